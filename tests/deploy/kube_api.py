"""A loopback HTTPS server that plays the Kubernetes API's pod LIST (the edge of the machine)."""

from __future__ import annotations

import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "sa-token-one"


def pod(
    name: str,
    node: str = "gpu-node-1",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    ip: str | None = "10.42.0.7",
    phase: str = "Running",
    ready: bool = True,
    namespace: str = "inference",
    terminating: bool = False,
    containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A pod as `GET /api/v1/pods` returns it (the fields a kubelet and scheduler fill in)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "resourceVersion": "4711",
        "creationTimestamp": "2026-11-21T23:00:00Z",
        "labels": labels if labels is not None else {"app": "vllm"},
    }
    if annotations:
        meta["annotations"] = annotations
    if terminating:
        meta["deletionTimestamp"] = "2026-11-22T00:00:00Z"
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": "True" if ready else "False"},
            {"type": "ContainersReady", "status": "True" if ready else "False"},
            {"type": "PodScheduled", "status": "True"},
        ],
        "hostIP": "192.0.2.10",
        "startTime": "2026-11-21T23:00:01Z",
    }
    if ip:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    spec = {
        "nodeName": node,
        "containers": containers or [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}],
    }
    return {"metadata": meta, "spec": spec, "status": status}


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _labels_match(selector: str, labels: dict[str, str]) -> bool:
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip():
            return False
    return True


class KubeApi(ThreadingHTTPServer):
    """Answers `GET /api/v1/pods` and `/api/v1/namespaces/NS/pods` the way kube-apiserver does
    for equality label selectors and the spec.nodeName field selector, with `limit`/`continue`
    paging; checks the bearer token; can be made slow or to refuse."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, cert: Path, key: Path) -> None:
        self.pods: list[dict[str, Any]] = []
        self.token = TOKEN
        self.delay = 0.0
        self.forbid = False
        self.page_size: int | None = None  # cap below the client's limit to force paging
        self.requests: list[tuple[str, dict[str, list[str]], str | None]] = []
        super().__init__(("127.0.0.1", 0), _ApiHandler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self.socket = ctx.wrap_socket(self.socket, server_side=True)
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def answer(self, path: str, query: dict[str, list[str]], auth: str | None) -> tuple[int, dict[str, Any]]:
        self.requests.append((path, query, auth))
        if auth != f"Bearer {self.token}":
            return 401, _status(401, "Unauthorized", "Unauthorized")
        if self.forbid:
            return 403, _status(
                403,
                "Forbidden",
                'pods is forbidden: User "system:serviceaccount:monitoring:kvops" cannot list '
                'resource "pods" in API group "" at the cluster scope',
            )
        parts = path.strip("/").split("/")
        if parts == ["api", "v1", "pods"]:
            namespace = None
        elif len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
            namespace = parts[3]
        else:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        selected = list(self.pods)
        if namespace:
            selected = [p for p in selected if p["metadata"]["namespace"] == namespace]
        for field in query.get("fieldSelector", [""])[0].split(","):
            if field:
                key, _, value = field.partition("=")
                if key != "spec.nodeName":
                    return 400, _status(400, "BadRequest", f'field label not supported: "{key}"')
                selected = [p for p in selected if p["spec"]["nodeName"] == value]
        if "labelSelector" in query:
            selected = [
                p for p in selected if _labels_match(query["labelSelector"][0], p["metadata"]["labels"])
            ]
        start = int(query.get("continue", ["0"])[0])
        limit = int(query.get("limit", ["0"])[0]) or len(selected)
        if self.page_size:
            limit = min(limit, self.page_size)
        page = selected[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": "4712"}
        if start + limit < len(selected):
            meta["continue"] = str(start + limit)
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": page}

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _ApiHandler(BaseHTTPRequestHandler):
    server: KubeApi
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.server.delay:
            time.sleep(self.server.delay)
        parts = urlsplit(self.path)
        code, doc = self.server.answer(parts.path, parse_qs(parts.query), self.headers.get("Authorization"))
        data = json.dumps(doc).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client gave up on a slow answer

    def log_message(self, format: str, *args: Any) -> None:
        pass

"""vLLM pods on this node, found through the Kubernetes API with the pod's service account.

`kvops exporter` runs as a DaemonSet, so each copy lists only the pods on its own node
(`spec.nodeName` field selector) that match a label selector: N nodes cost the API server N
small filtered LISTs per refresh, not N watches of every pod in the cluster.

The runner calls `targets()` on every scrape, so it answers from a cache that a background
thread refreshes; a slow or failing API server never holds a scrape up for more than
`first_wait` (the very first answer) and never drops the targets found before.

The LIST goes through kvops's own HTTP client (kvops.transport.http: libcurl, a deadline over the
whole exchange, a body bound, same-origin redirects only), which already carries a bearer token
and a CA file; the kubernetes client library would pull in a dozen packages for one call.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from kvops.errors import UsageError
from kvops.transport.http import FetchError, FetchOptions, HttpClient

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_PORT = 8000  # `vllm serve`'s default
DEFAULT_REFRESH_SECONDS = 30.0
# Pod annotations read for how to reach a pod's /metrics; kvops.io/* wins over the
# prometheus.io/* convention that many vLLM charts already set.
PORT_ANNOTATIONS = ("kvops.io/port", "prometheus.io/port")
SCHEME_ANNOTATIONS = ("kvops.io/scheme", "prometheus.io/scheme")
PATH_ANNOTATIONS = ("kvops.io/path", "prometheus.io/path")
_PAGE_SIZE = 250
_MAX_LIST_BYTES = 32 * 1024 * 1024
_MAX_PAGES = 100


class DiscoveryError(Exception):
    """One-line reason the pod list could not be had (reported as the collector's error)."""


@dataclass(frozen=True)
class ApiAccess:
    """Where the API server is and how to prove who we are. The token is re-read on every
    request: projected service-account tokens are rotated by the kubelet (about hourly)."""

    base_url: str
    token_file: Path
    ca_file: Path | None

    @classmethod
    def in_cluster(cls, env: Mapping[str, str] | None = None, sa_dir: Path | None = None) -> ApiAccess:
        env = os.environ if env is None else env
        sa_dir = SERVICE_ACCOUNT_DIR if sa_dir is None else sa_dir
        host = env.get("KUBERNETES_SERVICE_HOST", "").strip()
        port = env.get("KUBERNETES_SERVICE_PORT", "443").strip() or "443"
        if not host:
            raise UsageError(
                "--kubernetes-pod-selector: not inside a Kubernetes pod (KUBERNETES_SERVICE_HOST is unset)"
            )
        token = sa_dir / "token"
        if not token.is_file():
            raise UsageError(f"--kubernetes-pod-selector: no service-account token at {token}")
        ca = sa_dir / "ca.crt"
        netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        return cls(f"https://{netloc}", token, ca if ca.is_file() else None)

    def token(self) -> str:
        try:
            return self.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise DiscoveryError(f"service-account token {self.token_file}: {exc.strerror or exc}") from None


def _annotation(annotations: Mapping[str, str], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = annotations.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _is_ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = status.get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_target(pod: Mapping[str, Any], default_port: int) -> str:
    """The URL to scrape a ready pod at; raises ValueError naming what is wrong with it."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        raise ValueError("no pod IP yet")
    port_text = _annotation(annotations, PORT_ANNOTATIONS)
    port = default_port
    if port_text is not None:
        if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
            raise ValueError(f"port annotation {port_text!r} is not a port number")
        port = int(port_text)
    scheme = (_annotation(annotations, SCHEME_ANNOTATIONS) or "http").lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"scheme annotation {scheme!r} is not http or https")
    path = _annotation(annotations, PATH_ANNOTATIONS) or ""
    if path and not path.startswith("/"):
        path = "/" + path
    host = f"[{ip}]" if ":" in ip else ip
    return f"{scheme}://{host}:{port}{path}"


def pod_identity(pod: Mapping[str, Any], url: str) -> dict[str, str]:
    """namespace, pod and container of the scraped endpoint, the labels dcgm-exporter and AMD's
    device-metrics-exporter put on a pod's series (to join kube-state-metrics and DCGM): the
    container is the one that declares the scraped port, else the pod's only or first one."""
    meta = pod.get("metadata") or {}
    containers = (pod.get("spec") or {}).get("containers") or []
    port = url.rsplit(":", 1)[-1].split("/", 1)[0]
    named = next(
        (c for c in containers if any(str(p.get("containerPort")) == port for p in c.get("ports") or [])),
        containers[0] if containers else {},
    )
    return {
        "namespace": str(meta.get("namespace") or ""),
        "pod": str(meta.get("name") or ""),
        "container": str(named.get("name") or ""),
    }


def _status_message(body: bytes) -> str:
    """The API server's own words from a Status body ("pods is forbidden: User ..."), if any."""
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        return ""
    return f": {str(message).splitlines()[0][:200]}" if message else ""


class KubernetesDiscovery:
    """Ready pods on `node_name` matching `selector`, as scrape URLs (see the module doc)."""

    name = "kubernetes"

    def __init__(
        self,
        access: ApiAccess,
        selector: str,
        node_name: str,
        port: int = DEFAULT_PORT,
        namespace: str | None = None,
        refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
        timeout: float = 5.0,
        first_wait: float = 1.0,
    ) -> None:
        if not selector.strip():
            raise UsageError("--kubernetes-pod-selector: empty selector")
        if not node_name.strip():
            raise UsageError(
                "--kubernetes-node-name: not given and $NODE_NAME is empty "
                "(set NODE_NAME from the downward API: fieldRef spec.nodeName)"
            )
        if not 0 < port < 65536:
            raise UsageError(f"--kubernetes-port {port}: not a port number")
        if refresh_seconds <= 0:
            raise UsageError(f"--kubernetes-refresh {refresh_seconds:g}: expected seconds > 0")
        self.access = access
        self.selector = selector.strip()
        self.node_name = node_name.strip()
        self.port = port
        self.namespace = namespace
        self.refresh_seconds = refresh_seconds
        self.timeout = timeout
        self.first_wait = first_wait
        self._client: HttpClient | None = None  # rebuilt when the rotated token changes
        self._lock = threading.Lock()
        self._targets: list[str] | None = None  # None: no list has succeeded yet
        self._error: str | None = None
        self._attempted_at: float | None = None
        self._refresh: threading.Thread | None = None
        self._skipped: dict[str, str] = {}  # pod -> why, so each reason is logged once
        self._identities: dict[str, dict[str, str]] = {}  # url -> namespace, pod, container

    # -- what the runner calls on every scrape -------------------------------------------------

    def targets(self) -> list[str]:
        with self._lock:
            thread = self._start_refresh_if_due()
            first = self._targets is None and self._error is None
        if first and thread is not None:
            thread.join(self.first_wait)
        with self._lock:
            if self._error is not None:
                raise DiscoveryError(self._error)
            if self._targets is None:
                raise DiscoveryError(f"Kubernetes API: no answer within {self.first_wait:g} s yet")
            return list(self._targets)

    def _start_refresh_if_due(self) -> threading.Thread | None:
        if self._refresh is not None and self._refresh.is_alive():
            return self._refresh
        now = time.monotonic()
        # A failed list is retried sooner than the refresh period, but not on every scrape.
        wait = self.refresh_seconds if self._error is None else min(self.refresh_seconds, 5.0)
        if self._attempted_at is not None and now - self._attempted_at < wait:
            return None
        self._attempted_at = now
        self._refresh = threading.Thread(target=self._refresh_once, name="kvops-k8s-discovery", daemon=True)
        self._refresh.start()
        return self._refresh

    def _refresh_once(self) -> None:
        try:
            pods = self.list_pods()
        except DiscoveryError as exc:
            with self._lock:
                self._error = str(exc)
            return
        except Exception as exc:  # a bug here must not kill discovery for good
            with self._lock:
                self._error = f"Kubernetes API: {type(exc).__name__}: {exc}"[:300]
            return
        urls = self._urls(pods)
        with self._lock:
            self._targets = urls
            self._error = None

    def identities(self) -> dict[str, dict[str, str]]:
        """URL -> its pod's namespace, pod and container, for the targets() last returned."""
        with self._lock:
            return dict(self._identities)

    # -- the API call ---------------------------------------------------------------------------

    def list_pods(self) -> list[dict[str, Any]]:
        """Every pod on this node matching the selector, following `continue` pages."""
        path = f"/api/v1/namespaces/{self.namespace}/pods" if self.namespace else "/api/v1/pods"
        deadline = time.monotonic() + self.timeout
        client = self._client_for(self.access.token())
        params = {
            "labelSelector": self.selector,
            "fieldSelector": f"spec.nodeName={self.node_name}",
            "limit": str(_PAGE_SIZE),
        }
        pods: list[dict[str, Any]] = []
        for _ in range(_MAX_PAGES):
            page = self._get_json(client, f"{self.access.base_url}{path}?{urlencode(params)}", deadline)
            items = page.get("items")
            if not isinstance(items, list):
                raise DiscoveryError("Kubernetes API: answer is not a PodList")
            pods.extend(p for p in items if isinstance(p, dict))
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return pods
            params["continue"] = token
        raise DiscoveryError(f"Kubernetes API: more than {_MAX_PAGES} pages of pods")

    def _client_for(self, token: str) -> HttpClient:
        client = self._client
        if client is None or client.options.bearer_token != token:
            if client is not None:
                client.close()
            ca = str(self.access.ca_file) if self.access.ca_file else None
            options = FetchOptions(
                max_body_bytes=_MAX_LIST_BYTES, bearer_token=token, ca_file=ca, accept="application/json"
            )
            client = self._client = HttpClient(options)
        return client

    def _get_json(self, client: HttpClient, url: str, deadline: float) -> dict[str, Any]:
        if deadline - time.monotonic() <= 0:
            raise DiscoveryError(f"Kubernetes API: timed out after {self.timeout:g} s")
        try:
            body = client.fetch_text(url, deadline)
        except FetchError as exc:
            raise DiscoveryError(self._explain(exc)) from None
        try:
            page = json.loads(body)
        except ValueError:
            raise DiscoveryError("Kubernetes API: answer is not JSON") from None
        if not isinstance(page, dict):
            raise DiscoveryError("Kubernetes API: answer is not a PodList")
        return page

    def _explain(self, exc: FetchError) -> str:
        """One line for a failed LIST, with the API server's own words and a hint on 401/403."""
        if exc.status is not None:
            hint = {
                401: " (service-account token rejected)",
                403: " (RBAC: the exporter needs list on pods)",
            }.get(exc.status, "")
            reason = _status_message(exc.body) or str(exc).removeprefix(f"HTTP {exc.status}")
            return f"Kubernetes API: HTTP {exc.status}{reason}{hint}"
        text = str(exc)
        if text.startswith("TLS error"):
            return "Kubernetes API: TLS error (server not trusted by the CA?)"
        if "timed out" in text:
            return f"Kubernetes API: timed out after {self.timeout:g} s"
        if "over the limit" in text:
            return f"Kubernetes API: pod list over {_MAX_LIST_BYTES} bytes"
        return f"Kubernetes API: {text}"

    def _urls(self, pods: list[dict[str, Any]]) -> list[str]:
        urls: list[str] = []
        identities: dict[str, dict[str, str]] = {}
        skipped: dict[str, str] = {}
        for pod in pods:
            meta = pod.get("metadata") or {}
            pod_name = f"{meta.get('namespace', '?')}/{meta.get('name', '?')}"
            if not _is_ready(pod):
                continue  # starting or terminating: its /metrics is not there to scrape
            try:
                url = pod_target(pod, self.port)
            except ValueError as exc:
                if self._skipped.get(pod_name) != str(exc):
                    log.warning("kubernetes discovery: skipping pod %s: %s", pod_name, exc)
                skipped[pod_name] = str(exc)
                continue
            urls.append(url)
            identities[url] = pod_identity(pod, url)
        with self._lock:
            self._identities = identities
        self._skipped = skipped  # only pods still there: the map does not grow with churn
        return sorted(set(urls))


def discovery_from_args(args: Any, timeout: float) -> KubernetesDiscovery | None:
    """The discovery `kvops exporter --kubernetes-*` asks for, or None without a selector."""
    selector = getattr(args, "kubernetes_pod_selector", None)
    if not selector:
        return None
    node = args.kubernetes_node_name or os.environ.get("NODE_NAME", "")
    return KubernetesDiscovery(
        ApiAccess.in_cluster(),
        selector,
        node,
        port=args.kubernetes_port,
        namespace=args.kubernetes_namespace or None,
        refresh_seconds=args.kubernetes_refresh,
        timeout=timeout,
    )

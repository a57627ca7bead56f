"""In-cluster discovery against a loopback HTTPS server playing the Kubernetes API."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kube_api import KubeApi, pod

from kvops.errors import UsageError
from kvops.exporter.families import render
from kvops.scrape.runner import ScrapeRunner
from kvops.scrape.target import TargetScraper
from kvops.transport.kubernetes import ApiAccess, DiscoveryError, KubernetesDiscovery, pod_target
from support.exporter_harness import parse_exposition
from support.paths import VLLM_FIXTURES
from support.upstream import Upstream, body

NODE = "gpu-node-1"


def _access(api: KubeApi, sa: Path) -> ApiAccess:
    return ApiAccess.in_cluster(
        {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api.port)}, sa
    )


def _discovery(api: KubeApi, sa: Path, **kwargs) -> KubernetesDiscovery:
    kwargs.setdefault("first_wait", 5.0)
    return KubernetesDiscovery(_access(api, sa), "app=vllm", NODE, **kwargs)


def _wait_for(predicate, seconds: float = 5.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_ready_matching_pods_on_this_node_become_targets(kube_api, service_account):
    kube_api.pods = [
        pod("plain"),
        pod("annotated", ip="10.42.0.8", annotations={"prometheus.io/port": "8080"}),
        pod("ours-win", ip="10.42.0.9", annotations={"kvops.io/port": "9000", "prometheus.io/port": "1"}),
        pod("tls", ip="10.42.0.10", annotations={"kvops.io/scheme": "https", "kvops.io/path": "v1/metrics"}),
        pod("v6", ip="fd00::7"),
        pod("other-node", node="gpu-node-2", ip="10.42.1.7"),
        pod("other-app", labels={"app": "redis"}, ip="10.42.0.11"),
        pod("pending", phase="Pending", ip="10.42.0.12"),
        pod("not-ready", ready=False, ip="10.42.0.13"),
        pod("terminating", terminating=True, ip="10.42.0.14"),
        pod("no-ip", ip=None),
        pod("bad-port", ip="10.42.0.15", annotations={"kvops.io/port": "http"}),
    ]
    disc = _discovery(kube_api, service_account)
    assert disc.targets() == sorted(
        [
            "http://10.42.0.7:8000",
            "http://10.42.0.8:8080",
            "http://10.42.0.9:9000",
            "https://10.42.0.10:8000/v1/metrics",
            "http://[fd00::7]:8000",
        ]
    )
    path, query, auth = kube_api.requests[0]
    assert path == "/api/v1/pods"
    assert query["labelSelector"] == ["app=vllm"]
    assert query["fieldSelector"] == [f"spec.nodeName={NODE}"]  # the API filters, not kvops
    assert auth == "Bearer sa-token-one"


def test_namespace_and_pages(kube_api, service_account):
    kube_api.pods = [pod(f"p{i}", ip=f"10.42.0.{i}") for i in range(1, 8)]
    kube_api.pods.append(pod("elsewhere", namespace="batch", ip="10.42.0.99"))
    kube_api.page_size = 3
    disc = _discovery(kube_api, service_account, namespace="inference")
    assert disc.targets() == sorted(f"http://10.42.0.{i}:8000" for i in range(1, 8))
    paths = [r[0] for r in kube_api.requests]
    assert paths == ["/api/v1/namespaces/inference/pods"] * 3  # 7 pods, 3 a page
    assert [r[1].get("continue") for r in kube_api.requests] == [None, ["3"], ["6"]]


def test_rejected_token_is_an_error_and_a_rotated_token_is_picked_up(kube_api, service_account):
    kube_api.pods = [pod("a")]
    kube_api.token = "rotated-token"
    disc = _discovery(kube_api, service_account, refresh_seconds=0.05)
    with pytest.raises(DiscoveryError, match=r"HTTP 401: Unauthorized \(service-account token rejected\)"):
        disc.targets()
    # The kubelet rotates projected tokens in place; the next list must read the new one.
    (service_account / "token").write_text("rotated-token\n")
    disc._attempted_at = 0.0  # let the retry back-off pass without sleeping 5 s
    _wait_for(lambda: _targets_or_none(disc) == ["http://10.42.0.7:8000"])


def _targets_or_none(disc: KubernetesDiscovery) -> list[str] | None:
    try:
        return disc.targets()
    except DiscoveryError:
        return None


def test_forbidden_says_what_rbac_is_missing(kube_api, service_account):
    kube_api.forbid = True
    disc = _discovery(kube_api, service_account)
    with pytest.raises(DiscoveryError) as err:
        disc.targets()
    message = str(err.value)
    assert message.startswith("Kubernetes API: HTTP 403: pods is forbidden: User")
    assert message.endswith("(RBAC: the exporter needs list on pods)")
    assert "\n" not in message


def test_untrusted_api_server_is_refused(kube_api, service_account, tmp_path):
    other = tmp_path / "other-ca.crt"
    other.write_text(_self_signed(tmp_path))
    (service_account / "ca.crt").write_text(other.read_text())
    disc = _discovery(kube_api, service_account)
    with pytest.raises(DiscoveryError, match="TLS error"):
        disc.targets()
    assert kube_api.requests == []  # the token never left


def _self_signed(d: Path) -> str:
    import subprocess

    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "o.key"),
         "-out", str(d / "o.crt"), "-days", "1", "-subj", "/CN=someone-else"],
        check=True, capture_output=True,
    )  # fmt: skip
    return (d / "o.crt").read_text()


def test_slow_api_never_holds_a_scrape(kube_api, service_account):
    kube_api.pods = [pod("a")]
    disc = _discovery(kube_api, service_account, first_wait=0.2, timeout=0.6, refresh_seconds=0.05)
    kube_api.delay = 2.0
    start = time.monotonic()
    with pytest.raises(DiscoveryError, match=r"no answer within 0\.2 s yet"):
        disc.targets()
    assert time.monotonic() - start < 1.0
    _wait_for(lambda: disc._refresh is not None and not disc._refresh.is_alive())
    with pytest.raises(DiscoveryError, match=r"timed out after 0.6 s"):
        disc.targets()
    kube_api.delay = 0.0
    disc._attempted_at = 0.0
    _wait_for(lambda: _targets_or_none(disc) == ["http://10.42.0.7:8000"])
    # Now slow again: scrapes keep getting the cached list at once while a refresh hangs.
    kube_api.delay = 2.0
    kube_api.pods = []
    time.sleep(0.1)
    for _ in range(5):
        start = time.monotonic()
        assert disc.targets() == ["http://10.42.0.7:8000"]
        assert time.monotonic() - start < 0.5


def test_in_cluster_settings(tmp_path):
    with pytest.raises(UsageError, match="KUBERNETES_SERVICE_HOST is unset"):
        ApiAccess.in_cluster({}, tmp_path)
    with pytest.raises(UsageError, match="no service-account token"):
        ApiAccess.in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, tmp_path)
    (tmp_path / "token").write_text("t")
    access = ApiAccess.in_cluster({"KUBERNETES_SERVICE_HOST": "fd00:10:96::1"}, tmp_path)
    assert access.base_url == "https://[fd00:10:96::1]:443"
    assert access.ca_file is None  # no ca.crt mounted: the system store is used


@pytest.mark.parametrize(
    ("annotations", "error"),
    [
        ({"kvops.io/port": "70000"}, "not a port number"),
        ({"prometheus.io/scheme": "grpc"}, "not http or https"),
    ],
)
def test_pod_annotations_that_cannot_be_scraped(annotations, error):
    with pytest.raises(ValueError, match=error):
        pod_target(pod("x", annotations=annotations), 8000)


def test_discovered_pods_are_scraped_by_the_exporter(kube_api, service_account):
    """The whole path: API answer → discovery → ScrapeRunner → kvops_* series for the pod."""
    upstream = Upstream()
    try:
        data = (VLLM_FIXTURES / "0.33.0" / "offload-t1.prom").read_bytes()
        target = upstream.route("engine", body(data))
        port = target.rsplit(":", 1)[1].split("/")[0]
        kube_api.pods = [
            pod("vllm-0", ip="127.0.0.1", annotations={"kvops.io/port": port, "kvops.io/path": "/engine"})
        ]
        disc = _discovery(kube_api, service_account)
        runner = ScrapeRunner([], [], timeout=3, discovery=disc)
        try:
            samples = parse_exposition(_text(runner))
        finally:
            runner.close()
    finally:
        upstream.stop()
    up = {dict(k[1])["target"]: v for k, v in samples.items() if k[0] == "kvops_target_up"}
    assert up == {target: 1.0}
    assert samples[("kvops_collector_success", (("collector", "kubernetes"),))] == 1.0
    assert any(k[0] == "kvops_vllm_kv_cache_usage_ratio" and dict(k[1])["target"] == target for k in samples)


def test_a_discovered_pods_series_carry_its_namespace_pod_and_container(kube_api, service_account):
    """Issue 28: series from a discovered pod join kube-state-metrics and DCGM by namespace, pod
    and container (the container that declares the scraped port, not the sidecar listed first);
    a target given by URL gets none of them."""
    upstream = Upstream()
    try:
        data = (VLLM_FIXTURES / "0.33.0" / "offload-t1.prom").read_bytes()
        target = upstream.route("engine", body(data))
        static = upstream.route("static", body(data))
        port = target.rsplit(":", 1)[1].split("/")[0]
        containers = [
            {"name": "istio-proxy", "ports": [{"containerPort": 15090}]},
            {"name": "vllm-server", "ports": [{"containerPort": int(port), "name": "http"}]},
        ]
        kube_api.pods = [
            pod("vllm-0", ip="127.0.0.1", annotations={"kvops.io/port": port, "kvops.io/path": "/engine"},
                containers=containers)
        ]  # fmt: skip
        disc = _discovery(kube_api, service_account)
        runner = ScrapeRunner([TargetScraper(static)], [], timeout=3, discovery=disc)
        try:
            samples = parse_exposition(_text(runner))
        finally:
            runner.close()
    finally:
        upstream.stop()
    usage = {dict(k[1])["target"]: dict(k[1]) for k in samples if k[0] == "kvops_vllm_kv_cache_usage_ratio"}
    pod_labels = {k: usage[target].get(k) for k in ("namespace", "pod", "container")}
    assert pod_labels == {"namespace": "inference", "pod": "vllm-0", "container": "vllm-server"}
    assert not {"namespace", "pod", "container"} & set(usage[static])
    up = [dict(k[1]) for k in samples if k[0] == "kvops_target_up" and dict(k[1])["target"] == target]
    assert up and up[0]["pod"] == "vllm-0"


def _text(runner: ScrapeRunner) -> str:
    from prometheus_client.exposition import generate_latest

    class _Registry:
        def collect(self):
            return render(runner.snapshot())

    return generate_latest(_Registry()).decode()  # type: ignore[arg-type]


def test_bad_flags_are_one_line_exit_2(tmp_path):
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "KUBERNETES_SERVICE_HOST": "127.0.0.1", "NODE_NAME": ""}
    out = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "exporter", "--kubernetes-pod-selector", "app=vllm",
         "--listen", "127.0.0.1:0"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1
    assert "--kubernetes-pod-selector" in out.stderr or "--kubernetes-node-name" in out.stderr


def test_exporter_flags_wire_discovery_into_the_runner(kube_api, service_account, monkeypatch):
    """`kvops exporter --kubernetes-*` as the DaemonSet runs it: env from the kubelet, the
    service-account mount, the exporter's own config loading and build_runner."""
    import argparse

    from kvops.exporter import command
    from kvops.exporter.config import load_config
    from kvops.transport import kubernetes

    upstream = Upstream()
    try:
        target = upstream.route("m", body((VLLM_FIXTURES / "0.33.0" / "offload-t1.prom").read_bytes()))
        port = target.rsplit(":", 1)[1].split("/")[0]
        kube_api.pods = [
            pod("vllm-0", ip="127.0.0.1", annotations={"kvops.io/path": "/m"}),
            pod("vllm-1", node="gpu-node-2", ip="127.0.0.2"),
        ]
        monkeypatch.setattr(kubernetes, "SERVICE_ACCOUNT_DIR", service_account)
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(kube_api.port))
        monkeypatch.setenv("NODE_NAME", NODE)
        parser = argparse.ArgumentParser()
        command.configure(parser)
        args = parser.parse_args(
            ["--kubernetes-pod-selector", "app=vllm", "--kubernetes-port", port, "--no-collector", "host"]
        )
        config = load_config(args)
        discovery = kubernetes.discovery_from_args(args, config.timeout)
        assert discovery is not None
        discovery.first_wait = 5.0
        runner = command.build_runner(config, discovery)
        try:
            samples = parse_exposition(_text(runner))
        finally:
            runner.close()
    finally:
        upstream.stop()
    up = {dict(k[1])["target"]: v for k, v in samples.items() if k[0] == "kvops_target_up"}
    assert up == {target: 1.0}  # vllm-1 is on another node
    assert kube_api.requests[0][1]["fieldSelector"] == [f"spec.nodeName={NODE}"]
    assert kubernetes.discovery_from_args(parser.parse_args([]), 5.0) is None

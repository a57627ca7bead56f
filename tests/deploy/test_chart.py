"""The Helm chart, rendered by Helm's own engine, against the Kubernetes and Prometheus Operator
schemas, promtool, and kvops's own flag parser; deploy/ kept in step with alerts/ and dashboards/."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from kvops.exporter import command as exporter_command

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "kvops"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))


def _load(path: Path, name: str) -> ModuleType:
    import importlib.util

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


generate = _load(ROOT / "deploy" / "generate.py", "kvops_deploy_generate")
validate = _load(ROOT / "deploy" / "validate.py", "kvops_deploy_validate")


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    """ci values file name → every object the chart renders with it."""
    out = {}
    for path in CI_VALUES:
        values = yaml.safe_load(path.read_text()) or {}
        docs = generate.render_chart(values)
        out[path.name] = [obj for text in docs.values() for obj in validate.documents(text)]
    return out


def _one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind]
    assert len(found) == 1, [o["kind"] for o in objs]
    return found[0]


def _container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return _one(objs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]


def test_deploy_is_generated_from_alerts_and_dashboards():
    """CI's staleness gate: alerts/ or dashboards/ changed → run `python deploy/generate.py`."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


def test_check_names_stale_missing_and_stray_files(tmp_path):
    want = generate.expected()
    rule = next(p for p in want if p.name == "kvops-alerts.yml")
    manifest = generate.MANIFESTS / "daemonset.yaml"
    changed = dict(want)
    changed[rule] = want[rule] + b"# changed in alerts/\n"
    del changed[manifest]
    changed[tmp_path / "new.yaml"] = b"x"
    problems = generate.check(changed)
    assert f"{rule.relative_to(generate.ROOT)}: stale" in problems
    assert f"{manifest.relative_to(generate.ROOT)}: stray (not generated)" in problems
    assert f"{tmp_path / 'new.yaml'}: missing" in problems


@pytest.mark.parametrize("values_file", [p.name for p in CI_VALUES])
def test_every_ci_values_file_validates(values_file, rendered):
    objs = rendered[values_file]
    assert objs
    errors = [line for obj in objs for line in validate.problems(obj)]
    assert errors == []


def test_plain_manifests_validate():
    files = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
    assert {f.name for f in files} >= {"daemonset.yaml", "servicemonitor.yaml", "prometheusrule.yaml"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "validate.py"), *map(str, files)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_validator_refuses_what_a_cluster_would():
    sm = next(validate.documents((ROOT / "deploy" / "kubernetes" / "servicemonitor.yaml").read_text()))
    sm["spec"]["endpoints"][0]["intervall"] = "30s"  # pruned silently by the API server
    assert "'intervall' was unexpected" in " ".join(validate.problems(sm))
    ds = next(validate.documents((ROOT / "deploy" / "kubernetes" / "daemonset.yaml").read_text()))
    ds["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "19435"
    assert any("containerPort" in p for p in validate.problems(ds))


def test_prometheusrule_carries_alerts_verbatim_and_passes_promtool(rendered, tmp_path):
    if shutil.which("promtool") is None:
        pytest.fail("promtool missing: apt-get install prometheus (CI installs it)")
    rule = _one(rendered["default-values.yaml"], "PrometheusRule")
    source_groups = [
        g for p in sorted((ROOT / "alerts").glob("*.yml")) for g in yaml.safe_load(p.read_text())["groups"]
    ]
    assert rule["spec"]["groups"] == source_groups  # alerts' {{ $labels.x }} untouched by Helm
    groups = tmp_path / "groups.yml"
    groups.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    out = subprocess.run(["promtool", "check", "rules", str(groups)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    n_rules = sum(len(g["rules"]) for g in source_groups)
    assert f"SUCCESS: {n_rules} rules found" in out.stdout


def test_runbook_base_is_the_rule_files_and_can_be_moved(rendered):
    base = _load(ROOT / "alerts" / "set_runbook_base.py", "kvops_set_runbook_base").DEFAULT_BASE
    assert f'"{base}/"' in (CHART / "templates" / "prometheusrule.yaml").read_text()
    rule = _one(rendered["kube-prometheus-stack-values.yaml"], "PrometheusRule")
    urls = [
        r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r
    ]
    assert urls
    assert all(u.startswith("https://wiki.example.com/kvops/playbooks/Kvops") for u in urls), urls


def test_kube_prometheus_stack_release_label(rendered):
    objs = rendered["kube-prometheus-stack-values.yaml"]
    assert _one(objs, "PodMonitor")["metadata"]["labels"]["release"] == "monitoring"
    assert _one(objs, "PrometheusRule")["metadata"]["labels"]["release"] == "monitoring"
    assert not [o for o in objs if o["kind"] in ("Service", "ServiceMonitor")]
    default = rendered["default-values.yaml"]
    assert "release" not in _one(default, "ServiceMonitor")["metadata"]["labels"]


def test_container_args_are_flags_kvops_exporter_accepts(rendered):
    """The chart's args go through the exporter's real parser, so a renamed flag fails here."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    exporter_command.configure(parser)
    for name, objs in rendered.items():
        container = _container(objs)
        assert container["command"] == ["kvops"]
        assert container["args"][0] == "exporter"
        args = parser.parse_args(container["args"][1:])
        assert args.listen == exporter_command.DEFAULT_LISTEN, name
    everything = parser.parse_args(_container(rendered["everything-values.yaml"])["args"][1:])
    assert everything.kubernetes_pod_selector == "app=vllm,tier=serving"
    assert everything.kubernetes_namespace == "inference"
    assert everything.kubernetes_port == 8080
    assert everything.no_collector == ["nvidia"]
    minimal = parser.parse_args(_container(rendered["minimal-values.yaml"])["args"][1:])
    assert minimal.kubernetes_pod_selector is None


def test_exporter_config_is_what_kvops_reads(rendered, tmp_path):
    from kvops.exporter.config import load_config

    cm = _one(rendered["minimal-values.yaml"], "ConfigMap")
    path = tmp_path / "config.yaml"
    path.write_text(cm["data"]["config.yaml"])
    parser = argparse.ArgumentParser()
    exporter_command.configure(parser)
    config = load_config(parser.parse_args(["--config", str(path)]))
    assert [t.url for t in config.targets] == ["http://vllm.inference.svc:8000"]


def test_hardened_pod(rendered):
    for name, objs in rendered.items():
        pod = _one(objs, "DaemonSet")["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        sc = pod["containers"][0]["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False, name
        assert pod["containers"][0]["resources"]["limits"]["memory"], name
    default = _one(rendered["default-values.yaml"], "DaemonSet")["spec"]["template"]["spec"]
    assert default["hostPID"] is False
    assert (
        _one(rendered["everything-values.yaml"], "DaemonSet")["spec"]["template"]["spec"]["hostPID"] is True
    )
    minimal = _one(rendered["minimal-values.yaml"], "DaemonSet")["spec"]["template"]["spec"]
    assert minimal["automountServiceAccountToken"] is False  # no discovery, no API token


def test_rbac_is_read_only_and_scoped(rendered):
    cluster = [o for o in rendered["default-values.yaml"] if o["kind"] == "ClusterRole"]
    assert [r["verbs"] for r in cluster[0]["rules"]] == [["get", "list"]]
    assert [r["resources"] for r in cluster[0]["rules"]] == [["pods"]]
    role = _one(rendered["everything-values.yaml"], "Role")
    assert role["metadata"]["namespace"] == "inference"
    assert not [o for o in rendered["everything-values.yaml"] if o["kind"].startswith("Cluster")]
    assert not [o for o in rendered["minimal-values.yaml"] if "Role" in o["kind"]]


def test_tls_and_basic_auth(rendered):
    objs = rendered["tls-auth-values.yaml"]
    secret = _one(objs, "Secret")
    web = yaml.safe_load(secret["stringData"]["web-config.yml"])
    assert web["tls_server_config"]["cert_file"] == "/etc/kvops/tls/tls.crt"
    assert web["basic_auth_users"]["prometheus"].startswith("$2y$")
    endpoint = _one(objs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https"
    assert endpoint["basicAuth"]["password"]["name"] == "kvops-scrape-auth"
    container = _container(objs)
    assert "--web-config=/etc/kvops/web/web-config.yml" in container["args"]
    assert "tcpSocket" in container["livenessProbe"]  # basic auth covers /-/healthy too
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/etc/kvops/web", "/etc/kvops/tls"} <= mounts


def test_web_config_without_content_is_refused():
    with pytest.raises(
        Exception, match=r"webConfig.enabled needs webConfig.config or webConfig.existingSecret"
    ):
        generate.render_chart({"webConfig": {"enabled": True}})


def test_dashboards_as_grafana_sidecar_configmaps(rendered):
    maps = [
        o
        for o in rendered["default-values.yaml"]
        if o["kind"] == "ConfigMap" and "dashboard" in o["metadata"]["name"]
    ]
    sources = {p.name: json.loads(p.read_text()) for p in (ROOT / "dashboards").glob("*.json")}
    assert len(maps) == len(sources) > 0
    for cm in maps:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        ((name, text),) = cm["data"].items()
        assert json.loads(text) == sources[name]
        assert len(text.encode()) < 1024 * 1024
    kps = [o for o in rendered["kube-prometheus-stack-values.yaml"] if "dashboard" in o["metadata"]["name"]]
    assert {cm["metadata"]["namespace"] for cm in kps} == {"monitoring"}


def test_helm_lint_is_clean():
    import helm_python as helm

    report = helm.lint(str(CHART), strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"discoveryy": {"enabled": False}}, "additional properties 'discoveryy' not allowed"),
        ({"exporter": {"logLevel": "loud"}}, "/exporter/logLevel"),
        ({"serviceMonitor": {"interval": "30 s"}}, "/serviceMonitor/interval"),
        ({"targets": [{"bearer_token_file": "/t"}]}, "/targets/0"),
    ],
)
def test_values_schema_refuses_typos(values, where):
    """values.schema.json: Helm refuses a misspelt or mistyped value at install time."""
    with pytest.raises(Exception, match="values don't meet the specifications") as err:
        generate.render_chart(values)
    assert where in str(err.value)


def test_pod_security_restricted_without_host_mounts():
    """docs/deploy.md's claim, checked rule by rule against the Pod Security Standards'
    `restricted` profile (kubernetes.io/docs/concepts/security/pod-security-standards)."""
    docs = generate.render_chart({"hostShm": {"enabled": False}})
    pod = next(validate.documents(docs["daemonset.yaml"]))["spec"]["template"]["spec"]
    allowed_volumes = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                       "projected", "secret"}  # fmt: skip
    assert not pod.get("hostPID") and not pod.get("hostNetwork") and not pod.get("hostIPC")
    for volume in pod["volumes"]:
        assert set(volume) - {"name"} <= allowed_volumes, volume
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    for container in pod["containers"]:
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and not sc.get("privileged")
        assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
        assert not any("hostPort" in p for p in container["ports"])
    default = next(validate.documents(generate.render_chart({})["daemonset.yaml"]))
    # /dev/shm by default: that needs a privileged namespace
    assert any("hostPath" in v for v in default["spec"]["template"]["spec"]["volumes"])


# Ports the Prometheus default-port page allocates to other exporters that kvops once used or
# could collide with (docs/security.md): 9435 is cloudflare/ebpf_exporter's.
TAKEN_PORTS = {"9435"}


def test_every_deploy_file_and_the_cli_share_one_default_port_that_is_not_taken():
    root = Path(__file__).resolve().parents[2]
    port = exporter_command.DEFAULT_LISTEN.rsplit(":", 1)[1]
    assert port not in TAKEN_PORTS
    files = ["Containerfile", "deploy/helm/kvops/values.yaml", "deploy/kubernetes/daemonset.yaml",
             "deploy/kubernetes/service.yaml"]  # fmt: skip
    for rel in files:
        text = (root / rel).read_text()
        found = set(re.findall(r"(?<![0-9])(9[0-9]{3}|1[0-9]{4})(?![0-9])", text))
        assert port in found, rel
        assert not found & TAKEN_PORTS, rel

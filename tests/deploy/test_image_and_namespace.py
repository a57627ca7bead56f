"""What a new user applies (issue 30): the plain manifests bring their namespace first, and the
chart and manifests name the image the README's one build command makes."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from test_chart import generate, validate  # tests/deploy is on sys.path (no __init__.py)

from kvops import __version__

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"


def readme_build_tag() -> str:
    found = re.search(r"^(?:podman|docker) build -t (\S+) \.", (ROOT / "README.md").read_text(), re.M)
    assert found, "the README has one command that builds the image"
    return found.group(1)


def test_plain_manifests_create_their_namespace_before_anything_in_it():
    files = sorted(MANIFESTS.glob("*.yaml"))  # the order `kubectl apply -f deploy/kubernetes/` reads them
    objs = [obj for f in files for obj in validate.documents(f.read_text())]
    assert objs[0]["kind"] == "Namespace" and objs[0]["metadata"]["name"] == "kvops"
    namespaced = [o for o in objs[1:] if o["kind"] not in ("ClusterRole", "ClusterRoleBinding")]
    assert namespaced and {o["metadata"].get("namespace") for o in namespaced} == {"kvops"}
    assert validate.problems(objs[0]) == []


def test_the_chart_leaves_the_namespace_to_helm_create_namespace_by_default():
    assert not any("kind: Namespace" in text for text in generate.render_chart({}).values())


def test_chart_and_manifests_run_the_image_the_readme_builds():
    tag = readme_build_tag()
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "kvops" / "Chart.yaml").read_text())
    values = yaml.safe_load((ROOT / "deploy" / "helm" / "kvops" / "values.yaml").read_text())
    assert f"{values['image']['repository']}:{chart['appVersion']}" == tag
    daemonset = next(validate.documents((MANIFESTS / "daemonset.yaml").read_text()))
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == tag
    assert chart["appVersion"] == __version__ == tag.rsplit(":", 1)[1]  # one version, kvops/__init__.py

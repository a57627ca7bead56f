"""Every alert links to a runbook that exists, in the playbook format, and every alert
runbook belongs to an alert: a renamed alert or a moved file fails here, not on a pager."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from kvops.playbooks_path import playbooks_dir

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "alerts"
SECTIONS = ("Meaning", "Impact", "Diagnosis", "Mitigation")
FLAGS = ("--kv-offloading-size", "--kv-cache-dtype fp8", "--max-model-len", "--gpu-memory-utilization")


def front_matter(path: Path) -> tuple[dict[str, Any], str]:
    text = path.read_text()
    match = re.match(r"---\n(.*?)\n---\n(.*)", text, re.DOTALL)
    assert match, f"{path.name}: no front matter between --- lines"
    return yaml.safe_load(match.group(1)), match.group(2)


def resolve(url: str, base: str, playbooks: Path) -> Path:
    """The local file a runbook_url under `base` points at."""
    assert url.startswith(base + "/"), f"{url} is not under {base}"
    return playbooks / url[len(base) + 1 :]


def alert_playbooks() -> list[Path]:
    return [p for p in sorted(playbooks_dir().glob("*.md")) if front_matter(p)[0].get("kind") == "alert"]


def test_every_runbook_link_resolves_to_the_alerts_own_playbook(
    alerts: list[dict[str, Any]], runbook_base: ModuleType
) -> None:
    for alert in alerts:
        url = alert["annotations"]["runbook_url"]
        path = resolve(url, runbook_base.DEFAULT_BASE, playbooks_dir())
        assert path.name == f"{alert['alert']}.md", url
        assert path.is_file(), f"dead runbook link {url}"


def test_runbooks_use_the_playbook_format(alerts: list[dict[str, Any]]) -> None:
    for alert in alerts:
        meta, body = front_matter(playbooks_dir() / f"{alert['alert']}.md")
        assert meta["id"] == alert["alert"]
        assert meta["kind"] == "alert"
        assert meta["severity"] == alert["labels"]["severity"], alert["alert"]
        assert str(meta["title"]).strip()
        headings = re.findall(r"^## (.+)$", body, re.MULTILINE)
        assert [h for h in headings if h in SECTIONS] == list(SECTIONS), f"{alert['alert']}: {headings}"
        for section in re.split(r"^## ", body, flags=re.MULTILINE)[1:]:
            title, _, text = section.partition("\n")
            assert len(text.strip()) > 80, f"{alert['alert']}: section {title} is nearly empty"


def test_every_alert_runbook_belongs_to_an_alert(alerts: list[dict[str, Any]]) -> None:
    defined = {a["alert"] for a in alerts}
    orphans = [p.name for p in alert_playbooks() if p.stem not in defined]
    assert orphans == []
    assert {p.stem for p in alert_playbooks()} == defined


def test_links_between_playbooks_resolve() -> None:
    for path in alert_playbooks():
        for target in re.findall(r"\]\(([^)#:]+\.md)\)", path.read_text()):
            assert (path.parent / target).is_file(), f"{path.name}: dead link to {target}"


def test_runbooks_name_the_vllm_flags_to_change() -> None:
    text = "\n".join(p.read_text() for p in alert_playbooks())
    missing = [flag for flag in FLAGS if flag not in text]
    assert missing == []


def test_a_missing_runbook_is_reported_as_a_dead_link(
    alerts: list[dict[str, Any]], runbook_base: ModuleType, tmp_path: Path
) -> None:
    # The same resolution against a copy with one runbook removed must find it dead.
    for p in playbooks_dir().glob("*.md"):
        (tmp_path / p.name).write_text(p.read_text())
    gone = alerts[0]["alert"]
    (tmp_path / f"{gone}.md").unlink()
    dead = [
        a["alert"]
        for a in alerts
        if not resolve(a["annotations"]["runbook_url"], runbook_base.DEFAULT_BASE, tmp_path).is_file()
    ]
    assert dead == [gone]


def test_rebased_rule_files_link_to_the_new_base_and_still_load(
    alerts: list[dict[str, Any]], promtool: str, tmp_path: Path
) -> None:
    base = (ROOT / "playbooks").as_uri()
    result = subprocess.run(
        [sys.executable, str(ALERTS / "set_runbook_base.py"), "--base", base, "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    rebased = yaml.safe_load((tmp_path / "kvops-alerts.yml").read_text())
    urls = [r["annotations"]["runbook_url"] for g in rebased["groups"] for r in g["rules"] if "alert" in r]
    assert len(urls) == len(alerts)
    for url in urls:
        assert resolve(url, base, ROOT / "playbooks").is_file(), url
    check = subprocess.run(
        [promtool, "check", "rules", *map(str, tmp_path.glob("*.yml"))], capture_output=True
    )
    assert check.returncode == 0


@pytest.mark.parametrize("base", ["not a url", "relative/path"])
def test_rebase_refuses_a_base_that_is_not_a_url(base: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ALERTS / "set_runbook_base.py"), "--base", base, "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []

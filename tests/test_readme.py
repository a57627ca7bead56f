"""The README as a new user follows it (issue 30): every `kvops` command in its sh blocks runs here
as written (the demo's live screen and `kvops top` in a real terminal, tmux), the Prometheus
snippet scrapes the exporter it starts, and its counts are the repository's.

Only the ports differ: the README says 8000 and 19435, a test takes free ones.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
import yaml

from support.paths import ROOT
from support.prom import free_port

README = (ROOT / "README.md").read_text()
SIM_URL = "http://127.0.0.1:8000"
EXPORTER_LISTEN = "127.0.0.1:19435"


def sh_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, re.S)


def kvops_commands() -> list[str]:
    """Each `kvops ...` command of the README's sh blocks, comment and trailing `&` cut."""
    found = []
    for block in sh_blocks():
        for line in block.splitlines():
            for part in line.split("#", 1)[0].split("&&"):
                part = part.strip().removesuffix("&").strip()
                if part.startswith("kvops "):
                    found.append(part)
    return found


def argv(command: str, ports: dict[str, str]) -> list[str]:
    for old, new in ports.items():
        command = command.replace(old, new)
    return [sys.executable, "-m", "kvops.cli", *shlex.split(command)[1:]]


def wait_http(url: str, timeout: float = 30.0) -> requests.Response:
    end = time.monotonic() + timeout
    while True:
        try:
            return requests.get(url, timeout=2)
        except requests.RequestException:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="module")
def ports() -> dict[str, str]:
    return {"127.0.0.1:8000": f"127.0.0.1:{free_port()}", EXPORTER_LISTEN: f"127.0.0.1:{free_port()}"}


@pytest.fixture(scope="module")
def background(ports: dict[str, str]) -> Iterator[Callable[[str], None]]:
    """Starts a README command that keeps running (sim, exporter); all stopped at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    # stderr to a file, not a pipe read only at the end: a pipe's 64 KB fill and block the writer.
    with tempfile.TemporaryFile() as logs:

        def start(command: str) -> None:
            procs.append(subprocess.Popen(argv(command, ports), stdout=subprocess.DEVNULL, stderr=logs))

        yield start
        for proc in procs:
            proc.terminate()
        try:
            for proc in procs:
                proc.wait(timeout=20)
        finally:
            logs.seek(0)
            shown = logs.read()[-4000:].decode(errors="replace")
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                    pytest.fail(f"{proc.args} did not stop on SIGTERM; its stderr ends:\n{shown}")


def run(command: str, ports: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv(command, ports), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def check_demo(command: str, ports, background) -> None:
    # The live screen of exactly `kvops demo` is tests/top/test_tmux.py's; its frame as text here.
    proc = run(f"{command} --once", ports)
    assert proc.returncode == 0 and "Llama-3.1-8B-Instruct" in proc.stdout, proc.stderr


def check_sim(command: str, ports, background) -> None:
    background(command)
    page = wait_http(SIM_URL.replace("127.0.0.1:8000", ports["127.0.0.1:8000"]) + "/metrics")
    assert page.status_code == 200 and "vllm:" in page.text


def check_top(command: str, ports, background) -> None:
    """In a real terminal (tmux, 80x24), as typed; then `q`."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (.ci/run installs it)")
    from top.test_tmux import Tmux, start_shell, wait_exit

    tmp = Path(__import__("tempfile").mkdtemp(prefix="kvops-readme-"))
    tmux = Tmux(tmp)
    start_shell(tmux, tmp, 80, 24)
    try:
        exit_file = tmp / "exit"
        line = shlex.join(argv(command, ports))
        tmux("send-keys", "-t", tmux.session, f"cd {ROOT} && {line}; echo EXIT=$? > {exit_file}", "Enter")
        screen = tmux.wait_for("Llama-3.1-8B-Instruct")
        assert ports["127.0.0.1:8000"] in screen and "down" not in screen, screen
        tmux("send-keys", "-t", tmux.session, "q")
        assert wait_exit(exit_file) == "EXIT=0"
    finally:
        subprocess.run(["tmux", "-S", tmux.socket, "kill-server"], capture_output=True, timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)


def check_exporter(command: str, ports, background) -> None:
    """Started as written, then scraped by a real Prometheus with the README's scrape config."""
    background(command)
    listen = ports[EXPORTER_LISTEN]
    page = wait_http(f"http://{listen}/metrics")
    target = SIM_URL.replace("127.0.0.1:8000", ports["127.0.0.1:8000"])
    assert f'kvops_target_up{{target="{target}"}} 1.0' in page.text, page.text[:2000]
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.skip("prometheus not installed (.ci/run installs it)")
    snippet = re.search(r"```yaml\n(# prometheus.yml\n.*?)```", README, re.S)
    assert snippet, "the README has a prometheus.yml scrape config"
    config = yaml.safe_load(snippet.group(1).replace(EXPORTER_LISTEN, listen))
    config["scrape_configs"][0]["scrape_interval"] = "1s"  # the README's 15 s, faster for a test
    tmp = Path(__import__("tempfile").mkdtemp(prefix="kvops-readme-prom-"))
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = subprocess.Popen(
        [prometheus, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        end, result = time.monotonic() + 60, []
        while time.monotonic() < end and not result:
            try:
                query = {"query": "kvops_target_up == 1"}
                answer = requests.get(f"http://127.0.0.1:{port}/api/v1/query", params=query, timeout=2).json()
                result = answer["data"]["result"]
            except (requests.RequestException, KeyError, ValueError):
                pass
            time.sleep(0.5)
        assert result and result[0]["metric"]["job"] == "kvops", result
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)


def check_doctor(command: str, ports, background) -> None:
    proc = run(command, ports)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # an error finding, as the README says
    first = next(line for line in proc.stdout.splitlines() if line.startswith("ERROR "))
    assert "fix" in proc.stdout and "Traceback" not in proc.stderr, first


def check_size(command: str, ports, background) -> None:
    proc = run(command, ports)
    assert proc.returncode == 0, proc.stderr
    assert "recommended: --kv-offloading-size" in proc.stdout and "host RAM 512 GiB" in proc.stdout


RUNNERS: dict[str, Callable[..., None]] = {
    "demo": check_demo,
    "sim": check_sim,
    "top": check_top,
    "exporter": check_exporter,
    "doctor": check_doctor,
    "size": check_size,
}


def test_every_kvops_command_in_the_readme_has_a_runner():
    commands = kvops_commands()
    assert {c.split()[1] for c in commands} <= set(RUNNERS), commands
    # The quickstart's promise: the demo, top on a vLLM, the exporter, doctor and size.
    assert {"demo", "top", "exporter", "doctor", "size"} <= {c.split()[1] for c in commands}


@pytest.mark.slow
@pytest.mark.parametrize("command", kvops_commands())
def test_readme_command_runs_as_written(command, ports, background):
    # In README order: the simulated vLLM is up before top and the exporter point at it.
    RUNNERS[command.split()[1]](command, ports, background)


# --- counts and claims: generated from the repository, never typed ------------------------------


def test_the_alert_count_is_the_rule_files():
    rules = yaml.safe_load((ROOT / "alerts" / "kvops-alerts.yml").read_text())
    alerts = [r for group in rules["groups"] for r in group["rules"] if "alert" in r]
    assert re.search(r"\b(\d+) alerts\b", README).group(1) == str(len(alerts))
    for alert in alerts:  # "each linking to its runbook in playbooks/"
        assert (ROOT / "playbooks" / f"{alert['alert']}.md").is_file()


def test_the_dashboard_count_is_the_dashboards_folder():
    assert re.search(r"\((\d+) dashboards\)", README).group(1) == str(
        len(list((ROOT / "dashboards").glob("*.json")))
    )


def test_the_known_failure_count_is_doctors_catalog():
    from kvops.doctor.judging import catalog

    loaded = catalog.load()
    assert loaded.problems == ()
    # the same split as `kvops doctor --list-checks` (report.list_checks): a silent
    # misconfiguration has no log signature, only conditions on the command or model
    silent = [pb for pb in loaded.failures if not pb.signatures and pb.conditions]
    said = re.search(r"knows (\d+) failures\s.*?(\d+) silent\s+misconfigurations", README, re.S)
    assert said.groups() == (str(len(loaded.failures) - len(silent)), str(len(silent)))


def test_the_readme_stays_short_and_names_no_false_install():
    assert len(README.splitlines()) < 200
    assert "pip install 'kvops[" not in README and "pip install kvops" not in README  # not on PyPI
    assert "ghcr.io" not in README  # no image is published


def test_the_headline_performance_figures_are_docs_performance_figures():
    table = README.split("## Performance", 1)[1].split("\n## ", 1)[0]
    figures = re.findall(r"\d+(?:\.\d+)?(?:–\d+(?:\.\d+)?)?(?: ?[×%]| ms)", table)
    assert len(figures) >= 5, table
    performance = (ROOT / "docs" / "performance.md").read_text()
    assert [f for f in figures if f not in performance] == []


def test_the_screenshot_is_textuals_svg_of_the_demo():
    assert "](docs/images/kvops-demo.svg)" in README
    svg = (ROOT / "docs" / "images" / "kvops-demo.svg").read_text().replace("&#160;", " ")
    # Textual's export_screenshot (Rich's SVG console export) of the demo's title line
    assert svg.startswith('<svg class="rich-terminal"') and "kvops demo: simulated vLLM" in svg
    assert (ROOT / "docs" / "gen_screenshot.py").is_file()


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_completion_lines_work_on_a_fresh_account(shell: str, tmp_path: Path) -> None:
    """The README's completion line, run as written in a home with none of its folders."""
    line = re.search(rf"`(mkdir -p [^`]*kvops completion {shell} > [^`]*)`", README).group(1)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}  # `kvops` is the installed command, as a user has it
    proc = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    target = Path(line.rsplit("> ", 1)[1].replace("~", str(home)))
    assert target.is_file() and "kvops" in target.read_text()


def test_the_c_part_count_is_setup_pys_extensions() -> None:
    """The README's count of "small C parts": one Extension each in setup.py, one .c file each."""
    words = {2: "two", 3: "three", 4: "four", 5: "five"}
    extensions = re.findall(
        r'Extension\("kvops\.[\w.]+", \["(kvops/[\w/]+\.c)"\]', (ROOT / "setup.py").read_text()
    )
    sources = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "kvops").rglob("*.c"))
    assert sorted(extensions) == sources and sources, (extensions, sources)
    said = re.search(r"builds kvops's (\w+) small C parts", README)
    assert said and said.group(1) == words[len(sources)], said


def test_the_top_yml_keys_are_the_ones_kvops_top_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "holds `kvops top`'s (`targets:` or `prometheus:`, `interval`, ...)": each key the README names
    is read from a real top.yml, and a key it does not name is refused."""
    from kvops import userconfig
    from kvops.errors import UsageError
    from kvops.top.command import SORT_KEYS, WINDOWS

    said = re.search(r"holds `kvops top`'s\s+\(([^)]*)\)", README)
    assert said, "the README lists top.yml's keys"
    keys = [k.rstrip(":") for k in re.findall(r"`([a-z_]+:?)`", said.group(1))]
    valid = {
        "targets": ["http://127.0.0.1:8000"],
        "prometheus": "http://127.0.0.1:9090",
        "interval": 2,
        "sort": SORT_KEYS[0],
        "window": next(iter(WINDOWS)),
        "group_by": "model",
        "filter": "llama",
        "top": 5,
    }
    assert set(keys) == set(valid), keys
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "kvops").mkdir()
    for key in keys:
        (tmp_path / "kvops" / "top.yml").write_text(yaml.safe_dump({key: valid[key]}))
        assert userconfig.top_defaults(SORT_KEYS, tuple(WINDOWS)), key
    (tmp_path / "kvops" / "top.yml").write_text("colour: red\n")
    with pytest.raises(UsageError, match="unknown key"):
        userconfig.top_defaults(SORT_KEYS, tuple(WINDOWS))

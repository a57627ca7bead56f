"""`kvops top` in a real terminal: tmux at 120×40, keys sent, the screen read back."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kvops.top.app import COLUMNS
from support.paths import ROOT

from .helpers import T1, T2

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (.ci/run installs it)"),
]


PROMPT = "kvops-test$ "


class Tmux:
    def __init__(self, tmp: Path) -> None:
        # A private server socket: never touches a tmux the user has running.
        self.socket = str(tmp / "tmux.sock")
        self.session = f"kvops-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> str:
        proc = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=20)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.session)

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        end = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < end:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} not on screen after {timeout:g} s:\n{screen}")


def test_kvops_top_in_tmux_shows_help_quits_and_restores_the_terminal(tmp_path):
    tmux = Tmux(tmp_path)
    exit_file = tmp_path / "exit"
    kvops = f"{sys.executable} -m kvops.cli"
    tmux("new-session", "-d", "-x", "120", "-y", "40", "-s", tmux.session,
         f"env PS1='{PROMPT}' TERM=xterm-256color HOME={tmp_path} bash --norc --noprofile")  # fmt: skip
    try:
        command = f"cd {ROOT} && {kvops} top --replay {T1} {T2}; echo EXIT=$? > {exit_file}"
        tmux("send-keys", "-t", tmux.session, command, "Enter")
        screen = tmux.wait_for("holding the last frame")
        assert "Llama-3.1-8B-Instruct" in screen
        row = next(line for line in screen.splitlines() if "Llama-3.1-8B-Instruct" in line)
        assert row.split()[:12] == ["replay", "Llama-3.1-8B-Instruct", "0", "98.4!", "58.2", "18.2!",
                                    "30.33", "38.84", "0.19", "97", "3", "1"]  # fmt: skip
        assert tmux("display-message", "-p", "-t", tmux.session, "#{alternate_on}").strip() == "1"

        tmux("send-keys", "-t", tmux.session, "?")
        help_screen = tmux.wait_for("q, Ctrl-C")
        assert "Pre-empt" in help_screen and "TTFT p90 ms" in help_screen
        tmux("send-keys", "-t", tmux.session, "End")  # the help is longer than 40 rows: it scrolls
        help_screen = tmux.wait_for("GB/s = 10⁹ bytes per second")
        assert "GiB = 2³⁰ bytes" in help_screen

        tmux("send-keys", "-t", tmux.session, "q")
        end = time.monotonic() + 20
        while not exit_file.exists() and time.monotonic() < end:
            time.sleep(0.1)
        assert exit_file.read_text().strip() == "EXIT=0"
        # The terminal is back: alternate screen left, the shell and its prompt visible,
        # nothing of the dashboard left behind.
        assert tmux("display-message", "-p", "-t", tmux.session, "#{alternate_on}").strip() == "0"
        after = tmux.screen()
        assert "top --replay" in after and after.rstrip().endswith(PROMPT.rstrip())
        assert "Llama-3.1-8B-Instruct" not in after and "Load:" not in after
    finally:
        subprocess.run(["tmux", "-S", tmux.socket, "kill-server"], capture_output=True, timeout=20)


# Every word a column header may show: a header cut by the terminal's edge ("Loade") is none.
HEADER_WORDS = {word for _, label in COLUMNS for word in label.split()}


def header_words(screen: str) -> list[str]:
    """The words of the table's two header lines (the two lines under the status line)."""
    lines = screen.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["Target"])
    return [word for line in lines[start : start + 2] for word in line.split()]


def start_shell(tmux: Tmux, tmp: Path, width: int, height: int) -> None:
    tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-s", tmux.session,
         f"env PS1='{PROMPT}' TERM=xterm-256color HOME={tmp} bash --norc --noprofile")  # fmt: skip


def wait_exit(exit_file: Path, timeout: float = 20.0) -> str:
    end = time.monotonic() + timeout
    while not exit_file.exists() and time.monotonic() < end:
        time.sleep(0.1)
    return exit_file.read_text().strip() if exit_file.exists() else "still running"


@pytest.mark.parametrize(("width", "height"), [(80, 24), (120, 40)])
def test_kvops_demo_fits_the_terminal_and_ctrl_c_quits_with_exit_0(tmp_path, width, height):
    tmux = Tmux(tmp_path)
    exit_file = tmp_path / "exit"
    start_shell(tmux, tmp_path, width, height)
    try:
        command = f"cd {ROOT} && {sys.executable} -m kvops.cli demo; echo EXIT=$? > {exit_file}"
        tmux("send-keys", "-t", tmux.session, command, "Enter")
        started = time.monotonic()
        screen = tmux.wait_for("Llama-3.1-8B-Instruct")
        shown_after = time.monotonic() - started  # issue 20: within 5 s (given here to 10 s:
        assert shown_after < 10, shown_after  # the test machine is shared)
        words = header_words(screen)
        # The most important columns are always there, and every header shown is whole.
        assert {"Target", "Model", "KV", "Local", "Ext"} <= set(words), screen
        assert set(words) <= HEADER_WORDS, (set(words) - HEADER_WORDS, screen)
        if width == 80:  # the least important columns were left out, not cut
            assert "Stored" not in words and "Target" in words
        # The simulator feeds the GPU and host panels, and says so; the charts are drawn,
        # with a y scale and time marks.
        screen = tmux.wait_for("RAM ", timeout=30)
        assert "Sim. GPU" in screen or "GPU (simulated)" in screen, screen
        assert "Sim. host:" in screen or "Host (simulated):" in screen, screen
        # The table's GB/s are while moving ("Storing"), the chart's per wall-clock second.
        assert "Hit rate (%)" in screen and "Per wall-clock s (GB/s)" in screen, screen
        assert "Storing" in words and "GB/s" in words, words
        assert_nothing_wraps_or_clips(screen, width)
        assert "100┤" in screen and "-30s" in screen and "0└" in screen, screen
        if width >= 120:
            assert "Tokens saved (k tok/s)" in screen, screen
        tmux("send-keys", "-t", tmux.session, "C-c")
        assert wait_exit(exit_file) == "EXIT=0"
        assert tmux("display-message", "-p", "-t", tmux.session, "#{alternate_on}").strip() == "0"
        assert tmux.screen().rstrip().endswith(PROMPT.rstrip())
    finally:
        subprocess.run(["tmux", "-S", tmux.socket, "kill-server"], capture_output=True, timeout=20)


def assert_nothing_wraps_or_clips(screen: str, width: int) -> None:
    """Issue 30: the GPU's name on one line, the title and footer whole, no ^p palette hint."""
    lines = screen.splitlines()
    assert any("PCIe Gen5 x16, 24 GiB" in line for line in lines), screen  # the simulated GPU's name
    status = lines[0].rstrip()
    # Nothing past the edge: the line ends with one of the state's parts, whole.
    whole = ("sort: target", "rates from the next frame on", "waiting for the first scrape…")
    assert "sort: target" in status and status.endswith(whole) and len(status) <= width, status
    footer = next(line for line in reversed(lines) if line.strip()).rstrip()
    assert footer.endswith("p pause") and "q quit" in footer, footer
    assert "palette" not in screen and "^p" not in screen, footer
    host = next(line for line in lines if "host" in line.lower() and "RAM" in line)
    assert host.rstrip().endswith("GiB"), host  # its last figure on its own line: not wrapped


def test_kvops_top_quits_on_ctrl_c_with_exit_0(tmp_path):
    tmux = Tmux(tmp_path)
    exit_file = tmp_path / "exit"
    start_shell(tmux, tmp_path, 120, 40)
    try:
        command = (
            f"cd {ROOT} && {sys.executable} -m kvops.cli top --replay {T1} {T2}; echo EXIT=$? > {exit_file}"
        )
        tmux("send-keys", "-t", tmux.session, command, "Enter")
        tmux.wait_for("holding the last frame")
        tmux("send-keys", "-t", tmux.session, "/")  # Ctrl-C quits from the filter box too
        tmux("send-keys", "-t", tmux.session, "C-c")
        assert wait_exit(exit_file) == "EXIT=0"
        assert tmux("display-message", "-p", "-t", tmux.session, "#{alternate_on}").strip() == "0"
    finally:
        subprocess.run(["tmux", "-S", tmux.socket, "kill-server"], capture_output=True, timeout=20)


def test_kvops_demo_in_tmux_shows_the_simulated_vllm_live_and_quits(tmp_path):
    tmux = Tmux(tmp_path)
    exit_file = tmp_path / "exit"
    tmux("new-session", "-d", "-x", "120", "-y", "40", "-s", tmux.session,
         f"env PS1='{PROMPT}' TERM=xterm-256color HOME={tmp_path} bash --norc --noprofile")  # fmt: skip
    try:
        command = f"cd {ROOT} && {sys.executable} -m kvops.cli demo; echo EXIT=$? > {exit_file}"
        tmux("send-keys", "-t", tmux.session, command, "Enter")
        screen = tmux.wait_for("kvops demo: simulated vLLM 0.33.0")
        row = tmux.wait_for("Llama-3.1-8B-Instruct")
        line = next(line for line in row.splitlines() if "Llama-3.1-8B-Instruct" in line)
        assert line.split()[0].startswith("127.0.0.1:") and "down" not in line
        # Live: a later frame carries interval figures (a local hit rate, not "-").
        end = time.monotonic() + 20
        while time.monotonic() < end:
            screen = tmux.screen()
            line = next((x for x in screen.splitlines() if "Llama-3.1-8B-Instruct" in x), "")
            if len(line.split()) > 4 and line.split()[4] != "-":
                break
            time.sleep(0.3)
        assert float(line.split()[4].removesuffix("!")) >= 0, screen  # "!": under 50 %, an alarm
        tmux("send-keys", "-t", tmux.session, "q")
        end = time.monotonic() + 20
        while not exit_file.exists() and time.monotonic() < end:
            time.sleep(0.1)
        assert exit_file.read_text().strip() == "EXIT=0"
        assert tmux("display-message", "-p", "-t", tmux.session, "#{alternate_on}").strip() == "0"
    finally:
        subprocess.run(["tmux", "-S", tmux.socket, "kill-server"], capture_output=True, timeout=20)


def test_detail_view_of_a_kvbm_in_tmux_lists_its_tiers(tmp_path):
    """Enter on KVBM's row in a real terminal: its kind, each tier's blocks moved and the
    engine's own hit-rate gauges, as tests/fixtures/dynamo-kvbm/truth.json says."""
    import json

    kvbm = ROOT / "tests" / "fixtures" / "dynamo-kvbm"
    d1, d2 = json.loads((kvbm / "truth.json").read_text())["dumps"]
    c1, c2 = d1["counters"], d2["counters"]
    tmux = Tmux(tmp_path)
    exit_file = tmp_path / "exit"
    start_shell(tmux, tmp_path, 120, 40)
    try:
        command = (f"cd {ROOT} && {sys.executable} -m kvops.cli top --replay {kvbm / 'kvbm-t1.prom'} "
                   f"{kvbm / 'kvbm-t2.prom'}; echo EXIT=$? > {exit_file}")  # fmt: skip
        tmux("send-keys", "-t", tmux.session, command, "Enter")
        screen = tmux.wait_for("holding the last frame")
        rows = [line.split() for line in screen.splitlines() if line.split()[:1] == ["replay"]]
        assert [row[1] for row in rows] == ["of", "dynamo-kvbm"]  # the status line, then the row
        assert "no vLLM engine" not in screen
        tmux("send-keys", "-t", tmux.session, "Enter")
        detail = tmux.wait_for("Tiers")
        host = next(line.split() for line in detail.splitlines() if line.split()[:1] == ["host"])
        moved = [str(c2["offload_blocks_d2h"] - c1["offload_blocks_d2h"]), "blocks",
                 str(c2["onboard_blocks_h2d"] - c1["onboard_blocks_h2d"]), "blocks"]  # fmt: skip
        assert host[1:3] == [f"{d2['gauges']['host_cache_hit_rate'] * 100:.1f}", "%*"]
        assert host[5:9] == moved, detail
        assert "engine kind" in detail and "dynamo-kvbm" in detail
        tmux("send-keys", "-t", tmux.session, "q")
        assert wait_exit(exit_file) == "EXIT=0"
    finally:
        subprocess.run(["tmux", "-S", tmux.socket, "kill-server"], capture_output=True, timeout=20)

"""NO_COLOR (no-color.org): colour off, and every alarm still seen, as a mark that needs none."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import ROOT

from .helpers import T1, T2
from .test_tmux import PROMPT, Tmux

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (.ci/run installs it)"),
]

HITS = 'vllm:external_prefix_cache_hits_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"}'


def low_external_hit_rate_dump(tmp: Path) -> Path:
    """T2 with the offload tier hitting almost nothing over the interval (under 50 %: an alarm)."""
    text = T2.read_text()
    assert HITS in text
    low = re.sub(re.escape(HITS) + r" \S+", f"{HITS} 10.0", text)
    path = tmp / "low-t2.prom"
    path.write_text(low)
    return path


def colours(painted: str) -> set[str]:
    """The foreground colours (not greys) in a pane captured with its escape sequences."""
    found = set()
    for code in re.findall(r"\x1b\[([0-9;]*)m", painted):
        for n in re.findall(r"(?:^|;)38;5;(\d+)", code):
            if 1 <= int(n) <= 231 and int(n) not in (7, 8, 15, 16):  # 232-255 and 0/7/8/15/16 are greys
                found.add(f"38;5;{n}")
        for r, g, b in re.findall(r"(?:^|;)38;2;(\d+);(\d+);(\d+)", code):
            if not r == g == b:
                found.add(f"38;2;{r};{g};{b}")
    return found


def alarm_attributes(painted: str, figure: str) -> set[str]:
    """The SGR attributes in force where `figure` is drawn in a pane captured with escapes."""
    at = painted.index(figure)
    codes: set[str] = set()
    for code in re.findall(r"\x1b\[([0-9;]*)m", painted[:at]):
        if code in ("", "0"):
            codes.clear()
        codes.update(code.split(";"))
    return codes


@pytest.mark.parametrize("no_color", [True, False])
def test_an_alarm_is_marked_with_or_without_colour(tmp_path, no_color):
    t2 = low_external_hit_rate_dump(tmp_path)
    tmux = Tmux(tmp_path)
    env = "NO_COLOR=1 " if no_color else ""
    tmux("new-session", "-d", "-x", "120", "-y", "40", "-s", tmux.session,
         f"env {env}PS1='{PROMPT}' TERM=xterm-256color HOME={tmp_path} bash --norc --noprofile")  # fmt: skip
    try:
        command = f"cd {ROOT} && {sys.executable} -m kvops.cli top --replay {T1} {t2}"
        tmux("send-keys", "-t", tmux.session, command, "Enter")
        screen = tmux.wait_for("holding the last frame")
        row = next(line for line in screen.splitlines() if "Llama-3.1-8B-Instruct" in line).split()
        assert row[3:6] == ["98.4", "58.2", "0.0!"] or row[4:6] == ["58.2", "0.0!"], row  # Ext hit % 0
        painted = tmux("capture-pane", "-p", "-e", "-t", tmux.session)
        assert (colours(painted) == set()) == no_color, colours(painted)
        if no_color:  # the alarm stands out without colour: reverse video (it was grey on grey)
            assert "7" in alarm_attributes(painted, "0.0!")
    finally:
        subprocess.run(["tmux", "-S", tmux.socket, "kill-server"], capture_output=True, timeout=20)

"""User pages against the code they describe: names read from the code, never typed twice."""

from __future__ import annotations

import re

from support.paths import ROOT
from support.real_vllm import server


def test_real_vllm_page_names_every_mode_of_the_server() -> None:
    page = (ROOT / "docs" / "real-vllm.md").read_text()
    said = re.search(r"The modes: (.*?)\.\s*`--traffic`", page, re.S)
    assert said, "docs/real-vllm.md lists the server's modes"
    assert re.findall(r"`([a-z-]+)` \(", said.group(1)) == list(server.MODES)
    assert "ready: " in page and "log: " in page  # what the server prints, as main() prints it

"""`?` is generated from the table's columns and the charts' legends: every column the table
can show and every line a chart can draw is explained, and each key is listed once."""

from __future__ import annotations

import re

from kvops.frames.replay import ReplaySource
from kvops.top.app import COLUMNS, KIND_COLUMN, TIER_COLUMNS, HelpScreen, TopApp
from kvops.top.charts import CHARTS, TIER_LABELS

from .helpers import T1, T2, drive, screen_text, wait_until


@drive
async def test_help_lists_every_column_and_chart_line_and_each_key_once():
    app = TopApp(ReplaySource([str(T1), str(T2)], 0.05), 0.05)
    async with app.run_test(size=(120, 90)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shown = screen_text(app)
    headers = [label for _, label in (*COLUMNS, KIND_COLUMN)] + [label for _, _, label in TIER_COLUMNS]
    for header in headers:
        one_line = header.replace("-\n", "-").replace(":\n", ":").replace("\n", " ")
        assert re.search(rf"│\s+{re.escape(one_line)}\s{{2,}}\S", shown), one_line
    for name in ("Eng", "Run", "Wait", "Pre-empt", "TTFT p90 ms"):  # the ones `?` lacked
        assert f"  {name}  " in shown, name
    for chart in CHARTS:
        assert chart.title in shown
        for line in chart.lines:
            assert f"{line.marker}━ {line.label}" in shown, line.label
    for label in TIER_LABELS.values():
        assert f"━ {label} " in shown, label
    section = shown.split("Keys")[1].split("Columns")[0]
    keys = [m.group(1) for m in re.finditer(r"│\s+(\S+(?:,? \S+)?)\s{2,}\S", section)]
    assert keys.count("q, Ctrl-C") == 1 and not any(k == "q" for k in keys), keys
    assert "on the right edge" in shown  # the fourth chart's second scale

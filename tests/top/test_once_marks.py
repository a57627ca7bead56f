"""`kvops top --once` (and the detail view's tier table) mark the figures in trouble with "!" as
the live table does.

Which figures are in trouble is computed here from `--once --json`'s numbers and the
thresholds docs/top.md states (hit rate under 50 %, KV cache 95 % full or more, a PCIe link
over 90 % busy, RAM or /dev/shm smaller than the offload tier), never read back from the
text; the live table of the same replay, driven through Pilot, must mark the same cells.
"""

from __future__ import annotations

import json
from pathlib import Path

from kvops.cli import main
from kvops.engines import registry
from kvops.exposition.parser import parse
from kvops.frames.replay import ReplaySource
from kvops.snapshot import GpuSample, HostSample, Snapshot, TargetSample
from kvops.top.app import TopApp
from support.paths import FIXTURES

from .helpers import T1, T2, drive, wait_until
from .test_sources import exporter_text
from .test_tiers import cells

LINK = 6.3e10  # bytes per second per direction (PCIe 5.0 x16)
PAIRS = {  # the v0.33 engine's CPU tier is 128 GiB: the offload tier the host must hold
    "http://10.0.0.1:8000": (T1, T2),
    "http://10.0.0.2:30000": tuple(FIXTURES / "sglang" / f"hicache-t{i}.prom" for i in (1, 2)),
    "http://10.0.0.3:9090": tuple(FIXTURES / "lmcache" / f"lmcache-t{i}.prom" for i in (1, 2)),
}


def _dumps(tmp: Path) -> list[str]:
    """Two exporter dumps 1 s apart: the engines, one GPU whose transmit link is 95 % busy
    (receive 10 %), and a host with RAM to spare but a /dev/shm smaller than the tier."""
    files = []
    for i in (0, 1):
        targets = [registry.normalise(parse(pair[i].read_text(), registry.WANTED), url)
                   for url, pair in PAIRS.items()]  # fmt: skip
        targets.append(TargetSample("http://10.0.0.9:8000", up=False, error="refused"))
        gpu = GpuSample(index="0", uuid="GPU-1", vendor="nvidia", name="H100", memory_used_bytes=7e10,
                        memory_total_bytes=8.5e10, pcie_link_max_bytes_per_second=LINK,
                        pcie_tx_bytes=1e12 + i * 0.95 * LINK,
                        pcie_rx_bytes=2e12 + i * 0.10 * LINK)  # fmt: skip
        host = HostSample(memory_total_bytes=2e12, memory_available_bytes=1.5e12, shmem_bytes=1e9,
                          mlocked_bytes=0.0, shm_total_bytes=1e12, shm_free_bytes=5e10)  # fmt: skip
        path = tmp / f"t{i + 1}.prom"
        path.write_text(exporter_text(Snapshot(time=i, targets=targets, gpus=[gpu], host=host)))
        files.append(str(path))
    return files


def _once(capsys, files: list[str], *extra: str) -> str:
    assert main(["top", "--once", "--interval", "1", "--replay", *files, *extra]) == 0
    return capsys.readouterr().out


def _expected_marks(doc: dict) -> dict[str, set[str]]:
    """Per engine row (target engine), the columns in trouble by the documented thresholds."""
    out = {}
    for row in doc["targets"]:
        if not row["up"]:
            continue
        marks = set()
        if row["kv_cache_usage"] is not None and row["kv_cache_usage"] >= 0.95:
            marks.add("kv")
        for column, name in (("local", "local_hit_rate"), ("external", "external_hit_rate")):
            if row[name] is not None and row[name] < 0.5:
                marks.add(column)
        out[f"{row['target']} {row['engine']}"] = marks
    return out


def _text_marks(text: str) -> dict[str, set[str]]:
    lines = text.splitlines()
    header = lines[0]
    starts = {name: header.index(name) for name in ("KV", "LOCAL HIT", "EXT HIT", "STORE")}
    columns = (("kv", "KV", "LOCAL HIT"), ("local", "LOCAL HIT", "EXT HIT"), ("external", "EXT HIT", "STORE"))
    out = {}
    for line in lines[1:]:
        if not line.startswith("http://") or "DOWN:" in line:
            continue
        words = line.split()
        out[f"{words[0]} {words[2]}"] = {
            key for key, start, end in columns if "!" in line[starts[start] : starts[end]]
        }
    return out


def test_once_text_marks_what_the_thresholds_say(tmp_path, capsys):
    files = _dumps(tmp_path)
    doc = json.loads(_once(capsys, files, "--json"))
    expected = _expected_marks(doc)
    assert any(expected.values()) and not all(expected.values())  # some rows in trouble, some not
    text = _once(capsys, files)
    assert _text_marks(text) == expected
    [gpu] = [line for line in text.splitlines() if line.startswith("GPU 0")]
    assert " PCIe TX 59.85 GB/s! RX 6.30 GB/s " in gpu  # 95 % of the link: marked; 10 %: not
    [host] = [line for line in text.splitlines() if line.startswith("Host:")]
    assert "RAM available 1397.0 GiB of" in host and "/dev/shm free 46.6 GiB!," in host


def test_once_group_lines_mark_low_hit_rates(tmp_path, capsys):
    files = _dumps(tmp_path)
    groups = json.loads(_once(capsys, files, "--json", "--group-by", "kind"))["groups"]
    text = _once(capsys, files, "--group-by", "kind").split("\n\n", 1)[1]
    for g in groups:
        line = next(x.split() for x in text.splitlines() if x.startswith(f"{g['group']} "))
        for rate, cell in ((g["local_hit_rate"], line[3:5]), (g["external_hit_rate"], line[5:7])):
            if rate is None:
                continue
            assert cell[1] == ("%!" if rate < 0.5 else "%"), (g["group"], line)


@drive
async def test_once_text_marks_the_cells_the_live_table_marks(tmp_path, capsys):
    files = _dumps(tmp_path)
    text_marks = _text_marks(_once(capsys, files))
    app = TopApp(ReplaySource(files, 1.0), interval=0.05)
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        await pilot.pause()
        live = {}
        for key, row in cells(app).items():  # key: "target model engine"
            target, _, engine = key.split(" ")
            if row["kv"] != "down":
                live[f"{target} {engine}"] = {k for k in ("kv", "local", "external") if "!" in row[k]}
    assert live == text_marks and any(live.values())


@drive
async def test_the_detail_views_tier_table_marks_a_low_hit_rate(monkeypatch):
    """With NO_COLOR the tier table's red hit rate needs its mark too (host 18.2 %: under 50 %)."""
    from .test_tiers import _detail, tier_line

    monkeypatch.setenv("NO_COLOR", "1")
    truth = json.loads((T2.parent / "truth.json").read_text())["offload"]["intervals"][0]
    app = TopApp(ReplaySource([str(T1), str(T2)], 1.0), 0.05)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await _detail(app, pilot)
        gpu, host = tier_line(screen, "gpu"), tier_line(screen, "host")
    assert truth["prefix_cache_hit_rate"] >= 0.5 > truth["external_prefix_cache_hit_rate"]
    assert gpu[1:3] == [f"{truth['prefix_cache_hit_rate'] * 100:.1f}", "%"]
    assert host[1:3] == [f"{truth['external_prefix_cache_hit_rate'] * 100:.1f}", "%!"]

"""Issue 42 in `kvops top`'s detail view: two tiers of one kind are a row each under their kind
with the stores back-pressure dropped, and vLLM's KV connectors are shown with their transfers,
failures and expiries (pages written by vLLM 0.33's own code)."""

from __future__ import annotations

from pathlib import Path

from .helpers import drive
from .test_tiers import _detail, _truth, figure, replay, tier_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TWO_FS = FIXTURES / "vllm-tiering-2fs"
CONNECTORS = FIXTURES / "vllm-connectors"


@drive
async def test_two_fs_tiers_are_a_row_each_under_the_disk_tier_with_their_drops():
    t1, t2 = _truth(TWO_FS)["dumps"]

    def dropped(label: str) -> tuple[int, int]:
        fed0, fed1 = t1["fed"], t2["fed"]
        stores = fed1["stores_dropped"][label] - fed0["stores_dropped"][label]
        return stores, fed1["blocks_dropped"][label] - fed0["blocks_dropped"][label]

    app = replay(TWO_FS)
    async with app.run_test(size=(220, 60)) as pilot:
        screen = await _detail(app, pilot)
    assert "Dropped (bp)" in screen
    for label in ("1:fs", "2:fs"):
        line = " ".join(_member(screen, label))
        stores, blocks = dropped(label)
        assert f"{stores} ({blocks} blk)" in line, line
    disk = " ".join(tier_line(screen, "disk"))
    stores = sum(dropped(label)[0] for label in ("1:fs", "2:fs"))
    blocks = sum(dropped(label)[1] for label in ("1:fs", "2:fs"))
    assert f"{stores} ({blocks} blk)" in disk


def _member(screen: str, label: str) -> list[str]:
    for line in screen.splitlines():
        words = line.split()
        if len(words) > 1 and words[0] == "└" and words[1] == label:
            return words
    raise AssertionError(f"no row for {label} in\n{screen}")


@drive
async def test_connectors_show_transfers_failures_and_expiries():
    t1, t2 = _truth(CONNECTORS)["dumps"]
    before, after = t1["fed"], t2["fed"]
    app = replay(CONNECTORS)
    async with app.run_test(size=(220, 70)) as pilot:
        screen = await _detail(app, pilot)
    nixl = figure(screen, "nixl transfers")
    failed = sum(after["nixl"][k] - before["nixl"][k] for k in ("failed_transfers", "failed_handshakes",
                                                               "failed_notifications"))  # fmt: skip
    expired = after["nixl"]["expired"] - before["nixl"]["expired"]
    assert nixl.startswith(f"{after['nixl']['transfers'] - before['nixl']['transfers']} ·"), nixl
    assert f"{failed} failed" in nixl and f"{expired} expired" in nixl
    mooncake = figure(screen, "mooncake transfers")
    failed = sum(after["mooncake"][k] - before["mooncake"][k] for k in ("failed_transfers", "failed_recvs"))
    assert f"{failed} failed" in mooncake
    put = after["store"]["save_put"]
    was = before["store"]["save_put"]
    shown = figure(screen, "mooncake_store/save_put not ok")
    assert shown == f"{put['not_ok'] - was['not_ok']} of {put['operations'] - was['operations']}"

from __future__ import annotations

import json

from kvops.bench.plan import DEFAULT_SIZES, MAX_TRANSFER_BYTES, Case, build_plan, describe

KIB, MIB = 2**10, 2**20


def test_default_sizes_span_16kib_to_64mib_and_cover_vllm_blocks() -> None:
    assert min(DEFAULT_SIZES) == 16 * KIB
    assert max(DEFAULT_SIZES) == 64 * MIB
    assert {512 * KIB, 1 * MIB, 2 * MIB} <= set(DEFAULT_SIZES)


def test_default_plan_has_every_direction_memory_and_shape() -> None:
    plan = build_plan()
    combos = {(c.direction, c.memory, c.block_bytes, c.blocks > 1) for c in plan.cases}
    assert len(combos) == len(plan.cases) == 3 * 2 * len(DEFAULT_SIZES) * 2
    assert {c.direction for c in plan.cases} == {"h2d", "d2h", "bidir"}
    assert {c.memory for c in plan.cases} == {"pinned", "pageable"}


def test_batched_transfers_are_capped_at_one_gib() -> None:
    plan = build_plan(sizes=[2 * MIB, 64 * MIB], blocks=64, directions=["h2d"], memories=["pinned"])
    batched = {c.block_bytes: c.blocks for c in plan.cases if c.blocks > 1}
    assert batched == {2 * MIB: 64, 64 * MIB: 16}
    assert all(c.bytes_per_direction <= MAX_TRANSFER_BYTES for c in plan.cases)
    assert any("64 MiB: 16 blocks" in n for n in plan.notes)


def test_size_of_the_cap_itself_gets_no_batched_case() -> None:
    plan = build_plan(sizes=[2**30], blocks=8, directions=["d2h"], memories=["pinned"])
    assert [c.blocks for c in plan.cases] == [1]
    assert plan.notes and "no batched case" in plan.notes[0]


def test_blocks_one_means_single_copies_only() -> None:
    plan = build_plan(blocks=1)
    assert {c.blocks for c in plan.cases} == {1}


def test_directions_of_one_shape_run_in_a_row_so_buffers_are_reused() -> None:
    plan = build_plan(sizes=[64 * KIB, 2 * MIB], memories=["pinned", "pageable"])
    shapes = [(c.memory, c.block_bytes, c.blocks) for c in plan.cases]
    runs = [shapes[0]]
    for s in shapes[1:]:
        if s != runs[-1]:
            runs.append(s)
    assert len(runs) == len(set(shapes))  # each shape appears as one contiguous run


def test_duplicate_sizes_and_directions_are_dropped_and_sizes_sorted() -> None:
    plan = build_plan(
        sizes=[2 * MIB, 16 * KIB, 2 * MIB], directions=["h2d", "h2d"], memories=["pinned"], blocks=1
    )
    assert [c.block_bytes for c in plan.cases] == [16 * KIB, 2 * MIB]


def test_bidirectional_moves_twice_the_bytes_over_twice_the_link() -> None:
    one_way = Case("h2d", "pinned", 2 * MIB, 4)
    both = Case("bidir", "pinned", 2 * MIB, 4)
    assert one_way.bytes_moved == 8 * MIB and one_way.link_directions == 1
    assert both.bytes_moved == 16 * MIB and both.link_directions == 2


def test_plan_totals_count_warmup_and_repeats() -> None:
    plan = build_plan(
        sizes=[1 * MIB], directions=["h2d", "bidir"], memories=["pinned"], blocks=1, repeats=10, warmup=2
    )
    assert plan.copies == 2 * 12
    assert plan.bytes_total == (1 * MIB + 2 * MIB) * 12
    assert plan.peak_host_bytes == 2 * MIB


def test_describe_lists_groups_sizes_totals_and_link_source() -> None:
    plan = build_plan(sizes=[512 * KIB, 2 * MIB], memories=["pinned"], blocks=64, repeats=5, warmup=1)
    text = describe(plan, "63.0 GB/s per direction (from --link-max-gbps)")
    assert "12 cases, 1 warm-up + 5 timed repeats each" in text
    assert "host→device (load)" in text and "both at once, two streams" in text
    assert "512 KiB×64, 2 MiB×64" in text
    assert "link max: 63.0 GB/s per direction (from --link-max-gbps)" in text
    assert "needs a CUDA or ROCm GPU" in text
    # (0.5 + 2 + 32 + 128) MiB per shape, × 4 (h2d, d2h, bidir twice), × 6 repeats = 4.09e9 bytes.
    assert "moves 4.1 GB in 72 transfers" in text


def test_describe_small_plans_in_megabytes_and_singular() -> None:
    plan = build_plan(sizes=[2**20], directions=["h2d"], memories=["pinned"], blocks=1, repeats=9, warmup=1)
    text = describe(plan, "unknown")
    assert "1 case," in text and "moves 10.5 MB in 10 transfers" in text


def test_plan_json_round_trips() -> None:
    plan = build_plan(sizes=[2 * MIB], directions=["bidir"], memories=["pageable"], blocks=2)
    data = json.loads(json.dumps(plan.as_dict()))
    assert data["cases"] == [
        {
            "direction": "bidir",
            "memory": "pageable",
            "block_bytes": 2 * MIB,
            "blocks": 1,
            "bytes_per_transfer": 4 * MIB,
        },
        {
            "direction": "bidir",
            "memory": "pageable",
            "block_bytes": 2 * MIB,
            "blocks": 2,
            "bytes_per_transfer": 8 * MIB,
        },
    ]

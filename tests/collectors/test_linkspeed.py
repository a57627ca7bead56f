"""PCIe generation x width -> usable bytes per second per direction (hardware.md §1.5, §5)."""

from __future__ import annotations

import pytest

from kvops.collectors.linkspeed import bytes_per_second, bytes_per_second_from_rate, generation_from_rate


@pytest.mark.parametrize(
    ("gen", "width", "gb_per_s"),
    [(5, 16, 63.0), (4, 16, 31.5), (3, 16, 15.75), (4, 8, 15.75), (2, 16, 8.0), (1, 1, 0.25)],
)
def test_published_figures(gen: int, width: int, gb_per_s: float) -> None:
    got = bytes_per_second(gen, width)
    assert got is not None
    assert got == pytest.approx(gb_per_s * 1e9, rel=2e-3)  # published figures are rounded


def test_gen5_x16_is_exact_arithmetic() -> None:
    assert bytes_per_second(5, 16) == 32e9 * 16 * (128 / 130) / 8


@pytest.mark.parametrize(("gen", "width"), [(None, 16), (5, None), (0, 16), (5, 0), (9, 16)])
def test_unknown_link_is_none(gen: int | None, width: int | None) -> None:
    assert bytes_per_second(gen, width) is None


def test_rate_and_generation_agree() -> None:
    assert bytes_per_second_from_rate(16.0, 16) == bytes_per_second(4, 16)
    assert [generation_from_rate(r) for r in (2.5, 5, 8, 16, 32, 64)] == [1, 2, 3, 4, 5, 6]
    assert generation_from_rate(12.0) is None and generation_from_rate(None) is None

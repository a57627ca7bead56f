from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvops.errors import UsageError
from kvops.units import format_size, from_unit, to_unit, unit_note
from kvops.units import size_as_written as parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16KiB", 16 * 1024),
        ("2MiB", 2 * 1024 * 1024),
        ("2mib", 2 * 1024 * 1024),
        ("1GiB", 2**30),
        ("512KB", 512_000),
        ("2MB", 2_000_000),
        ("1.5MiB", 1_572_864),
        ("4096", 4096),
        ("4096B", 4096),
        (" 64 KiB ", 65536),
    ],
)
def test_parse_size_reads_binary_and_decimal_units_as_written(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["2M", "16k", "2Mb/s", "two", "", "0", "0.3", "1.0000001KiB", "-4KiB"])
def test_parse_size_refuses_ambiguous_or_unreadable_sizes(text: str) -> None:
    with pytest.raises(UsageError):
        parse_size(text)


def test_ambiguous_unit_message_names_both_conventions() -> None:
    with pytest.raises(UsageError, match=r"KiB/MiB/GiB \(2\^10.*KB/MB/GB \(10\^3"):
        parse_size("2M")


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (16384, "16 KiB"),
        (2**21, "2 MiB"),
        (2**30, "1 GiB"),
        (1000, "1000 B"),
        (1_572_864, "1536 KiB"),
        (1_000_000, "976.56 KiB"),
    ],
)
def test_format_size_is_binary_and_exact_where_it_can_be(n: int, text: str) -> None:
    assert format_size(n) == text


def test_gb_is_ten_to_the_nine_and_gib_two_to_the_thirty() -> None:
    link = 63.0e9  # PCIe Gen5 x16 per direction, bytes per second
    assert to_unit(link, "GB") == pytest.approx(63.0)
    assert to_unit(link, "GiB") == pytest.approx(58.673, abs=1e-3)
    assert to_unit(2**30, "GiB") == 1.0
    assert to_unit(2**30, "GB") == pytest.approx(1.073741824)
    assert from_unit(83.4, "GB") == pytest.approx(83.4e9)
    assert from_unit(1, "GiB") == 2**30


def test_unit_note_states_the_exponent() -> None:
    assert "1 GB = 10^9 bytes" in unit_note("GB")
    assert "1 GiB = 2^30 bytes" in unit_note("GiB")


@given(st.integers(min_value=1, max_value=2**40))
def test_formatted_exact_sizes_read_back_to_the_same_bytes(n: int) -> None:
    text = format_size(n)
    if "." not in text:  # exact forms only; rounded ones say so with decimals
        assert parse_size(text) == n

"""The traffic the real-Mooncake tests and the fixture capture drive, in two phases each.

`healthy`: a store with room; the second phase's account is the interval's truth, the end state
(allocated bytes, capacity, keys) follows from every put the client saw succeed.
`full`: a segment smaller than what is put: puts fail for want of space and the master evicts.
"""

from __future__ import annotations

from support.real_mooncake.store import MIB, Plan

HEALTHY_SEGMENT = 64 * MIB
FULL_SEGMENT = 16 * MIB
ODD = 256 * 1024 + 5  # not a multiple of any page or block: allocation must still be exact


def healthy() -> tuple[Plan, Plan]:
    first = Plan()
    for i in range(20):
        first.put(f"a{i}", MIB)
    for i in range(10):
        first.get(f"a{i}")
    for i in range(5):
        first.get(f"absent{i}")
    second = Plan()
    for i in range(10):
        second.put(f"c{i}", MIB)
    for i in range(4):
        second.put(f"odd{i}", ODD)
    for i in range(20):
        second.get(f"a{i}")
    for i in range(4):
        second.get(f"odd{i}")
    for i in range(6):
        second.get(f"absent-later{i}")
    return first, second


def full() -> tuple[Plan, Plan]:
    first = Plan()
    for i in range(8):
        first.put(f"f{i}", MIB)
    second = Plan()
    for i in range(30):
        second.put(f"g{i}", MIB)
    for i in range(8):
        second.get(f"f{i}")
    for i in range(30):
        second.get(f"g{i}")
    return first, second

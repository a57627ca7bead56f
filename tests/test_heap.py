"""kvops.heap: a round's freed memory kept for the next round, not faulted in again."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys

import pytest

from kvops import heap
from kvops.exporter import command

# A round's shape: many blocks below glibc's default mmap threshold (128 KB), as a round's
# page bodies and texts are, all freed at its end; faults counted over 20 such rounds.
ROUNDS = """
import sys
from kvops import heap
if sys.argv[1] == "tuned":
    assert heap.keep_freed_memory()

def faults():
    with open("/proc/self/stat") as f:
        return int(f.read().rpartition(")")[2].split()[7])

blocks = [b"x" * 100_000 for _ in range(40)]  # the first round: faulted in either way
del blocks
start = faults()
for _ in range(20):
    blocks = [b"x" * 100_000 for _ in range(40)]
    del blocks
print(faults() - start)
"""

GLIBC = platform.libc_ver()[0] == "glibc"


def _faults(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not heap.user_tuned({k: v})}
    out = subprocess.run(
        [sys.executable, "-c", ROUNDS, mode], env=env, capture_output=True, text=True, check=True
    )
    return int(out.stdout)


@pytest.mark.skipif(not GLIBC or not os.path.exists("/proc/self/stat"), reason="glibc on Linux only")
def test_a_rounds_memory_is_not_faulted_in_again() -> None:
    untuned, tuned = _faults("untuned"), _faults("tuned")
    # 4 MB a round given back and asked for again: ~1,000 pages a round untuned
    assert untuned > 20 * 500, untuned
    assert tuned < untuned / 20, (tuned, untuned)


def test_a_users_own_malloc_settings_win(monkeypatch: pytest.MonkeyPatch) -> None:
    assert heap.user_tuned({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"})
    assert heap.user_tuned({"MALLOC_TRIM_THRESHOLD_": "0"})
    assert not heap.user_tuned({"GLIBC_TUNABLES": "glibc.pthread.rseq=0", "PATH": "/bin"})
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert heap.keep_freed_memory() is False


def test_the_exporter_keeps_freed_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    class Called(Exception):
        pass

    def called() -> bool:
        raise Called

    monkeypatch.setattr(heap, "keep_freed_memory", called)
    parser = argparse.ArgumentParser()
    command.configure(parser)
    with pytest.raises(Called):
        command.run(parser.parse_args(["--target", "http://127.0.0.1:9"]))

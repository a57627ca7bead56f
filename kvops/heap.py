"""glibc's malloc told to keep the memory a round frees for the next round.

Each exporter round allocates and frees the same few megabytes: 16 pages of ~77 KB (their
bytes and their text), a ~400 KB exposition and its gzip form. glibc gives that memory back
to the kernel as it is freed (an allocation past the mmap threshold is unmapped on free; free
space at the top of the heap past the trim threshold is trimmed), so the next round asks for
it again and the kernel zeroes every page on its first touch: 96.8-108.1 minor faults a
scrape of 16 simulated vLLMs and 8 stub GPUs without the thresholds below, 4.5-4.8 with them
(the faults column of benchmarks/exporter_scrape.py, three runs). Writing a 400 KB exposition
into fresh memory took 283 us against 20 us into memory kept (`"".join(heads).encode()` of
2,561 lines, 300 times; a /tmp snippet, not committed).

The thresholds, set at start-up and left alone: an allocation of up to 32 MiB (glibc's
largest mmap threshold on 64-bit; an exposition of ~1,000 vLLMs) is served from the heap,
and up to 64 MiB of free memory at its top is kept. The cost is resident memory the process
keeps after its largest round: +1.7 MB with 16 targets (psutil's RSS after 100 scrapes, a
/tmp script). A user's own malloc settings
(GLIBC_TUNABLES or the MALLOC_*_ variables) are left as they are; elsewhere than glibc
(musl, macOS) nothing is changed.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)

# mallopt(3) parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # HEAP_MAX_SIZE / 2 on 64-bit: mallopt refuses a larger one
TRIM_THRESHOLD = 64 << 20
# Where a user tuned malloc: theirs wins.
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def user_tuned(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment sets malloc's thresholds itself."""
    return any(name in environ for name in _USER_SETTINGS) or "glibc.malloc." in environ.get(
        "GLIBC_TUNABLES", ""
    )


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds (once, at start-up); True where both were set."""
    if user_tuned():
        log.debug("malloc thresholds left as the environment sets them")
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc's C library (macOS has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 where it took the value; musl's answers 0 and does nothing.
    done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    log.debug("malloc thresholds %s", "raised" if done else "not changed (not glibc)")
    return done

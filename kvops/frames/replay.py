"""Saved expositions played back as if scraped one interval apart (`kvops top --replay`).

Each file is one scrape: a vLLM (or LMCache) /metrics dump, or a `kvops exporter` dump
(kvops_* series, several targets, GPUs and the host). All files are read and checked before
anything is shown, so a missing or unreadable file is a usage error, not a blank screen.
Frame i carries time i × interval: rates over a replay are per replayed interval.
"""

from __future__ import annotations

from pathlib import Path

from kvops.engines import registry
from kvops.errors import UsageError
from kvops.exposition.parser import parse
from kvops.frames import kvops_exposition
from kvops.operator_files import read_bounded
from kvops.scrape.unread import unread_families
from kvops.snapshot import Snapshot
from kvops.transport.http import DEFAULT_MAX_BODY_BYTES

# The target name vLLM dumps replay under: one name for the whole sequence, so the
# frames line up into intervals.
REPLAY_TARGET = "replay"


_WANTED = registry.WANTED | kvops_exposition.EXPORTED

# A saved page is held to what the exporter accepts from a target by default (16 MiB: a large
# vLLM page is ~1 MiB); `--replay /dev/zero` must not read forever.
MAX_REPLAY_BYTES = DEFAULT_MAX_BODY_BYTES


def load_frame(path: Path, time: float) -> Snapshot:
    """One file as a Snapshot, or UsageError with a one-line reason."""
    try:
        with path.open("rb") as file:
            data = read_bounded(file, MAX_REPLAY_BYTES)
        if data is None:
            raise UsageError(f"--replay {path}: larger than {MAX_REPLAY_BYTES} bytes (16 MiB), not read")
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"--replay {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"--replay {path}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"--replay {path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--replay {path}: not UTF-8 text (byte {exc.start})") from None
    result = parse(text, _WANTED)
    if kvops_exposition.has_kvops_samples(result):
        return kvops_exposition.decode(result, time)
    sample = registry.normalise(result, REPLAY_TARGET)
    sample.unread_families = unread_families(text)
    if not sample.up:  # the up rule: a sample of a family kvops reads for some engine kind
        raise UsageError(
            f"--replay {path}: no vllm:, lmcache: or kvops_ sample in it, "
            "nor one of another engine kvops reads"
        )
    return Snapshot(time=time, targets=[sample])


class ReplaySource:
    """Frames in order; next() returns None once they are all played (the view holds)."""

    live = False

    def __init__(self, files: list[str], interval: float) -> None:
        if not files:
            raise UsageError("--replay needs at least one file")
        self.files = [Path(f) for f in files]
        self.frames = [load_frame(p, i * interval) for i, p in enumerate(self.files)]
        self.position = 0
        self.description = f"replay of {len(self.frames)} file(s)"

    @property
    def finished(self) -> bool:
        return self.position >= len(self.frames)

    def next(self) -> Snapshot | None:
        if self.finished:
            return None
        frame = self.frames[self.position]
        self.position += 1
        return frame

    def close(self) -> None:
        pass

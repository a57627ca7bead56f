"""`docker run` as doctor reads it: which of its options take a value, which say the same thing,
and where the image is; `...` in a paste is elision. Shared by serve_line (finding the command)
and cmdline (reading it), so neither imports the other for it."""

from __future__ import annotations

from collections.abc import Sequence

ELISIONS = ("...", "....", ".....", "\u2026", "[...]")  # what people write for "left out" in a paste


def is_elision(token: str) -> bool:
    """`...` as written bare in a paste; a quoted `'[...]'` is a value (shell_words.Word.quoted)."""
    return token in ELISIONS and not getattr(token, "quoted", False)


# docker run options that take a value (docker CLI reference); everything else is a switch.
VALUE_OPTIONS = frozenset(
    [
        "-e",
        "--env",
        "--env-file",
        "-p",
        "--publish",
        "-v",
        "--volume",
        "--name",
        "--shm-size",
        "--ipc",
        "--device",
        "--group-add",
        "--gpus",
        "--runtime",
        "--ulimit",
        "-m",
        "--memory",
        "--memory-swap",
        "--network",
        "--net",
        "--security-opt",
        "--cap-add",
        "--cap-drop",
        "--entrypoint",
        "-w",
        "--workdir",
        "-u",
        "--user",
        "--mount",
        "--cpus",
        "--cpuset-cpus",
        "--pid",
        "--hostname",
        "-h",
        "--label",
        "-l",
        "--restart",
        "--platform",
        "--pull",
        "--log-driver",
        "--log-opt",
        "--add-host",
        "--dns",
        "--expose",
        "--tmpfs",
        "--uts",
        "--device-cgroup-rule",
        "--cgroupns",
        "--cgroup-parent",
        "--stop-signal",
        "--stop-timeout",
        "--health-cmd",
    ]
)
# Options that say the same thing: --ipc=host makes --shm-size moot.
SAME_AS = {"--ipc": ("--shm-size",), "--shm-size": ("--ipc",)}


def image_index(tokens: Sequence[str]) -> int | None:
    """Where the image is in the tokens after `docker run` (None: no image); `...` is skipped."""
    i = 0
    while i < len(tokens) and (tokens[i].startswith("-") or is_elision(tokens[i])):
        if "=" not in tokens[i] and tokens[i] in VALUE_OPTIONS:
            i += 1
        i += 1
    return i if i < len(tokens) else None

"""What a rule is judged against (Context: the model, command, release, host, the report's own
words) and what it answers (Verdict). Apart from rules.py so that the checks it registers from
other modules (cli_checks.py) use them without importing rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kvops.doctor.reading.cmdline import ServeCommand
from kvops.doctor.reading.modelcfg import ModelInfo
from kvops.doctor.reading.platform import Platform


@dataclass
class Context:
    model: ModelInfo | None = None
    cmd: ServeCommand | None = None
    version: str | None = None
    version_source: str = "unknown"
    platform: Platform | None = None  # set only when doctor may judge this machine
    vllm_root: Path | None = None  # installed vllm's source, when it is the vLLM being judged
    host_ram_bytes: int | None = None  # --host-ram: the serving host's memory, given by the user
    shm_bytes: int | None = None  # --shm: the serving host's /dev/shm, given by the user (or a df line)
    shm_source: str = "--shm"
    # words in the report/log (logs.FACTS names -> (line no, line)): what the user says they want
    log_facts: dict[str, tuple[int, str]] = field(default_factory=dict)


@dataclass
class Verdict:
    holds: bool | None  # None: could not tell
    applies: bool = True  # False: an input the rule needs was not given
    evidence: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    hard: bool = False  # an unknown other than version/platform: not worth a finding on its own
    # every premise but one holds and that one is plausible but unproven (Docker's /dev/shm default
    # when the options may be elided; weights that may need --cpu-offload-gb): an `info` finding
    # that names, in `unknown`, what would confirm it
    tentative: bool = False

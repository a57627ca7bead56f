"""Everything `kvops doctor` judges, read and checked: one typed object handed to diagnose()."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kvops.doctor.judging.logs import LogScan
from kvops.doctor.reading.cmdline import ServeCommand
from kvops.doctor.reading.modelcfg import ModelInfo
from kvops.doctor.reading.platform import Platform


@dataclass(frozen=True)
class Inputs:
    model: ModelInfo | None = None  # --model, or the shipped config of a known model name
    cmd: ServeCommand | None = None  # --cmd, or rebuilt from the log's non-default args
    log: LogScan | None = None  # --log, scanned
    version: str | None = None  # the judged vLLM release
    version_source: str = "unknown"  # --vllm-version | log | installed vllm | unknown
    platform: Platform | None = None  # this machine, only under --here (or with no input at all)
    only: frozenset[str] | None = None  # --check IDs
    vllm_root: Path | None = None  # the installed vllm's source, when it is the judged release
    command_text: str = ""  # --cmd as given (facts are read from its words too)
    host_ram_bytes: int | None = None  # --host-ram
    shm_bytes: int | None = None  # --shm
    partial_command: bool = False  # rebuilt from a log: it may lack what vLLM did not print
    # SGLang's / LMCache's release (--engine-version, the log): dates a located message
    engine_versions: dict[str, str | None] = field(default_factory=dict)

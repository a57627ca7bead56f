"""`kvops doctor`: recognise known failures in a model, a serve command, a log and this machine."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the command imports its work lazily: `kvops --help` stays fast
    from kvops.doctor.judging.catalog import Catalog
    from kvops.doctor.judging.logs import LogScan
    from kvops.doctor.reading.cmdline import ServeCommand
    from kvops.doctor.reading.modelcfg import ModelInfo

EXAMPLES = """\
examples:
  kvops doctor --log vllm.log
  kvops doctor --model ./DeepSeek-V3.2 --vllm-version 0.17.0 \\
      --cmd "vllm serve deepseek-ai/DeepSeek-V3.2 --kv-offloading-backend native --kv-offloading-size 64"
  kvops doctor --list-checks
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", metavar="DIR|config.json", help="model directory or its config.json")
    parser.add_argument(
        "--cmd", metavar="LINE", help='the serve line: "vllm serve ...", python -m ..., docker run'
    )
    parser.add_argument("--log", metavar="FILE", help="a vLLM log file, or - for stdin (streamed)")
    parser.add_argument(
        "--vllm-version",
        metavar="X.Y.Z",
        help="vLLM version to judge against (default: the log's, else the installed one)",
    )
    parser.add_argument(
        "--engine-version",
        action="append",
        metavar="PKG==X",
        help="SGLang's or LMCache's release (sglang==0.5.3, lmcache==0.3.15): dates a located message",
    )
    parser.add_argument(
        "--here", action="store_true", help="also judge this machine (GPU, RAM, /dev/shm, ...)"
    )
    parser.add_argument(
        "--host-ram", metavar="SIZE", help="the serving host's memory (e.g. 512G), to judge the offload tier"
    )
    parser.add_argument("--shm", metavar="SIZE", help="the serving host's /dev/shm size (e.g. 64G)")
    parser.add_argument("--check", action="append", metavar="ID", help="run only this check (repeatable)")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too, not only errors")
    parser.add_argument("--list-checks", action="store_true", help="list the playbooks doctor knows")
    parser.add_argument(
        "--repro",
        metavar="ID",
        help="reproduce failure ID: vLLM's own code on CPU where the failure is Python (downloads the "
        "release once into ~/.cache/kvops), else run or print the failing and fixed serve lines",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        metavar="S",
        help="seconds to wait for each --repro server start (default 900)",
    )
    parser.add_argument(
        "--target",
        metavar="URL",
        help="read a running server's /metrics twice and report live offload signals with playbooks",
    )
    parser.add_argument("--json", action="store_true", help="print only JSON on stdout")


def run(args: argparse.Namespace) -> int:
    import sys

    from kvops.errors import UsageError, one_line
    from kvops.termsafe import visible

    try:
        return _run(args)
    except RecursionError:
        # a JSON/YAML input nested thousands deep (config.json, --kv-transfer-config)
        raise UsageError("an input is nested too deeply to read (config.json or a JSON flag value)") from None
    except UsageError as exc:
        # messages quote files and logs: shown, never interpreted (cli prints them as they are)
        raise UsageError(visible(str(exc))) from None
    except (BrokenPipeError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a doctor bug on some input: one line, the input's text made visible
        where = exc.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        at = f" at {where.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{where.tb_lineno}" if where else ""
        print(
            f"kvops doctor: internal error{at}: {visible(one_line(exc, typed=True))} (please report it)",
            file=sys.stderr,
        )
        return 1


def _size_arg(flag: str, text: str | None) -> int | None:
    from kvops.errors import UsageError
    from kvops.termsafe import visible
    from kvops.units import docker_size

    if text is None:
        return None
    size = docker_size(text[:-2] if text.lower().endswith("ib") else text) if len(text) <= 32 else None
    if size is None or size <= 0:
        raise UsageError(f"{flag} {visible(text[:32])!r}: expected a size like 512G or 64GiB")
    return size


def _run(args: argparse.Namespace) -> int:
    """The command's modes in the order they win: --target, --list-checks, --repro, a diagnosis."""
    from kvops.doctor.judging import catalog as catalog_mod
    from kvops.doctor.reading import modelcfg
    from kvops.doctor.reporting import report
    from kvops.errors import UsageError

    if args.target:
        from kvops.doctor import live

        return live.run(args.target, as_json=args.json, strict=args.strict)
    if args.vllm_version is not None:  # checked before anything reads it (pip, the cache, a report)
        from kvops.doctor.reading.vllm_release import release_number

        args.vllm_version = release_number(args.vllm_version)
    args.engine_versions = _engine_versions(args.engine_version or [])  # issue 43: checked up front too
    catalog = catalog_mod.load()
    if args.list_checks:
        print(report.list_checks(catalog, args.json))
        return 0
    if args.check:
        unknown = [c for c in args.check if catalog.get(c) is None]
        if unknown:
            raise UsageError(f"unknown check {unknown[0]!r} (see kvops doctor --list-checks)")

    model = modelcfg.load(args.model) if args.model else None
    cmd, cmd_note = _read_cmd(args)
    if args.repro:
        from kvops.doctor.reproducing import repro

        return repro.run(
            catalog,
            args.repro,
            model,
            args.model,
            cmd,
            timeout=args.timeout,
            as_json=args.json,
            vllm_version=args.vllm_version,
        )
    return _diagnose(args, catalog, model, cmd, cmd_note)


def _read_cmd(args: argparse.Namespace) -> tuple[ServeCommand | None, str | None]:
    """--cmd parsed, or why it was given up when a log or model can still be judged without it."""
    from kvops.doctor.reading import cmdline
    from kvops.errors import UsageError

    if args.cmd is None:
        return None, None
    try:
        return cmdline.parse(args.cmd), None
    except UsageError as exc:
        if not (args.log or args.model):
            raise
        return None, f"--cmd not understood, judged without it: {exc}"  # the log/model still count


class LogCommand(NamedTuple):
    """The serve command doctor found in a log or report, which is someone else's text."""

    cmd: ServeCommand | None
    unread: str | None = None  # why the `non-default args:` line could not be read as a command
    source: str | None = None  # where it came from, said in a note
    text: str = ""  # the launch line as written: read for facts and the release, never pasted
    notes: tuple[str, ...] = ()  # what the line also runs; words whose substitutions are kept as text
    also_runs: tuple[str, ...] = ()


def _cmd_from_log(scan: LogScan) -> LogCommand:
    """The serve command from the log: rebuilt from its `non-default args` line, else the first
    launch command it carries (a report's code block) that reads as one; with where it came from,
    or why the args line could not be read."""
    from kvops.doctor.reading import cmdline
    from kvops.errors import UsageError

    if scan.serve_args:
        try:
            cmd = cmdline.from_non_default_args(scan.serve_args)
            if cmd is not None:
                cmd.offloading()  # the log's JSON-valued flags must read too
                return LogCommand(cmd, source="rebuilt from the log's non-default args line")
        except UsageError as exc:
            # the log stays the evidence; only the command rebuilt from it is given up
            return LogCommand(None, unread=str(exc))
    if scan.report is not None and (found := _cmd_from_yaml(scan.report)).cmd is not None:
        return found
    for line_no, text in scan.launches:
        try:
            cmd = cmdline.parse(text)
            cmd.offloading()
        except UsageError:  # prose that names `vllm serve`, a line cut short: not a command
            continue
        found = _rebuilt(cmd, f"read from the log's line {line_no}")
        found = _json_unescaped(text, found) or found
        if line_no in scan.annotated_launches:
            note = (
                "the report's command has a comment after a line's `\\` (an annotation): read on "
                "past it, as the report means; a shell would end the command at that line"
            )
            found = found._replace(notes=(*found.notes, note))
        return found
    return LogCommand(None)


def _bad_json(cmd: ServeCommand) -> bool:
    """Whether a flag's value that opens as JSON (`{`, `[`) does not read as JSON."""
    import json

    for arg in cmd.args:
        if arg.value and arg.value.lstrip().startswith(("{", "[")):
            try:
                json.loads(arg.value)
            except json.JSONDecodeError:
                return True
    return False


def _json_unescaped(text: str, found: LogCommand) -> LogCommand | None:
    """The launch line read again with its `\\"` made `"`, when its JSON flags are not JSON only
    because of them: reports copy commands out of JSON strings and Markdown (vllm#43093 wrote
    `'{\\"kv_connector\\":...}'`), and a server that got as far as the error reported parsed
    its flags. None where that reads no better."""
    from kvops.doctor.reading import cmdline
    from kvops.errors import UsageError

    cmd = found.cmd
    if cmd is None or '\\"' not in text or not _bad_json(cmd):
        return None
    try:
        again = cmdline.parse(text.replace('\\"', '"'))
        again.offloading()
    except UsageError:
        return None
    if _bad_json(again):
        return None
    better = _rebuilt(again, found.source or "")
    note = (
        'the report\'s JSON values are JSON once their \\" are read as " (quoting copied into the '
        "report); read that way"
    )
    return better._replace(notes=(*better.notes, note))


_FENCE = re.compile(r"[ \t]*(```|~~~)")


def _code_blocks(text: str) -> list[str]:
    """A report's code blocks (``` or ~~~ fences, as GitHub and GitLab render them), in one pass
    over its lines: a regular expression with a lazy body and a back-reference went back over
    the rest of the text for every fence left open (quadratic on a report of open fences)."""
    blocks: list[str] = []
    fence: str | None = None
    lines: list[str] = []
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence, lines = m.group(1), []
        elif m and m.group(1) == fence and not line.strip()[3:]:
            blocks.append("\n".join(lines) + "\n")
            fence = None
        else:
            lines.append(line)
    return blocks


# A compose file or manifest is a few KB; YAML is read at ~0.2 MB/s, so a longer text is left
# to the launch lines (a 1 MiB report of such blocks took 7 s).
_YAML_CHARS = 64 * 1024
_COMMAND_KEY = re.compile(
    r"^[ \t-]*(?:command|args|entrypoint)[ \t]*:"
    r"|^[ \t]*-[ \t]+[\"']?(?:vllm|python3?)[\"']?[ \t]*$",  # a command's list pasted without its key
    re.M,
)


def _cmd_from_yaml(text: str) -> LogCommand:
    """A short log's (a report's) compose file or Kubernetes manifest, whole or in a code block:
    its `command:`/`args:` under a vLLM image (whose entrypoint is `vllm serve`) read as YAML,
    so a list's items and a folded scalar's lines are one command (the launch lines hold only
    commands that name `vllm serve`, and a folded script's first line alone). Prose around the
    YAML does not split as a shell line, so each code block is tried too. Rebuilt from its
    words like a launch line."""
    from kvops.doctor.reading import cmdline, serve_line
    from kvops.errors import UsageError

    for block in [text, *_code_blocks(text)]:
        if len(block) > _YAML_CHARS or not _COMMAND_KEY.search(block):
            continue
        try:
            cmd = cmdline.parse(block)
            cmd.offloading()
        except UsageError:
            continue
        if serve_line.outside(serve_line.clean(block), serve_line.extract(block)) is None:
            return _rebuilt(cmd, "read from the report's compose or Kubernetes command", from_yaml=True)
        # Words placed in a shell string (`sh -c` with `vllm serve ... && ...`): that string,
        # as YAML gives it (a folded scalar's lines joined), is rebuilt as a launch line, which
        # says what else it runs.
        for script in serve_line.yaml_strings(block):
            try:
                cmd = cmdline.parse(script)
                cmd.offloading()
            except UsageError:
                continue
            return _rebuilt(cmd, "read from the report's compose or Kubernetes command")
    return LogCommand(None)


def _rebuilt(cmd: ServeCommand, source: str, from_yaml: bool = False) -> LogCommand:
    """A launch line from a log or report is rebuilt, never replayed: without its pasted text no
    fix is written into it (as_written.py), so every command doctor prints is the serve segment
    alone, each word quoted; the rest of the line is said apart. `from_yaml`: the words are a
    compose or Kubernetes command's list, not a shell line (where no shell string placed them,
    the YAML around them runs nothing)."""
    from dataclasses import replace

    from kvops.doctor.reading import serve_line
    from kvops.termsafe import visible

    text = cmd.pasted or ""
    notes: list[str] = []
    tokens = serve_line.extract(text)  # placed in clean(text), the text extract reads
    others = serve_line.outside(serve_line.clean(text), tokens)
    if others is None:  # words without a place: the whole line is shown, only its serve command kept
        others = [text.strip()] if not from_yaml and any(w.op for w in _shell_words(text)) else []
    also = tuple(visible(p[:300] + ("..." if len(p) > 300 else "")) for p in others)
    if also:
        notes.append(
            "the report's line also runs: "
            + " ... ".join(also)
            + " (left out: doctor's commands are the serve command alone)"
        )
    subs = serve_line.substitutions(tokens)
    if subs:
        shown = ", ".join(repr(visible(w[:120])) for w in subs[:3])
        notes.append(
            f"the report's line has a command substitution in {shown}: kept as text, single-quoted "
            "in doctor's commands so that nothing in it runs"
        )
    return LogCommand(replace(cmd, pasted=None), source=source, text=text, notes=tuple(notes), also_runs=also)


def _shell_words(text: str) -> list[Any]:
    from kvops.doctor.reading import shell_words
    from kvops.errors import UsageError

    try:
        return list(shell_words.split(text))
    except UsageError:
        return []


def _model_from_name(cmd: ServeCommand) -> tuple[ModelInfo | None, str | None]:
    """The architecture of a model kvops ships the config of, read from the served name."""
    from kvops.doctor.reading.known_models import shipped_config_for
    from kvops.termsafe import visible

    model = shipped_config_for(cmd.served_model())
    if model is None:
        return None, None
    return model, (
        f"model read from its name {visible(cmd.served_model())!r}: the architecture of its "
        "published config.json, shipped with kvops; pass --model DIR|config.json for yours"
    )


def _diagnose(
    args: argparse.Namespace,
    catalog: Catalog,
    model: ModelInfo | None,
    cmd: ServeCommand | None,
    cmd_note: str | None,
) -> int:
    from kvops.doctor.judging import logs
    from kvops.doctor.judging.diagnose import diagnose, resolve_version
    from kvops.doctor.judging.inputs import Inputs
    from kvops.doctor.reading.platform import probe
    from kvops.doctor.reporting import report

    scan = logs.scan_file(args.log, catalog.failures, args.cmd or "") if args.log else None
    command_text = args.cmd or ""
    from_log: str | None = None  # how the command was found in the log, without --cmd
    unread_args = None
    found = LogCommand(None)
    if cmd is None and scan is not None:
        found = _cmd_from_log(scan)
        cmd, unread_args, from_log = found.cmd, found.unread, found.source
        command_text = found.text or command_text  # a launch line the log carries, as written
    model_note = None
    if model is None and cmd is not None:
        model, model_note = _model_from_name(cmd)
    version, source = resolve_version(args.vllm_version, scan, command_text)
    host_ram = _size_arg("--host-ram", args.host_ram)  # bad sizes are refused before probing
    shm = _size_arg("--shm", args.shm)
    no_input = not (args.model or args.cmd or args.log)
    vllm_root = None
    if source == "installed vllm":  # the installed vllm is the one judged: read its source too
        from kvops.doctor.reading.vllm_source import installed_root

        vllm_root = installed_root()
    inputs = Inputs(
        model=model,
        cmd=cmd,
        log=scan,
        version=version,
        version_source=source,
        platform=probe() if (args.here or no_input) else None,
        only=frozenset(args.check) if args.check else None,
        vllm_root=vllm_root,
        command_text=command_text,
        host_ram_bytes=host_ram,
        shm_bytes=shm,
        partial_command=from_log is not None and cmd is not None and not found.text,
        engine_versions=_with_logged(getattr(args, "engine_versions", {}), scan),
    )
    result = diagnose(catalog, inputs)
    if cmd_note:
        result.notes.insert(0, cmd_note)
    if model_note:
        result.notes.append(model_note)
    if args.cmd is not None and cmd is not None:
        result.command_source = "cmd"
    if from_log:
        result.notes.append(f"no --cmd: the serve command was {from_log}")
        result.notes += found.notes
        result.command_source = "log"
        result.also_runs = list(found.also_runs)
    if unread_args:
        result.notes.append(f"the log's non-default args line could not be read as a command: {unread_args}")
    print(report.to_json(result, catalog) if args.json else report.to_text(result, catalog))
    if args.strict and any(f.severity == "warning" for f in result.findings):
        return 1
    return result.exit_code


# ---- issue 43: --engine-version (SGLang's, LMCache's release) ------------------------------------
ENGINE_PACKAGES = ("sglang", "lmcache")


def _engine_versions(values: list[str]) -> dict[str, str | None]:
    """`sglang==0.5.3` / `lmcache==0.3.15` -> {package: release}; UsageError (one line) otherwise."""
    from kvops.doctor.reading.vllm_release import release_number
    from kvops.errors import UsageError
    from kvops.termsafe import visible

    out: dict[str, str | None] = {}
    for value in values:
        package, sep, release = value.partition("==")
        if not sep or package.strip().lower() not in ENGINE_PACKAGES:
            raise UsageError(
                f"--engine-version '{visible(value[:60])}': expected sglang==X or lmcache==X"
                " (vLLM's: --vllm-version)"
            )
        out[package.strip().lower()] = release_number(release.strip(), "--engine-version")
    return out


def _with_logged(given: dict[str, str | None], scan: LogScan | None) -> dict[str, str | None]:
    """--engine-version, else the release the log names for its engine."""
    out = dict(given)
    if scan is not None and scan.engine in ENGINE_PACKAGES and scan.engine_version and scan.engine not in out:
        out[scan.engine] = scan.engine_version
    return out

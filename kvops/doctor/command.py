"""`kvops doctor`: recognise known failures in a model, a serve command, a log and this machine."""

from __future__ import annotations

import argparse

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
    from kvops.errors import UsageError

    try:
        return _run(args)
    except RecursionError:
        # a JSON/YAML input nested thousands deep (config.json, --kv-transfer-config)
        raise UsageError("an input is nested too deeply to read (config.json or a JSON flag value)") from None


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
    from kvops.doctor import catalog as catalog_mod
    from kvops.doctor import cmdline, logs, modelcfg, report
    from kvops.doctor.diagnose import diagnose, resolve_version
    from kvops.doctor.inputs import Inputs
    from kvops.doctor.platform import probe
    from kvops.errors import UsageError

    if args.target:
        from kvops.doctor import live

        return live.run(args.target, as_json=args.json, strict=args.strict)
    if args.vllm_version is not None:  # checked before anything reads it (pip, the cache, a report)
        from kvops.doctor.vllm_release import release_number

        args.vllm_version = release_number(args.vllm_version)
    catalog = catalog_mod.load()
    if args.list_checks:
        print(report.list_checks(catalog, args.json))
        return 0
    if args.check:
        unknown = [c for c in args.check if catalog.get(c) is None]
        if unknown:
            raise UsageError(f"unknown check {unknown[0]!r} (see kvops doctor --list-checks)")

    model = modelcfg.load(args.model) if args.model else None
    cmd, cmd_note = None, None
    if args.cmd is not None:
        try:
            cmd = cmdline.parse(args.cmd)
        except UsageError as exc:
            if not (args.log or args.model):
                raise
            cmd_note = f"--cmd not understood, judged without it: {exc}"  # the log/model still count
    if args.repro:
        from kvops.doctor import repro

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

    scan = logs.scan_file(args.log, catalog.failures, args.cmd or "") if args.log else None
    from_log = False
    unread_args = None
    if cmd is None and scan is not None and scan.serve_args:
        try:
            cmd = cmdline.from_non_default_args(scan.serve_args)
            if cmd is not None:
                cmd.offloading()  # the log's JSON-valued flags must read too
        except UsageError as exc:
            # the log stays the evidence; only the command rebuilt from it is given up
            cmd, unread_args = None, str(exc)
        from_log = cmd is not None
    model_note = None
    if model is None and cmd is not None:
        from kvops.doctor.known_models import shipped_config_for
        from kvops.termsafe import visible

        model = shipped_config_for(cmd.served_model())
        if model is not None:
            model_note = (
                f"model read from its name {visible(cmd.served_model())!r}: the architecture of its "
                "published config.json, shipped with kvops; pass --model DIR|config.json for yours"
            )
    version, source = resolve_version(args.vllm_version, scan)
    host_ram = _size_arg("--host-ram", args.host_ram)
    shm = _size_arg("--shm", args.shm)
    no_input = not (args.model or args.cmd or args.log)
    platform = probe() if (args.here or no_input) else None
    vllm_root = None
    if source == "installed vllm":  # the installed vllm is the one judged: read its source too
        from kvops.doctor.vllm_source import installed_root

        vllm_root = installed_root()
    inputs = Inputs(
        model=model,
        cmd=cmd,
        log=scan,
        version=version,
        version_source=source,
        platform=platform,
        only=frozenset(args.check) if args.check else None,
        vllm_root=vllm_root,
        command_text=args.cmd or "",
        host_ram_bytes=host_ram,
        shm_bytes=shm,
        partial_command=from_log,
    )
    result = diagnose(catalog, inputs)
    if cmd_note:
        result.notes.insert(0, cmd_note)
    if model_note:
        result.notes.append(model_note)
    if from_log:
        result.notes.append("no --cmd: the serve command was rebuilt from the log's non-default args line")
    if unread_args:
        result.notes.append(f"the log's non-default args line could not be read as a command: {unread_args}")
    print(report.to_json(result, catalog) if args.json else report.to_text(result, catalog))
    if args.strict and any(f.severity == "warning" for f in result.findings):
        return 1
    return result.exit_code

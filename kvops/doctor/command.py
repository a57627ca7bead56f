"""`kvops doctor`: recognise known failures in a model, a serve command, a log and this machine."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", metavar="DIR|config.json", help="model directory or its config.json")
    parser.add_argument(
        "--cmd", metavar="LINE", help='the serve line: "vllm serve ...", python -m ..., docker run'
    )
    parser.add_argument("--log", metavar="FILE", help="a vLLM log file, or - for stdin (streamed)")
    parser.add_argument(
        "--vllm-version", metavar="X.Y.Z", help="vLLM version (else the log's, else installed)"
    )
    parser.add_argument(
        "--here", action="store_true", help="also judge this machine (GPU, RAM, /dev/shm, ...)"
    )
    parser.add_argument("--check", action="append", metavar="ID", help="run only this check (repeatable)")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too, not only errors")
    parser.add_argument("--list-checks", action="store_true", help="list the playbooks doctor knows")
    parser.add_argument(
        "--repro",
        metavar="ID",
        help="run the failing serve line, then the fixed one (needs GPU+vllm; else prints them)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for each --repro server start")
    parser.add_argument(
        "--target",
        metavar="URL",
        help="read a running server's /metrics twice and report live offload signals with playbooks",
    )
    parser.add_argument("--json", action="store_true", help="print only JSON on stdout")


def run(args: argparse.Namespace) -> int:
    from kvops.doctor import catalog as catalog_mod
    from kvops.doctor import cmdline, logs, modelcfg, report
    from kvops.doctor.diagnose import diagnose, resolve_version
    from kvops.doctor.platform import probe
    from kvops.errors import UsageError

    if args.target:
        from kvops.doctor import live

        return live.run(args.target, as_json=args.json, strict=args.strict)
    catalog = catalog_mod.load()
    if args.list_checks:
        print(report.list_checks(catalog, args.json))
        return 0
    if args.check:
        unknown = [c for c in args.check if catalog.get(c) is None]
        if unknown:
            raise UsageError(f"unknown check {unknown[0]!r} (see kvops doctor --list-checks)")

    model = modelcfg.load(args.model) if args.model else None
    cmd = cmdline.parse(args.cmd) if args.cmd is not None else None
    if cmd is not None:
        cmd.kv_transfer_config()  # malformed JSON inside --cmd: one line, exit 2
    if args.repro:
        from kvops.doctor import repro

        return repro.run(catalog, args.repro, model, args.model, cmd, timeout=args.timeout, as_json=args.json)

    scan = logs.scan_file(args.log, catalog.failures, args.cmd or "") if args.log else None
    from_log = False
    if cmd is None and scan is not None and scan.serve_args:
        cmd = cmdline.from_non_default_args(scan.serve_args)
        from_log = cmd is not None
    version, source = resolve_version(args.vllm_version, scan)
    no_input = not (args.model or args.cmd or args.log)
    platform = probe() if (args.here or no_input) else None
    vllm_root = None
    if source == "installed vllm":  # the installed vllm is the one judged: read its source too
        from kvops.doctor.vllm_source import installed_root

        vllm_root = installed_root()
    result = diagnose(
        catalog,
        model=model,
        cmd=cmd,
        log=scan,
        version=version,
        version_source=source,
        platform=platform,
        only=set(args.check) if args.check else None,
        vllm_root=vllm_root,
    )
    if from_log:
        result.notes.append("no --cmd: the serve command was rebuilt from the log's non-default args line")
    print(report.to_json(result, catalog) if args.json else report.to_text(result, catalog))
    if args.strict and any(f.severity == "warning" for f in result.findings):
        return 1
    return result.exit_code

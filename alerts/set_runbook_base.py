"""Write copies of the kvops rule files whose runbook_url points at your copy of the playbooks.

    python alerts/set_runbook_base.py --base https://wiki.example.com/kvops/playbooks -o out/

The committed rule files link to DEFAULT_BASE; only `runbook_url:` values that start with it
change, so the output stays the same YAML, comments included, ready for `promtool check rules`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

DEFAULT_BASE = "https://github.com/kvops/kvops/blob/main/playbooks"
ALERTS_DIR = Path(__file__).resolve().parent
_RUNBOOK_LINE = re.compile(r"^(\s*runbook_url:\s*)" + re.escape(DEFAULT_BASE) + r"/", re.MULTILINE)


def rebase(text: str, base: str) -> str:
    """Swap DEFAULT_BASE for `base` in every runbook_url line of one rule file's text."""
    base = base.rstrip("/")
    return _RUNBOOK_LINE.sub(lambda m: f"{m.group(1)}{base}/", text)


def rule_files(alerts_dir: Path = ALERTS_DIR) -> list[Path]:
    """The rule files (not the promtool tests under tests/)."""
    return sorted(alerts_dir.glob("*.yml"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="URL (or path) that holds <AlertName>.md files")
    parser.add_argument("-o", "--out", required=True, type=Path, help="directory for the rewritten files")
    args = parser.parse_args(argv)
    if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://\S+$|^/\S*$", args.base):
        print(f"set_runbook_base: error: --base {args.base!r} is not a URL or absolute path", file=sys.stderr)
        return 2
    if args.out.resolve() == ALERTS_DIR:
        print("set_runbook_base: error: --out must not be alerts/ itself", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for path in rule_files():
        (args.out / path.name).write_text(rebase(path.read_text(), args.base))
        print(args.out / path.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())

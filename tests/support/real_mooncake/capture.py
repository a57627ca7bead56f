"""Capture tests/fixtures/mooncake-master/: pages the REAL master wrote from known traffic.

    python tests/support/real_mooncake/capture.py tests/fixtures/mooncake-master

Runs each scenario of support/real_mooncake/traffic.py against a fresh master (one client),
saves its page after each phase (<scenario>-t1.prom, -t2.prom) and truth.json: the client's own
account of the second phase and the end state that follows from it. Needs the venv
(install.py) and gcc (the stand-in CUDA libraries, a test device only).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from support.real_mooncake import install, traffic
from support.real_mooncake.store import Account, RealMooncake


def truth_of(first: Account, second: Account, segment: int) -> dict[str, object]:
    kept = first.puts_ok + second.puts_ok
    return {
        "interval": {
            "lookups": second.gets,
            "hits": second.hits,
            "hit_rate": second.hits / second.gets,
            "bytes_served": second.bytes_served,
            "puts": len(second.puts_ok),
            "put_failures": second.puts_failed,
        },
        "end": {
            "puts_ok_ever": len(kept),
            "bytes_put_ok_ever": sum(int(str(s["size"])) for s in kept),
            "capacity_bytes": segment,
            "clients": 1,
        },
        "client_results": {"first": first.results, "second": second.results},
    }


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    truth: dict[str, object] = {"version": install.MOONCAKE_VERSION, "scenarios": {}}
    for name, plans, segment in (("healthy", traffic.healthy(), traffic.HEALTHY_SEGMENT),
                                 ("full", traffic.full(), traffic.FULL_SEGMENT)):  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="kvops-mooncake-") as work:
            store = RealMooncake(Path(work))
            try:
                client = store.client(segment)
                first = client.run(plans[0])
                (out / f"{name}-t1.prom").write_text(store.page())
                second = client.run(plans[1])
                (out / f"{name}-t2.prom").write_text(store.page())
            finally:
                store.stop()
        truth["scenarios"][name] = truth_of(first, second, segment)  # type: ignore[index]
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))

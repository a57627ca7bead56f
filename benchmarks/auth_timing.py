"""Basic auth timing: does an unknown user answer as slowly as a wrong password? (issue 17)

Starts `kvops exporter` in-process with a basic_auth_users web-config (a cost-10 bcrypt hash,
htpasswd's default) and times, over loopback HTTP, first-time requests with an unknown user,
with a known user and a wrong password, and with the right password after it was cached.
Each request uses a password not tried before, so none is answered from the cache. The
baseline is the same server with the unknown user answered at once (what kvops did before:
0.8 ms against 52 ms, a user-enumeration oracle), measured in the same run.

    python benchmarks/auth_timing.py [--rounds 20] [--cost 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bcrypt
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvops.exporter.server import ExporterServer
from kvops.exporter.webconfig import WebConfig, load


class _NoDummy(WebConfig):
    """The baseline: an unknown user is refused without a bcrypt."""

    def check_basic_auth(self, header: str | None) -> bool:
        import base64

        user = base64.b64decode((header or "Basic ")[6:]).split(b":", 1)[0].decode()
        if user not in self.users:
            return False
        return super().check_basic_auth(header)


def median_ms(url: str, user: str, label: str, rounds: int) -> float:
    times = []
    for i in range(rounds):
        began = time.perf_counter()
        status = requests.get(url, auth=(user, f"{label}-{i}-{time.time_ns()}"), timeout=30).status_code
        times.append((time.perf_counter() - began) * 1000)
        assert status == 401
    return statistics.median(times)


def measure(web: WebConfig, rounds: int) -> tuple[float, float, float]:
    server = ExporterServer(("127.0.0.1", 0), lambda _t: [], web)
    server.serve_in_thread()
    url = server.url + "/-/healthy"
    try:
        unknown = median_ms(url, "nobody", "u", rounds)
        wrong = median_ms(url, "prometheus", "w", rounds)
        requests.get(url, auth=("prometheus", "right"), timeout=30)
        began = time.perf_counter()
        for _ in range(rounds):
            assert requests.get(url, auth=("prometheus", "right"), timeout=30).status_code == 200
        cached = (time.perf_counter() - began) * 1000 / rounds
    finally:
        server.shutdown()
        server.server_close()
    return unknown, wrong, cached


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--cost", type=int, default=10)
    args = parser.parse_args()
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=args.cost)).decode()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "web.yml"
        path.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
        kvops_web = load(str(path))
        baseline_web = _NoDummy(users=kvops_web.users, dummy_hash=kvops_web.dummy_hash)
        results = {"kvops": measure(kvops_web, args.rounds), "baseline": measure(baseline_web, args.rounds)}
    print(f"bcrypt cost {args.cost}, {args.rounds} requests each, median ms per request")
    print(f"{'':10} {'unknown user':>13} {'wrong pass':>11} {'ratio':>6} {'cached ok':>10}")
    for name, (unknown, wrong, cached) in results.items():
        print(f"{name:10} {unknown:13.1f} {wrong:11.1f} {wrong / unknown:6.2f} {cached:10.2f}")
    unknown, wrong, _ = results["kvops"]
    within = max(unknown, wrong) / min(unknown, wrong) <= 2.0
    print("kvops: unknown user and wrong password within 2x:", "yes" if within else "NO")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())

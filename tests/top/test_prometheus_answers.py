"""`kvops top --prometheus` against a hostile or broken store on loopback: answers of the wrong
shape, escape sequences in labels and errors, and the access options reaching the server."""

from __future__ import annotations

import base64
import json
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from kvops.cli import main
from support.upstream import Upstream, body

EVIL = "evil\x1b]0;pwned\x07\x1b[2J\x9b31m"  # window title, clear screen, a C1 CSI


def store(
    model: str = "m",
    error: str | None = None,
    seen: list[dict[str, str]] | None = None,
    bad_times: bool = False,
    counts: tuple[Any, Any] = ("200", "50"),
    times: list[Any] | None = None,
    stamp: Any = 100,
):
    """A store that answers the fleet view's queries for one engine with fixed values:
    `counts` (lookups, hits) over the window, `times` the stored samples' times the scrape
    interval is read from, `stamp` the newest sample's time."""

    def handle(h: BaseHTTPRequestHandler) -> None:
        if seen is not None:
            seen.append(dict(h.headers.items()))
        query = parse_qs(urlsplit(h.path).query).get("query", [""])[0]
        labels = {"instance": "10.0.0.1:8000", "model_name": model, "engine": "0"}
        if error is not None:
            doc: dict = {"status": "error", "errorType": "bad_data", "error": error}
        elif query.startswith("max(timestamp(kvops_build_info"):
            doc = {"status": "success", "data": {"resultType": "vector", "result": []}}
        elif query.startswith("max(timestamp("):
            doc = {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": [stamp, stamp]}]},
            }
        elif query.startswith("topk("):
            doc = {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": labels, "value": [100, "100"]}]},
            }
        elif query.endswith("[10m]"):
            values = [["x", "1"], [{}, "1"]] if bad_times else [[t, "1"] for t in times or (70, 85, 100)]
            doc = {
                "status": "success",
                "data": {"resultType": "matrix", "result": [{"metric": labels, "values": values}]},
            }
        elif query.startswith("timestamp("):
            doc = {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": labels, "value": [100, "30"]}]},
            }
        elif query.startswith("count by (__name__)"):  # the names it holds
            held = (
                "vllm:prefix_cache_queries_total",
                "vllm:prefix_cache_hits_total",
                "vllm:num_requests_running",
            )
            series = [{"metric": {"__name__": name}, "value": [100, "1"]} for name in held]
            doc = {"status": "success", "data": {"resultType": "vector", "result": series}}
        elif query.startswith("(vllm:prefix_cache_"):  # a counter's difference over the window
            value = counts[0] if query.startswith("(vllm:prefix_cache_queries_total") else counts[1]
            doc = {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": labels, "value": [100, value]}]},
            }
        else:  # the gauges
            series = [{"metric": labels | {"__name__": "vllm:num_requests_running"}, "value": [100, "3"]}]
            doc = {"status": "success", "data": {"resultType": "vector", "result": series}}
        body(json.dumps(doc))(h)

    return handle


@pytest.fixture
def upstream():
    server = Upstream()
    yield server
    server.stop()


WRONG_SHAPES = [
    "[1, 2, 3]",
    '"success"',
    '{"status": "success", "data": []}',
    '{"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}}',
    '{"status": "success", "data": {"resultType": "vector", "result": [1, 2]}}',
    '{"status": "success", "data": {"resultType": "string", "result": [1, "x"]}}',
    "[" * 100_000 + "]" * 100_000,
    "<html>not json</html>",
]


@pytest.mark.parametrize("answer", WRONG_SHAPES, ids=range(len(WRONG_SHAPES)))
@pytest.mark.parametrize("as_json", [False, True])
def test_an_answer_of_the_wrong_shape_is_one_line_and_exit_1(upstream, capsys, answer, as_json):
    """A store whose answers kvops cannot use: exit 1, as for one that cannot be reached (2 is
    for the user's own bad flags and files)."""
    upstream.routes["/api/v1/query"] = body(answer)
    code = main(["top", "--once", "--prometheus", upstream.base, *(["--json"] if as_json else [])])
    captured = capsys.readouterr()
    assert code == 1, captured
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith("kvops") and upstream.base in captured.err and captured.out == ""


def test_an_unreachable_store_is_one_line_and_exit_1(capsys):
    assert main(["top", "--once", "--prometheus", "http://127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "127.0.0.1:1" in err


def test_escape_sequences_from_the_store_are_shown_not_run(upstream, capsys):
    upstream.routes["/api/v1/query"] = store(model=EVIL)
    assert main(["top", "--once", "--prometheus", upstream.base]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m" in out
    assert "25.0 %" in out  # 50 hits of 200 lookups: the frame itself is fine
    upstream.routes["/api/v1/query"] = store(error=EVIL)
    assert main(["top", "--once", "--prometheus", upstream.base]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b]0;pwned" in err


def test_access_options_reach_the_store(upstream, capsys, tmp_path):
    seen: list[dict[str, str]] = []
    upstream.routes["/api/v1/query"] = store(seen=seen)
    token, password = tmp_path / "token", tmp_path / "password"
    token.write_text("tok-123\n")
    password.write_text("s3cret\n")
    argv = ["top", "--once", "--json", "--prometheus", upstream.base]
    assert main([*argv, "--prometheus-bearer-token-file", str(token),
                 "--prometheus-header", "X-Scope-OrgID: tenant-1"]) == 0  # fmt: skip
    assert seen and all(h["Authorization"] == "Bearer tok-123" for h in seen)
    assert all(h["X-Scope-OrgID"] == "tenant-1" for h in seen)
    doc = json.loads(capsys.readouterr().out)
    assert doc["targets"][0]["local_hit_rate"] == 0.25
    seen.clear()
    assert main([*argv, "--prometheus-basic-auth", f"ops:{password}"]) == 0
    assert all(h["Authorization"] == "Basic " + base64.b64encode(b"ops:s3cret").decode() for h in seen)
    capsys.readouterr()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--prometheus-bearer-token-file", "{tmp}/evil-token"], "control characters"),
        (["--prometheus-bearer-token-file", "{tmp}/missing"], "No such file"),
        (["--prometheus-bearer-token-file", "{tmp}/open-token"], "world-writable"),
        (["--prometheus-basic-auth", "ops:{tmp}/open-token"], "world-writable"),
        (["--prometheus-basic-auth", "nopasswordfile"], "USER:PASSWORD_FILE"),
        (["--prometheus-header", "X-Bad\r\nInjected: 1"], "'Name: value'"),
        (["--prometheus-header", "X-Ok: a\rb"], "control characters"),
        (["--prometheus-ca-file", "{tmp}/missing"], "cannot read"),
    ],
)
def test_bad_access_options_are_one_line_and_exit_2(capsys, tmp_path, extra, message):
    (tmp_path / "evil-token").write_text("tok1\r\nX-Injected: evil\n")
    (tmp_path / "open-token").write_text("tok1\n")
    (tmp_path / "open-token").chmod(0o666)  # any user could choose the credential sent
    argv = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    assert main(["top", "--once", "--prometheus", "http://127.0.0.1:1", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_access_options_without_prometheus_are_refused(capsys):
    assert main(["top", "--once", "--prometheus-header", "X: y", "http://127.0.0.1:1"]) == 2
    assert "go with --prometheus" in capsys.readouterr().err


def test_stored_samples_with_timestamps_that_are_not_numbers_are_one_line_and_exit_1(upstream, capsys):
    upstream.routes["/api/v1/query"] = store(bad_times=True)
    assert main(["top", "--once", "--prometheus", upstream.base]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "timestamps are not numbers" in err


HUGE = 10**400  # a 400-digit integer: float() of it raises OverflowError


@pytest.mark.parametrize(
    "counts", [(HUGE, HUGE), (str(HUGE), "50"), ("1e400", "-1e400"), ("NaN", "+Inf")], ids=range(4)
)
def test_counts_out_of_float_range_are_unknown_not_a_traceback(upstream, capsys, counts):
    upstream.routes["/api/v1/query"] = store(counts=counts)
    assert main(["top", "--once", "--json", "--prometheus", upstream.base]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    (row,) = json.loads(captured.out)["targets"]
    assert row["up"] is True and row["requests_running"] == 3
    assert row["local_queries"] is None and row["local_hit_rate"] is None  # unknown, never inf


@pytest.mark.parametrize(
    "times", [[0, 1e308], [0.0, 1e308, 1e308], [HUGE, HUGE + 15], [-1e308, 1e308]], ids=range(4)
)
def test_sample_times_out_of_range_give_no_interval_not_a_traceback(upstream, capsys, times):
    """The scrape interval is read from the gaps between stored samples: gaps of 1e308 s, or
    from 400-digit times, are no interval (the frame shows the gauges, rates unknown)."""
    upstream.routes["/api/v1/query"] = store(times=times)
    assert main(["top", "--once", "--json", "--prometheus", upstream.base]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    doc = json.loads(captured.out)
    assert doc["interval_seconds"] is None
    assert doc["targets"][0]["requests_running"] == 3 and doc["targets"][0]["local_hit_rate"] is None


@pytest.mark.parametrize("stamp", [HUGE, 1e308, 0, -5, "1e400"], ids=range(5))
def test_a_newest_sample_time_out_of_range_is_one_line_and_exit_1(upstream, capsys, stamp):
    upstream.routes["/api/v1/query"] = store(stamp=stamp)
    assert main(["top", "--once", "--prometheus", upstream.base]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "is not a time" in err


def test_the_live_view_keeps_no_poisoned_interval(upstream):
    """A store whose stored sample times are 0 and 1e308, then that recovers: the frames
    after it show the interval again (a kept interval of 1e308 s failed every later frame)."""
    from kvops.frames.prometheus import PrometheusSource

    source = PrometheusSource(upstream.base, timeout=5.0)
    try:
        upstream.routes["/api/v1/query"] = store(times=[0, 1e308])
        first = source.next()
        assert first is not None and first[0].targets == []  # no interval: no "before"
        upstream.routes["/api/v1/query"] = store(error="store restarting")
        down = source.next()
        assert down is not None and not down[1].targets[0].up
        upstream.routes["/api/v1/query"] = store(stamp=115)
        after = source.next()
        assert after is not None
        assert after[1].time - after[0].time == 30  # the span the store gave
        from kvops.rates import EngineInterval, interval

        (entry,) = interval(after[0], after[1]).targets
        assert isinstance(entry, EngineInterval) and entry.local_hit_rate == 0.25
    finally:
        source.close()


# Runs `kvops top --once --prometheus URL` and then reads the process's own peak RSS from
# /proc/self/status (VmHWM: this image's, since exec). ru_maxrss would carry the forking
# pytest process's size across exec (209 MB in the whole suite's run).
_ONCE_AND_PEAK = """
import sys
from kvops.cli import main
code = main(["top", "--once", "--prometheus", sys.argv[1]])
status = open("/proc/self/status").read()
print(int(status.split("VmHWM:")[1].split()[0]), file=sys.stderr)
sys.exit(code)
"""


def _peak_rss_of_once(base: str) -> tuple[int, str, float]:
    """`kvops top --once --prometheus base` in a process of its own: (exit code, its stderr
    less the last line, its peak RSS in MiB)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _ONCE_AND_PEAK, base], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    *err, peak_kib = proc.stderr.splitlines()
    return proc.returncode, "".join(line + "\n" for line in err), int(peak_kib) / 1024


def _vector_of(item: str, size: int) -> str:
    head, tail = '{"status":"success","data":{"resultType":"vector","result":[', "]}}"
    count = (size - len(head) - len(tail)) // (len(item) + 1)
    return head + ",".join([item] * count) + tail


def test_an_answer_over_the_cap_is_refused_naming_the_cap_in_bounded_memory(upstream):
    """16 MB of series (the size that cost 460 MB) is over the 8 MiB a query kvops takes."""
    upstream.routes["/api/v1/query"] = body(_vector_of('{"metric":{},"value":[1,"1"]}', 16 * 10**6))
    code, err, peak = _peak_rss_of_once(upstream.base)
    assert peak < 150, peak  # 501 MiB decoded whole (16 MiB cap, no count)
    assert code == 1 and err.count("\n") == 1 and "cap of 8 MiB a query" in err, err


def test_an_answer_of_too_many_series_is_refused_within_bounded_memory(upstream):
    """Under the byte cap, 270,000 tiny series: decoding stops past 100,000 of them."""
    upstream.routes["/api/v1/query"] = body(_vector_of('{"metric":{},"value":[1,"1"]}', 8 * 10**6))
    code, err, peak = _peak_rss_of_once(upstream.base)
    assert peak < 150, peak  # 264 MiB decoded whole
    assert code == 1 and "more than 100,000 series" in err, err

"""`kvops top --prometheus` against a hostile or broken store on loopback: answers of the wrong
shape, escape sequences in labels and errors, and the access options reaching the server."""

from __future__ import annotations

import base64
import json
from http.server import BaseHTTPRequestHandler
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
):
    """A store that answers the fleet view's queries for one engine with fixed values."""

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
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": [100, "100"]}]},
            }
        elif query.startswith("topk("):
            doc = {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": labels, "value": [100, "100"]}]},
            }
        elif query.endswith("[10m]"):
            values = [["x", "1"], [{}, "1"]] if bad_times else [[70, "1"], [85, "1"], [100, "1"]]
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
            value = "200" if query.startswith("(vllm:prefix_cache_queries_total") else "50"
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
        (["--prometheus-bearer-token-file", "{tmp}/missing"], "cannot read"),
        (["--prometheus-basic-auth", "nopasswordfile"], "USER:PASSWORD_FILE"),
        (["--prometheus-header", "X-Bad\r\nInjected: 1"], "'Name: value'"),
        (["--prometheus-header", "X-Ok: a\rb"], "control characters"),
        (["--prometheus-ca-file", "{tmp}/missing"], "cannot read"),
    ],
)
def test_bad_access_options_are_one_line_and_exit_2(capsys, tmp_path, extra, message):
    (tmp_path / "evil-token").write_text("tok1\r\nX-Injected: evil\n")
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

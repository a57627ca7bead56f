"""`kvops top --once [--json]` and its bad input, through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvops.cli import main

from .helpers import T1, T2, truth_interval


def test_once_json_replay_equals_the_truth_interval(capsys):
    assert main(["top", "--once", "--json", "--replay", str(T1), str(T2)]) == 0
    doc = json.loads(capsys.readouterr().out)
    [row] = doc["targets"]
    assert row["up"] is True and row["engine"] == "0"
    for name, expected in truth_interval().items():
        if isinstance(expected, str):
            assert row[name] == expected
        else:
            assert row[name] == pytest.approx(expected, rel=1e-9, abs=1e-9), name
    assert doc["gpus"] == [] and doc["host"] == {}


def test_once_json_writes_only_json_on_stdout():
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "top", "--once", "--json", "--replay", str(T1), str(T2)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["targets"][0]["preemptions"] == 1
    assert proc.stdout.count("\n") == 1


def test_once_text_shows_the_frame_in_readable_units(capsys):
    assert main(["top", "--once", "--replay", str(T1), str(T2)]) == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()[:2]
    assert header.split()[:3] == ["TARGET", "MODEL", "ENG"]
    assert row.split() == ["replay", "meta-llama/Llama-3.1-8B-Instruct", "0", "98.4", "%!", "58.2", "%",
                           "18.2", "%!", "30.33", "GB/s", "38.84", "GB/s", "0.19", "97", "3", "1",
                           "456", "ms"]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--replay", "/nonexistent/a.prom", str(T2)], "no such file"),
        (["--once", "--replay", str(T1)], "needs two files"),
        (["--interval", "0", "--replay", str(T1)], "positive"),
        (["--interval", "soon", "--replay", str(T1)], "not a number"),
        (["--interval", "nan", "--replay", str(T1)], "positive"),
        (["--json", "--replay", str(T1), str(T2)], "--json goes with --once"),
        (["ftp://example.invalid/metrics"], "only http and https"),
        (["http://127.0.0.1:99999"], "bad port"),
        (["http://127.0.0.1:1", "--replay", str(T1)], "give one source, not URL and --replay"),
        (["--prometheus", "gopher://x"], "only http and https"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(capsys, argv, message):
    assert main(["top", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and message in err, err


def test_replay_file_that_is_not_an_exposition_is_refused(tmp_path, capsys):
    junk = tmp_path / "junk.prom"
    junk.write_text("node_load1 0.5\n")
    binary = tmp_path / "bin.prom"
    binary.write_bytes(b"\xff\xfe\x00")
    for path, message in ((junk, "no vllm:, lmcache: or kvops_ sample"), (binary, "not UTF-8")):
        assert main(["top", "--once", "--replay", str(path), str(T2)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


def test_once_json_live_target_down_is_reported_not_raised(capsys):
    # A closed port: the target is down, the command still answers with the document, and
    # exits 1 (every target down) with the first-run hint on stderr.
    assert main(["top", "--once", "--json", "--interval", "0.1", "http://127.0.0.1:1"]) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    [row] = doc["targets"]
    assert row["up"] is False and row["target"] == "http://127.0.0.1:1"
    assert row["error"]  # the reason, one line (its wording is the fetcher's)
    assert captured.err.count("\n") == 1 and "every target is down" in captured.err
    assert "kvops sim --listen 127.0.0.1:8000 &" in captured.err


def test_once_exits_0_when_one_target_of_two_is_up(capsys):
    """Exit status (docs/DESIGN.md): 0 when at least one target is up, 1 when every target is
    down, 2 for the user's own bad flags."""
    from kvops.sim import server

    with server.start() as sim:
        argv = ["top", "--once", "--json", "--interval", "0.2", sim.url, "http://127.0.0.1:1"]
        assert main(argv) == 0
        captured = capsys.readouterr()
        assert captured.err == ""
        assert sorted(t["up"] for t in json.loads(captured.out)["targets"]) == [False, True]
    assert main(["top", "--once", "--interval", "-1", "http://127.0.0.1:1"]) == 2


def test_live_view_without_a_terminal_is_refused_not_hung():
    for argv in (["top", "--replay", str(T1), str(T2)], ["demo"]):
        proc = subprocess.run([sys.executable, "-m", "kvops.cli", *argv], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and "needs a terminal" in proc.stderr

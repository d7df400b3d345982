"""``streamanon flink z|castle|merge`` keep the promises of every command
(tests/cli/test_cli_contract.py).

Cheap checks run in-process and never start a JVM: an output that is an input is refused, a
file that is not text or has no usable header gets exactly the one-line message of
``streamanon z`` / ``streamanon castle`` (the client checks the head of the file before the
job), bad options exit 2 in one line. A few real jobs show what only a job can: a bad line
found inside the job fails the run with the pure command's message and leaves the previous
output untouched; ``-o -`` keeps stdout for rows (the summary goes to stderr and
``--summary``); Ctrl-C while a job runs exits 130 and says what was not written.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streamanon.cli import app
from tests.cli.test_broken_inputs import PREVIOUS, Z_GOOD, castle_good, corpus
from tests.flink.conftest import STREAMANON, require_flink

require_flink()
pytestmark = pytest.mark.flink

runner = CliRunner()
#: broken inputs the client recognizes from the file's head, before any job runs
CLIENT_SIDE = ("random-bytes", "gzip", "zip", "nul-bytes", "wrong-header", "jsonl-in-csv")


def invoke(args: list[str]) -> tuple[int, str]:
    res = runner.invoke(app, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stderr


def commands(kind: str, src: Path, out: Path, rules: Path | None) -> tuple[list, list]:
    """The pure command and its Flink twin on the same input."""
    if kind == "z":
        pure = ["z", "--z", "1", "--delta-t", "10", str(src), "-o", str(out)]
        return pure, ["flink", *pure, "-p", "1"]
    pure = ["castle", "--rules", str(rules), "--k", "2", "--l", "0", str(src), "-o", str(out)]
    return pure, ["flink", *pure, "-p", "1"]


def untouched(out: Path) -> bool:
    return out.read_text() == PREVIOUS and not [
        p for p in out.parent.iterdir() if ".partial" in p.name]


@pytest.mark.parametrize("kind", ["z", "castle"])
def test_broken_heads_get_the_pure_commands_message_before_any_job(tmp_path, kind) -> None:
    good, rules = (Z_GOOD, None) if kind == "z" else castle_good(tmp_path)
    out = tmp_path / "out.csv"
    for name, (content, expected) in corpus(good).items():
        if name not in CLIENT_SIDE:
            continue
        src = tmp_path / f"{name}.csv"
        src.write_bytes(content)
        out.write_text(PREVIOUS)
        pure, flink = commands(kind, src, out, rules)
        code, err = invoke(flink)
        assert code == 2 and "Traceback" not in err, (name, err)
        assert err.splitlines()[0] == invoke(pure)[1].splitlines()[0], (name, err)
        assert expected in err.splitlines()[0] and "not written" in err, (name, err)
        assert untouched(out), name


def test_an_output_that_is_an_input_is_refused(tmp_path) -> None:
    src = tmp_path / "in.csv"
    src.write_text(Z_GOOD)
    code, err = invoke(["flink", "z", "--z", "1", "--delta-t", "1", str(src), "-o", str(src)])
    assert code == 2 and "would destroy the input" in err
    good, rules = castle_good(tmp_path)
    data = tmp_path / "c.csv"
    data.write_text(good)
    base = ["flink", "castle", "--rules", str(rules), str(data)]
    for extra in (["-o", str(data)], ["-o", str(rules)],
                  ["-o", str(tmp_path / "o.csv"), "--rejects", str(data)]):
        code, err = invoke([*base, *extra])
        assert code == 2 and "would destroy the input" in err, (extra, err)
        assert len(err.strip().splitlines()) == 1, err
    assert src.read_text() == Z_GOOD and data.read_text() == good
    assert rules.read_text().startswith("id =")


def test_bad_options_and_inputs_are_one_line_exit_2(tmp_path) -> None:
    src = tmp_path / "in.csv"
    src.write_text(Z_GOOD)
    out = tmp_path / "out.csv"
    out.write_text(PREVIOUS)
    z = ["flink", "z", "--z", "1", "--delta-t", "1"]
    cases = {
        "missing": ([*z, str(tmp_path / "nope.csv"), "-o", str(out)], "no such file"),
        "folder": ([*z, str(tmp_path), "-o", str(out)], "is a folder"),
        "stdin": ([*z, "-", "-o", str(out)], "cannot read standard input"),
        "xml": ([*z, str(src), "-o", str(out), "--input-format", "xml"],
                "--input-format xml: use csv or jsonl"),
        "out xml": ([*z, str(src), "-o", str(out), "--output-format", "xml"],
                    "--output-format xml: use csv or jsonl"),
        "no folder": ([*z, str(src), "-o", str(tmp_path / "nodir" / "o.csv")],
                      "does not exist"),
        "bad tcp": ([*z, "tcp://nowhere", "-o", str(out)], "expected HOST:PORT"),
        "restore": ([*z, str(src), "-o", str(out), "--restore", "latest"],
                    "--restore needs --work-dir"),
        "merge": (["flink", "merge", str(tmp_path / "none"), "-o", str(out)], "not a folder"),
        "rules": (["flink", "castle", "--rules", str(tmp_path / "no.toml"), str(src)],
                  "--rules"),
    }
    for name, (args, expected) in cases.items():
        code, err = invoke(args)
        assert code == 2, (name, err)
        assert expected in err and "Traceback" not in err, (name, err)
        assert len(err.strip().splitlines()) == 1, (name, err)
    assert untouched(out)


def test_job_errors_report_streamanon_errors_and_leave_other_value_errors_alone() -> None:
    """A refusal (:class:`~streamanon.errors.StreamanonError`) becomes the one-line failure of
    the command; a plain ``ValueError`` (a bug, e.g. in numpy) keeps its traceback."""
    from streamanon.cli.flink import job_errors
    from streamanon.errors import ConfigError, JobError, JobFailed, OutcomeGap

    with pytest.raises(JobFailed, match=r"^--partitions 3: refused$"), job_errors():
        raise ConfigError("--partitions 3: refused")
    with pytest.raises(JobFailed, match=r"^the Flink job failed: 2 outcome"), job_errors():
        raise JobError("2 outcome(s) never met their input positions")
    gap = r"^the job's part files are not exactly one outcome per input line: no outcome"
    with pytest.raises(JobFailed, match=gap), job_errors():
        raise OutcomeGap("no outcome for input line 2")
    with pytest.raises(ValueError, match="a bug") as caught, job_errors():
        raise ValueError("a bug")
    assert not isinstance(caught.value, JobFailed)


def test_job_errors_silence_py4js_tracebacks_and_only_for_the_command(capsys) -> None:
    """py4j logs a traceback on its own loggers when a call to the JVM is cut (a SIGTERM to
    the process group kills the JVM while Python waits on it); those records propagate to
    the root's handlers, where a root filter never sees them, and PyFlink's get_gateway sets
    py4j.java_gateway's own level (so a level on py4j's parent logger does not hold, as CI
    showed). Inside the command they are silent; afterwards py4j logs as before."""
    import logging
    import sys

    from streamanon.cli.flink import job_errors

    logging.getLogger("py4j.java_gateway").level = logging.WARN  # as get_gateway does

    handler = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with job_errors():
            logging.getLogger("py4j.java_gateway").error("cut inside")
            logging.error("ours inside")
        logging.getLogger("py4j.java_gateway").error("after the command")
    finally:
        root.removeHandler(handler)
        logging.getLogger("py4j.java_gateway").level = logging.NOTSET
    err = capsys.readouterr().err
    assert "cut inside" not in err
    assert "ours inside" in err and "after the command" in err


def run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*STREAMANON, *args], capture_output=True, text=True, timeout=300,
                          **kwargs)


@pytest.mark.parametrize("kind", ["z", "castle"])
def test_a_bad_line_found_by_the_job_fails_the_run_and_keeps_the_old_output(tmp_path,
                                                                         kind) -> None:
    """The unclosed quote is seen only by the job's reader: the merge stops at it, the
    message is the pure command's, and nothing replaces the previous output."""
    good, rules = (Z_GOOD, None) if kind == "z" else castle_good(tmp_path)
    content, expected = corpus(good)["unclosed-quote"]
    src = tmp_path / "quote.csv"
    src.write_bytes(content)
    out = tmp_path / "out.csv"
    out.write_text(PREVIOUS)
    pure, flink = commands(kind, src, out, rules)
    res = run(flink)
    assert res.returncode == 2, res.stderr
    first = res.stderr.splitlines()[0]
    assert first == invoke(pure)[1].splitlines()[0] and expected in first
    assert "not written" in res.stderr and "Traceback" not in res.stderr
    assert untouched(out)


def test_dash_o_keeps_stdout_for_rows_and_the_summary_goes_elsewhere(tmp_path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("t,u,a\n1,a,x\n2,b,x\n3,c,y\n")
    summary = tmp_path / "summary.json"
    res = run(["flink", "z", "--z", "2", "--delta-t", "10", "-p", "1", str(src), "--json",
               "--summary", str(summary)])
    assert res.returncode == 0, res.stderr
    assert res.stdout == "t,u,a\n2,b,x\n"
    from_stderr = json.loads(res.stderr.strip().splitlines()[-1])
    assert from_stderr["released"] == 1 and from_stderr["outputs"] == [str(summary)]
    assert json.loads(summary.read_text()) == from_stderr


def test_ctrl_c_during_a_job_exits_130_and_says_what_was_not_written(tmp_path) -> None:
    """A job reading a TCP source that never ends; SIGINT to the command's process group
    (what a terminal's Ctrl-C does) while the job runs."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(120)
    port = server.getsockname()[1]
    out = tmp_path / "out.csv"
    out.write_text(PREVIOUS)
    proc = subprocess.Popen([*STREAMANON, "flink", "z", "--z", "1", "--delta-t", "10", "-p",
                             "1", f"tcp://127.0.0.1:{port}", "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        conn, _ = server.accept()  # the job runs: its source connected
        conn.sendall(b"t,u,a\n1,a,x\n")
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        server.close()
    assert proc.returncode == 130, err
    assert "interrupted: not written" in err and str(out) in err
    assert "Traceback" not in err
    assert untouched(out)


def test_help_examples_fit_an_80_column_terminal() -> None:
    for path in (["flink", "z"], ["flink", "castle"], ["flink", "merge"]):
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert res.exit_code == 0
        example = res.stdout.split("Example")[1].split("╭")[0]
        lines = [ln.strip() for ln in example.splitlines() if ln.strip()]
        commands = lines[next(i for i, ln in enumerate(lines) if ln.startswith("streamanon")):]
        assert all(ln.startswith(("streamanon", "--", "diff")) for ln in commands), (
            path, example)  # a wrapped example line would start with something else

"""The promises every command keeps: outputs, exit codes, stdout for data, warnings, defaults.

Each section names the promise its tests protect.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from streamanon.castle import CastleAnonymizer
from streamanon.cli import app, main
from streamanon.cli.exitcodes import ExitCode
from streamanon.data import ashrae
from streamanon.data.traces import write_trace, zipf_trace
from streamanon.pipeline.file_outputs import OutputSet

NOT_WRITTEN_NOTE = "(previous content, if any, untouched)"

runner = CliRunner()
EXE = Path(sys.executable).with_name("streamanon")


def trace(tmp_path: Path, n: int = 3000) -> Path:
    return write_trace(tmp_path / "trace.csv", zipf_trace(n, n_users=80, n_values=300, seed=7))


def castle_files(tmp_path: Path, n: int = 400) -> tuple[Path, Path]:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(n, seed=2))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    return data, rules


# -- an output never overwrites its input -------------------------------------------------
def test_output_over_its_input_is_refused_and_the_input_kept(tmp_path) -> None:
    src = trace(tmp_path)
    before = src.read_bytes()
    res = runner.invoke(app, ["z", "--z", "1", "--delta-t", "3600", str(src), "-o", str(src)])
    assert res.exit_code == 2 and "would destroy the input" in res.stderr
    data, rules = castle_files(tmp_path)
    kept = data.read_bytes()
    for opt in ("-o", "--suppressed", "--rejects"):
        args = ["castle", "--rules", str(rules), str(data), "-o", str(tmp_path / "o.csv"),
                opt, str(data)]
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "would destroy the input" in res.stderr, (opt, res.output)
    res = runner.invoke(app, ["castle", "--rules", str(rules), str(data), "-o", str(rules)])
    assert res.exit_code == 2 and "destroy the input" in res.stderr
    assert src.read_bytes() == before and data.read_bytes() == kept


# -- a failed run leaves no output that looks valid ---------------------------------------
def test_a_bad_line_late_in_the_file_leaves_the_previous_output(tmp_path) -> None:
    src = trace(tmp_path, 30_000)
    with src.open("a") as fh:
        fh.write("yesterday,u1,v1\n")  # line 30,002
    out = tmp_path / "published.csv"
    out.write_text("previous\n")
    res = runner.invoke(app, ["z", "--z", "2", "--delta-t", "3600", str(src), "-o", str(out)])
    assert res.exit_code == 2
    assert f"{src}:30002:" in res.stderr and "not written" in res.stderr
    assert out.read_text() == "previous\n"


def test_castle_suppressed_into_a_missing_folder_is_refused_before_any_work(tmp_path) -> None:
    data, rules = castle_files(tmp_path)
    res = runner.invoke(app, ["castle", "--rules", str(rules), str(data), "-o",
                              str(tmp_path / "ok.csv"), "--suppressed",
                              str(tmp_path / "nodir" / "sup.csv")])
    assert res.exit_code == 2 and "--suppressed" in res.stderr and "does not exist" in res.stderr
    assert not (tmp_path / "ok.csv").exists()


@pytest.mark.parametrize(("signum", "code", "word"), [
    (signal.SIGINT, ExitCode.INTERRUPTED, "interrupted"),
    (signal.SIGTERM, ExitCode.TERMINATED, "terminated"),
])
def test_ctrl_c_and_sigterm_say_what_was_not_written(tmp_path, signum, code, word) -> None:
    """A real signal to a real `streamanon z` waiting on its input: exit 130 (143), the old
    output untouched, stderr naming it. The command starts with SIGINT at its default, as
    from a terminal: a test session started in the background by a script (``pytest &``)
    ignores SIGINT, and a process that inherits that disposition keeps it (as Python does)."""
    out = tmp_path / "out.csv"
    out.write_text("previous\n")
    proc = subprocess.Popen([str(EXE), "z", "--z", "1", "--delta-t", "10", "-", "-o", str(out)],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdin is not None
    proc.stdin.write("t,u,a\n1,a,x\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 30
    while not [p for p in tmp_path.iterdir() if ".partial" in p.name]:
        assert time.monotonic() < deadline, "the run never opened its output"
        time.sleep(0.05)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == code, err
    assert f"{word}: not written" in err and str(out) in err and "Traceback" not in err
    assert out.read_text() == "previous\n"
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]


def interrupt_at(n: int):  # type: ignore[no-untyped-def]
    """A trace function that raises KeyboardInterrupt before the ``n``-th line run in
    :func:`~streamanon.cli.common.writing` and its :class:`OutputSet`, as a signal's handler
    raises between two lines."""
    from streamanon.cli import common
    from streamanon.pipeline import file_outputs

    files = {common.__file__, file_outputs.__file__}
    count = 0

    def trace(frame, event, arg):  # type: ignore[no-untyped-def]
        nonlocal count
        if frame.f_code.co_filename not in files:
            return None
        if event == "line":
            count += 1
            if count == n:
                raise KeyboardInterrupt
        return trace

    return trace


def test_ctrl_c_at_any_moment_leaves_no_temporary_file_and_says_what_was_written(
        tmp_path, capsys) -> None:
    """Ctrl-C before each line of a run's outputs in turn (taking the output, writing it,
    committing it): never a temporary file left; the target is untouched and named not written,
    or replaced and named written; exit 130."""
    from streamanon.cli.common import writing

    target = tmp_path / "out.csv"
    interrupted = 0
    for n in range(1, 1000):
        target.write_text("old")
        taken: list[OutputSet] = []
        stopped = False
        sys.settrace(interrupt_at(n))
        try:
            with writing([]) as outs:
                taken.append(outs)
                Path(outs.add(target, "-o")).write_text("new")
        except typer.Exit as exc:
            assert exc.exit_code == ExitCode.INTERRUPTED, n
            stopped = True
        except KeyboardInterrupt:  # before writing() could take it: no output taken yet
            stopped = True
            assert not taken or not taken[0].targets, n
        finally:
            sys.settrace(None)
        err = capsys.readouterr().err
        assert not [p for p in tmp_path.iterdir() if ".partial" in p.name], n
        written = target.read_text() == "new"
        if not stopped:
            assert written
            break
        interrupted += 1
        if taken and taken[0].targets:
            said = f"written: {target}" if written else f"not written {NOT_WRITTEN_NOTE}: {target}"
            assert f"interrupted: {said}" in err or f"; {said}" in err, (n, err)
    assert interrupted > 20


# -- --json and rows never share stdout -----------------------------------------------------
def test_stdout_carries_only_rows_with_dash_o(tmp_path) -> None:
    data = "t,u,a\n1,a,x\n2,b,x\n3,c,y\n"
    summary = tmp_path / "summary.json"
    res = subprocess.run([str(EXE), "z", "--z", "2", "--delta-t", "10", "-", "--json",
                          "--summary", str(summary)], input=data, capture_output=True,
                         text=True, check=True)
    assert res.stdout == "t,u,a\n2,b,x\n"
    from_stderr = json.loads(res.stderr.strip().splitlines()[-1])
    assert from_stderr["released"] == 1
    assert json.loads(summary.read_text()) == from_stderr


def test_json_goes_to_stdout_when_rows_go_to_a_file(tmp_path) -> None:
    data, rules = castle_files(tmp_path)
    res = runner.invoke(app, ["castle", "--rules", str(rules), str(data), "-o",
                              str(tmp_path / "o.csv"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["outputs"] == [str(tmp_path / "o.csv")]


# -- exit codes ----------------------------------------------------------------------------
def test_an_internal_error_is_exit_70_not_1(tmp_path, monkeypatch, capsys) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("streamanon.cli.zanon.run_z", broken)
    monkeypatch.setattr(sys, "argv", ["streamanon", "z", "--z", "1", "--delta-t", "1",
                                      str(trace(tmp_path)), "-o", str(tmp_path / "o.csv")])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == ExitCode.INTERNAL
    assert "internal error" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


# -- parameters that cannot be met are said -------------------------------------------------
def test_k_and_l_that_cannot_be_reached_are_warned(tmp_path) -> None:
    data, rules = castle_files(tmp_path, 200)
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "1000", "--l", "5000",
                              str(data), "-o", str(tmp_path / "o.csv"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["released"] == 0
    warnings = " ".join(summary["warnings"])
    assert "--k 1000: the input has only 89 distinct individual(s)" in warnings
    assert "--l 5000: the sensitive attribute meter_reading has only" in warnings
    assert "warning: --k 1000" in res.stderr


def test_a_delta_below_k_is_warned_and_the_defaults_are_not(tmp_path) -> None:
    data, rules = castle_files(tmp_path, 200)
    runs = {}
    for name, extra in {"below": ["--k", "10", "--delta", "5"], "defaults": []}.items():
        res = runner.invoke(app, ["castle", "--rules", str(rules), *extra, str(data), "-o",
                                  str(tmp_path / f"{name}.csv"), "--json"])
        assert res.exit_code == 0, res.output
        runs[name] = " ".join(json.loads(res.stdout).get("warnings", []))
    assert "--delta 5 --k 10: δ = 5 < k = 10: Prink requires δ >= k" in runs["below"]
    assert "Prink requires" not in runs["defaults"]


def test_pointless_z_parameters_are_warned(tmp_path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("t,u,a\n1,a,x\n2,b,x\n")
    res = runner.invoke(app, ["z", "--z", "3", "--delta-t", "0", str(src), "-o",
                              str(tmp_path / "o.csv"), "--json"])
    assert res.exit_code == 0
    warnings = json.loads(res.stdout)["warnings"]
    assert any("--delta-t 0" in w for w in warnings)
    assert any("only 2 distinct user(s)" in w for w in warnings)


def test_simulate_refuses_zero_days_and_names_options_not_parameters() -> None:
    res = runner.invoke(app, ["simulate", "--days", "0"])
    assert res.exit_code == 2 and "--days 0 is less than one 15-minute cycle" in res.stderr
    res = runner.invoke(app, ["simulate", "--p-pub", "0", "--cycles", "2"])
    assert res.exit_code == 2 and res.stderr.startswith("error: --p-pub must be in (0, 1]")
    res = runner.invoke(app, ["simulate", "--gateways", "2", "--max-sn", "2", "--z", "50",
                              "--cycles", "2", "--json"])
    assert res.exit_code == 0 and "no value can reach z" in json.loads(res.stdout)["warnings"][0]


# -- defaults that agree across commands ---------------------------------------------------
def options(*path: str) -> dict[str, object]:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return {p.name: p for p in command.params}  # type: ignore[misc]


def test_castle_commands_default_to_the_operator() -> None:
    import inspect

    operator = {n: p.default for n, p in inspect.signature(CastleAnonymizer).parameters.items()}
    castle, grid = options("castle"), options("experiment", "castle")
    for name in ("k", "l", "delta", "beta", "mu", "zeta"):
        assert castle[name].default == operator[name], name  # type: ignore[attr-defined]
    for name in ("beta", "mu", "zeta"):
        assert grid[name].default == operator[name], name  # type: ignore[attr-defined]


def test_dezent_defaults_agree_and_experiments_share_workdir() -> None:
    simulate, cluster = options("simulate"), options("cluster", "up")
    assert simulate["structure"].default == cluster["structure"].default  # type: ignore[attr-defined]
    assert simulate["structure"].default == options("experiment", "dezent")[  # type: ignore[attr-defined]
        "structure"].default
    for grid in ("castle", "dezent"):
        opts = options("experiment", grid)
        assert "--workdir" in opts["workdir"].opts  # type: ignore[attr-defined]

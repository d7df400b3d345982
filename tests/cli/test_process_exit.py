"""The console script ends a finished ``streamanon z`` or ``streamanon castle`` without the
interpreter's teardown (``os._exit``): everything it wrote must still be there, flushed, as an
in-process run writes it; and a command run in process must not end the process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from streamanon.cli import app
from streamanon.cli.exitcodes import teardown_skipped
from streamanon.data import ashrae
from streamanon.data.traces import write_trace, zipf_trace

EXE = Path(sys.executable).with_name("streamanon")
runner = CliRunner()


def test_an_early_exit_keeps_every_output_and_the_summary(tmp_path) -> None:
    trace = write_trace(tmp_path / "trace.csv", zipf_trace(20_000, n_users=300, n_values=500,
                                                           seed=3))
    args = ["z", "--z", "3", "--delta-t", "600", str(trace)]
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "in-process.csv"), "--json"])
    assert res.exit_code == 0, res.output
    assert teardown_skipped()  # asked for, and the test process is still here
    summary_file = tmp_path / "summary.json"
    proc = subprocess.run([str(EXE), *args, "-o", str(tmp_path / "script.csv"), "--json",
                           "--summary", str(summary_file)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["read"] == 20_000 and 0 < summary["released"] < 20_000
    assert json.loads(summary_file.read_text()) == summary
    assert (tmp_path / "script.csv").read_bytes() == (tmp_path / "in-process.csv").read_bytes()
    rows = subprocess.run([str(EXE), *args, "-o", "-"], capture_output=True, check=True)
    assert rows.stdout == (tmp_path / "in-process.csv").read_bytes()
    assert "released" in rows.stderr.decode()  # the summary table, flushed before the exit


def test_an_early_exit_keeps_every_castle_output_and_the_summary(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("streamanon.cli.exitcodes._skip_teardown", False)
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(3000, seed=4))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    args = ["castle", "--rules", str(rules), "--k", "5", "--l", "2", "--delta", "300", str(data),
            "--suppression", "drop"]

    def outputs(stem: str) -> list[str]:
        return ["-o", str(tmp_path / f"{stem}.csv"), "--suppressed",
                str(tmp_path / f"{stem}-suppressed.csv")]

    res = runner.invoke(app, [*args, *outputs("in-process"), "--json"])
    assert res.exit_code == 0, res.output
    assert teardown_skipped()  # asked for, and the test process is still here
    summary_file = tmp_path / "summary.json"
    proc = subprocess.run([str(EXE), *args, *outputs("script"), "--json", "--summary",
                           str(summary_file)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["read"] == 3000 and summary["released"] > 2000
    assert json.loads(summary_file.read_text()) == summary
    for stem in ("", "-suppressed"):
        assert ((tmp_path / f"script{stem}.csv").read_bytes()
                == (tmp_path / f"in-process{stem}.csv").read_bytes())
    rows = subprocess.run([str(EXE), *args, "-o", "-"], capture_output=True, check=True)
    assert rows.stdout == (tmp_path / "in-process.csv").read_bytes()
    assert "released" in rows.stderr.decode()  # the summary table, flushed before the exit


def test_parameters_an_operator_refuses_are_a_usage_error_not_a_crash(tmp_path) -> None:
    """`--delta-t 1e400` passes the option's bounds but the operator refuses infinity: the
    console script says so in one line and exits 2, with no traceback and no output file."""
    src = tmp_path / "in.csv"
    src.write_text("t,u,a\n1,alice,x\n")
    res = subprocess.run([str(EXE), "z", "--z", "3", "--delta-t", "1e400", str(src), "-o",
                          str(tmp_path / "out.csv")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == "error: delta_t must be a finite number >= 0, got inf"
    assert not (tmp_path / "out.csv").exists()

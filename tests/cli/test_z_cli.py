"""The z and verify commands end to end, through the installed console script and typer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from streamanon.cli import app
from streamanon.data.traces import write_trace, zipf_trace
from streamanon.io import read_records
from streamanon.records import Suppressed
from streamanon.zanon import ZAnonymizer

runner = CliRunner()


def trace(tmp_path: Path, n: int = 3000, levels: int = 3) -> Path:
    return write_trace(tmp_path / "trace.csv", zipf_trace(n, n_users=80, n_values=300,
                                                         levels=levels, seed=7))


def test_z_writes_what_the_operator_publishes(tmp_path):
    src = trace(tmp_path)
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["z", "--z", "4", "--delta-t", "1800", str(src), "-o", str(out),
                              "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    op = ZAnonymizer(z=4, delta_t=1800)
    expected = [(r.t, r.u, r.a) for rec in read_records(src) for r in op.process(rec)
                if not isinstance(r, Suppressed)]
    got = [(r.t, r.u, r.a) for r in read_records(out)]
    assert got == expected
    assert summary["params"] == {"z": 4, "delta_t": 1800.0, "input": str(src)}
    assert summary["read"] == 3000 == summary["released"] + summary["suppressed"]
    assert summary["released"] == len(expected)
    assert sum(summary["released_per_level"].values()) == len(expected)
    assert summary["balanced"] is True


def test_verify_accepts_and_then_catches_a_leak(tmp_path):
    src = trace(tmp_path)
    out = tmp_path / "out.csv"
    assert runner.invoke(app, ["z", "--z", "5", "--delta-t", "600", str(src), "-o",
                               str(out)]).exit_code == 0
    ok = runner.invoke(app, ["verify", "z", "--z", "5", "--delta-t", "600", str(src), str(out),
                             "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["ok"] is True
    # leak: publish every input tuple at its finest level
    bad = runner.invoke(app, ["verify", "z", "--z", "5", "--delta-t", "600", str(src),
                              str(src)])
    assert bad.exit_code == 1
    assert "counterexample:" in bad.stderr and "distinct user(s)" in bad.stderr


def test_on_error_fail_names_the_line(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("t,u,a\n1,a,x\n2,b\n3,c,x\n")
    res = runner.invoke(app, ["z", "--z", "1", "--delta-t", "10", str(src), "-o",
                              str(tmp_path / "o.csv")])
    assert res.exit_code == 2
    assert "in.csv:3: expected 3 comma-separated fields, got 2" in res.stderr


def test_on_error_skip_accounts_for_everything(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("t,u,a\n1,a,x\n2,b\n3,c,x\nnan,d,x\n2.5,e,x\n4,f,x\n")
    out = tmp_path / "o.csv"
    res = runner.invoke(app, ["z", "--z", "2", "--delta-t", "10", str(src), "-o", str(out),
                              "--on-error", "skip", "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert (s["read"], s["rejected"]) == (6, 3)
    assert s["read"] == s["released"] + s["suppressed"] + s["rejected"]
    rejects = [json.loads(x) for x in Path(f"{out}.rejects.jsonl").read_text().splitlines()]
    assert [r["line"] for r in rejects] == [3, 5, 6]
    assert "time goes backwards" in rejects[2]["reason"]


def test_adaptive_option_reports_its_z(tmp_path):
    src = trace(tmp_path, n=4000, levels=1)
    res = runner.invoke(app, ["z", "--z", "10", "--delta-t", "3600", "--adaptive", "--pk",
                              "0.5", "--rate", "1800", str(src), "-o",
                              str(tmp_path / "o.csv"), "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["params"]["adaptive"] is True and s["z_updates"] >= 1
    assert s["read"] == s["released"] + s["suppressed"]


def test_console_script_stdin_to_stdout(tmp_path):
    exe = Path(sys.executable).with_name("streamanon")
    data = "t,u,a\n1,a,x\n2,b,x\n3,c,y\n"
    res = subprocess.run([str(exe), "z", "--z", "2", "--delta-t", "10", "-"], input=data,
                         capture_output=True, text=True, check=True)
    assert res.stdout == "t,u,a\n2,b,x\n"
    assert "released" in res.stderr


def test_help_teaches():
    res = runner.invoke(app, ["z", "--help"])
    assert res.exit_code == 0
    for word in ("--z", "--delta-t", "--on-error", "--json", "streamanon z --z 5"):
        assert word in res.stdout


def test_json_summary_carries_the_old_keys_with_the_same_values(tmp_path):
    """One release of deprecated aliases: ``published`` beside ``released`` (and the per-level
    counts), same numbers, in ``--json`` and ``--summary FILE``; the table shows the new word
    only."""
    src = trace(tmp_path)
    summary_file = tmp_path / "summary.json"
    res = runner.invoke(app, ["z", "--z", "4", "--delta-t", "1800", str(src), "-o",
                              str(tmp_path / "out.csv"), "--json", "--summary",
                              str(summary_file)])
    assert res.exit_code == 0, res.output
    for summary in (json.loads(res.stdout), json.loads(summary_file.read_text())):
        assert summary["released"] == summary["published"] > 0
        assert summary["released_per_level"] == summary["published_per_level"]
        assert summary["read"] == summary["released"] + summary["suppressed"]
    table = subprocess.run([str(Path(sys.executable).with_name("streamanon")), "z", "--z", "4",
                            "--delta-t", "1800", str(src), "-o", str(tmp_path / "out2.csv")],
                           capture_output=True, text=True, check=True).stderr
    assert "released" in table and "published" not in table

"""``streamanon pki init``, ``cluster up`` (real processes), ``ce export``, then the
independent ``verify z --privacy-only`` on what the cluster left in its workdir."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from typer.testing import CliRunner

from streamanon.cli import app

runner = CliRunner()


def test_pki_init_then_refuses_to_overwrite(tmp_path):
    res = runner.invoke(app, ["pki", "init", str(tmp_path / "pki"), "--gateways", "3",
                              "--json"])
    assert res.exit_code == 0, res.output
    files = json.loads(res.stdout)["certificates"]
    assert sorted(files) == ["ca", "ca_key", "ce", "ce_mix_key", "crl", "gw0", "gw1", "gw2",
                            "monitor"]
    assert not (tmp_path / "pki" / "ca.key").exists()  # kept apart: pki-ca/
    res = runner.invoke(app, ["pki", "init", str(tmp_path / "pki"), "--gateways", "3"])
    assert res.exit_code == 2 and "exists" in res.output
    res = runner.invoke(app, ["pki", "init", str(tmp_path / "s2"), "--gateways", "2",
                              "--ca-dir", str(tmp_path / "s2" / "ca")])
    assert res.exit_code == 2 and "must not be inside" in res.output


def test_cluster_init_carries_the_publication_options_into_every_config(tmp_path):
    import tomllib

    args = ["cluster", "init", "--gateways", "3", "--workdir", str(tmp_path / "site")]
    res = runner.invoke(app, [*args, "--publication", "mix", "--publication-order", "random"])
    assert res.exit_code == 0, res.output
    for name in ("cluster", "gw0", "gw1", "gw2"):
        text = (tmp_path / "site" / f"{name}.toml").read_text()
        conf = tomllib.loads(text)
        found = [(k, v) for k, v in _walk(conf) if k in ("publication", "publication_order")]
        assert sorted(found) == [("publication", "mix"), ("publication_order", "random")], name
    res = runner.invoke(app, [*args[:-1], str(tmp_path / "other"), "--publication", "carrier"])
    assert res.exit_code == 2 and "publication must be one of" in res.output


def _walk(conf):
    for key, value in conf.items():
        if isinstance(value, dict):
            yield from _walk(value)
        else:
            yield key, value


def test_cluster_up_runs_stops_by_itself_and_leaves_its_files(tmp_path):
    work = tmp_path / "run"
    up = subprocess.Popen(
        [sys.executable, "-m", "streamanon", "cluster", "up", "--gateways", "3", "--period",
         "0.4", "--cycles", "8", "--z", "3", "--max-sn", "10", "--workdir", str(work),
         "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # while it runs, `cluster status` reads every daemon's metrics (mutual TLS)
    end = time.time() + 90
    while not (work / "clock.t0").exists() and up.poll() is None and time.time() < end:
        time.sleep(0.1)
    time.sleep(1.5)
    res = runner.invoke(app, ["cluster", "status", "--workdir", str(work), "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["daemon"]: r for r in json.loads(res.stdout)}
    assert sorted(rows) == ["ce", "gw0", "gw1", "gw2"]
    assert all(r["state"] == "up" for r in rows.values()), rows
    assert rows["gw0"]["peers_up"] == 2 and rows["gw1"]["readings_ok"] > 0
    out, err = up.communicate(timeout=150)
    assert up.returncode == 0, err[-2000:]
    summary = json.loads(out)
    assert summary["z_check"]["ok"] and summary["published"] > 0
    assert set(summary["exit_codes"].values()) == {0}
    for name in ("ce.sqlite", "measurements.csv", "published.csv", "logs/ce.log",
                 "logs/gw0.log", "logs/replay.log", "pki/ca.crt", "gw2.toml", "ce.toml",
                 "ca/ca.key", "run.json"):
        assert (work / name).exists(), name
    # a second run in the same workdir is refused (exit 2) rather than mixing two runs
    again = subprocess.run(
        [sys.executable, "-m", "streamanon", "cluster", "up", "--gateways", "3", "--period",
         "0.4", "--cycles", "8", "--workdir", str(work)], capture_output=True, text=True,
        timeout=60)
    assert again.returncode == 2 and "--force" in again.stderr, again.stderr
    assert "WARNING" not in (work / "logs" / "gw0.log").read_text().split("stopping")[-1]
    res = runner.invoke(app, ["cluster", "status", "--workdir", str(work), "--once"])
    assert res.exit_code == 1  # every daemon is down now
    measured = (work / "measurements.csv").read_text().splitlines()
    assert measured[0] == "t,u,a" and len(measured) > 8 * 3
    res = runner.invoke(app, ["ce", "export", "--config", str(work / "ce.toml"), "-o",
                              str(tmp_path / "again.csv"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"] == summary["published"]
    assert sorted((tmp_path / "again.csv").read_text().splitlines()) == sorted(
        (work / "published.csv").read_text().splitlines())
    res = runner.invoke(app, ["verify", "z", str(work / "measurements.csv"),
                              str(work / "published.csv"), "--z", "3", "--delta-t", "7260",
                              "--privacy-only", "--json"])
    assert res.exit_code == 0, res.output


def test_cluster_up_resumes_and_stops_in_order_on_ctrl_c(tmp_path):
    """`--resume` goes on at the cycle after the last one; Ctrl-C (SIGINT) stops every
    process in order, exports what the CE holds and exits 130."""
    work = tmp_path / "run"
    first = subprocess.run(
        [sys.executable, "-m", "streamanon", "cluster", "up", "--gateways", "3", "--period",
         "0.3", "--cycles", "4", "--max-sn", "8", "--workdir", str(work), "--json"],
        capture_output=True, text=True, timeout=150)
    assert first.returncode == 0, first.stderr[-2000:]
    assert json.loads((work / "run.json").read_text())["next_cycle"] == 4
    rows_before = len((work / "measurements.csv").read_text().splitlines())
    # another z than the earlier run's is refused before anything starts (the CE's rows were
    # published under z 3; the final check would report violations that are not ones)
    other = runner.invoke(app, ["cluster", "up", "--gateways", "3", "--z", "4", "--max-sn",
                                "8", "--workdir", str(work), "--resume"])
    assert other.exit_code == 2, other.output
    assert "z 3 -> 4" in other.output and "--force" in other.output
    assert len((work / "measurements.csv").read_text().splitlines()) == rows_before
    up = subprocess.Popen(
        [sys.executable, "-m", "streamanon", "cluster", "up", "--gateways", "3", "--period",
         "0.3", "--max-sn", "8", "--workdir", str(work), "--resume", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.time() + 90
    while up.poll() is None and time.time() < end:
        lines = (work / "measurements.csv").read_text().splitlines()
        if len(lines) > rows_before + 20:
            break
        time.sleep(0.1)
    up.send_signal(signal.SIGINT)
    out, err = up.communicate(timeout=60)
    assert up.returncode == 130, err[-2000:]
    assert "stopped by Ctrl-C" in err and "--resume" in err
    summary = json.loads(out)
    assert summary["interrupted"] and summary["cycles"][0] == 4
    assert set(summary["exit_codes"].values()) == {0}  # stopped, not killed
    times = [int(line.split(",")[0]) for line in
             (work / "measurements.csv").read_text().splitlines()[1:]]
    assert min(times[rows_before - 1:]) >= 4 * 900  # the resumed run went on at cycle 4
    assert summary["z_check"]["ok"]


def test_cluster_up_on_postgresql_and_force_clears_the_earlier_run(tmp_path, pg_database):
    work = tmp_path / "run"
    cmd = [sys.executable, "-m", "streamanon", "cluster", "up", "--gateways", "3", "--period",
           "0.3", "--cycles", "4", "--max-sn", "8", "--workdir", str(work), "--store",
           pg_database, "--json"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    assert first.returncode == 0, first.stderr[-2000:]
    summary = json.loads(first.stdout)
    assert summary["published"] > 0 and summary["z_check"]["ok"]
    assert "***" in summary["ce_store"] and pg_database not in first.stdout  # no password
    refused = subprocess.run([*cmd[:-1]], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "rows in the PostgreSQL store" in refused.stderr
    second = subprocess.run([*cmd, "--force"], capture_output=True, text=True, timeout=150)
    assert second.returncode == 0, second.stderr[-2000:]
    again = json.loads(second.stdout)
    measured = (work / "measurements.csv").read_text().splitlines()[1:]
    published = (work / "published.csv").read_text().splitlines()[1:]
    assert again["published"] == len(published) <= len(measured)  # this run's rows only
    assert set(published) <= set(measured)

"""Both jobs on a real standalone Flink cluster: a JobManager and two TaskManagers (separate
JVMs started by the distribution's ``start-cluster.sh`` on loopback), jobs submitted with
``flink run -pym streamanon.flink``; the keyed operators must run on both TaskManagers, both
subtasks doing work (two CASTLE partitions, one per subtask), and the outputs must be what the
pure-Python commands give (z byte for byte; CASTLE per partition).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from streamanon.castle import RuleSet
from streamanon.cli.zanon import run_z
from streamanon.data import ashrae
from streamanon.data.traces import write_trace, zipf_trace
from streamanon.io.rows import read_rows
from streamanon.verify.castle import check_castle
from streamanon.zanon import ZAnonymizer
from tests.flink.conftest import require_flink
from tests.flink.test_castle_job import PARAMS, pure_per_partition

require_flink()
pytestmark = pytest.mark.flink


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from streamanon.flink.standalone import StandaloneCluster

    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), taskmanagers=2) as running:
        jvms = running.pids()
        assert len(jvms) == 3  # the JobManager and two TaskManagers
        yield running
    assert not any(Path(f"/proc/{pid}").exists() for pid in jvms), "the cluster did not stop"


def submit(cluster, args: list[str], keyed: str) -> dict:
    """Run a job on the cluster; its summary. The keyed operator (vertex name ``keyed...``)
    must have run on both TaskManagers, each subtask reading batches (work was shared)."""
    from streamanon.flink.standalone import job_id_of

    proc = cluster.submit([*args, "--json"])
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    job = job_id_of(proc.stdout + proc.stderr)
    assert job is not None, proc.stdout[-2000:]
    tms = next(v for k, v in cluster.taskmanagers_of(job).items() if k.startswith(keyed))
    records = next(v for k, v in cluster.records_in(job).items() if k.startswith(keyed))
    assert len(tms) == 2 and len(records) == 2 and min(records) > 0, (tms, records)
    return json.loads(next(x for x in reversed(proc.stdout.splitlines())
                           if x.startswith("{")))


def test_z_job_on_two_taskmanagers_equals_streamanon_z(cluster, tmp_path):
    trace = write_trace(tmp_path / "trace.csv", zipf_trace(20_000, n_users=300,
                                                            n_values=2000, levels=3, seed=6))
    pure = tmp_path / "pure.csv"
    run_z(trace, pure, ZAnonymizer(z=3, delta_t=600))
    out = tmp_path / "flink.csv"
    summary = submit(cluster, ["z", "--z", "3", "--delta-t", "600", "-p", "2", str(trace),
                               "-o", str(out), "--batch-size", "4000", "--work-dir",
                               str(tmp_path / "work")], keyed="z-anonymity")
    assert out.read_bytes() == pure.read_bytes()
    assert summary["read"] == 20_000 and summary["balanced"]


def test_castle_job_on_two_taskmanagers_is_castle_per_partition(cluster, tmp_path):
    data = ashrae.write_csv(tmp_path / "ashrae.csv", ashrae.generate(2000, seed=3))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    out = tmp_path / "released.csv"
    summary = submit(cluster, [
        "castle", str(data), "--rules", str(rules), "-p", "2", "--partitions", "2",
        *(x for k, v in PARAMS.items() for x in (f"--{k}", str(v))), "-o", str(out),
        "--work-dir", str(tmp_path / "work")], keyed="CASTLE")
    assert Counter(out.read_text().splitlines()[1:]) == pure_per_partition(data, rules,
                                                                           tmp_path)
    rs = RuleSet.load(rules)
    report = check_castle(read_rows(out), rs.id_field, rs.quasi_identifiers, rs.sensitive,
                          k=PARAMS["k"], l=PARAMS["l"], inputs=read_rows(data))
    assert report.ok, report.first_problem
    assert summary["read"] == 2000 and summary["released"] == report.rows > 0

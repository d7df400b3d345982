"""Both jobs on a real standalone Flink cluster: a JobManager and two TaskManagers (separate
JVMs started by the distribution's ``start-cluster.sh`` on loopback), jobs submitted with
``flink run -pym streamanon.flink``; the keyed operators must run on both TaskManagers, both
subtasks doing work (two CASTLE partitions, one per subtask), and the outputs must be what the
pure-Python commands give (z byte for byte; CASTLE per partition).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
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


# -- a TaskManager killed mid-run (Kafka -> Kafka, --restarts) ------------------------------------
# The kill tests end with as many TaskManagers as they found (a new one replaces the killed one),
# so they may run in any order after the tests above.

def kill_taskmanager_mid_run(cluster, args: list[str], bootstrap: str, out: str, work: Path,
                             *, min_written: int) -> tuple[subprocess.Popen[str], int, str]:
    """Start a spare TaskManager (the restarted job needs a free slot at once: one slot per
    TaskManager, and a restart that finds none fails) while a Kafka job with ``--restarts``
    is submitted; once ``min_written`` messages are in ``out[0]`` and a checkpoint completed
    after that, SIGKILL the TaskManager that runs the job's Kafka sink at a moment the output
    topic is growing. Returns the still running ``flink run``, the messages in ``out[0]`` at
    the kill and the job's id."""
    from tests.kill_and_compare import topic_end, wait_for_checkpoint_after_output

    with ThreadPoolExecutor(1) as pool:
        spare = pool.submit(cluster.start_taskmanager)  # (it waits for its registration)
        proc = cluster.launch(args)
        try:
            spare.result()  # registered (or its error raised) before any kill
        except BaseException:
            proc.kill()
            raise

    def alive() -> str | None:
        return None if proc.poll() is None else "".join(proc.communicate())[-3000:]

    written = topic_end(bootstrap, out)
    wait_for_checkpoint_after_output(alive, work, written, min_written=min_written,
                                     timeout=120, growing=True)
    (job,) = cluster.running_jobs()
    tm = sorted(next(v for k, v in cluster.taskmanagers_of(job).items() if "kafka sink" in k))[0]
    pid = cluster.taskmanager_pid(tm)
    assert pid is not None, tm
    os.kill(pid, signal.SIGKILL)
    return proc, written(), job


def finished(proc: subprocess.Popen[str]) -> dict:
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, (stdout + stderr)[-3000:]
    return json.loads(next(x for x in reversed(stdout.splitlines()) if x.startswith("{")))


def failovers(cluster, job: str) -> list[str]:
    """The exceptions the job recovered from (it restarted once per entry)."""
    return [e["exceptionName"] for e in
            cluster.rest(f"/jobs/{job}/exceptions")["exceptionHistory"]["entries"]]


def test_flink_z_kafka_survives_a_killed_taskmanager_exactly_once(cluster, kafka_broker,
                                                                  tmp_path):
    """``flink z -p 2 --restarts 3`` kafka -> kafka on the cluster; the TaskManager writing
    the output SIGKILLed while the output grows: the job restarts from its latest checkpoint
    inside the same command, and the output holds the pure command's messages, each once."""
    from tests.flink.test_kafka_connector import per_user, tagged
    from tests.kill_and_compare import assert_each_message_once, start_pure
    from tests.pipeline.kafka.conftest import produce, z_trace

    b = kafka_broker
    (inp,) = b.topics("in")
    out, pure_out = b.names("flink", "pure")
    produce(b.bootstrap, inp, z_trace(40_000, seed=11))
    work = tmp_path / "work"
    common = ["--z", "3", "--delta-t", "30", "--until-end"]
    reference = start_pure(b, "z", inp, pure_out, *common)  # (runs while the job runs)
    # paced (the barrier of a checkpoint waits behind the records buffered before the
    # reading step) so that checkpoints complete while the output grows
    proc, at_kill, job = kill_taskmanager_mid_run(cluster, [
        "z", b.url(inp), "-o", b.url(out), *common, "-p", "2", "--restarts", "3",
        "--checkpoint-interval", "300", "--batch-ms", "20", "--batch-size", "500",
        "--pace", "0.0002", "--work-dir", str(work), "--json"], b.bootstrap, out, work,
        min_written=300)
    s = finished(proc)
    assert failovers(cluster, job), "the job did not restart"
    ref = reference()
    got, want = tagged(b.bootstrap, out), tagged(b.bootstrap, pure_out)
    assert_each_message_once(got, want, ref, at_kill)  # 0 repeats, 0 missing
    assert per_user(got) == per_user(want)
    assert (s["read"], s["released"]) == (40_000, ref["released"])
    assert s["params"]["delivery"] == "exactly-once"


def test_flink_castle_kafka_survives_a_killed_taskmanager_exactly_once(cluster, kafka_broker,
                                                                       tmp_path):
    """As the z test, for ``flink castle -p 1 --restarts 3`` (releases and suppressed rows):
    both topics hold the pure command's messages once, and the releases pass ``verify
    castle``."""
    from tests.flink.test_kafka_connector import tagged
    from tests.kill_and_compare import (
        assert_each_message_once,
        assert_suppressed_once,
        castle_topic,
        start_pure,
        verify_castle_releases,
    )

    b = kafka_broker
    data, rules, header, inp = castle_topic(b, tmp_path, 6000, seed=8)
    out, sup, pure_out, pure_sup = b.names("flink", "fsup", "pure", "psup")
    common = ["--rules", str(rules), "--k", "4", "--l", "2", "--delta", "60", "--until-end"]
    reference = start_pure(b, "castle", inp, pure_out, *common, suppressed=pure_sup)
    work = tmp_path / "work"
    proc, at_kill, job = kill_taskmanager_mid_run(cluster, [
        "castle", b.url(inp), "-o", b.url(out), "--suppressed", b.url(sup), "-p", "1",
        "--restarts", "3", "--checkpoint-interval", "300", "--batch-ms", "20",
        "--batch-size", "100", "--pace", "0.004", "--work-dir", str(work), *common,
        "--json"], b.bootstrap, out, work, min_written=200)
    s = finished(proc)
    assert failovers(cluster, job), "the job did not restart"
    ref = reference()
    got, want = tagged(b.bootstrap, out), tagged(b.bootstrap, pure_out)
    assert_each_message_once(got, want, ref, at_kill)
    got_sup, want_sup = tagged(b.bootstrap, sup), tagged(b.bootstrap, pure_sup)
    assert_suppressed_once(got_sup, want_sup)
    assert s["params"]["delivery"] == "exactly-once"
    verify_castle_releases(tmp_path, header, [v for _, v in got], rules, data)

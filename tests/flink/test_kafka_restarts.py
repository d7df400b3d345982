"""``streamanon flink z --restarts 1`` from a topic to a topic, with a real SIGKILL of a task
process (a Python worker of ``--mode process``) while output is being written: Flink restarts
the job from its latest checkpoint inside the one command, and the output holds the pure
run's messages, each once. One mini-cluster job with a restart (~60-90 s)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.flink.conftest import require_flink
from tests.pipeline.kafka.conftest import (
    EXE,
    produce,
    require_kafka,
    summary_of,
    z_trace,
)

require_flink()
require_kafka()

pytestmark = [pytest.mark.flink, pytest.mark.kafka]


def python_workers(session: int) -> dict[int, str]:
    """``{pid: command line}`` of the PyFlink Python workers in process group ``session``."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # the process ended meanwhile
        pgid = int(stat.rsplit(")", 1)[1].split()[2])
        if pgid == session and "fn_execution" in cmd:
            out[int(entry.name)] = cmd
    return out


def test_flink_z_kafka_restarts_after_a_task_process_is_killed_mid_output(kafka_broker,
                                                                           tmp_path):
    from streamanon.pipeline.kafka.client import end_offsets
    from tests.flink.conftest import STREAMANON, completed_checkpoints
    from tests.flink.test_kafka_connector import per_user, tagged

    b = kafka_broker
    (inp,) = b.topics("in")
    out, pure_out = b.names("flink", "pure")
    produce(b.bootstrap, inp, z_trace(20_000, seed=11))
    work = tmp_path / "work"
    args = ["flink", "z", b.url(inp), "-o", b.url(out), "--z", "3", "--delta-t", "30",
            "--until-end", "-p", "1", "--mode", "process", "--restarts", "1",
            "--checkpoint-interval", "300", "--batch-ms", "20", "--batch-size", "500",
            "--pace", "0.0005", "--work-dir", str(work), "--json"]
    proc = subprocess.Popen([*STREAMANON, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    delay = random.Random(11).uniform(0.0, 1.0)
    baseline: int | None = None
    deadline = time.monotonic() + 240
    try:
        while True:  # output written, then a checkpoint after it, then a random moment
            assert proc.poll() is None, "the job ended before the kill: " + proc.stderr.read()
            assert time.monotonic() < deadline, "no checkpoint after output in time"
            done = max(completed_checkpoints(work), default=0)
            try:  # (the topic appears when the job starts)
                written = end_offsets(b.bootstrap, out, [0])[0]
            except Exception:
                written = 0
            if baseline is None and written >= 300:
                baseline = done
            elif baseline is not None and done > baseline:
                break
            time.sleep(0.1)
        time.sleep(delay)
        workers = python_workers(proc.pid)
        assert workers, "no Python worker process found"
        at_kill = end_offsets(b.bootstrap, out, [0])[0]
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        # the restart inside the command starts new workers (same job, same command)
        restarted: set[int] = set()
        while proc.poll() is None and not restarted and time.monotonic() < deadline + 120:
            restarted = set(python_workers(proc.pid)) - set(workers)
            time.sleep(0.2)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, stderr[-3000:]
    s = summary_of(subprocess.CompletedProcess(args, 0, stdout, stderr))
    ref = summary_of(subprocess.run([str(EXE), "z", b.url(inp), "-o", b.url(pure_out),
                                     "--from", "earliest", "--z", "3", "--delta-t", "30",
                                     "--until-end", "--json"], capture_output=True, text=True,
                                    timeout=120))
    got, want = tagged(b.bootstrap, out), tagged(b.bootstrap, pure_out)
    # the kill landed mid-output, and the restarted job dropped its replay: 0 repeats,
    # 0 missing, the pure run's messages as a multiset, one user's records in input order
    assert 0 < at_kill < len(want), (at_kill, len(want))
    assert Counter(got) == Counter(want), (delay, at_kill, len(got), len(want))
    assert len(got) == len(set(got)) == ref["released"]
    assert per_user(got) == per_user(want)
    assert restarted, "no new Python worker after the kill: the job did not restart"
    assert s["params"]["delivery"] == "exactly-once"
    assert 0 <= s.get("reconfirmed_outputs", 0) <= at_kill  # the dropped replay

"""Exactly-once with real kills through the real CLI: SIGKILL ``streamanon z|castle`` at chosen
points (between a produce and a checkpoint, inside a checkpoint, after one) and from outside,
run the same command again, and compare every output (topics and files) with one
uninterrupted run; stop and restart the broker mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.pipeline.kafka.conftest import (
    EXE,
    produce,
    read_topic,
    require_kafka,
    summary_of,
    z_trace,
)

require_kafka()

pytestmark = pytest.mark.kafka

# where the process kills itself (streamanon.pipeline.kafka.exactly_once.CRASH_ENV): POINT:N =
# the N-th time this process gets there; each run resumes where the previous one died (the
# runs checkpoint after every batch, so that each point is a few batches into a run)
KILL_POINTS = ["batch:2", "produce:3", "snapshot:2", "checkpoint:3", "batch:5"]


def _run(args: list[str], env: dict[str, str] | None = None, timeout: float = 120
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _output_count(bootstrap: str, topic: str) -> int:
    from streamanon.pipeline.kafka.admin import topic_partitions
    from streamanon.pipeline.kafka.client import end_offsets

    parts = topic_partitions(f"kafka://{bootstrap}/{topic}")
    return 0 if parts is None else sum(end_offsets(bootstrap, topic, parts).values())


def _run_with_kills(args: list[str], bootstrap: str, watch: str, more: int
                    ) -> tuple[dict, int, str]:
    """One run per kill point (the process kills itself there), one killed from outside once
    ``watch`` holds ``more`` messages more than at its start (wherever the run then is),
    then one to the end. Returns the last summary, how many runs died by SIGKILL (the one
    from outside may finish first), and the last run's stderr."""
    killed = 0
    for point in KILL_POINTS:
        proc = _run(args, {"STREAMANON_CRASH_AT": point})
        assert proc.returncode == -signal.SIGKILL, (point, proc.returncode, proc.stderr[-2000:])
        killed += 1
    base = _output_count(bootstrap, watch)
    p = subprocess.Popen([str(EXE), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.monotonic() + 60
    while p.poll() is None and _output_count(bootstrap, watch) < base + more:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    if p.poll() is None:
        p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    killed += p.returncode == -signal.SIGKILL
    final = _run(args)
    assert final.returncode == 0, final.stderr[-3000:]
    return summary_of(final), killed, final.stderr


def test_z_exactly_once_across_sigkills(kafka_broker, tmp_path):
    """Two input partitions, rejects to a file: every output equals one uninterrupted run's."""
    from streamanon.pipeline import KafkaOptions, run_z
    from streamanon.zanon import ZAnonymizer

    b = kafka_broker
    trace = z_trace(30_000, seed=11)
    users = [int(v.split(b",")[1][1:]) for v in trace]
    times = [int(float(v.split(b",")[0]) * 1000) for v in trace]
    for i in (100, 15_000, 23_333):  # bad messages: rejects are exactly-once too
        trace[i] = b"oops"
    (inp,) = b.topics("in", partitions=2)
    produce(b.bootstrap, inp, trace, partitions=[u % 2 for u in users], timestamps=times)

    ref_out = b.names("ref")[0]
    ref = run_z(b.url(inp), b.url(ref_out), ZAnonymizer(z=3, delta_t=20), on_error="skip",
                rejects_path=tmp_path / "ref-rejects.jsonl",
                kafka=KafkaOptions(until_end=True, log=lambda s: None))
    out = b.names("out")[0]
    rejects = tmp_path / "rejects.jsonl"
    args = ["z", "--z", "3", "--delta-t", "20", b.url(inp), "-o", b.url(out), "--rejects",
            str(rejects), "--on-error", "skip", "--until-end", "--batch-size", "500",
            "--checkpoint-every", "0", "--json"]
    final, killed, err = _run_with_kills(args, b.bootstrap, out, 2000)
    assert killed >= 5
    assert final["delivery"]["resumed_from_checkpoint"] is not None
    assert "resuming from checkpoint" in err
    got, want = read_topic(b.bootstrap, out), read_topic(b.bootstrap, ref_out)
    assert set(got) == {0, 1} and got == want  # values and headers, same order per partition
    assert rejects.read_bytes() == (tmp_path / "ref-rejects.jsonl").read_bytes()
    for key in ("read", "released", "suppressed", "rejected"):  # the accounting adds up
        assert final[key] == getattr(ref, key), key
    assert final["read"] == 30_000 and final["rejected"] == 3 and final["balanced"]
    assert sum(len(v) for v in got.values()) == final["released"]


@pytest.mark.parametrize("split", ["window", "prink"])
def test_castle_exactly_once_across_sigkills(kafka_broker, tmp_path, split):
    """Released rows to a file, suppressed rows to a topic; the held tuples, τ history and
    remembered classes (the window release, the default) or CASTLE's open clusters and Ω
    (the Prink split) come back from the checkpoint (the outputs could not match otherwise)."""
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.pipeline import run_castle
    from tests.kill_and_compare import castle_topic

    b = kafka_broker
    data, rules, _, inp = castle_topic(b, tmp_path, 4000, seed=3)
    ref = run_castle(data, tmp_path / "ref.csv",
                     CastleAnonymizer(RuleSet.load(rules), k=4, l=2, delta=200, split=split),
                     suppressed_path=tmp_path / "ref-sup.csv")
    out, sup = tmp_path / "out.csv", b.names("sup")[0]
    args = ["castle", "--rules", str(rules), "--k", "4", "--l", "2", "--delta", "200",
            b.url(inp), "-o", str(out), "--suppressed", b.url(sup), "--until-end",
            "--batch-size", "150", "--checkpoint-every", "0", "--split", split, "--json"]
    final, killed, _ = _run_with_kills(args, b.bootstrap, sup, 2)
    assert killed >= 5
    assert out.read_bytes() == (tmp_path / "ref.csv").read_bytes()
    want_sup = (tmp_path / "ref-sup.csv").read_bytes().splitlines()[1:]
    assert [v for v, _ in read_topic(b.bootstrap, sup)[0]] == want_sup
    assert want_sup or split == "window"  # (the window release suppresses none of these)
    for key in ("read", "released", "suppressed", "rejected", "clusters_released"):
        assert final[key] == (ref.details[key] if key == "clusters_released" else
                              getattr(ref, key)), key
    assert final["balanced"] and "held" not in final and final["read"] == 4000


def _committed(bootstrap: str, group: str, topic: str) -> int:
    """The offset the run's consumer group committed (after each of its checkpoints)."""
    from confluent_kafka import Consumer, TopicPartition

    from streamanon.pipeline.kafka.connection import quiet_logs

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **quiet_logs()})
    try:
        return max(0, c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        c.close()


def _scan(bootstrap: str, topic: str, timeout: float = 60) -> list[tuple[bytes, dict]]:
    """Partition 0 read from offset 0 to the end the fetch reports (Tansu on S3 answers
    nothing to a fetch that starts inside a batch written before a restart, so
    ``read_topic``'s short cut to the end cannot be used after one)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from streamanon.pipeline.kafka.connection import quiet_logs

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "scan",
                  "enable.partition.eof": True, **quiet_logs()})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes, dict]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in c.consume(10_000, 0.2):
            if m.error() is None:
                out.append((m.value(), dict(m.headers() or [])))
            elif m.error().code() == KafkaError._PARTITION_EOF:
                c.close()
                return out
    raise TimeoutError(topic)


def test_the_broker_stopped_and_restarted_mid_run(tmp_path):
    """A live pipeline while its broker process stops (S3 storage keeps the data) and starts
    again on another address: the run says so on stderr, waits, and goes on; its output is
    the file path's output for the whole stream, no loss, no duplicate.

    The broker is stopped cleanly: killed, this Tansu build loses an acknowledged message on
    S3 storage (a broker that loses acknowledged data breaks assumption A3; a pipeline
    restart detects it as an output shorter than its checkpoint).
    """
    from streamanon.harness.kafka_broker import Broker
    from streamanon.pipeline import run_z
    from streamanon.pipeline.kafka.admin import create_topics
    from streamanon.pipeline.kafka.options import default_group
    from streamanon.zanon import ZAnonymizer

    with Broker(tmp_path / "broker", storage="s3") as broker:
        bs = broker.bootstrap  # every address the broker may move to
        trace = z_trace(60_000, seed=21)
        create_topics(bs, {"in": 1})
        produce(bs, "in", trace[:30_000])
        src = tmp_path / "in.csv"
        src.write_bytes(b"t,u,a\n" + b"\n".join(trace) + b"\n")
        ref = run_z(src, tmp_path / "ref.csv", ZAnonymizer(z=3, delta_t=20))
        p = subprocess.Popen([str(EXE), "z", "--z", "3", "--delta-t", "20", f"kafka://{bs}/in",
                              "-o", f"kafka://{bs}/out", "--batch-size", "500",
                              "--checkpoint-every", "0.2", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def wait_committed(n: int) -> None:
            deadline = time.monotonic() + 90
            while _committed(bs, default_group("z", f"kafka://{bs}/out"), "in") < n:
                if p.poll() is not None:
                    pytest.fail(f"the run stopped (exit {p.returncode}) before {n} committed: "
                                f"{p.communicate()[1][-3000:]}")
                assert time.monotonic() < deadline
                time.sleep(0.1)

        wait_committed(5_000)
        broker.restart(down_for=2.0)
        produce(bs, "in", trace[30_000:])  # upstream goes on once the broker is back
        wait_committed(60_000)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err[-3000:]
        assert "broker unreachable" in err and "retrying with backoff" in err
        assert "broker back after" in err
        got = json.loads(out.strip().splitlines()[-1])
        assert [v for v, _ in _scan(bs, "out")] == Path(tmp_path / "ref.csv").read_bytes(
        ).splitlines()[1:]
        assert (got["read"], got["released"], got["suppressed"]) == (
            ref.read, ref.released, ref.suppressed)

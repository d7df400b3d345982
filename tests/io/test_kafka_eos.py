"""Exactly-once with real kills: SIGKILL the pipeline process at random points, restart it,
compare the output topics with one uninterrupted run; stop and restart the broker mid-run."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.io.conftest import produce, read_topic, require_kafka, summary_of, z_trace

require_kafka()

pytestmark = pytest.mark.kafka
DRIVER = [sys.executable, "-m", "streamanon.io.kafka_run"]


def _topics(bootstrap, names, partitions):
    from streamanon.io.kafka_broker import create_topics

    create_topics(bootstrap, {n: (partitions if i < 2 else 1) for i, n in enumerate(names)})
    return names


def _run_with_kills(args: list[str], kills: list[tuple[str, float]]) -> tuple[dict, int]:
    """Run ``args`` once per kill point (``("batch", n)``: the process kills itself after
    batch n once its outputs are acknowledged, i.e. between a produce and a checkpoint;
    ``("time", s)``: SIGKILL from outside after s seconds, wherever it is), then to the end.
    Returns the last summary and how many runs were really killed."""
    killed = 0
    for kind, at in kills:
        if kind == "batch":
            proc = subprocess.run([*DRIVER, *args, "--kill-after-batch", str(int(at))],
                                  capture_output=True, text=True, timeout=120)
            rc = proc.returncode
            assert rc in (0, -signal.SIGKILL), proc.stderr[-3000:]
        else:
            p = subprocess.Popen([*DRIVER, *args], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            try:
                p.wait(at)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
            _, err = p.communicate(timeout=60)
            rc = p.returncode
            assert rc in (0, -signal.SIGKILL), err[-3000:]
        killed += rc == -signal.SIGKILL
        if rc == 0:
            break
        assert rc == -signal.SIGKILL, f"run ended with {rc}"
    proc = subprocess.run([*DRIVER, *args], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return summary_of(proc), killed


def _kill_points(seed: int) -> list[tuple[str, float]]:
    rng = random.Random(seed)
    # each run resumes where the last one was killed, so points count from a run's start
    points: list[tuple[str, float]] = [("batch", rng.randrange(1, 8)) for _ in range(4)]
    points += [("time", round(rng.uniform(0.6, 1.1), 2)) for _ in range(3)]
    rng.shuffle(points)
    return points


def test_z_exactly_once_across_sigkills(kafka_broker, topic_names):
    bs = kafka_broker.bootstrap
    trace = z_trace(40_000, seed=11)
    users = [int(v.split(b",")[1][1:]) for v in trace]
    times = [int(float(v.split(b",")[0]) * 1000) for v in trace]
    # a few bad messages, so rejects are exactly-once too
    for i in (100, 15_000, 33_333):
        trace[i] = b"oops"
    inp = _topics(bs, topic_names("in"), 2)[0]
    produce(bs, inp, trace, partitions=[u % 2 for u in users], timestamps=times)

    def args(t: list[str]) -> list[str]:
        return ["z", "--bootstrap", bs, "--input", inp, "--output", t[0], "--rejects", t[1],
                "--progress", t[2], "--z", "3", "--delta-t", "20", "--until-end",
                "--fetch-batch", "500", "--checkpoint-every", "0.05"]

    ref_t = _topics(bs, topic_names("out", "rej", "prog"), 2)
    proc = subprocess.run([*DRIVER, *args(ref_t)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = summary_of(proc)
    crash_t = _topics(bs, topic_names("out", "rej", "prog"), 2)
    final, killed = _run_with_kills(args(crash_t), _kill_points(seed=5))
    assert killed >= 5
    assert final["delivery"]["resumed_from_checkpoint"] is not None
    for a, b in zip(ref_t[:2], crash_t[:2], strict=True):
        want, got = read_topic(bs, a), read_topic(bs, b)
        assert got == want  # byte-identical values and headers, same order per partition
    for key in ("read", "published", "suppressed", "rejected", "balanced"):
        assert final[key] == ref[key], key
    assert final["read"] == 40_000 and final["rejected"] == 3 and final["balanced"]
    assert sum(len(v) for v in read_topic(bs, crash_t[0]).values()) == final["published"]


def test_castle_exactly_once_across_sigkills(kafka_broker, topic_names, tmp_path):
    from streamanon.data import ashrae

    bs = kafka_broker.bootstrap
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(4000, seed=3))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    header, *lines = data.read_bytes().splitlines()
    inp = _topics(bs, topic_names("in"), 1)[0]
    produce(bs, inp, lines)

    def args(t: list[str]) -> list[str]:
        return ["castle", "--bootstrap", bs, "--input", inp, "--output", t[0],
                "--rejects", t[1], "--progress", t[2], "--suppressed", t[3], "--until-end",
                "--rules", str(rules), "--columns", header.decode(), "--k", "4", "--l", "2",
                "--delta", "200", "--fetch-batch", "100", "--checkpoint-every", "0.1"]

    names = ("out", "rej", "prog", "sup")
    ref_t = _topics(bs, topic_names(*names), 1)
    proc = subprocess.run([*DRIVER, *args(ref_t)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = summary_of(proc)
    crash_t = _topics(bs, topic_names(*names), 1)
    final, killed = _run_with_kills(args(crash_t), _kill_points(seed=8))
    assert killed >= 5
    for a, b in ((ref_t[0], crash_t[0]), (ref_t[3], crash_t[3])):
        assert read_topic(bs, b) == read_topic(bs, a)
    for key in ("read", "published", "suppressed", "rejected", "clusters_released"):
        assert final[key] == ref[key], key
    assert final["balanced"] and final["held"] == 0 and final["read"] == 4000


def _scan(bootstrap: str, topic: str, timeout: float = 60) -> list[tuple[bytes, dict]]:
    """Partition 0 read from offset 0 to the end reported by the fetch (Tansu on S3 answers
    nothing to a fetch that starts inside a batch written before a restart, so
    ``read_topic``'s short cut to the end cannot be used after one)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from streamanon.io.kafka_broker import quiet_logs

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "scan",
                  "enable.partition.eof": True, **quiet_logs()})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes, dict]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in c.consume(10_000, 0.5):
            if m.error() is None:
                out.append((m.value(), dict(m.headers() or [])))
            elif m.error().code() == KafkaError._PARTITION_EOF:
                c.close()
                return out
    raise TimeoutError(topic)


def test_broker_stopped_and_restarted_mid_run(tmp_path, topic_names):
    """The broker process goes away for a while (S3 storage keeps its data); the pipeline
    waits, says so on stderr, and finishes with the uninterrupted run's output."""
    from streamanon.io.kafka_broker import Broker

    with Broker(tmp_path / "broker", storage="s3") as broker:
        bs = broker.bootstrap
        trace = z_trace(60_000, seed=21)
        inp = _topics(bs, topic_names("in"), 1)[0]
        produce(bs, inp, trace)

        def args(t: list[str]) -> list[str]:
            return ["z", "--bootstrap", bs, "--input", inp, "--output", t[0], "--rejects",
                    t[1], "--progress", t[2], "--z", "3", "--delta-t", "20", "--until-end",
                    "--fetch-batch", "100", "--checkpoint-every", "0.2"]

        ref_t = _topics(bs, topic_names("out", "rej", "prog"), 1)
        ref = summary_of(subprocess.run([*DRIVER, *args(ref_t)], capture_output=True,
                                        text=True, timeout=120, check=True))
        run_t = _topics(bs, topic_names("out", "rej", "prog"), 1)
        p = subprocess.Popen([*DRIVER, *args(run_t)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(2.0)  # well into the run (600 batches of 100 records take ~5 s here)
        assert p.poll() is None, "the run ended before the broker went away"
        broker.restart(down_for=3.0)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        assert "broker unreachable" in err and "broker back" in err
        got = json.loads(out.strip().splitlines()[-1])
        assert _scan(bs, run_t[0]) == _scan(bs, ref_t[0])
        assert (got["read"], got["published"], got["suppressed"]) == (
            ref["read"], ref["published"], ref["suppressed"])

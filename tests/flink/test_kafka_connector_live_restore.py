"""``streamanon flink z`` live (no ``--until-end``) on a 2-partition topic, SIGKILLed after a
checkpoint, restored and fed more records, on the real broker and the PyFlink mini-cluster
(a file of its own, so that ./dev test's workers can run the connector's long tests side by
side; the other connector tests: test_kafka_connector.py)."""

from __future__ import annotations

import subprocess
from collections import Counter

from tests.flink.conftest import require_flink
from tests.flink.test_kafka_connector import per_user
from tests.kill_and_compare import kill_mid_run
from tests.pipeline.kafka.conftest import (
    EXE,
    cli,
    read_topic,
    require_kafka,
    summary_of,
    write_lines,
    z_trace,
)

require_flink()
require_kafka()


def test_flink_z_live_two_partitions_killed_restored_and_fed_writes_each_message_once(
        kafka_broker, tmp_path):
    """A live job (no ``--until-end``) on a 2-partition topic (one user's records in one
    partition, Kafka timestamps from ``t``), SIGKILLed after a checkpoint mid-stream, restored
    with ``--restore latest`` and fed more records after the restore: once the output holds
    as many messages as the pure command writes for the records a live merge can release,
    each output partition holds exactly the pure command's messages of those records (same
    tag, same text), each once, one user's in input order.

    A live merge holds, until more records come, every record whose key (the running maximum
    Kafka timestamp of its partition) is not below the smallest partition's last key (the
    pure path's rule, :class:`~streamanon.pipeline.kafka.merge.PartitionMerge`): here the
    records at the trace's last time stamps."""
    import os
    import signal
    import time

    from tests.flink.conftest import STREAMANON

    b = kafka_broker
    trace = z_trace(16_000, seed=31)
    first = write_lines(tmp_path / "first.csv", "t,u,a", trace[:12_000])
    later = write_lines(tmp_path / "later.csv", "t,u,a", trace[12_000:])
    inp, out, pure_out = b.names("in", "flink", "pure")
    produce_args = ("--partitions", "2", "--key-column", "u", "--time-column", "t")
    cli("kafka", "produce", str(first), b.url(inp), *produce_args)
    work = tmp_path / "work"
    args = ["flink", "z", b.url(inp), "-o", b.url(out), "--z", "3", "--delta-t", "30",
            "-p", "2", "--checkpoint-interval", "300", "--batch-ms", "20", "--batch-size",
            "500", "--work-dir", str(work)]
    at_kill, delay = kill_mid_run(b.bootstrap, [*args, "--pace", "0.001"], work, out,
                                  seed=31)
    restored = subprocess.Popen([*STREAMANON, *args, "--restore", "latest"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
    try:
        cli("kafka", "produce", str(later), b.url(inp), *produce_args)  # after the restore
        ref = summary_of(subprocess.run([str(EXE), "z", b.url(inp), "-o", b.url(pure_out),
                                         "--from", "earliest", "--z", "3", "--delta-t", "30",
                                         "--until-end", "--json"], capture_output=True,
                                        text=True, timeout=120))
        assert ref["read"] == 16_000
        held = live_merge_holds(read_topic(b.bootstrap, inp))
        want = {q: [(h.get("streamanon-in", b""), v) for v, h in m
                    if h.get("streamanon-in", b"") not in held]
                for q, m in read_topic(b.bootstrap, pure_out).items()}
        expected = sum(len(m) for m in want.values())
        assert 0 < ref["released"] - expected <= 20  # (the tail)
        from streamanon.pipeline.kafka.client import end_offsets

        deadline = time.monotonic() + 240
        while (ends := end_offsets(b.bootstrap, out, [0, 1])) and (
                sum(ends.values()) < expected):
            assert restored.poll() is None, "the restored job ended: " + (
                restored.stderr.read().decode()[-2000:] if restored.stderr else "")
            assert time.monotonic() < deadline, (
                f"the restored job did not catch up in time: {ends}, {ref}, {at_kill}")
            time.sleep(0.2)
        time.sleep(1.0)  # (a repeat written late would show now)
        assert restored.poll() is None  # live: still waiting for more records
    finally:
        os.killpg(restored.pid, signal.SIGKILL)
        restored.wait()
    got = read_topic(b.bootstrap, out)
    assert sorted(got) == sorted(want) == [0, 1]
    for part in (0, 1):
        g = [(h.get("streamanon-in", b""), v) for v, h in got[part]]
        w = want[part]
        assert Counter(g) == Counter(w) and len(g) == len(set(g)), (part, delay, at_kill)
        assert per_user(g) == per_user(w), part
    assert 0 < at_kill < len(want[0])  # the kill came mid-stream
    assert sum(len(m) for m in got.values()) == expected


def live_merge_holds(topic: dict[int, list[tuple[bytes, dict[str, bytes]]]]) -> set[bytes]:
    """The ``partition@offset`` tags of a ``t,u,a`` topic's records (times non-decreasing
    within each partition) that a live merge of its partitions holds: those whose time is not
    below the smallest of the partitions' last times."""
    times = {q: [(off, float(v.split(b",", 1)[0])) for off, (v, _) in enumerate(m)
                 if not v.startswith(b"t,")] for q, m in topic.items()}
    horizon = min(max(t for _, t in recs) for recs in times.values())
    return {f"{q}@{off}".encode() for q, recs in times.items() for off, t in recs
            if t >= horizon}

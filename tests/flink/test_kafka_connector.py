"""``streamanon flink z|castle`` from a topic to topics through Flink's Kafka connector, on the
real broker (Tansu) and the PyFlink mini-cluster: the outputs are the pure commands' outputs
on the same records, every message tagged with its input record, rejections named by
``partition@offset``. Each job costs ~10-20 s (the mini-cluster start)."""

from __future__ import annotations

import contextlib
import subprocess
from collections import Counter

from tests.flink.conftest import require_flink
from tests.pipeline.kafka.conftest import (
    EXE,
    cli,
    produce,
    read_topic,
    require_kafka,
    summary_of,
    write_lines,
    z_trace,
)

require_flink()
require_kafka()


def flink_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(EXE), "flink", *args], capture_output=True, text=True,
                          timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def tagged(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """``(streamanon-in tag, value)`` of every message of a one-partition topic, in order."""
    parts = read_topic(bootstrap, topic)
    assert list(parts) == [0]
    return [(h.get("streamanon-in", b""), v) for v, h in parts[0]]


def per_user(messages: list[tuple[bytes, bytes]]) -> dict[bytes, list[bytes]]:
    """z messages grouped by user, in topic order (the order a user's records keep)."""
    out: dict[bytes, list[bytes]] = {}
    for tag, value in messages:
        out.setdefault(value.split(b",")[1], []).append(tag + b" " + value)
    return out


def test_flink_z_kafka_equals_the_pure_command_per_record(kafka_broker):
    b = kafka_broker
    (inp,) = b.topics("in")
    flink_out, pure_out = b.names("flink", "pure")
    records = z_trace(3000, seed=5)
    records[700] = b"7,u1"  # wrong field count
    records[1500] = b""  # empty
    produce(b.bootstrap, inp, records)
    common = ("--z", "3", "--delta-t", "30", "--on-error", "skip", "--until-end", "--json")
    s = summary_of(flink_cli("z", b.url(inp), "-o", b.url(flink_out), "-p", "2",
                             "--checkpoint-interval", "500", *common))
    ref = summary_of(subprocess.run([str(EXE), "z", b.url(inp), "-o", b.url(pure_out),
                                     "--from", "earliest", *common], capture_output=True,
                                    text=True, timeout=120))
    got, want = tagged(b.bootstrap, flink_out), tagged(b.bootstrap, pure_out)
    # byte-identical per record (same tag, same text), nothing twice, nothing missing
    assert Counter(got) == Counter(want) and len(got) == len(set(got)) == ref["released"]
    # one user's records stay in input order (a user is in one key group: one channel)
    assert per_user(got) == per_user(want)
    assert (s["read"], s["released"], s["suppressed"], s["rejected"]) == (
        ref["read"], ref["released"], ref["suppressed"], ref["rejected"]) == (
        3000, ref["released"], 3000 - 2 - ref["released"], 2)
    rejects = tagged(b.bootstrap, f"{flink_out}.rejects")
    assert rejects == tagged(b.bootstrap, f"{pure_out}.rejects")
    assert [t for t, _ in rejects] == [b"0@700", b"0@1500"]
    # the job's own stream time (first record taken to last output sent) is in the summary,
    # within Flink's net runtime
    assert 0 < s["stream_seconds"] <= s["job_seconds"] and s["stream_tuples_per_second"] > 0


def test_flink_z_kafka_merges_two_partitions_as_the_pure_command(kafka_broker, tmp_path):
    """A topic written by ``kafka produce --partitions 2 --key-column u --time-column t``
    (a header message in each partition, one user's records in one partition, Kafka
    timestamps from ``t``): the Flink job merges its partitions by the pure path's rule, so
    each output partition holds the pure command's messages (same tag, same text), each once,
    and one user's records keep their order."""
    b = kafka_broker
    src = write_lines(tmp_path / "t.csv", "t,u,a", z_trace(5000, seed=27))
    inp, flink_out, pure_out = b.names("in2", "flink2", "pure2")
    cli("kafka", "produce", str(src), b.url(inp), "--partitions", "2", "--key-column", "u",
        "--time-column", "t")
    assert sorted(read_topic(b.bootstrap, inp)) == [0, 1]
    common = ("--z", "3", "--delta-t", "30", "--until-end", "--json")
    work = tmp_path / "work"
    s = summary_of(flink_cli("z", b.url(inp), "-o", b.url(flink_out), "-p", "2",
                             "--checkpoint-interval", "500", "--work-dir", str(work), *common))
    assert_parallel_record_path(work, 2)
    ref = summary_of(subprocess.run([str(EXE), "z", b.url(inp), "-o", b.url(pure_out),
                                     "--from", "earliest", *common], capture_output=True,
                                    text=True, timeout=120))
    got, want = read_topic(b.bootstrap, flink_out), read_topic(b.bootstrap, pure_out)
    assert sorted(got) == sorted(want) == [0, 1]
    released = 0
    for part in (0, 1):
        g = [(h.get("streamanon-in", b""), v) for v, h in got[part]]
        w = [(h.get("streamanon-in", b""), v) for v, h in want[part]]
        assert Counter(g) == Counter(w) and len(g) == len(set(g)), part
        assert per_user(g) == per_user(w), part
        released += len(g)
    assert (s["read"], s["released"], s["suppressed"], s["rejected"]) == (
        ref["read"], ref["released"], ref["suppressed"], ref["rejected"]) == (
        5000, released, 5000 - released, 0)
    assert 0 < released < 5000


def assert_parallel_record_path(work, parallelism: int) -> None:
    """Every step of the job's plan (``WORK/plan.json``, Flink's execution plan) runs at
    ``parallelism``, the Kafka source and the message steps included, but for the one that
    is a single order by its nature: the reading step (the partition merge and the line
    numbering with the time check's clock, one order of the whole input as in the pure
    command); and, in a CASTLE job, the rules' steps, which are not on the record path."""
    import json

    plan = json.loads((work / "plan.json").read_text())
    steps = {n["contents"]: n["parallelism"] for n in plan["nodes"]}
    assert any(name.startswith("Source: kafka") for name in steps), steps
    rules = {"Source: rules files", "check rules", "rule notes", "rule lines"}
    single = {name for name, p in steps.items() if p != parallelism and name not in rules}
    assert single == {"messages to record batches"}, steps
    assert steps["messages to record batches"] == 1
    for name in ("outcomes to messages", "output gate (per output partition)",
                 "split messages"):
        assert steps[name] == parallelism, steps


def test_flink_z_kafka_fails_on_a_bad_message_naming_partition_and_offset(kafka_broker):
    b = kafka_broker
    (inp,) = b.topics("in")
    records = z_trace(200, seed=3)
    records[42] = b"nan,u1,EU"
    produce(b.bootstrap, inp, records)
    proc = flink_cli("z", b.url(inp), "-o", b.url(b.names("out")[0]), "--z", "2",
                     "--delta-t", "10", "--until-end", "-p", "1", check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"{b.url(inp)}[0]@42: time is not a finite number" in proc.stderr, proc.stderr[-2000:]


def test_flink_castle_kafka_equals_the_pure_command_and_verifies(kafka_broker, tmp_path):
    from streamanon.data import ashrae

    b = kafka_broker
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(1500, seed=4))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    header, *lines = data.read_bytes().splitlines()
    (inp,) = b.topics("in")
    flink_out, pure_out, flink_sup, pure_sup = b.names("flink", "pure", "fsup", "psup")
    produce(b.bootstrap, inp, [header, *lines])  # the header as the first message
    common = ("--rules", str(rules), "--k", "4", "--l", "2", "--delta", "60", "--until-end",
              "--json")
    s = summary_of(flink_cli("castle", b.url(inp), "-o", b.url(flink_out), "--suppressed",
                             b.url(flink_sup), "-p", "1", *common))
    ref = summary_of(subprocess.run([str(EXE), "castle", b.url(inp), "-o", b.url(pure_out),
                                     "--suppressed", b.url(pure_sup), "--from", "earliest",
                                     *common], capture_output=True, text=True, timeout=120))
    # one partition: the same releases in the same order, each with its input record's tag
    assert tagged(b.bootstrap, flink_out) == tagged(b.bootstrap, pure_out)
    assert tagged(b.bootstrap, flink_sup) == tagged(b.bootstrap, pure_sup)
    assert (s["read"], s["released"], s["suppressed"]) == (
        ref["read"], ref["released"], ref["suppressed"]) and s["read"] == 1500
    # the topic's rows under the header pass the independent checker
    released = tmp_path / "released.csv"
    released.write_bytes(header + b"\n" + b"".join(
        v + b"\n" for _, v in tagged(b.bootstrap, flink_out)))
    subprocess.run([str(EXE), "verify", "castle", str(released), "--rules", str(rules),
                    "--k", "4", "--l", "2", "--input", str(data)], check=True,
                   capture_output=True, timeout=120)


def test_flink_castle_kafka_at_parallelism_two_equals_one_task(kafka_broker, tmp_path):
    """``flink castle -p 2 --partitions 2`` on a 2-partition topic written by ``kafka
    produce`` (a header message in each partition: the first one met gives the columns):
    the message steps and the gate run at 2, and each
    output partition holds the messages of ``-p 1 --partitions 2`` (the same CASTLE
    partitions, each meeting its rows in the same order), each once, and the accounting
    is the same."""
    from streamanon.data import ashrae

    b = kafka_broker
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(1500, seed=9))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    header, *lines = data.read_bytes().splitlines()
    inp, one, two, one_sup, two_sup = b.names("in", "one", "two", "osup", "tsup")
    body = write_lines(tmp_path / "body.csv", header.decode(), lines)
    cli("kafka", "produce", str(body), b.url(inp), "--partitions", "2", "--key-column",
        "building_id")
    common = ("--rules", str(rules), "--k", "4", "--l", "2", "--delta", "60", "--until-end",
              "--partitions", "2", "--json")
    work = tmp_path / "work"
    s2 = summary_of(flink_cli("castle", b.url(inp), "-o", b.url(two), "--suppressed",
                              b.url(two_sup), "-p", "2", "--work-dir", str(work), *common))
    assert_parallel_record_path(work, 2)
    s1 = summary_of(flink_cli("castle", b.url(inp), "-o", b.url(one), "--suppressed",
                              b.url(one_sup), "-p", "1", *common))
    for got_topic, want_topic in ((two, one), (two_sup, one_sup)):
        got, want = read_topic(b.bootstrap, got_topic), read_topic(b.bootstrap, want_topic)
        assert sorted(got) == sorted(want) == [0, 1]
        for part in (0, 1):
            g = [(h.get("streamanon-in", b""), v) for v, h in got[part]]
            w = [(h.get("streamanon-in", b""), v) for v, h in want[part]]
            assert Counter(g) == Counter(w) and len(g) == len(set(g)), (got_topic, part)
    assert (s2["read"], s2["released"], s2["suppressed"]) == (
        s1["read"], s1["released"], s1["suppressed"]) and s2["read"] == 1500
    assert s2["released"] > 0


def kill_mid_run(bootstrap: str, args: list[str], work, out: str, *, seed: int,
                 min_written: int = 300) -> tuple[int, float]:
    """Start ``streamanon *args`` in its own process group; once a checkpoint completed after
    ``min_written`` messages were in ``out[0]``, wait a random time (seeded) and SIGKILL the
    whole group. Returns the messages in ``out[0]`` at the kill and the delay waited."""
    import os
    import random
    import signal
    import time

    from streamanon.pipeline.kafka.client import end_offsets
    from tests.flink.conftest import STREAMANON, completed_checkpoints

    delay = random.Random(seed).uniform(0.0, 1.5)
    proc = subprocess.Popen([*STREAMANON, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    baseline: int | None = None
    deadline = time.monotonic() + 240
    try:
        while True:
            assert proc.poll() is None, "the job ended before the kill: " + (
                proc.stderr.read().decode()[-2000:] if proc.stderr else "")
            assert time.monotonic() < deadline, "no checkpoint after output in time"
            done = max(completed_checkpoints(work), default=0)
            try:  # (the topic appears when the job starts)
                written = end_offsets(bootstrap, out, [0])[0]
            except Exception:
                written = 0
            if baseline is None and written >= min_written:
                baseline = done
            elif baseline is not None and done > baseline:
                break
            time.sleep(0.1)
        time.sleep(delay)
        assert proc.poll() is None, f"the job ended before the kill (delay {delay:.2f} s)"
    finally:
        with contextlib.suppress(ProcessLookupError):  # (a job that ended: its error shows)
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return end_offsets(bootstrap, out, [0])[0], delay


def test_flink_z_kafka_killed_and_restored_writes_each_message_once(kafka_broker, tmp_path):
    """SIGKILL of the whole process group at a random moment after a checkpoint, then
    ``--restore latest``: the output holds the pure run's messages, each once (same tag, same
    text): the restored message step read what the killed run wrote past the checkpoint and
    dropped its replay."""
    from tests.flink.conftest import STREAMANON

    b = kafka_broker
    (inp,) = b.topics("in")
    out, pure_out = b.names("flink", "pure")
    produce(b.bootstrap, inp, z_trace(20_000, seed=9))
    work = tmp_path / "work"
    args = ["flink", "z", b.url(inp), "-o", b.url(out), "--z", "3", "--delta-t", "30",
            "--until-end", "-p", "2", "--checkpoint-interval", "300", "--batch-ms", "20",
            "--batch-size", "500", "--work-dir", str(work)]
    # small batches (a backlog is otherwise read in batches of up to a second's records, and
    # the whole topic here would be one batch), slowed down (a barrier waits behind the
    # records queued before the reading step), so that a kill lands mid-run after a checkpoint
    at_kill, delay = kill_mid_run(b.bootstrap, [*args, "--pace", "0.0005"], work, out,
                                  seed=9)
    proc = subprocess.run([*STREAMANON, *args, "--restore", "latest", "--json"],
                          capture_output=True, text=True, timeout=300)
    s = summary_of(proc)
    ref = summary_of(subprocess.run([str(EXE), "z", b.url(inp), "-o", b.url(pure_out),
                                     "--from", "earliest", "--z", "3", "--delta-t", "30",
                                     "--until-end", "--json"], capture_output=True, text=True,
                                    timeout=120))
    got, want = tagged(b.bootstrap, out), tagged(b.bootstrap, pure_out)
    # 0 repeats, 0 missing, nothing else: the pure run's messages as a multiset
    assert Counter(got) == Counter(want), (delay, at_kill, len(got), len(want))
    assert len(got) == len(set(got)) == ref["released"] and 0 < at_kill < len(want)
    assert per_user(got) == per_user(want)  # one user's records in input order
    assert s["read"] <= 20_000 and s["params"]["delivery"] == "exactly-once"
    assert 0 <= s.get("reconfirmed_outputs", 0) <= at_kill  # the dropped replay


def test_flink_castle_kafka_killed_and_restored_writes_each_message_once(kafka_broker,
                                                                         tmp_path):
    """As the z test, for ``flink castle`` (releases and suppressed rows): after a SIGKILL at
    a random moment and ``--restore latest``, both topics hold the pure run's messages once,
    and the releases pass ``verify castle``."""
    from streamanon.data import ashrae
    from tests.flink.conftest import STREAMANON

    b = kafka_broker
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(6000, seed=8))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    header, *lines = data.read_bytes().splitlines()
    (inp,) = b.topics("in")
    out, sup, pure_out, pure_sup = b.names("flink", "fsup", "pure", "psup")
    produce(b.bootstrap, inp, [header, *lines])
    common = ["--rules", str(rules), "--k", "4", "--l", "2", "--delta", "60", "--until-end"]
    work = tmp_path / "work"
    args = ["flink", "castle", b.url(inp), "-o", b.url(out), "--suppressed", b.url(sup),
            "-p", "1", "--checkpoint-interval", "300", "--batch-ms", "20", "--batch-size",
            "100", "--work-dir", str(work), *common]
    at_kill, delay = kill_mid_run(b.bootstrap, [*args, "--pace", "0.005"], work, out,
                                  seed=8, min_written=200)
    s = summary_of(subprocess.run([*STREAMANON, *args, "--restore", "latest", "--json"],
                                  capture_output=True, text=True, timeout=300))
    ref = summary_of(subprocess.run([str(EXE), "castle", b.url(inp), "-o", b.url(pure_out),
                                     "--suppressed", b.url(pure_sup), "--from", "earliest",
                                     *common, "--json"], capture_output=True, text=True,
                                    timeout=120))
    got, want = tagged(b.bootstrap, out), tagged(b.bootstrap, pure_out)
    assert Counter(got) == Counter(want), (delay, at_kill, len(got), len(want))
    assert len(got) == len(set(got)) == ref["released"] and 0 < at_kill < len(want)
    got_sup, want_sup = tagged(b.bootstrap, sup), tagged(b.bootstrap, pure_sup)
    assert Counter(got_sup) == Counter(want_sup) and len(got_sup) == len(set(got_sup))
    assert s["params"]["delivery"] == "exactly-once"
    assert 0 <= s.get("reconfirmed_outputs", 0) <= at_kill + len(got_sup)
    released = tmp_path / "released.csv"
    released.write_bytes(header + b"\n" + b"".join(v + b"\n" for _, v in got))
    subprocess.run([str(EXE), "verify", "castle", str(released), "--rules", str(rules),
                    "--k", "4", "--l", "2", "--input", str(data)], check=True,
                   capture_output=True, timeout=120)


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


def test_a_work_folder_of_the_one_message_step_layout_is_refused_on_restore(tmp_path):
    """A Kafka job's work folder from before the keyed message steps (a ``job.json``, no
    ``kafka-output.json``) is refused on ``--restore`` with a message naming the cause,
    not read as if its state were of this layout; a fresh run writes the layout and its
    start offsets, and a restore takes them back."""
    import pytest

    from streamanon.errors import ResumeError
    from streamanon.flink.kafka_connector import KafkaOutput, settle_output_base

    (tmp_path / "job.json").write_text("{}\n")
    out = KafkaOutput("kafka://127.0.0.1:9/out", base={"out": {0: 5}})
    with pytest.raises(ResumeError, match="older Kafka job"):
        settle_output_base(tmp_path, out, True)
    settle_output_base(tmp_path, out, False)  # a fresh run
    again = KafkaOutput("kafka://127.0.0.1:9/out", base={"out": {0: 99}})
    settle_output_base(tmp_path, again, True)
    assert again.base == {"out": {0: 5}}


def test_the_keyed_steps_shares_of_the_accounting_add_up(tmp_path):
    import json

    from streamanon.flink.kafka_connector import kafka_counts

    path = tmp_path / "kafka-stats.json"
    shares = {"m1": {"read": 3, "published": 2, "first_read_ms": 50,
                     "suppressed_by_reason": {"a": 1}},
              "m2": {"read": 4, "published": 1, "first_read_ms": 40,
                     "suppressed_by_reason": {"a": 2, "b": 1}},
              "g7": {"reconfirmed": 2, "pending": 0, "last_output_ms": 90},
              "g8": {"reconfirmed": 1, "pending": 1, "last_output_ms": None}}
    for name, counts in shares.items():
        (tmp_path / f"kafka-stats.json.{name}").write_text(json.dumps(counts))
    (tmp_path / "kafka-stats.json.m3.part").write_text("{not json")  # a share being written
    assert kafka_counts(path) == {
        "read": 7, "published": 3, "first_read_ms": 40, "reconfirmed": 3, "pending": 1,
        "last_output_ms": 90, "suppressed_by_reason": {"a": 3, "b": 1}}

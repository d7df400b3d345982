"""``streamanon flink z|castle`` from a topic to topics through Flink's Kafka connector, on the
real broker (Tansu) and the PyFlink mini-cluster: the outputs are the pure commands' outputs
on the same records, every message tagged with its input record, rejections named by
``partition@offset``. Each job costs ~10-20 s (the mini-cluster start). The kill-and-restore
tests have a file each (test_kafka_connector_*_restore.py), so that ./dev test's two workers
share them."""

from __future__ import annotations

import json
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
    assert_parallel_record_path(work, 2, messages="z-anonymity z=3 to messages (per key group)")
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


def assert_parallel_record_path(work, parallelism: int, messages: str) -> None:
    """Every step of the job's plan (``WORK/plan.json``, Flink's execution plan) runs at
    ``parallelism``, the Kafka source and the message steps included, but for the one that
    is a single order by its nature: the reading step (the partition merge and the line
    numbering with the time check's clock, one order of the whole input as in the pure
    command); and, in a CASTLE job, the rules' steps, which are not on the record path.
    ``messages`` is the step that makes the output messages (the operator's own step)."""
    import json

    plan = json.loads((work / "plan.json").read_text())
    steps = {n["contents"]: n["parallelism"] for n in plan["nodes"]}
    assert any(name.startswith("Source: kafka") for name in steps), steps
    rules = {"Source: rules files", "check rules", "rule notes", "rule lines"}
    single = {name for name, p in steps.items() if p != parallelism and name not in rules}
    assert single == {"messages to record batches"}, steps
    assert steps["messages to record batches"] == 1
    for name in (messages, "output gate (per output partition)", "split messages"):
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
    for at in (300, 301, 900):  # clean rows the operator refuses (a category it lacks)
        fields = lines[at].split(b",")
        fields[3] = b"Nowhere"
        lines[at] = b",".join(fields)
    lines[600] = lines[600].replace(lines[600].split(b",")[4], b"big", 1)  # the reader's
    (inp,) = b.topics("in")
    flink_out, pure_out, flink_sup, pure_sup = b.names("flink", "pure", "fsup", "psup")
    produce(b.bootstrap, inp, [header, *lines])  # the header as the first message
    common = ("--rules", str(rules), "--k", "4", "--l", "2", "--delta", "60", "--until-end",
              "--on-error", "skip", "--json")
    s = summary_of(flink_cli("castle", b.url(inp), "-o", b.url(flink_out), "--suppressed",
                             b.url(flink_sup), "-p", "1", *common))
    ref = summary_of(subprocess.run([str(EXE), "castle", b.url(inp), "-o", b.url(pure_out),
                                     "--suppressed", b.url(pure_sup), "--from", "earliest",
                                     *common], capture_output=True, text=True, timeout=120))
    # one partition: the same releases in the same order, each with its input record's tag
    assert tagged(b.bootstrap, flink_out) == tagged(b.bootstrap, pure_out)
    assert tagged(b.bootstrap, flink_sup) == tagged(b.bootstrap, pure_sup)
    assert (s["read"], s["released"], s["suppressed"], s["rejected"]) == (
        ref["read"], ref["released"], ref["suppressed"], ref["rejected"]) and s["read"] == 1500
    # the refused rows on the rejects topic, each named by its message (offset = line, the
    # header being message 0) with the pure command's reason; the reader's refusals come from
    # the reading step, the operator's from its step (their order between them differs), and
    # a row the operator refused is written from its parsed values (JSON while the job does
    # not know the columns), not as its line: the reader's refusal is the pure one's exactly
    rejects = {t: json.loads(v) for t, v in tagged(b.bootstrap, f"{flink_out}.rejects")}
    want = {t: json.loads(v) for t, v in tagged(b.bootstrap, f"{pure_out}.rejects")}
    assert sorted(rejects) == sorted(want) == [b"0@301", b"0@302", b"0@601", b"0@901"]
    assert rejects[b"0@601"] == want[b"0@601"]
    for tag in (b"0@301", b"0@302", b"0@901"):
        assert rejects[tag]["reason"] == want[tag]["reason"]
        assert "Nowhere" in rejects[tag]["reason"]
        assert json.loads(rejects[tag]["text"])["primary_use"] == "Nowhere"
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
    the operator's step (which makes the messages) and the gate run at 2, and each
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
    assert_parallel_record_path(
        work, 2, messages="CASTLE k=4 l=2 delta=60 (per partition, to messages)")
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

"""Kafka endpoints on a real broker: file equality, bad messages, partition merge, stop signal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.io.conftest import (
    produce,
    read_topic,
    require_kafka,
    run_driver,
    summary_of,
    write_lines,
    z_trace,
)

require_kafka()

pytestmark = pytest.mark.kafka


def _topics(broker, names, partitions=1):
    from streamanon.io.kafka_broker import create_topics

    create_topics(broker.bootstrap, {n: partitions for n in names})
    return names


def _z_args(bs, t, *extra):
    return ["z", "--bootstrap", bs, "--input", t[0], "--output", t[1], "--rejects", t[2],
            "--progress", t[3], "--until-end", *extra]


def test_z_kafka_equals_file_path_byte_for_byte(kafka_broker, topic_names, tmp_path):
    from streamanon.cli.zanon import run_z
    from streamanon.zanon import ZAnonymizer

    bs = kafka_broker.bootstrap
    t = _topics(kafka_broker, topic_names("in", "out", "rej", "prog"))
    trace = z_trace(20_000, seed=3)
    produce(bs, t[0], trace)
    s = summary_of(run_driver(*_z_args(bs, t, "--z", "4", "--delta-t", "20",
                                       "--fetch-batch", "3000")))
    out = read_topic(bs, t[1])[0]
    src = write_lines(tmp_path / "in.csv", "t,u,a", trace)
    stats = run_z(src, tmp_path / "out.csv", ZAnonymizer(z=4, delta_t=20))
    expected = (tmp_path / "out.csv").read_bytes().splitlines()[1:]
    assert [v for v, _ in out] == expected
    assert (s["read"], s["published"], s["suppressed"], s["rejected"]) == (
        stats.read, stats.published, stats.suppressed, stats.rejected)
    assert s["balanced"] and 0 < s["suppressed"] < s["read"]
    # every output names the input record it stands for: the same timestamp text and user
    for value, headers in out[:500]:
        offset = int(headers["streamanon-in-offset"])
        assert headers["streamanon-in-partition"] == b"0"
        assert trace[offset].split(b",")[:2] == value.split(b",")[:2]


def test_bad_messages_are_rejected_with_partition_and_offset(kafka_broker, topic_names):
    bs = kafka_broker.bootstrap
    t = _topics(kafka_broker, topic_names("in", "out", "rej", "prog"))
    good = z_trace(50, seed=5)
    bad = {b"": "empty message", b"\xff\xfe,u,a": "not UTF-8", b"7,u1": "expected 3",
           b"nan,u2,EU": "not a finite number", b"9,u3," + b"x" * 5000: "characters long",
           b"1,u4,EU\n2,u5,EU": "one line", b"0,u6,EU": "time goes backwards",
           b"8,u7," + b"y" * 9000: "bytes (limit"}
    values = good[:20] + list(bad) + good[20:]
    produce(bs, t[0], values)
    s = summary_of(run_driver(*_z_args(bs, t, "--z", "2", "--delta-t", "10",
                                       "--max-message-bytes", "8192")))
    rejects = [json.loads(v) for v, _ in read_topic(bs, t[2])[0]]
    assert [r["offset"] for r in rejects] == list(range(20, 20 + len(bad)))
    for r, (_, why) in zip(rejects, bad.items(), strict=True):
        assert why in r["reason"], r
        assert r["partition"] == 0 and r["source"].endswith("/" + t[0])
    assert s["rejected"] == len(bad) and s["read"] == len(values) and s["balanced"]
    # under --on-error fail the run stops at the first bad message, naming it
    t2 = _topics(kafka_broker, topic_names("out", "rej", "prog"))
    proc = run_driver(*_z_args(bs, [t[0], *t2], "--z", "2", "--delta-t", "10",
                               "--on-error", "fail"), check=False)
    assert proc.returncode == 2
    assert f"/{t[0]}[0]@20: empty message" in proc.stderr
    assert [int(h["streamanon-in-offset"]) for _, h in read_topic(bs, t2[0])[0]] == [
        int(h["streamanon-in-offset"]) for _, h in read_topic(bs, t[1])[0]
        if int(h["streamanon-in-offset"]) < 20]


def test_castle_kafka_equals_file_path_and_verifies(kafka_broker, topic_names, tmp_path):
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.castle.verify import check_castle
    from streamanon.cli.castle import run_castle
    from streamanon.data import ashrae
    from streamanon.io.rows import read_rows

    bs = kafka_broker.bootstrap
    t = _topics(kafka_broker, topic_names("in", "out", "rej", "prog", "sup"))
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(3000, seed=2))
    rules_file = tmp_path / "rules.toml"
    rules_file.write_text(ashrae.rules_toml())
    header, *lines = data.read_bytes().splitlines()
    produce(bs, t[0], lines)
    s = summary_of(run_driver("castle", "--bootstrap", bs, "--input", t[0], "--output", t[1],
                              "--rejects", t[2], "--progress", t[3], "--suppressed", t[4],
                              "--until-end", "--rules", str(rules_file), "--columns",
                              header.decode(), "--k", "5", "--l", "2", "--delta", "300"))
    stats = run_castle(data, tmp_path / "out.csv",
                       CastleAnonymizer(RuleSet.load(rules_file), k=5, l=2, delta=300, beta=50,
                                        mu=10, zeta=10))
    out = [v for v, _ in read_topic(bs, t[1])[0]]
    assert out == (tmp_path / "out.csv").read_bytes().splitlines()[1:]
    assert (s["published"], s["suppressed"], s["held"]) == (stats.published, stats.suppressed,
                                                            0)
    assert s["balanced"] and len(read_topic(bs, t[4])[0]) == s["suppressed"]
    (tmp_path / "k.csv").write_bytes(header + b"\n" + b"\n".join(out) + b"\n")
    rules = RuleSet.load(rules_file)
    report = check_castle(read_rows(tmp_path / "k.csv"), rules.id_field,
                          rules.quasi_identifiers, rules.sensitive, k=5, l=2,
                          inputs=read_rows(data))
    assert report.ok, report.first_problem


def test_partitions_merge_by_timestamp_deterministically(kafka_broker, topic_names):
    """Records of one user in one partition, Kafka timestamps = record times: the merged
    stream is the time order; the same data gives the same output however it is fetched."""
    bs = kafka_broker.bootstrap
    trace = z_trace(6000, seed=9)
    users = [int(v.split(b",")[1][1:]) for v in trace]
    times = [int(float(v.split(b",")[0]) * 1000) for v in trace]
    t = _topics(kafka_broker, topic_names("in"), partitions=3)
    produce(bs, t[0], trace, partitions=[u % 3 for u in users], timestamps=times)
    outs = []
    for fetch in ("50", "5000"):
        o = _topics(kafka_broker, topic_names("out", "rej", "prog"), partitions=3)
        s = summary_of(run_driver(*_z_args(bs, [t[0], *o], "--z", "3", "--delta-t", "15",
                                           "--fetch-batch", fetch)))
        assert s["read"] == 6000 and s["rejected"] == 0 and s["balanced"]
        outs.append(read_topic(bs, o[0]))
    assert outs[0] == outs[1]
    # a record stays in its input partition's output partition
    for q, msgs in outs[0].items():
        assert {h["streamanon-in-partition"] for _, h in msgs} <= {str(q).encode()}
    # merged by time: z over the merged stream equals z over the trace sorted by time
    from streamanon.records import Record, Suppressed
    from streamanon.zanon import ZAnonymizer

    order = sorted(range(len(trace)), key=lambda i: (times[i], users[i] % 3, i))
    op = ZAnonymizer(z=3, delta_t=15)
    expected = {q: [] for q in range(3)}
    for i in order:
        tt, u, a = trace[i].decode().split(",")
        r = op.process_one(Record(float(tt), u, a, tt))
        if not isinstance(r, Suppressed):
            expected[users[i] % 3].append(f"{r.t_text},{r.u},{r.a}".encode())
    assert {q: [v for v, _ in m] for q, m in outs[0].items()} == expected


def test_sigterm_stops_cleanly_and_a_rerun_continues(kafka_broker, topic_names):
    bs = kafka_broker.bootstrap
    t = _topics(kafka_broker, topic_names("in", "out", "rej", "prog"))
    trace = z_trace(3000, seed=4)
    produce(bs, t[0], trace[:1000])
    args = ["z", "--bootstrap", bs, "--input", t[0], "--output", t[1], "--rejects", t[2],
            "--progress", t[3], "--z", "2", "--delta-t", "10", "--from", "earliest"]
    proc = subprocess.Popen([sys.executable, "-m", "streamanon.io.kafka_run", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while sum(len(m) for m in read_topic(bs, t[1]).values()) == 0:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    first = json.loads(out.strip().splitlines()[-1])
    assert first["delivery"]["stopped_by_signal"] == signal.SIGTERM and first["read"] == 1000
    produce(bs, t[0], trace[1000:])
    second = summary_of(run_driver(*args, "--until-end"))
    assert second["delivery"]["resumed_from_checkpoint"] is not None
    assert second["read"] == 3000 and second["balanced"]
    assert sum(len(m) for m in read_topic(bs, t[1]).values()) == second["published"]

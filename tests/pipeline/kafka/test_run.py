"""``kafka://`` endpoints of ``streamanon z`` and ``castle`` on a real broker: the same output as
the file path, bad messages named by partition and offset, partition merge order, signals,
checkpoints of other parameters, file sources into topics."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.pipeline.kafka.conftest import (
    EXE,
    cli,
    produce,
    read_topic,
    require_kafka,
    summary_of,
    values_of,
    write_lines,
    z_trace,
)

require_kafka()

pytestmark = pytest.mark.kafka


def _z_file(tmp_path, trace, z, dt, name="in.csv"):
    from streamanon.pipeline import run_z
    from streamanon.zanon import ZAnonymizer

    src = write_lines(tmp_path / name, "t,u,a", trace)
    out = tmp_path / f"{name}.out.csv"
    stats = run_z(src, out, ZAnonymizer(z=z, delta_t=dt))
    return out.read_bytes().splitlines()[1:], stats


def test_z_kafka_to_kafka_equals_the_file_path_on_100k_tuples(kafka_broker, tmp_path):
    k = kafka_broker
    (inp,) = k.topics("in")
    out = k.names("out")[0]
    trace = z_trace(100_000, seed=3, users=300, values=40)
    produce(k.bootstrap, inp, [b"t,u,a", *trace])  # a producer's header is skipped
    s = summary_of(cli("z", "--z", "4", "--delta-t", "20", k.url(inp), "-o", k.url(out),
                       "--until-end", "--json"))
    expected, stats = _z_file(tmp_path, trace, 4, 20)
    got = read_topic(k.bootstrap, out)
    assert list(got) == [0]  # created with the input's partition count
    assert [v for v, _ in got[0]] == expected  # byte-identical, record by record, in order
    assert (s["read"], s["released"], s["suppressed"], s["rejected"]) == (
        stats.read, stats.released, stats.suppressed, stats.rejected)
    assert s["balanced"] and 0 < s["suppressed"] < s["read"] and s["headers_skipped"] == 1
    assert s["delivery"]["resumed_from_checkpoint"] is None
    # every output names the input record it stands for (offset 0 is the header)
    for value, headers in got[0][::997]:
        p, o = headers["streamanon-in"].split(b"@")
        assert p == b"0" and trace[int(o) - 1].split(b",")[:2] == value.split(b",")[:2]


_records = st.lists(st.tuples(st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0, 40.0]),
                              st.integers(0, 6), st.sampled_from(["a", "a*b", "a*c", "d*e*f"])),
                    min_size=1, max_size=120)


@settings(max_examples=5, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(records=_records, z=st.integers(1, 4), dt=st.sampled_from([0.0, 2.0, 30.0]),
       fmt=st.sampled_from(["csv", "jsonl"]))
def test_z_kafka_equals_the_file_path_on_generated_streams(kafka_broker, tmp_path, records, z,
                                                           dt, fmt):
    from streamanon.pipeline import KafkaOptions, run_z
    from streamanon.zanon import ZAnonymizer

    k = kafka_broker
    t, lines = 0.0, []
    for step, u, a in records:
        t += step
        lines.append(f'{{"t": {t:g}, "u": "u{u}", "a": "{a}"}}' if fmt == "jsonl"
                     else f"{t:g},u{u},{a}")
    (inp,) = k.topics("in")
    out = k.names("out")[0]
    produce(k.bootstrap, inp, [x.encode() for x in lines])
    stats = run_z(k.url(inp), k.url(out), ZAnonymizer(z=z, delta_t=dt), in_format=fmt,
                  out_format=fmt, kafka=KafkaOptions(until_end=True, log=lambda s: None))
    src = tmp_path / f"in-{out}.{fmt}"
    src.write_text(("t,u,a\n" if fmt == "csv" else "") + "\n".join(lines) + "\n")
    ref = run_z(src, tmp_path / f"out-{out}.{fmt}", ZAnonymizer(z=z, delta_t=dt))
    expected = (tmp_path / f"out-{out}.{fmt}").read_bytes().splitlines()
    assert values_of(k.bootstrap, out) == (expected[1:] if fmt == "csv" else expected)
    assert stats.to_dict()["released_per_level"] == ref.details["released_per_level"]
    assert (stats.read, stats.suppressed, stats.rejected) == (ref.read, ref.suppressed, 0)


def _castle_files(tmp_path, n, seed=2):
    from streamanon.data import ashrae

    data = ashrae.write_csv(tmp_path / f"castle-{n}.csv", ashrae.generate(n, seed=seed))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    return data, rules


@settings(max_examples=3, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(n=st.integers(1, 400), seed=st.integers(0, 1000), k=st.integers(2, 6),
       delta=st.integers(5, 80), as_json=st.booleans())
def test_castle_kafka_equals_the_file_path_on_generated_streams(kafka_broker, tmp_path, n,
                                                                seed, k, delta, as_json):
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.io.rows import read_rows
    from streamanon.pipeline import KafkaOptions, run_castle

    b = kafka_broker
    data, rules = _castle_files(tmp_path, n, seed)
    header, *lines = data.read_bytes().splitlines()
    if as_json:  # JSON objects instead of CSV lines (the file path reads the same objects)
        rows = read_rows(data)
        lines = [json.dumps(r).encode() for r in rows]
        data = tmp_path / f"castle-{n}.jsonl"
        data.write_bytes(b"\n".join(lines) + b"\n")
    (inp,) = b.topics("in")
    out, sup = b.names("out", "sup")
    produce(b.bootstrap, inp, lines if as_json else [header, *lines])

    def op():
        return CastleAnonymizer(RuleSet.load(rules), k=k, l=2, delta=delta, beta=8)

    fmt = "jsonl" if as_json else "csv"
    stats = run_castle(b.url(inp), b.url(out), op(), suppressed_path=b.url(sup),
                       in_format=fmt, kafka=KafkaOptions(until_end=True, log=lambda s: None))
    ref = run_castle(data, tmp_path / f"{out}.csv", op(), in_format=fmt,
                     suppressed_path=tmp_path / f"{sup}.csv")
    assert values_of(b.bootstrap, out) == (tmp_path / f"{out}.csv").read_bytes().splitlines(
    )[1:]
    assert values_of(b.bootstrap, sup) == (tmp_path / f"{sup}.csv").read_bytes().splitlines(
    )[1:]
    assert (stats.read, stats.released, stats.suppressed, stats.held) == (
        ref.read, ref.released, ref.suppressed, 0)


@pytest.mark.slow
def test_castle_kafka_to_kafka_equals_the_file_path_on_100k_rows_and_verifies(kafka_broker,
                                                                                tmp_path):
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.pipeline import run_castle

    b = kafka_broker
    data, rules = _castle_files(tmp_path, 100_000)
    header, *lines = data.read_bytes().splitlines()
    (inp,) = b.topics("in")
    out = b.names("out")[0]
    produce(b.bootstrap, inp, lines)  # no header message: --columns names the fields
    s = summary_of(cli("castle", "--rules", str(rules), "--k", "5", "--l", "2", b.url(inp),
                       "-o", b.url(out), "--columns", header.decode(), "--until-end", "--json",
                       timeout=300))
    ref = run_castle(data, tmp_path / "pure.csv",
                     CastleAnonymizer(RuleSet.load(rules), k=5, l=2))
    got = values_of(b.bootstrap, out)
    assert got == (tmp_path / "pure.csv").read_bytes().splitlines()[1:]
    assert (s["read"], s["released"], s["suppressed"]) == (ref.read, ref.released,
                                                            ref.suppressed)
    assert s["balanced"] and s["read"] == 100_000
    # the topic's rows, under the header, pass the independent checker
    released = tmp_path / "released.csv"
    with open(released, "wb") as fh:
        subprocess.run([str(EXE), "kafka", "consume", b.url(out), "--header", header.decode()],
                       stdout=fh, check=True, timeout=120)
    assert released.read_bytes().splitlines()[1:] == got
    cli("verify", "castle", str(released), "--rules", str(rules), "--k", "5", "--l", "2",
        "--input", str(data), timeout=300)


BAD = {b"": "empty message", b"\xff\xfe,u,a": "not UTF-8", b"7,u1": "expected 3",
       b"nan,u2,EU": "not a finite number", b"9,u3," + b"x" * 5000: "characters long",
       b"1,u4,EU\n2,u5,EU": "one line", b"0,u6,EU": "time goes backwards",
       b"8,u7," + b"y" * 9000: "bytes (limit"}


def test_bad_messages_go_to_the_rejects_with_partition_and_offset(kafka_broker, tmp_path):
    b = kafka_broker
    (inp,) = b.topics("in")
    good = z_trace(50, seed=5)
    produce(b.bootstrap, inp, good[:20] + list(BAD) + good[20:])
    out, rej = b.names("out", "rej")
    common = ["z", "--z", "2", "--delta-t", "10", b.url(inp), "--until-end",
              "--max-message-bytes", "8192", "--json"]
    s = summary_of(cli(*common, "-o", b.url(out), "--on-error", "skip", "--rejects",
                       b.url(rej)))
    rejects = [json.loads(v) for v in values_of(b.bootstrap, rej)]
    assert [r["offset"] for r in rejects] == list(range(20, 20 + len(BAD)))
    for r, (_, why) in zip(rejects, BAD.items(), strict=True):
        assert why in r["reason"], r
        assert r["partition"] == 0 and r["source"] == b.url(inp)
    assert s["rejected"] == len(BAD) and s["read"] == 50 + len(BAD) and s["balanced"]
    # the default rejects destination of a topic output is OUTPUT.rejects; files get the
    # same JSON objects (a Kafka run appends to its files exactly once)
    frej = tmp_path / "rejects.jsonl"
    s2 = summary_of(cli(*common, "-o", str(tmp_path / "out.csv"), "--on-error", "skip",
                        "--rejects", str(frej)))
    assert [json.loads(x) for x in frej.read_text().splitlines()] == rejects
    assert (tmp_path / "out.csv").read_bytes().splitlines()[1:] == values_of(b.bootstrap, out)
    assert s2["rejected"] == len(BAD)
    # under --on-error fail the run stops at the first bad message, naming it; the output
    # holds what came before it, and a rerun stops there again
    out2 = b.names("out")[0]
    for _ in range(2):
        proc = cli(*common, "-o", b.url(out2), check=False)
        assert proc.returncode == 2, proc.stderr
        assert f"error: {b.url(inp)}[0]@20: empty message" in proc.stderr
        assert "--on-error skip" in proc.stderr
        assert [int(h["streamanon-in"].split(b"@")[1]) for _, h in read_topic(
            b.bootstrap, out2)[0]] == [int(h["streamanon-in"].split(b"@")[1])
                                       for _, h in read_topic(b.bootstrap, out)[0]
                                       if int(h["streamanon-in"].split(b"@")[1]) < 20]


def test_partitions_merge_by_timestamp_deterministically(kafka_broker):
    """Every record of a user in one partition, Kafka timestamps = record times: the merged
    stream is the time order (ties: partition, then offset), whatever the batch size."""
    from streamanon.pipeline import KafkaOptions, run_z
    from streamanon.records import Record, Suppressed
    from streamanon.zanon import ZAnonymizer

    b = kafka_broker
    trace = z_trace(6000, seed=9)
    users = [int(v.split(b",")[1][1:]) for v in trace]
    times = [int(float(v.split(b",")[0]) * 1000) for v in trace]
    (inp,) = b.topics("in", partitions=3)
    produce(b.bootstrap, inp, trace, partitions=[u % 3 for u in users], timestamps=times)
    outs = []
    for batch in (50, 5000):
        out = b.names("out")[0]
        st = run_z(b.url(inp), b.url(out), ZAnonymizer(z=3, delta_t=15), kafka=KafkaOptions(
            until_end=True, fetch_batch=batch, log=lambda s: None))
        assert st.read == 6000 and st.rejected == 0 and st.balanced
        outs.append(read_topic(b.bootstrap, out))
    assert outs[0] == outs[1]
    assert set(outs[0]) == {0, 1, 2}  # the output has the input's partitions
    for q, msgs in outs[0].items():  # a record stays in its input partition's output
        assert {h["streamanon-in"].split(b"@")[0] for _, h in msgs} == {str(q).encode()}
    order = sorted(range(len(trace)), key=lambda i: (times[i], users[i] % 3, i))
    op = ZAnonymizer(z=3, delta_t=15)
    expected: dict[int, list[bytes]] = {q: [] for q in range(3)}
    for i in order:
        tt, u, a = trace[i].decode().split(",")
        r = op.process_one(Record(float(tt), u, a, tt))
        for x in r if isinstance(r, list) else [r]:
            if not isinstance(x, Suppressed):
                expected[users[i] % 3].append(f"{x.t_text},{x.u},{x.a}".encode())
    assert {q: [v for v, _ in m] for q, m in outs[0].items()} == expected


def test_a_live_run_stops_cleanly_on_sigterm_and_the_next_run_continues(kafka_broker):
    b = kafka_broker
    (inp,) = b.topics("in")
    out = b.names("out")[0]
    trace = z_trace(3000, seed=4)
    produce(b.bootstrap, inp, trace[:1000])
    args = [str(EXE), "z", "--z", "2", "--delta-t", "10", b.url(inp), "-o", b.url(out),
            "--json", "--checkpoint-every", "60"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (_exists(b, out) and read_topic(b.bootstrap, out)[0]):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err  # stopping is how a live pipeline ends
    first = json.loads(stdout.strip().splitlines()[-1])
    assert first["delivery"]["stopped_by_signal"] == signal.SIGTERM and first["read"] == 1000
    produce(b.bootstrap, inp, trace[1000:])
    second = summary_of(cli(*args[1:], "--until-end"))
    assert second["delivery"]["resumed_from_checkpoint"] is not None
    assert second["read"] == 3000 and second["balanced"]  # the accounting of the whole stream
    assert len(values_of(b.bootstrap, out)) == second["released"]


def _exists(b, topic: str) -> bool:
    from streamanon.pipeline import topic_partitions

    return topic_partitions(b.url(topic)) is not None


def test_an_until_end_run_stopped_early_exits_143_and_a_rerun_finishes(kafka_broker,
                                                                         tmp_path):
    b = kafka_broker
    (inp,) = b.topics("in")
    out = b.names("out")[0]
    trace = z_trace(20_000, seed=6)
    produce(b.bootstrap, inp, trace)
    # small batches, a checkpoint after each: the run takes seconds
    args = ["z", "--z", "3", "--delta-t", "10", b.url(inp), "-o", b.url(out), "--until-end",
            "--batch-size", "50", "--checkpoint-every", "0.01", "--json"]
    proc = subprocess.Popen([str(EXE), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not _exists(b, out):  # created at the start of the run
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "before the end of the input" in err
    s = summary_of(cli(*args[:-5], "--json"))  # batches and checkpoints as they come
    expected, _ = _z_file(tmp_path, trace, 3, 10)
    assert values_of(b.bootstrap, out) == expected and s["read"] == 20_000


def test_a_checkpoint_of_other_parameters_is_not_resumed(kafka_broker):
    b = kafka_broker
    (inp,) = b.topics("in")
    out = b.names("out")[0]
    produce(b.bootstrap, inp, z_trace(100))
    base = [b.url(inp), "-o", b.url(out), "--until-end"]
    cli("z", "--z", "2", "--delta-t", "10", *base)
    proc = cli("z", "--z", "3", "--delta-t", "10", *base, check=False)
    assert proc.returncode == 2
    assert "other z (then 2, now 3)" in proc.stderr and "--group" in proc.stderr


def test_a_file_source_to_a_topic(kafka_broker, tmp_path):
    b = kafka_broker
    trace = z_trace(2000, seed=8)
    src = write_lines(tmp_path / "in.csv", "t,u,a", trace)
    out = b.names("out")[0]
    s = summary_of(cli("z", "--z", "2", "--delta-t", "10", str(src), "-o", b.url(out),
                       "--json"))
    expected, _ = _z_file(tmp_path, trace, 2, 10, "ref.csv")
    got = read_topic(b.bootstrap, out)[0]
    assert [v for v, _ in got] == expected and s["released"] == len(expected)
    # a file source tags each message with its input line (the header is line 1)
    for value, headers in got[::101]:
        line = int(headers["streamanon-in-line"])
        assert trace[line - 2].split(b",")[:2] == value.split(b",")[:2]
    assert s["outputs"] == [b.url(out)]


def test_a_kafka_run_refuses_to_overwrite_a_file_it_did_not_write(kafka_broker, tmp_path):
    b = kafka_broker
    (inp,) = b.topics("in")
    produce(b.bootstrap, inp, z_trace(10))
    old = tmp_path / "out.csv"
    old.write_text("precious\n")
    proc = cli("z", "--z", "2", "--delta-t", "10", b.url(inp), "-o", str(old), "--until-end",
               check=False)
    assert proc.returncode == 2 and "no checkpoint that wrote it" in proc.stderr
    assert old.read_text() == "precious\n"
    proc = cli("z", "--z", "2", "--delta-t", "10", b.url("no-such-topic"), "--until-end",
               check=False)
    assert proc.returncode == 2 and "no such topic" in proc.stderr


def test_castle_takes_its_header_from_the_first_message_or_columns(kafka_broker, tmp_path):
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.pipeline import KafkaOptions, UnreadableMessagesError, run_castle

    b = kafka_broker
    data, rules = _castle_files(tmp_path, 300)
    header, *lines = data.read_bytes().splitlines()

    def op():
        return CastleAnonymizer(RuleSet.load(rules), k=3, l=2, delta=40)

    ref = run_castle(data, tmp_path / "ref.csv", op())
    expected = (tmp_path / "ref.csv").read_bytes().splitlines()[1:]
    opts = KafkaOptions(until_end=True, log=lambda s: None)
    (with_header, without) = b.topics("h", "n")
    produce(b.bootstrap, with_header, [header, *lines[:150], header, *lines[150:]])
    produce(b.bootstrap, without, lines)
    for inp, cols, repeated in ((with_header, None, 1), (without, header.decode().split(","),
                                                         None)):
        out = b.names("out")[0]
        st = run_castle(b.url(inp), b.url(out), op(), columns=cols, kafka=opts)
        assert values_of(b.bootstrap, out) == expected
        assert st.read == ref.read and st.rejected == 0
        assert st.details.get("headers_skipped") == repeated  # a header again: skipped
    with pytest.raises(UnreadableMessagesError, match=r"\[0\]@0: CSV header"):
        run_castle(b.url(without), b.url(b.names("out")[0]), op(), kafka=opts)


def test_another_writer_on_the_output_stops_the_run(kafka_broker):
    """One writer per output partition (assumption A2) is checked, not assumed: a message
    that lands where this run's count does not expect it stops the run."""
    from confluent_kafka import Producer

    from streamanon.pipeline import EndpointError, KafkaOptions, run_z
    from streamanon.zanon import ZAnonymizer

    b = kafka_broker
    (inp,) = b.topics("in")
    out = b.names("out")[0]
    produce(b.bootstrap, inp, z_trace(5000, seed=2))
    intruder = Producer({"bootstrap.servers": b.bootstrap})

    def intrude(n: int) -> None:
        if n == 2:
            intruder.produce(out, b"not from the pipeline", partition=0)
            assert intruder.flush(10) == 0

    with pytest.raises(EndpointError, match=r"landed at offset \d+, expected \d+: another"):
        run_z(b.url(inp), b.url(out), ZAnonymizer(z=2, delta_t=10), kafka=KafkaOptions(
            until_end=True, fetch_batch=500, log=lambda s: None, after_batch=intrude))


def test_castle_from_a_topic_takes_t_closeness_and_reports_the_risk(kafka_broker, tmp_path):
    b = kafka_broker
    data, rules = _castle_files(tmp_path, 600, seed=5)
    header, *lines = data.read_bytes().splitlines()
    (inp,) = b.topics("in")
    produce(b.bootstrap, inp, [header, *lines])
    options = ["--rules", str(rules), "--k", "5", "--l", "2", "--delta", "300", "--t", "0.5",
               "--t-reference", str(data), "--risk", "--json"]
    released = tmp_path / "released.csv"
    s = summary_of(cli("castle", *options, b.url(inp), "-o", str(released), "--until-end",
                       "--group", "closeness"))
    pure = tmp_path / "pure.csv"
    ref = summary_of(cli("castle", *options, str(data), "-o", str(pure)))
    assert s["params"]["t"] == 0.5 and s["released"] == ref["released"] > 0
    assert released.read_bytes() == pure.read_bytes()
    assert s["risk"] == ref["risk"] and s["risk"]["overall"]["smallest_class"] >= 1


def test_castle_dp_mode_topic_to_topic_accounts_for_every_tuple(kafka_broker, tmp_path):
    """``castle kafka://... -o kafka://... --dp-epsilon --dp-beta`` (with static attributes
    too): every message is released or suppressed, the tuples sampled out are on the
    suppressed topic with their reason and counted as suppressed, and the released topic's
    rows pass the independent checker (k, l and the static bound)."""
    import csv
    import io

    from streamanon.castle.dp import NOT_SAMPLED

    b = kafka_broker
    data, rules = _castle_files(tmp_path, 900, seed=7)
    header, *lines = data.read_bytes().splitlines()
    (inp,) = b.topics("in")
    out, sup = b.names("out", "sup")
    produce(b.bootstrap, inp, [header, *lines])
    static = "square_feet,year_built,floor_count,primary_use"
    s = summary_of(cli("castle", "--rules", str(rules), "--k", "5", "--l", "2", "--delta",
                       "300", "--dp-epsilon", "4", "--dp-beta", "0.7", "--static", static,
                       b.url(inp), "-o", b.url(out), "--suppressed", b.url(sup),
                       "--until-end", "--json"))
    assert s["params"]["dp_epsilon"] == 4 and s["params"]["dp_beta"] == 0.7
    assert s["params"]["static"] == static.split(",")
    released, suppressed = values_of(b.bootstrap, out), values_of(b.bootstrap, sup)
    assert s["read"] == 900 == s["released"] + s["suppressed"] and s["balanced"]
    assert (len(released), len(suppressed)) == (s["released"], s["suppressed"])
    left_out = s["suppressed_by_reason"][NOT_SAMPLED]
    assert 180 < left_out < 360  # Binomial(900, 0.3): mean 270, sd 14
    reasons = [row[-1] for row in csv.reader(io.StringIO(
        b"\n".join(suppressed).decode()))]
    assert reasons.count(NOT_SAMPLED) == left_out
    assert s["anchors"]["kept"] > 0 and s["anchors"]["forgotten"] == 0
    rows = tmp_path / "released.csv"
    rows.write_bytes(b"\n".join([header, *released]) + b"\n")
    report = json.loads(cli("verify", "castle", str(rows), "--rules", str(rules), "--k", "5",
                            "--l", "2", "--static", static, "--json").stdout)
    assert report["ok"] and report["static_violations"] == 0 and report["rows"] == len(
        released)

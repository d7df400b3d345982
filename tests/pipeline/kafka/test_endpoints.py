"""What a user meets around a Kafka run, through the real CLI on real brokers: the documented
multi-partition recipe, a byte order mark, JSON messages, changing --on-error on a rerun, two
brokers with the same topic name, a broker that is not running, what exit 2 leaves behind, a
broker that restarts and loses its topics, a stop signal while the broker is gone."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.pipeline.kafka.conftest import (
    EXE,
    cli,
    produce,
    require_kafka,
    summary_of,
    values_of,
    write_lines,
    z_trace,
)

require_kafka()

pytestmark = pytest.mark.kafka


def _z_file(src: Path, out: Path, *extra: str) -> dict:
    return summary_of(cli("z", "--z", "3", "--delta-t", "20", str(src), "-o", str(out),
                          "--json", *extra))


def _z_kafka(url: str, out: Path, *extra: str, check: bool = True
             ) -> subprocess.CompletedProcess[str]:
    return cli("z", "--z", "3", "--delta-t", "20", url, "-o", str(out), "--until-end",
               "--json", *extra, check=check)


def _increasing(n: int, seed: int) -> list[bytes]:
    """A trace whose times strictly increase: its merge order by time is its file order."""
    return [b"%d,%s" % (i + 1, b.split(b",", 1)[1]) for i, b in enumerate(z_trace(n, seed))]


def test_produce_with_partitions_key_and_time_merges_the_partitions_by_time(kafka_broker,
                                                                            tmp_path):
    k = kafka_broker
    trace = _increasing(6_000, seed=31)
    src = write_lines(tmp_path / "t.csv", "t,u,a", trace)
    topic = k.names("mp")[0]
    cli("kafka", "produce", str(src), k.url(topic), "--partitions", "3", "--key-column", "u",
        "--time-column", "t")
    ref = _z_file(src, tmp_path / "ref.csv")
    got = summary_of(_z_kafka(k.url(topic), tmp_path / "out.csv"))
    assert got["rejected"] == 0 and got["headers_skipped"] == 3
    assert (got["read"], got["published"], got["suppressed"]) == (
        ref["read"], ref["published"], ref["suppressed"])
    assert (tmp_path / "out.csv").read_bytes() == (tmp_path / "ref.csv").read_bytes()


def test_a_byte_order_mark_is_not_part_of_the_first_message(kafka_broker, tmp_path):
    k = kafka_broker
    trace = z_trace(300, seed=32)
    src = tmp_path / "bom.csv"
    src.write_bytes(b"\xef\xbb\xbft,u,a\n" + b"\n".join(trace) + b"\n")
    topic = k.names("bom")[0]
    cli("kafka", "produce", str(src), k.url(topic))
    assert values_of(k.bootstrap, topic)[0] == b"t,u,a"
    # a topic whose first message holds one (another producer): z accepts it like a file
    (raw,) = k.topics("rawbom")
    produce(k.bootstrap, raw, [b"\xef\xbb\xbft,u,a", *trace])
    _z_file(src, tmp_path / "ref.csv")
    for t, name in ((topic, "a.csv"), (raw, "b.csv")):
        got = summary_of(_z_kafka(k.url(t), tmp_path / name))
        assert got["rejected"] == 0 and got["headers_skipped"] == 1 and got["read"] == 300
        assert (tmp_path / name).read_bytes() == (tmp_path / "ref.csv").read_bytes()


def test_json_messages_are_read_without_an_input_format(kafka_broker, tmp_path):
    k = kafka_broker
    trace = z_trace(400, seed=33)
    objs = [json.dumps(dict(zip("tua", (float(t), u, a), strict=True))).encode()
            for t, u, a in (r.decode().split(",") for r in trace)]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(objs) + b"\n")
    (topic,) = k.topics("json")
    produce(k.bootstrap, topic, objs)
    _z_file(src, tmp_path / "ref.csv", "--output-format", "csv")
    got = summary_of(_z_kafka(k.url(topic), tmp_path / "out.csv"))
    assert got["rejected"] == 0 and got["read"] == 400
    assert (tmp_path / "out.csv").read_bytes() == (tmp_path / "ref.csv").read_bytes()


def test_a_rerun_may_switch_to_on_error_skip_as_the_error_advises(kafka_broker, tmp_path):
    k = kafka_broker
    trace = z_trace(600, seed=34)
    bad = [*trace[:350], b"not,a,record,at all", *trace[350:]]
    (topic,) = k.topics("in")
    produce(k.bootstrap, topic, bad)
    args = ["z", "--z", "3", "--delta-t", "20", k.url(topic), "-o", str(tmp_path / "o.csv"),
            "--until-end", "--json", "--checkpoint-every", "0", "--batch-size", "100"]
    first = cli(*args, check=False)
    assert first.returncode == 2 and "--on-error skip" in first.stderr
    resumed = cli(*args, "--on-error", "skip")
    s = summary_of(resumed)
    assert s["delivery"]["resumed_from_checkpoint"] is not None
    src = write_lines(tmp_path / "in.csv", "t,u,a", bad)
    ref = _z_file(src, tmp_path / "ref.csv", "--on-error", "skip",
                  "--rejects", str(tmp_path / "ref.rej"))
    assert (s["read"], s["rejected"], s["published"], s["suppressed"]) == (
        ref["read"], 1, ref["published"], ref["suppressed"])
    assert (tmp_path / "o.csv").read_bytes() == (tmp_path / "ref.csv").read_bytes()
    rejects = (tmp_path / "o.csv.rejects.jsonl").read_text().splitlines()
    assert len(rejects) == 1 and json.loads(rejects[0])["offset"] == 350


def test_the_same_output_topic_name_on_two_brokers_is_two_pipelines(kafka_broker, tmp_path):
    from streamanon.harness.kafka_broker import Broker
    from streamanon.pipeline.kafka.options import default_group

    k = kafka_broker
    (inp,) = k.topics("in")
    produce(k.bootstrap, inp, z_trace(300, seed=35))
    name = k.names("same")[0]
    with Broker(tmp_path / "other") as other:
        there = f"kafka://{other.host}:{other.port}/{name}"
        assert default_group("z", k.url(name)) != default_group("z", there)
        for out in (k.url(name), there):
            s = summary_of(cli("z", "--z", "3", "--delta-t", "20", k.url(inp), "-o", out,
                               "--until-end", "--json"))
            assert s["read"] == 300 and s["delivery"]["resumed_from_checkpoint"] is None
        other.stop(kill=True)


def test_a_broker_that_is_not_running_fails_fast_and_creates_nothing(kafka_broker, tmp_path):
    from streamanon.harness.ports import free_port
    from streamanon.pipeline.kafka.admin import topic_partitions
    from streamanon.pipeline.kafka.options import default_group

    k = kafka_broker
    dead = f"127.0.0.1:{free_port()}"
    # a subprocess timeout, not a timed assertion: the old behaviour waited 30 s per check
    proc = cli("z", "--z", "3", "--delta-t", "20", f"kafka://{dead}/in", "-o",
               str(tmp_path / "o.csv"), "--until-end", check=False, timeout=25)
    assert proc.returncode == 2 and "refused" in proc.stderr.lower()
    assert "Traceback" not in proc.stderr
    (inp,) = k.topics("in")
    out = f"kafka://{dead}/out"
    proc = cli("z", "--z", "3", "--delta-t", "20", k.url(inp), "-o", out, "--until-end",
               check=False, timeout=25)
    assert proc.returncode == 2 and "--output" in proc.stderr and "refused" in proc.stderr.lower()
    assert topic_partitions(k.url(default_group("z", out) + ".progress")) is None


def test_exit_2_leaves_no_empty_output_and_the_rows_before_a_bad_message(kafka_broker,
                                                                           tmp_path):
    k = kafka_broker
    (first_bad,) = k.topics("a")
    produce(k.bootstrap, first_bad, [b"x,y", *z_trace(50, seed=36)])
    proc = _z_kafka(k.url(first_bad), tmp_path / "a.csv", check=False)
    assert proc.returncode == 2 and not (tmp_path / "a.csv").exists()
    # CASTLE without a header: the first message is taken as one, and refused
    from tests.pipeline.kafka.test_run import _castle_files

    data, rules = _castle_files(tmp_path, 20)
    (headless,) = k.topics("b")
    produce(k.bootstrap, headless, data.read_bytes().splitlines()[1:])
    proc = cli("castle", "--rules", str(rules), "--k", "2", k.url(headless), "-o",
               str(tmp_path / "b.csv"), "--until-end", check=False)
    assert proc.returncode == 2 and not (tmp_path / "b.csv").exists(), proc.stderr[-800:]
    # a bad message later: the file holds exactly the outputs of the records before it (the
    # journal its checkpoint counts on: a rerun with --on-error skip continues it)
    trace = z_trace(400, seed=37)
    (later,) = k.topics("c")
    produce(k.bootstrap, later, [*trace, b"bad"])
    proc = _z_kafka(k.url(later), tmp_path / "c.csv", check=False)
    assert proc.returncode == 2
    ref = tmp_path / "ref.csv"
    _z_file(write_lines(tmp_path / "in.csv", "t,u,a", trace), ref)
    assert (tmp_path / "c.csv").read_bytes() == ref.read_bytes()


def _live_z(bootstrap: str, out: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(EXE), "z", "--z", "3", "--delta-t", "20",
                             f"kafka://{bootstrap}/in", "-o", f"kafka://{bootstrap}/{out}",
                             "--batch-size", "200", "--checkpoint-every", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_output(bootstrap: str, topic: str, p: subprocess.Popen[str]) -> None:
    from streamanon.pipeline.kafka.client import end_offsets

    deadline = time.monotonic() + 60
    while True:
        try:
            if end_offsets(bootstrap, topic, [0], timeout=5)[0] > 0:
                return
        except Exception:  # not created yet
            pass
        assert time.monotonic() < deadline and p.poll() is None, "no output"
        time.sleep(0.2)


def test_a_memory_broker_restart_stops_the_run_with_a_clear_message(tmp_path):
    from streamanon.harness.kafka_broker import Broker
    from streamanon.pipeline.kafka.admin import create_topics

    with Broker(tmp_path / "broker", storage="memory") as broker:
        bs = broker.bootstrap
        create_topics(bs, {"in": 1})
        produce(bs, "in", z_trace(3_000, seed=38))
        p = _live_z(bs, "out")
        _wait_output(bs, "out", p)
        broker.restart(down_for=1.0, kill=True)  # memory storage: every topic is gone
        try:
            _, err = p.communicate(timeout=90)  # it used to wait for ever
        finally:
            p.kill()
        assert p.returncode == 2, err[-2000:]
        assert "input topic" in err and "memory storage" in err and "Traceback" not in err


@pytest.mark.parametrize("fatal", [True, False])
def test_a_forgotten_producer_is_said_the_same_way_by_every_producer(fatal):
    """The restart above can hit the outputs' producer or the progress log's, in a flush or
    in a produce call: librdkafka's UNKNOWN_PRODUCER_ID becomes the one clear EndpointError
    (exit 2), and any other Kafka error stays what it was."""
    from confluent_kafka import KafkaError, KafkaException

    from streamanon.errors import EndpointError
    from streamanon.pipeline.kafka.client import forgotten_producer

    gone = KafkaException(KafkaError(KafkaError.UNKNOWN_PRODUCER_ID, "unknown producer",
                                     fatal=fatal))
    said = forgotten_producer(gone, "b:9092", "out.progress")
    assert isinstance(said, EndpointError)
    assert "b:9092" in str(said) and "out.progress" in str(said) and "memory storage" in str(said)
    other = KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large", fatal=fatal))
    assert forgotten_producer(other, "b:9092", "out") is other


def test_sigterm_is_honoured_while_the_broker_is_gone(tmp_path):
    from streamanon.harness.kafka_broker import Broker
    from streamanon.pipeline.kafka.admin import create_topics

    with Broker(tmp_path / "broker", storage="memory") as broker:
        bs = broker.bootstrap
        create_topics(bs, {"in": 1})
        produce(bs, "in", z_trace(2_000, seed=39))
        p = _live_z(bs, "out")
        _wait_output(bs, "out", p)
        broker.stop(kill=True)
        time.sleep(3)  # the run notices the outage
        p.send_signal(signal.SIGTERM)  # one signal
        try:
            _, err = p.communicate(timeout=30)  # it used to ignore it for minutes
        finally:
            p.kill()
        assert p.returncode == 128 + signal.SIGTERM, err[-2000:]
        assert "no checkpoint was written" in err and "Traceback" not in err


def test_produce_says_how_many_messages_were_delivered_when_the_broker_restarts(tmp_path):
    from streamanon.harness.kafka_broker import Broker
    from streamanon.pipeline.kafka.admin import create_topics

    with Broker(tmp_path / "broker", storage="memory") as broker:
        bs = broker.bootstrap
        create_topics(bs, {"in": 1})
        p = subprocess.Popen([str(EXE), "kafka", "produce", "-", f"kafka://{bs}/in"],
                             stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdin is not None
        trace = z_trace(20_000, seed=40)
        p.stdin.write(b"\n".join(trace[:10_000]) + b"\n")
        p.stdin.flush()
        _wait_output(bs, "in", p)  # type: ignore[arg-type]
        broker.restart(down_for=1.0, kill=True)
        try:
            p.stdin.write(b"\n".join(trace[10_000:]) + b"\n")
            p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            p.wait(timeout=90)
        finally:
            p.kill()
        err = p.stderr.read().decode() if p.stderr else ""
        assert p.returncode == 2, err[-2000:]
        assert "acknowledged by the broker" in err and "Traceback" not in err


@pytest.mark.parametrize("form", ["jsonl", "headerless"])
def test_produce_key_column_for_json_lines_and_headerless_csv(kafka_broker, tmp_path,
                                                              form):
    k = kafka_broker
    trace = z_trace(600, seed=41)
    if form == "jsonl":
        src = tmp_path / "t.jsonl"
        src.write_text("".join(
            json.dumps(dict(zip("tua", line.decode().split(","), strict=True))) + "\n"
                               for line in trace))
        key, when = "u", "t"
    else:
        src = tmp_path / "t.csv"
        src.write_bytes(b"\n".join(trace) + b"\n")
        key, when = "2", "1"
    topic = k.names("keyed")[0]
    cli("kafka", "produce", str(src), k.url(topic), "--partitions", "3", "--key-column", key,
        "--time-column", when)
    from tests.pipeline.kafka.conftest import read_topic

    parts = read_topic(k.bootstrap, topic)
    users: dict[str, set[int]] = {}
    got = []
    for p, msgs in parts.items():
        for value, _ in msgs:
            u = (json.loads(value)["u"] if form == "jsonl" else value.decode().split(",")[1])
            users.setdefault(u, set()).add(p)
            got.append(value)
    assert sorted(got) == sorted(src.read_bytes().splitlines())  # every record, no header
    assert all(len(ps) == 1 for ps in users.values())  # a key's records in one partition
    assert sum(1 for msgs in parts.values() if msgs) == 3  # spread over the partitions


def test_end_offsets_of_a_stopped_broker_are_a_broker_timeout_naming_the_partition(tmp_path):
    """Asked while the broker is down (a run's outage check asks every few seconds),
    ``end_offsets`` raises streamanon's :class:`~streamanon.errors.BrokerTimeout`, which the
    check takes as "keep waiting"; librdkafka's own exception escaped it and ended a live run
    as an internal error (exit 70) when its broker restarted."""
    from streamanon.errors import BrokerTimeout
    from streamanon.harness.kafka_broker import Broker
    from streamanon.pipeline.kafka.admin import create_topics
    from streamanon.pipeline.kafka.client import end_offsets

    with Broker(tmp_path / "broker", storage="memory") as broker:
        bs = broker.bootstrap
        create_topics(bs, {"in": 1})
        produce(bs, "in", z_trace(10, seed=3))
        assert end_offsets(bs, "in", [0], timeout=10) == {0: 10}
        broker.stop()
        with pytest.raises(BrokerTimeout, match=r"the offsets of in\[0\]: no answer within 1 s"):
            end_offsets(bs, "in", [0], timeout=1.0)

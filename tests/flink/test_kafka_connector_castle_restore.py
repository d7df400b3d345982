"""``streamanon flink castle`` kafka -> kafka SIGKILLed after a checkpoint and restored with
``--restore latest``, on the real broker and the PyFlink mini-cluster: releases and
suppressed rows hold the pure command's messages, each once (a file of its own, so that
./dev test's workers can run the connector's long tests side by side; the other connector
tests: test_kafka_connector.py)."""

from __future__ import annotations

import subprocess

from tests.flink.conftest import require_flink
from tests.flink.test_kafka_connector import tagged
from tests.kill_and_compare import (
    assert_each_message_once,
    assert_suppressed_once,
    castle_topic,
    kill_mid_run,
    start_pure,
    verify_castle_releases,
)
from tests.pipeline.kafka.conftest import require_kafka, summary_of

require_flink()
require_kafka()


def test_flink_castle_kafka_killed_and_restored_writes_each_message_once(kafka_broker,
                                                                         tmp_path):
    """As the z test, for ``flink castle`` (releases and suppressed rows): after a SIGKILL at
    a random moment and ``--restore latest``, both topics hold the pure run's messages once,
    and the releases pass ``verify castle``."""
    from tests.flink.conftest import STREAMANON

    b = kafka_broker
    data, rules, header, inp = castle_topic(b, tmp_path, 6000, seed=8)
    out, sup, pure_out, pure_sup = b.names("flink", "fsup", "pure", "psup")
    common = ["--rules", str(rules), "--k", "4", "--l", "2", "--delta", "60", "--until-end"]
    reference = start_pure(b, "castle", inp, pure_out, *common, suppressed=pure_sup)
    work = tmp_path / "work"
    args = ["flink", "castle", b.url(inp), "-o", b.url(out), "--suppressed", b.url(sup),
            "-p", "1", "--checkpoint-interval", "300", "--batch-ms", "20", "--batch-size",
            "100", "--work-dir", str(work), *common]
    at_kill, delay = kill_mid_run(b.bootstrap, [*args, "--pace", "0.005"], work, out,
                                  seed=8, min_written=200)
    s = summary_of(subprocess.run([*STREAMANON, *args, "--restore", "latest", "--json"],
                                  capture_output=True, text=True, timeout=300))
    ref = reference()
    got, want = tagged(b.bootstrap, out), tagged(b.bootstrap, pure_out)
    assert_each_message_once(got, want, ref, at_kill, delay)
    got_sup, want_sup = tagged(b.bootstrap, sup), tagged(b.bootstrap, pure_sup)
    assert_suppressed_once(got_sup, want_sup)
    assert s["params"]["delivery"] == "exactly-once"
    assert 0 <= s.get("reconfirmed_outputs", 0) <= at_kill + len(got_sup)
    verify_castle_releases(tmp_path, header, [v for _, v in got], rules, data)

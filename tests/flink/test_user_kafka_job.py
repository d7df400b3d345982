"""The Flink guide's first example (docs/examples/flink_kafka_job.py) runs as written: the
user's own PyFlink ``KafkaSource`` and ``KafkaSink`` around ``streamanon.flink.z_anonymize``,
on the session's broker and a local mini-cluster, reading without end as in production; the
topic it writes holds what ``streamanon z`` kafka -> kafka writes from the same topic. One job
(~20-40 s)."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.flink.conftest import require_flink
from tests.pipeline.kafka.conftest import (
    cli,
    produce,
    read_topic,
    require_kafka,
    summary_of,
    z_trace,
)

require_flink()
require_kafka()

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "flink_kafka_job.py"


def test_the_guides_own_kafka_job_writes_what_streamanon_z_writes(kafka_broker):
    from streamanon.flink.env import make_env
    from streamanon.flink.kafka_jars import ensure_jars, jar_urls
    from streamanon.pipeline.kafka.client import end_offsets

    spec = importlib.util.spec_from_file_location("flink_kafka_job", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules["flink_kafka_job"] = example  # its functions are pickled by reference
    try:
        spec.loader.exec_module(example)
        b = kafka_broker
        # the sink's topic exists before the job: this broker creates a topic a producer
        # names with 4 partitions
        inp, out = b.topics("in", "out")
        (pure,) = b.names("pure")
        produce(b.bootstrap, inp, z_trace(3000, seed=6))
        env = make_env(parallelism=1, checkpoint_interval_ms=500)
        env.add_jars(*jar_urls(ensure_jars()))
        env.add_python_file(str(EXAMPLE))  # the Python workers import the job's module too
        example.build(env, bootstrap=b.bootstrap, source_topic=inp, sink_topic=out, z=3,
                      delta_t=30)
        ref = summary_of(cli("z", b.url(inp), "-o", b.url(pure), "--z", "3", "--delta-t",
                             "30", "--from", "earliest", "--until-end", "--json"))
        # the job reads its topic without end, as in production: it is cancelled once its
        # topic holds as many messages as the pure run's, and a little later
        job = env.execute_async("the guide's job")
        deadline = time.monotonic() + 240
        while end_offsets(b.bootstrap, out, [0])[0] < ref["released"]:
            assert time.monotonic() < deadline, "the job did not write its messages in time"
            time.sleep(0.5)
        time.sleep(3)  # (a repeat or an extra message would show in the comparison)
        job.cancel().result()
    finally:
        del sys.modules["flink_kafka_job"]
    got = Counter(v for v, _ in read_topic(b.bootstrap, out)[0])
    want = Counter(v for v, _ in read_topic(b.bootstrap, pure)[0])
    assert got == want and sum(got.values()) == ref["released"] > 0

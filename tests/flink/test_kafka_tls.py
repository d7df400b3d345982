"""``streamanon flink z --kafka-config FILE`` against the session's TLS broker (client
certificates in a PKCS#12 key store and its password): Flink's Java clients take the same
properties file as librdkafka (Java 17's cannot decrypt an encrypted PEM key: PBES2), the
job's messages are the pure command's, and the password is in no printout. One mini-cluster
job (~20-40 s)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.flink.conftest import require_flink
from tests.pipeline.kafka.conftest import (
    cli,
    read_topic,
    require_kafka,
    summary_of,
    write_lines,
    z_trace,
)

require_flink()
require_kafka()

pytestmark = [pytest.mark.flink, pytest.mark.kafka]


def test_flink_z_over_tls_with_the_same_properties_file(tls_kafka_broker, tmp_path):
    from streamanon.pipeline.kafka.options import read_kafka_config
    from tests.pipeline.kafka.tls_front import KEY_PASSWORD

    b = tls_kafka_broker
    conf = ["--kafka-config", str(b.keystore_config)]
    src = write_lines(tmp_path / "in.csv", "t,u,a", z_trace(2000, seed=4))
    inp, out, pure = b.names("in", "flink", "pure")
    cli("kafka", "produce", str(src), b.url(inp), *conf)
    common = ("--z", "3", "--delta-t", "30", "--until-end", "--json", *conf)
    connections = b.front.connections
    proc = cli("flink", "z", b.url(inp), "-o", b.url(out), "-p", "1", *common, timeout=300)
    s = summary_of(proc)
    assert b.front.connections > connections
    ref = summary_of(cli("z", b.url(inp), "-o", b.url(pure), "--from", "earliest", *common))
    client = read_kafka_config(b.keystore_config)

    def tagged(topic: str) -> list[tuple[bytes, bytes]]:
        return [(h.get("streamanon-in", b""), v)
                for v, h in read_topic(b.bootstrap, topic, client)[0]]

    got, want = tagged(out), tagged(pure)
    assert Counter(got) == Counter(want) and len(got) == len(set(got)) == ref["released"]
    assert (s["read"], s["released"]) == (ref["read"], ref["released"]) == (2000, len(got))
    assert KEY_PASSWORD not in proc.stdout + proc.stderr

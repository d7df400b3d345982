"""``--kafka-config FILE`` against a cluster reached only through TLS with client
certificates (real certificates of a test CA, an encrypted client key and its password):
``kafka produce``, ``streamanon z`` kafka -> kafka exactly once and ``kafka consume`` work,
their outputs are the file run's, and the key's password is in no printout, summary or
topic. The broker is the session's TLS broker (tests/pipeline/kafka/tls_front.py)."""

from __future__ import annotations

import socket
import ssl

import pytest

from tests.pipeline.kafka.conftest import (
    cli,
    read_topic,
    require_kafka,
    summary_of,
    write_lines,
    z_trace,
)

require_kafka()

pytestmark = pytest.mark.kafka


def test_the_front_speaks_only_tls_with_a_client_certificate(tls_kafka_broker):
    """What the other tests' clients pass through: a TLS handshake that verifies the server
    as ``localhost`` by the test CA, and a refusal of a client without a certificate."""
    b = tls_kafka_broker
    ctx = ssl.create_default_context(cafile=str(b.files.ca))
    with socket.create_connection(("127.0.0.1", b.front.port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
        assert dict(x[0] for x in tls.getpeercert()["subject"])["commonName"] == "localhost"
        # no client certificate: the front ends the connection (TLS 1.3 says so on the
        # first read; TLS 1.2 in the handshake above)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            tls.sendall(b"\x00\x00\x00\x01\x00")
            if not tls.recv(1):
                raise ConnectionResetError("closed")


def test_produce_z_and_consume_over_tls_equal_the_file_run_and_print_no_secret(
        tls_kafka_broker, tmp_path):
    from streamanon.pipeline.kafka.options import default_group, read_kafka_config
    from tests.pipeline.kafka.tls_front import KEY_PASSWORD

    b = tls_kafka_broker
    conf = ["--kafka-config", str(b.config)]
    records = z_trace(600, seed=3)
    records[100] = b"7,u1"  # a reject, named partition@offset in the rejects topic
    src = write_lines(tmp_path / "in.csv", "t,u,a", records)
    inp, out = b.names("in", "out")
    z_args = ("--z", "3", "--delta-t", "30", "--on-error", "skip")
    connections = b.front.connections
    procs = [cli("kafka", "produce", str(src), b.url(inp), *conf)]
    procs.append(cli("z", b.url(inp), "-o", b.url(out), *z_args, "--from", "earliest",
                     "--until-end", "--json", *conf))
    summary = summary_of(procs[-1])
    procs.append(cli("kafka", "consume", b.url(out), *conf))
    cli("z", str(src), "-o", str(tmp_path / "file.csv"), *z_args)
    file_lines = (tmp_path / "file.csv").read_text().splitlines()
    assert file_lines[0] == "t,u,a"
    assert procs[-1].stdout.splitlines() == file_lines[1:]
    assert summary["read"] == 600 and summary["released"] == len(file_lines) - 1
    assert summary["rejected"] == 1
    assert b.front.connections > connections  # every client went through the TLS front
    client = read_kafka_config(b.config)
    rejects = read_topic(b.bootstrap, f"{out}.rejects", client)[0]
    assert [h["streamanon-in"] for _, h in rejects] == [b"0@101"]  # line 101: after the header
    # the password is in no output, summary, log or topic (value or header)
    for proc in procs:
        assert KEY_PASSWORD not in proc.stdout + proc.stderr
    secret = KEY_PASSWORD.encode()
    topics = [inp, out, f"{out}.rejects", f"{default_group('z', b.url(out))}.progress"]
    for topic in topics:
        for part in read_topic(b.bootstrap, topic, client).values():
            assert part
            assert all(secret not in v and all(secret not in h for h in hs.values())
                       for v, hs in part)


def test_an_encrypted_pem_key_is_refused_for_the_java_clients_a_key_store_passes(
        tmp_path):
    """Java 17's Kafka clients cannot decrypt a PBES2 PEM key (a Flink job would fail after
    its start-up): the translation refuses it at once, naming the file, never the password;
    the PKCS#12 key store of the same pair passes to the Java clients as it is."""
    from streamanon.errors import KafkaConfigError
    from streamanon.pipeline.kafka.options import java_kafka_config, read_kafka_config
    from tests.pipeline.kafka.tls_front import (
        KEY_PASSWORD,
        client_properties,
        make_tls_files,
    )

    files = make_tls_files(tmp_path / "pki")
    pem = read_kafka_config(client_properties(tmp_path / "pem.properties", files))
    with pytest.raises(KafkaConfigError, match="PBES2") as err:
        java_kafka_config(pem)
    assert str(files.client_key) in str(err.value) and KEY_PASSWORD not in str(err.value)
    store = read_kafka_config(client_properties(tmp_path / "p12.properties", files,
                                                keystore=True))
    java = java_kafka_config(store)
    assert java["ssl.keystore.location"] == str(files.client_keystore)
    assert java["ssl.keystore.password"] == KEY_PASSWORD
    assert java["ssl.truststore.certificates"] == files.ca.read_text()
    assert java["security.protocol"] == "SSL"

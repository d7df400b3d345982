"""The metrics port serves only the site's monitor certificate (mutual TLS, role, CRL).

A real TLS server on loopback and real certificates from ``init_pki``: the monitor reads the
metrics; a gateway's or a sensor's certificate of the same CA gets 403; a certificate of
another CA fails the handshake; a revoked monitor certificate gets 403 at its next request.
"""

from __future__ import annotations

import re
import socket
import ssl

import pytest
from prometheus_client import CollectorRegistry, Gauge

from streamanon.harness.ports import free_port
from streamanon.net.metrics import scrape, serve
from streamanon.net.pki import init_pki, revoke, sensor_paths
from streamanon.net.tls import Revocations


@pytest.fixture()
def site(tmp_path):
    d = tmp_path / "pki"
    init_pki(d, 3, sensors={"meter-1": 0}, ca_dir=tmp_path / "ca")
    registry = CollectorRegistry()
    Gauge("dezent_last_cycle", "The last cycle", registry=registry).set(41)
    address = f"127.0.0.1:{free_port()}"
    server = serve(registry, address, ca=d / "ca.crt", cert=d / "gw0.crt", key=d / "gw0.key",
                   revocations=Revocations(d / "crl.pem", d / "ca.crt"))
    yield d, tmp_path / "ca", address
    server.shutdown()
    server.server_close()


def test_the_monitor_reads_the_metrics(site) -> None:
    d, _, address = site
    m = scrape(address, "gw0", ca=d / "ca.crt", cert=d / "monitor.crt", key=d / "monitor.key")
    assert m["dezent_last_cycle"] == 41


def test_other_roles_of_the_same_ca_are_refused(site) -> None:
    d, _, address = site
    crt, key = sensor_paths(d, 0, "meter-1")
    with pytest.raises(OSError, match="403"):
        scrape(address, "gw0", ca=d / "ca.crt", cert=d / "gw1.crt", key=d / "gw1.key")
    # the CE's and a sensor's certificates are refused too, in the handshake or with 403
    # (which one depends on the key usages their certificates carry)
    for cert, k in ((d / "ce.crt", d / "ce.key"), (crt, key)):
        with pytest.raises(OSError, match=r"403|certificate"):
            scrape(address, "gw0", ca=d / "ca.crt", cert=cert, key=k)


def test_a_stranger_ca_fails_the_handshake(site, tmp_path) -> None:
    d, _, address = site
    other = tmp_path / "other"
    init_pki(other, 3, ca_dir=tmp_path / "other-ca")
    with pytest.raises((ssl.SSLError, OSError)) as err:
        scrape(address, "gw0", ca=d / "ca.crt", cert=other / "monitor.crt",
               key=other / "monitor.key")
    assert "403" not in str(err.value)  # refused in the handshake, before any HTTP


def test_a_revoked_monitor_is_refused_at_its_next_request(site) -> None:
    d, ca, address = site
    creds = {"ca": d / "ca.crt", "cert": d / "monitor.crt", "key": d / "monitor.key"}
    assert scrape(address, "gw0", **creds)["dezent_last_cycle"] == 41
    revoke(d, d / "monitor.crt", ca)
    with pytest.raises(OSError, match="403"):
        scrape(address, "gw0", **creds)


@pytest.fixture()
def metrics_log():
    """What the daemon's log file receives from the metrics server (its format)."""
    import io
    import logging

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("streamanon.net.metrics")
    old = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield buf
    logger.removeHandler(handler)
    logger.setLevel(old)


def _no_cert(address: str, ca) -> None:
    """A TLS client without a certificate: the server refuses it after the handshake."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca))
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="gw0") as conn:
        try:
            conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            while conn.recv(4096):
                pass
        except (ssl.SSLError, OSError):
            pass


def _plain_http(address: str) -> None:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\nHost: gw0\r\n\r\n")
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass


def test_a_flood_of_refused_connections_writes_a_bounded_log(tmp_path, metrics_log) -> None:
    """100 connections without credentials (50 TLS without a certificate, 50 plain HTTP) write
    a few short lines (peer, reason) and one line counting the rest; no traceback."""
    from streamanon.net.metrics import RefusalLog

    d = tmp_path / "pki"
    init_pki(d, 3, ca_dir=tmp_path / "ca")
    registry = CollectorRegistry()
    Gauge("dezent_last_cycle", "The last cycle", registry=registry).set(7)
    address = f"127.0.0.1:{free_port()}"
    import logging

    refusals = RefusalLog(logging.getLogger("streamanon.net.metrics"), burst=5,
                          interval=3600.0)
    server = serve(registry, address, ca=d / "ca.crt", cert=d / "gw0.crt", key=d / "gw0.key",
                   revocations=Revocations(d / "crl.pem", d / "ca.crt"), refusals=refusals)
    try:
        for _ in range(50):
            _no_cert(address, d / "ca.crt")
            _plain_http(address)
        import time

        deadline = time.monotonic() + 30  # the last handler threads finish their refusal
        while refusals.total < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert refusals.total == 100
        # the port still serves the monitor
        m = scrape(address, "gw0", ca=d / "ca.crt", cert=d / "monitor.crt",
                   key=d / "monitor.key")
        assert m["dezent_last_cycle"] == 7
    finally:
        server.shutdown()
        server.server_close()  # reports what was held
    text = metrics_log.getvalue()
    lines = text.strip().splitlines()
    assert "Traceback" not in text
    assert len(lines) == 6, text
    assert len(text.encode()) < 1500, len(text.encode())
    shown = lines[:5]
    assert all("metrics: refused 127.0.0.1:" in ln for ln in shown)
    assert any("no client certificate" in ln for ln in shown)
    assert any("plain HTTP on the TLS port" in ln for ln in shown)
    assert "95 more connection(s) refused" in lines[5]
    held = lines[5]
    counts = [int(c) for c in re.findall(r" x(\d+)", held)]
    assert sum(counts) == 95


def test_refusals_are_reported_per_interval(tmp_path) -> None:
    """With a clock: each interval logs ``burst`` lines plus one count, whatever the flood."""
    import io
    import logging

    from streamanon.net.metrics import RefusalLog

    buf = io.StringIO()
    logger = logging.getLogger("test.refusals")
    logger.propagate = False
    h = logging.StreamHandler(buf)
    logger.addHandler(h)
    now = [0.0]
    r = RefusalLog(logger, burst=2, interval=10.0, clock=lambda: now[0])
    for _ in range(3):  # three intervals of 1000 refusals each
        for i in range(1000):
            r.refused(("10.0.0.9", 1000 + i), "no client certificate")
        now[0] += 10.0
    r.flush()
    logger.removeHandler(h)
    lines = buf.getvalue().strip().splitlines()
    assert len(lines) == 3 * 3
    assert sum("998 more connection(s) refused" in ln for ln in lines) == 3
    assert r.total == 3000

"""The metrics port serves only the site's monitor certificate (mutual TLS, role, CRL).

A real TLS server on loopback and real certificates from ``init_pki``: the monitor reads the
metrics; a gateway's or a sensor's certificate of the same CA gets 403; a certificate of
another CA fails the handshake; a revoked monitor certificate gets 403 at its next request.
"""

from __future__ import annotations

import socket
import ssl

import pytest
from prometheus_client import CollectorRegistry, Gauge

from streamanon.net.metrics import scrape, serve
from streamanon.net.pki import init_pki, revoke, sensor_paths
from streamanon.net.tls import Revocations


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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

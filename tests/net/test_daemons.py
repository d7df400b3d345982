"""The daemons as real processes on loopback: the CE's durability and idempotence, a gateway's
outbox across a crash, refused certificates, malformed and oversized frames."""

from __future__ import annotations

import contextlib
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamanon.net import framing
from streamanon.net.cluster import free_ports
from streamanon.net.config import load_gateway_config, toml_dump
from streamanon.net.pki import init_pki, write_self_signed
from streamanon.net.tls import client_context

DEADLINE = 30.0


@pytest.fixture
def procs():
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def spawn(procs, workdir: Path, name: str, *args: str) -> subprocess.Popen[bytes]:
    log = open(workdir / f"{name}.log", "ab")  # noqa: SIM115
    p = subprocess.Popen([sys.executable, "-m", "streamanon", *args], cwd=workdir,
                         stdout=log, stderr=subprocess.STDOUT)
    log.close()
    procs.append(p)
    return p


def wait_for(predicate, what: str, timeout: float = DEADLINE):
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def tls(pki: Path, port: int, server: str, cert: Path, key: Path) -> ssl.SSLSocket:
    ctx = client_context(pki / "ca.crt", cert, key)
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    return ctx.wrap_socket(sock, server_hostname=server)


def refused(pki: Path, port: int, server: str, cert: Path, key: Path, payload: bytes) -> bool:
    """True when the server ends the TLS session without answering ``payload`` (with TLS 1.3
    the client learns that its certificate was rejected on its first read)."""
    try:
        with tls(pki, port, server, cert, key) as s:
            s.sendall(payload)
            return recv_frame(s) is None
    except (ssl.SSLError, ConnectionError):
        return True


def recv_frame(sock: ssl.SSLSocket) -> framing.Frame | None:
    head = _recv_exactly(sock, 4)
    if head is None:
        return None
    body = _recv_exactly(sock, int.from_bytes(head, "big"))
    return None if body is None else framing.decode_frame(body)


def _recv_exactly(sock: ssl.SSLSocket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def ce_rows(db: Path) -> list[tuple]:
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT gateway, seq, cycle, t, u, a FROM published "
                           "ORDER BY gateway, seq").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


@pytest.fixture
def site(tmp_path):
    """A PKI for two gateways and the CE, a ce.toml, free ports."""
    pki = tmp_path / "pki"
    init_pki(pki, 2)
    ce_port, ring0, ring1, sens0 = free_ports(4)
    (tmp_path / "ce.toml").write_text(toml_dump({"ce": {
        "listen": f"127.0.0.1:{ce_port}", "db": "ce.sqlite", "ca": "pki/ca.crt",
        "cert": "pki/ce.crt", "key": "pki/ce.key", "max_frame": 65536}}))
    return {"dir": tmp_path, "pki": pki, "ce_port": ce_port, "ring": [ring0, ring1],
            "sensors": sens0}


def test_pki_files_and_permissions(site):
    pki = site["pki"]
    assert (pki.stat().st_mode & 0o777) == 0o700
    for name in ("ca", "gw0", "gw1", "ce"):
        assert (pki / f"{name}.key").stat().st_mode & 0o777 == 0o600
        assert (pki / f"{name}.crt").stat().st_mode & 0o777 == 0o644
    from cryptography import x509

    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    gw1 = x509.load_pem_x509_certificate((pki / "gw1.crt").read_bytes())
    assert gw1.issuer == ca.subject
    san = gw1.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["gw1"]
    with pytest.raises(FileExistsError):
        init_pki(pki, 2)


def test_ce_commits_before_ack_is_idempotent_and_refuses_outsiders(site, procs):
    d, pki, port = site["dir"], site["pki"], site["ce_port"]
    ce = spawn(procs, d, "ce", "ce", "--config", str(d / "ce.toml"))
    wait_for(lambda: listening(port), "the CE to listen")
    batch = [framing.WireTuple(s, 3, 2700.0, f"m{s}", 100 + s) for s in (1, 2, 3)]
    with tls(pki, port, "ce", pki / "gw0.crt", pki / "gw0.key") as s:
        s.sendall(framing.encode_batch(batch))
        assert recv_frame(s) == framing.Ack(3)
        assert len(ce_rows(d / "ce.sqlite")) == 3  # committed when the ack arrived
        s.sendall(framing.encode_batch([*batch[1:], framing.WireTuple(4, 4, 3600.0, "m4", "x")]))
        assert recv_frame(s) == framing.Ack(4)
    rows = ce_rows(d / "ce.sqlite")
    assert [(g, seq, u, a) for g, seq, _c, _t, u, a in rows] == [
        ("gw0", 1, "m1", "101"), ("gw0", 2, "m2", "102"), ("gw0", 3, "m3", "103"),
        ("gw0", 4, "m4", "x")]

    # a self-signed certificate claiming to be gw0: the handshake fails, nothing is stored
    cert, key = write_self_signed(d / "outsider", "gw0")
    assert refused(pki, port, "ce", cert, key,
                   framing.encode_batch([framing.WireTuple(9, 0, 0.0, "evil", 1)]))
    # a valid certificate that is not a gateway's (the CE's own): refused with a reason
    with tls(pki, port, "ce", pki / "ce.crt", pki / "ce.key") as s:
        reply = recv_frame(s)
        assert isinstance(reply, framing.Error) and "not a gateway" in reply.reason
    # malformed and oversized frames close that connection, never the daemon
    for junk in (framing.LEN.pack(5) + b"Zjunk", framing.LEN.pack(1 << 30) + b"B",
                 framing.LEN.pack(9) + b"B\x00\x00\x00\x07abcd"):
        with tls(pki, port, "ce", pki / "gw1.crt", pki / "gw1.key") as s:
            s.sendall(junk)
            reply = recv_frame(s)
            assert isinstance(reply, framing.Error), reply
            assert recv_frame(s) is None  # then closed
    assert ce.poll() is None
    assert len(ce_rows(d / "ce.sqlite")) == 4

    # a crash of the CE loses no acknowledged tuple
    ce.send_signal(signal.SIGKILL)
    ce.wait(timeout=10)
    spawn(procs, d, "ce", "ce", "--config", str(d / "ce.toml"))
    wait_for(lambda: listening(port), "the CE to listen again")
    assert ce_rows(d / "ce.sqlite") == rows
    log = (d / "ce.log").read_text()
    assert "oversized frame" in log and "unknown frame kind" in log


def _gateway_config(site, ahead: int = 5) -> Path:
    d = site["dir"]
    path = d / "gw0.toml"
    path.write_text(toml_dump({
        "gateway": {"id": 0, "listen": f"127.0.0.1:{site['ring'][0]}",
                    "sensors": f"127.0.0.1:{site['sensors']}", "state_dir": "state/gw0",
                    "ca": "pki/ca.crt", "cert": "pki/gw0.crt", "key": "pki/gw0.key",
                    "ce": f"127.0.0.1:{site['ce_port']}", "max_frame": 65536},
        "peers": {"gw0": f"127.0.0.1:{site['ring'][0]}",
                  "gw1": f"127.0.0.1:{site['ring'][1]}"},  # gw1 never runs
        "protocol": {"z": 1, "delta_t": 0.0, "p_pub": 1.0, "structure": "exact",
                     "domain": list(range(50)), "sensors_total": 10, "ring_seed": 1},
        "clock": {"t0_file": "clock.t0", "period": 0.3, "ahead": ahead}}))
    return path


def _sensor_lines(lines: list[str], port: int) -> list[str]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall("".join(line + "\n" for line in lines).encode())
        f = s.makefile("r", encoding="utf-8")
        return [f.readline().strip() for _ in lines]


def test_gateway_outbox_survives_a_crash_and_reaches_the_ce_once(site, procs):
    d, pki = site["dir"], site["pki"]
    cfg_path = _gateway_config(site)
    cfg = load_gateway_config(cfg_path)
    gw = spawn(procs, d, "gw0", "gateway", "--config", str(cfg_path))
    wait_for(lambda: listening(site["sensors"]), "the gateway to listen")
    (d / "clock.t0").write_text(f"{time.time() + 0.3!r}\n")  # cycle 0 begins now
    readings = [f"{c * 900},m{s},{10 * c + s}" for c in range(3) for s in range(3)]
    bad = ["900,m0,7", "not a line", "0,m9,999", '{"t": 0, "u": "m8", "a": 4}']
    replies = _sensor_lines(readings + bad, site["sensors"])
    assert replies[:9] == [f"ok {c}" for c in range(3) for _ in range(3)]
    assert replies[9].startswith("err duplicate") and replies[10].startswith("err malformed")
    assert replies[11].startswith("err value 999") and replies[12] == "ok 0"
    published = {(str(c * 900), f"m{s}", str(10 * c + s)) for c in range(3) for s in range(3)}
    published.add(("0", "m8", "4"))  # z = 1: everything is published

    outbox = d / "state" / "gw0" / "outbox.sqlite"

    def outbox_rows() -> list[tuple]:
        con = sqlite3.connect(outbox)
        try:
            return con.execute("SELECT seq, t, id, value FROM outbox ORDER BY seq").fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            con.close()

    wait_for(lambda: len(outbox_rows()) == len(published), "10 tuples in the outbox")

    # peers: an outsider is refused; a real peer's bad frames close only its connection
    port = site["ring"][0]
    cert, key = write_self_signed(d / "outsider", "gw1")
    assert refused(pki, port, "gw0", cert, key, framing.encode_hello(cfg.fingerprint()))
    oversized = framing.LEN.pack(1 << 20) + b"R"
    # a well-formed ring frame this gateway must not act on is dropped (logged), the link stays
    dropped = framing.encode_ring(1, (1,), b"C" + bytes(8))  # a session without gw0
    for junk in ([oversized], [framing.encode_ring(0, (0, 1), b"Q")], [dropped, oversized]):
        with tls(pki, port, "gw0", pki / "gw1.crt", pki / "gw1.key") as s:
            s.sendall(framing.encode_hello(cfg.fingerprint()))
            assert recv_frame(s) == framing.Hello(cfg.fingerprint())
            for frame in junk:
                s.sendall(frame)
            reply = recv_frame(s)
            assert isinstance(reply, framing.Error), reply
            assert ("oversized" in reply.reason) == (junk[-1] is oversized), reply
            assert recv_frame(s) is None
    assert gw.poll() is None
    log = (d / "gw0.log").read_text()
    assert "oversized frame" in log and "dropped a ring message from gw1" in log

    # crash with the CE down: the published tuples stay on disk
    gw.send_signal(signal.SIGKILL)
    gw.wait(timeout=10)
    kept = outbox_rows()
    assert {(format_t(t), u, v) for _s, t, u, v in kept} == published
    spawn(procs, d, "ce", "ce", "--config", str(d / "ce.toml"))
    gw2 = spawn(procs, d, "gw0", "gateway", "--config", str(cfg_path))
    wait_for(lambda: len(ce_rows(d / "ce.sqlite")) >= len(published), "the CE to get them")
    wait_for(lambda: not outbox_rows(), "the outbox to empty after the ack")
    rows = ce_rows(d / "ce.sqlite")
    assert {(format_t(t), u, a) for _g, _s, _c, t, u, a in rows} == published
    assert [seq for _g, seq, *_ in rows] == [s for s, *_ in kept]  # same sequence numbers
    gw2.send_signal(signal.SIGTERM)
    assert gw2.wait(timeout=15) == 0


def format_t(t: float) -> str:
    return str(int(t))

"""The daemons as real processes on loopback: the CE's durability, idempotence and validation
(on SQLite and on a real PostgreSQL server), a gateway's outbox across a crash and across the
loss of its database, the authenticated sensor port (no squatting, a stolen credential is one
sensor once per cycle), refused and revoked certificates, malformed and oversized frames."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamanon.errors import ConfigError
from streamanon.harness.ports import free_ports
from streamanon.net import framing
from streamanon.net.ce_client import CEClient
from streamanon.net.config import load_gateway_config, toml_dump
from streamanon.net.outbox import Outbox
from streamanon.net.pki import init_pki, revoke, sensor_paths, sensor_role, write_self_signed
from streamanon.net.store import iter_rows
from streamanon.net.tls import Revocations, client_context

DEADLINE = 30.0
SENSORS = {"m0": 0, "m1": 0, "m2": 0, "m8": 0, "m9": 0, "x1": 1}
INC_A, INC_B, INC_C = b"A" * 16, b"B" * 16, b"C" * 16


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
    """True when the server ends the TLS session without answering ``payload`` with anything
    but an error (with TLS 1.3 the client learns that its certificate was rejected on its
    first read)."""
    try:
        with tls(pki, port, server, cert, key) as s:
            s.sendall(payload)
            reply = recv_frame(s)
            return reply is None or isinstance(reply, framing.Error)
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


def ce_rows(store: str) -> list[tuple]:
    """(gateway, incarnation, seq, cycle, t, u, a) ordered by key; [] before the first write."""
    try:
        rows = list(iter_rows(store))
    except Exception:  # not created yet (no file, no table)
        return []
    return sorted(r[:7] for r in rows)


@pytest.fixture(params=["sqlite", "postgresql"])
def site(request, tmp_path):
    """A PKI for two gateways, the CE and six sensor nodes, a ce.toml on SQLite or on a real
    PostgreSQL server, free ports."""
    pki = tmp_path / "pki"
    init_pki(pki, 2, sensors=SENSORS, ca_dir=tmp_path / "ca")
    store = (request.getfixturevalue("pg_database") if request.param == "postgresql"
             else str(tmp_path / "ce.sqlite"))
    ce_port, ring0, ring1, sens0 = free_ports(4)
    (tmp_path / "ce.toml").write_text(toml_dump({"ce": {
        "listen": f"127.0.0.1:{ce_port}", "store": store, "ca": "pki/ca.crt",
        "cert": "pki/ce.crt", "key": "pki/ce.key", "crl": "pki/crl.pem", "max_frame": 65536,
        "max_batch": 50, "domain": list(range(200)), "data_period": 900.0}}))
    return {"dir": tmp_path, "pki": pki, "ca": tmp_path / "ca", "ce_port": ce_port,
            "ring": [ring0, ring1], "sensors": sens0, "store": store}


def test_pki_keeps_the_ca_key_apart_and_files_private(tmp_path):
    pki = tmp_path / "site" / "pki"
    files = init_pki(pki, 2, sensors={"m0": 0, "m1": 1})
    ca = tmp_path / "site" / "pki-ca"
    assert Path(files["ca_key"]) == ca / "ca.key" and not (pki / "ca.key").exists()
    assert not list(pki.rglob("*ca.key"))  # nothing that could mint an identity
    assert (pki.stat().st_mode & 0o777) == 0o700 and (ca.stat().st_mode & 0o777) == 0o700
    for name in ("gw0", "gw1", "ce", "monitor", "sensors/gw0/m0", "sensors/gw1/m1"):
        assert (pki / f"{name}.key").stat().st_mode & 0o777 == 0o600
        assert (pki / f"{name}.crt").stat().st_mode & 0o777 == 0o644
    assert (pki / "sensors" / "gw1.txt").read_text() == "m1\n"
    from cryptography import x509

    cacert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    m1 = x509.load_pem_x509_certificate((pki / "sensors/gw1/m1.crt").read_bytes())
    assert m1.issuer == cacert.subject
    ou = m1.subject.get_attributes_for_oid(x509.oid.NameOID.ORGANIZATIONAL_UNIT_NAME)
    assert [a.value for a in ou] == [sensor_role(1)]
    with pytest.raises(ConfigError, match="must not be inside the deployment folder"):
        init_pki(tmp_path / "other", 1, ca_dir=tmp_path / "other" / "ca")
    with pytest.raises(FileExistsError):
        init_pki(pki, 2)
    assert Revocations(pki / "crl.pem", pki / "ca.crt").serials == frozenset()
    # a CRL not signed by the CA is refused
    other = tmp_path / "rogue"
    init_pki(other, 1)
    shutil.copy(other / "crl.pem", tmp_path / "rogue-crl.pem")
    with pytest.raises(ConfigError, match="not signed by the CA"):
        Revocations(tmp_path / "rogue-crl.pem", pki / "ca.crt")


def test_ce_validates_commits_before_ack_is_idempotent_and_refuses_outsiders(site, procs):
    d, pki, port, store = site["dir"], site["pki"], site["ce_port"], site["store"]
    gw0 = (pki / "gw0.crt", pki / "gw0.key")
    gw1 = (pki / "gw1.crt", pki / "gw1.key")
    ce = spawn(procs, d, "ce", "ce", "--config", str(d / "ce.toml"))
    wait_for(lambda: listening(port), "the CE to listen")
    batch = [framing.WireTuple(s, 3, 2700.0, f"m{s}", 100 + s) for s in (1, 2, 3)]
    with tls(pki, port, "ce", *gw0) as s:
        s.sendall(framing.encode_batch(INC_A, batch))
        assert recv_frame(s) == framing.Ack(3)
        assert len(ce_rows(store)) == 3  # committed when the ack arrived
        s.sendall(framing.encode_batch(INC_A, [*batch[1:],
                                               framing.WireTuple(4, 4, 3600.0, "m4", 150)]))
        assert recv_frame(s) == framing.Ack(4)
        # invalid tuples: the batch is refused with a reason per tuple, nothing is stored,
        # the connection stays open for the next batch
        bad = [framing.WireTuple(5, 5, math.nan, "m5", 1),
               framing.WireTuple(6, 5, 4500.0, "m6", 999),
               framing.WireTuple(7, 5, 4500.0, "m7", 7),
               framing.WireTuple(8, 5, 4400.0, "m8", 7)]
        s.sendall(framing.encode_batch(INC_A, bad))
        reply = recv_frame(s)
        assert isinstance(reply, framing.Refused), reply
        reasons = dict(reply.items)
        assert sorted(reasons) == [5, 6, 8]
        assert "not finite" in reasons[5] and "outside the CE's domain" in reasons[6]
        assert "not the time of cycle 5" in reasons[8]
        s.sendall(framing.encode_batch(INC_A, [bad[2]]))
        assert recv_frame(s) == framing.Ack(7)
        # a lost outbox starts again at sequence 1 under a new incarnation: new tuples
        s.sendall(framing.encode_batch(INC_B, [framing.WireTuple(1, 6, 5400.0, "m1", 9)]))
        assert recv_frame(s) == framing.Ack(1)
    rows = ce_rows(store)
    assert [(g, bytes.fromhex(i), seq, u, a) for g, i, seq, _c, _t, u, a in rows] == [
        ("gw0", INC_A, 1, "m1", "101"), ("gw0", INC_A, 2, "m2", "102"),
        ("gw0", INC_A, 3, "m3", "103"), ("gw0", INC_A, 4, "m4", "150"),
        ("gw0", INC_A, 7, "m7", "7"), ("gw0", INC_B, 1, "m1", "9")]

    # a self-signed certificate claiming to be gw0: the handshake fails, nothing is stored
    cert, key = write_self_signed(d / "outsider", "gw0")
    assert refused(pki, port, "ce", cert, key,
                   framing.encode_batch(INC_A, [framing.WireTuple(9, 0, 0.0, "evil", 1)]))
    # a valid certificate that is not a gateway's (a sensor's): refused with a reason
    with tls(pki, port, "ce", *sensor_paths(pki, 0, "m0")) as s:
        reply = recv_frame(s)
        assert isinstance(reply, framing.Error) and "role 'sensor@gw0'" in reply.reason
    # malformed, oversized and over-long frames close that connection, never the daemon
    too_many = framing.encode_batch(INC_A, [framing.WireTuple(s, 1, 900.0, "m", 1)
                                            for s in range(1, 52)])
    for junk, why in ((framing.LEN.pack(5) + b"Zjunk", "unknown frame kind"),
                      (framing.LEN.pack(1 << 30) + b"B", "oversized frame"),
                      (framing.LEN.pack(9) + b"B\x00\x00\x00\x07abcd", "incarnation"),
                      (too_many, "batch of 51 tuples > max 50")):
        with tls(pki, port, "ce", *gw1) as s:
            s.sendall(junk)
            reply = recv_frame(s)
            assert isinstance(reply, framing.Error) and why in reply.reason, reply
            assert recv_frame(s) is None  # then closed
    assert ce.poll() is None
    assert ce_rows(store) == rows

    # killed in the middle of a batch: the batch is all there or not at all; sent again
    # (as the gateway does without an ack) it is there exactly once
    big = [framing.WireTuple(s, 7, 6300.0, f"k{s}", s % 200) for s in range(1, 51)]
    with tls(pki, port, "ce", *gw1) as s:
        s.sendall(framing.encode_batch(INC_C, big))
        ce.send_signal(signal.SIGKILL)
    ce.wait(timeout=10)
    after_kill = ce_rows(store)
    in_flight = [r for r in after_kill if r[0] == "gw1"]
    assert len(in_flight) in (0, len(big))
    assert [r for r in after_kill if r[0] == "gw0"] == rows  # nothing acknowledged lost
    ce = spawn(procs, d, "ce", "ce", "--config", str(d / "ce.toml"))
    wait_for(lambda: listening(port), "the CE to listen again")
    with tls(pki, port, "ce", *gw1) as s:
        s.sendall(framing.encode_batch(INC_C, big))
        assert recv_frame(s) == framing.Ack(50)
    final = ce_rows(store)
    assert len(final) == len(rows) + len(big) == len(set((r[0], r[1], r[2]) for r in final))

    # a revoked gateway certificate is refused from its next connection on
    revoke(pki, pki / "gw1.crt", site["ca"])
    with tls(pki, port, "ce", *gw1) as s:
        reply = recv_frame(s)
        assert isinstance(reply, framing.Error) and "revoked" in reply.reason, reply
    with tls(pki, port, "ce", *gw0) as s:  # the others still are served
        s.sendall(framing.encode_batch(INC_A, [framing.WireTuple(10, 8, 7200.0, "m0", 1)]))
        assert recv_frame(s) == framing.Ack(10)
    log = (d / "ce.log").read_text()
    assert "oversized frame" in log and "unknown frame kind" in log and "revoked" in log
    assert "not finite" in log


def test_a_gateway_sets_bad_tuples_aside_without_a_retry_storm(site, procs):
    """Tuples the CE refuses (a time that is not finite, a value out of its domain, an ID too
    large for any frame) move to the outbox's refused table with the reason; the rest is
    delivered; a handful of round trips, no loop."""
    d, pki, port = site["dir"], site["pki"], site["ce_port"]
    spawn(procs, d, "ce", "ce", "--config", str(d / "ce.toml"))
    wait_for(lambda: listening(port), "the CE to listen")
    box = Outbox(d / "outbox.sqlite")
    box.append([(1, 900.0, "m1", 5), (1, math.inf, "m2", 5), (1, 900.0, "m3", 500),
                (1, 900.0, "h" * 65000, 5)] + [(1, 900.0, f"n{i}", 6) for i in range(60)])
    sent = []

    async def deliver() -> None:
        stopping = asyncio.Event()
        stopping.set()  # deliver what is there, then return
        client = CEClient(box, f"127.0.0.1:{port}", max_frame=1 << 20,
                          ctx=client_context(pki / "ca.crt", pki / "gw0.crt", pki / "gw0.key"),
                          revocations=Revocations(pki / "crl.pem", pki / "ca.crt"),
                          on_commit=lambda n, _s: sent.append(n))
        await asyncio.wait_for(client.run(stopping), 60)

    asyncio.run(deliver())
    assert box.count() == 0
    refused_rows = dict(box.db.execute("SELECT seq, reason FROM refused").fetchall())
    assert sorted(refused_rows) == [2, 3, 4], refused_rows
    assert "not finite" in refused_rows[2] and "domain" in refused_rows[3]
    assert "oversized" in refused_rows[4] or "ID of" in refused_rows[4]
    stored = {r[5] for r in ce_rows(site["store"])}
    assert stored == {"m1", *(f"n{i}" for i in range(60))}
    assert len(sent) <= 8  # a few halvings, then done
    box.close()


def _gateway_config(site, ahead: int = 5) -> Path:
    d = site["dir"]
    path = d / "gw0.toml"
    path.write_text(toml_dump({
        "gateway": {"id": 0, "listen": f"127.0.0.1:{site['ring'][0]}",
                    "sensors": f"127.0.0.1:{site['sensors']}", "state_dir": "state/gw0",
                    "ca": "pki/ca.crt", "cert": "pki/gw0.crt", "key": "pki/gw0.key",
                    "crl": "pki/crl.pem", "ce": f"127.0.0.1:{site['ce_port']}",
                    "max_frame": 65536},
        "sensors": {"registry": "pki/sensors/gw0.txt", "idle_timeout": 2.0,
                    "max_connections": 8},
        "peers": {"gw0": f"127.0.0.1:{site['ring'][0]}",
                  "gw1": f"127.0.0.1:{site['ring'][1]}"},  # gw1 never runs
        # a ring of one: this test is about the outbox and the sensor port
        "protocol": {"z": 1, "delta_t": 0.0, "p_pub": 1.0, "structure": "exact",
                     "domain": list(range(50)), "sensors_total": 10, "ring_seed": 1,
                     "min_members": 1},
        "clock": {"t0_file": "clock.t0", "period": 0.3, "ahead": ahead}}))
    return path


def sensor(site, sid: str, lines: list[str], gw: int = 0, cert: tuple[Path, Path] | None = None
           ) -> list[str]:
    """Lines sent to gw0 as sensor ``sid`` of gateway ``gw`` (its own certificate unless
    ``cert``), the replies; a refused connection answers one ``err refused`` line, or none
    (``closed``), for all."""
    pki = site["pki"]
    crt, key = cert or sensor_paths(pki, gw, sid)
    ctx = client_context(pki / "ca.crt", crt, key)
    try:
        with socket.create_connection(("127.0.0.1", site["sensors"]), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname="gw0") as s:  # gw0 listens there
            s.sendall("".join(line + "\n" for line in lines).encode())
            f = s.makefile("r", encoding="utf-8")
            out = []
            for _ in lines:
                reply = f.readline().strip()
                if not reply:
                    break
                out.append(reply)
            return out or ["closed"]
    except (ssl.SSLError, ConnectionError) as exc:
        return [f"tls {type(exc).__name__}"]


def test_gateway_sensor_port_outbox_crash_and_outbox_loss(site, procs):
    d, pki, store = site["dir"], site["pki"], site["store"]
    if site["store"] != str(d / "ce.sqlite"):
        pytest.skip("the gateway side does not depend on the CE's store")
    cfg_path = _gateway_config(site, ahead=20)
    cfg = load_gateway_config(cfg_path)
    gw = spawn(procs, d, "gw0", "gateway", "--config", str(cfg_path))
    wait_for(lambda: listening(site["sensors"]), "the gateway to listen")
    (d / "clock.t0").write_text(f"{time.time() + 2.0!r}\n")  # cycle 0 begins in 2 s
    for s in range(3):
        assert sensor(site, f"m{s}", [f"{c * 900},m{s},{10 * c + s}" for c in range(3)]) == [
            "ok 0", "ok 1", "ok 2"]
    # one reading per sensor per cycle, the ID is the certificate's
    replies = sensor(site, "m0", ["900,m0,7", "900,m1,7", "0,zz-fake-1,7", "0,m0,999",
                                  "not a line"])
    assert replies[0].startswith("err duplicate") and "certificate is 'm0'" in replies[1]
    assert "certificate is 'm0'" in replies[2] and replies[3].startswith("err value 999")
    assert replies[4].startswith("err malformed")
    assert sensor(site, "m8", ['{"t": 0, "a": 4}']) == ["ok 0"]
    # a stolen credential (m9's) is m9 and only m9, once per cycle, and only at gw0
    assert sensor(site, "m9", ["0,m8,4", "0,m9,4", "0,m9,5"])[1:] == [
        "ok 0", "err duplicate: m9 already reported cycle 0"]
    # squatting: m9's credential naming m8 first; m8's own reading is taken all the same
    assert sensor(site, "m9", ["2700,m8,5"])[0].startswith("err the line names sensor 'm8'")
    assert sensor(site, "m8", ["2700,m8,4"]) == ["ok 3"]
    # the sensor port's caps: a line over max_line, more than max_connections at once, and
    # idle_timeout seconds of silence each close a connection
    assert sensor(site, "m1", ["0," + "9" * 5000])[0].startswith("err line too long")
    pki_ = site["pki"]
    ctx = client_context(pki_ / "ca.crt", *sensor_paths(pki_, 0, "m1"))
    held = []
    for _ in range(8):
        raw = socket.create_connection(("127.0.0.1", site["sensors"]), timeout=5)
        held.append(ctx.wrap_socket(raw, server_hostname="gw0"))
    assert sensor(site, "m1", ["0,1"])[0].startswith("err busy")
    began = time.time()
    assert held[0].recv(100) == b""  # closed by the gateway after idle_timeout = 2 s
    assert time.time() - began > 1.0
    for h in held:
        h.close()
    wait_for(lambda: not sensor(site, "m1", ["0,1"])[0].startswith("err busy"),
             "the idle connections to be gone")
    # no certificate, a self-signed one, a gateway's, one of another gateway's sensor
    cert, key = write_self_signed(d / "outsider", "m1", role=sensor_role(0))
    assert sensor(site, "m1", ["0,m1,1"], cert=(cert, key))[0] in ("closed", "tls SSLError")
    with socket.create_connection(("127.0.0.1", site["sensors"]), timeout=5) as raw:
        raw.sendall(b"0,m1,1\n")  # plain text to the TLS port: never a reading
        with contextlib.suppress(OSError):
            assert b"ok" not in raw.recv(100)
    gw_reply = sensor(site, "gw1", ["0,gw1,1"], cert=(pki / "gw1.crt", pki / "gw1.key"))
    assert "role 'gateway'" in gw_reply[0]
    assert "not ('sensor@gw0',)" in sensor(site, "x1", ["0,x1,1"], gw=1)[0]
    # a revoked sensor is refused from its next connection on
    revoke(pki, sensor_paths(pki, 0, "m2")[0], site["ca"])
    assert "revoked" in sensor(site, "m2", ["1800,m2,3"])[0]

    published = {(str(c * 900), f"m{s}", str(10 * c + s)) for c in range(3) for s in range(3)}
    published |= {("0", "m8", "4"), ("0", "m9", "4"), ("2700", "m8", "4")}  # z = 1
    outbox = d / "state" / "gw0" / "outbox.sqlite"

    def outbox_rows() -> list[tuple]:
        con = sqlite3.connect(outbox)
        try:
            return con.execute("SELECT seq, t, id, value FROM outbox ORDER BY seq").fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            con.close()

    wait_for(lambda: len(outbox_rows()) == len(published), "12 tuples in the outbox")

    # peers: an outsider and a revoked peer are refused; a real peer's bad frames close only
    # its connection
    port = site["ring"][0]
    cert, key = write_self_signed(d / "outsider", "gw1")
    assert refused(pki, port, "gw0", cert, key, framing.encode_hello(cfg.fingerprint()))
    oversized = framing.LEN.pack(1 << 20) + b"R"
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
    revoke(pki, pki / "gw1.crt", site["ca"])
    assert refused(pki, port, "gw0", pki / "gw1.crt", pki / "gw1.key",
                   framing.encode_hello(cfg.fingerprint()))
    assert gw.poll() is None
    log = (d / "gw0.log").read_text()
    assert "oversized frame" in log and "dropped a ring message from gw1" in log
    assert "revoked" in log

    # crash with the CE down: the published tuples stay on disk
    gw.send_signal(signal.SIGKILL)
    gw.wait(timeout=10)
    kept = outbox_rows()
    assert {(format_t(t), u, v) for _s, t, u, v in kept} == published
    spawn(procs, d, "ce", "ce", "--config", str(d / "ce.toml"))
    gw2 = spawn(procs, d, "gw0", "gateway", "--config", str(cfg_path))
    wait_for(lambda: len(ce_rows(store)) >= len(published), "the CE to get them")
    wait_for(lambda: not outbox_rows(), "the outbox to empty after the ack")
    rows = ce_rows(store)
    assert {(format_t(t), u, a) for _g, _i, _s, _c, t, u, a in rows} == published
    assert [seq for _g, _i, seq, *_ in rows] == [s for s, *_ in kept]  # same sequence numbers
    gw2.send_signal(signal.SIGTERM)
    assert gw2.wait(timeout=15) == 0
    assert "WARNING" not in (d / "gw0.log").read_text().split("gateway gw0 stopping")[-1]

    # the outbox's database is lost: the new one numbers from 1 again under a new
    # incarnation, and the CE stores its tuples (they are not taken for duplicates)
    shutil.rmtree(d / "state" / "gw0")
    t0 = time.time() - 10 * 0.3  # now in cycle 10
    (d / "clock.t0").write_text(f"{t0!r}\n")
    gw3 = spawn(procs, d, "gw0", "gateway", "--config", str(cfg_path))
    wait_for(lambda: listening(site["sensors"]), "the gateway to listen again")
    ahead = int((time.time() - t0) / 0.3) + 8  # well after its clock has started
    assert sensor(site, "m0", [f"{ahead * 900},m0,1"]) == [f"ok {ahead}"]
    wait_for(lambda: len(ce_rows(store)) == len(published) + 1, "the new tuple at the CE")
    new = [r for r in ce_rows(store) if r[5] == "m0" and r[6] == "1"]
    assert len(new) == 1 and new[0][2] == 1 and new[0][1] != rows[0][1]
    gw3.send_signal(signal.SIGTERM)
    assert gw3.wait(timeout=15) == 0


def format_t(t: float) -> str:
    return str(int(t))


def test_ce_opens_mix_batches_stores_each_tuple_once_and_survives_a_kill(site, procs):
    """A mix batch (sealed, padded items, one per cycle): the CE stores its tuples under the
    gateway name ``mix`` keyed by their uid, drops the dummies, refuses (and logs) an item that
    does not open and a tuple outside its domain, and acknowledges the cycle after the commit.
    The same batch again changes nothing; killed in the middle of a batch the CE has all of it
    or none, and the batch sent again is there once."""
    from streamanon.dezent import mix

    d, pki, port, store = site["dir"], site["pki"], site["ce_port"], site["store"]
    ce_toml = d / "ce.toml"
    ce_toml.write_text(ce_toml.read_text().replace("[ce]\n", '[ce]\nmix_key = "pki/ce-mix.key"\n'))
    ce = spawn(procs, d, "ce", "ce", "--config", str(ce_toml))
    wait_for(lambda: listening(port), "the CE to listen")
    pub = mix.load_public_key(pki / "ce-mix.pub")

    def sealed(t: mix.MixTuple) -> bytes:
        return mix.seal(pub, mix.encode_plaintext(t))

    good = [mix.MixTuple(mix.new_uid(), 3, 2700.0, f"m{i}", 100 + i) for i in range(5)]
    batch = mix.secure_shuffle(
        [sealed(t) for t in good] + [sealed(mix.dummy(3)),
                                     sealed(mix.MixTuple(mix.new_uid(), 3, 2700.0, "x", 999)),
                                     bytes(mix.item_bytes())])
    gw1 = (pki / "gw1.crt", pki / "gw1.key")
    with tls(pki, port, "ce", *gw1) as s:
        for _ in range(2):  # the second time: a batch re-sent after a lost ack
            s.sendall(framing.encode_mix(3, batch))
            assert recv_frame(s) == framing.Ack(3)
        s.sendall(framing.encode_mix(4, [b"short"]))
        reply = recv_frame(s)
        assert isinstance(reply, framing.Error) and "not 112 bytes" in reply.reason
    rows = ce_rows(store)
    assert sorted((g, u, a) for g, _i, _s, _c, _t, u, a in rows) == [
        ("mix", f"m{i}", str(100 + i)) for i in range(5)]
    assert {bytes.fromhex(i) for _g, i, *_ in rows} == {t.uid for t in good}
    log = (d / "ce.log").read_text()
    assert "outside the CE's domain" in log and "does not open" in log

    big = [mix.MixTuple(mix.new_uid(), 7, 6300.0, f"k{i}", i % 200) for i in range(50)]
    items = [sealed(t) for t in big]
    with tls(pki, port, "ce", *gw1) as s:
        s.sendall(framing.encode_mix(7, items))
        ce.send_signal(signal.SIGKILL)
    ce.wait(timeout=10)
    assert len(ce_rows(store)) in (5, 55)  # all of the batch or none of it
    spawn(procs, d, "ce", "ce", "--config", str(ce_toml))
    wait_for(lambda: listening(port), "the CE to listen again")
    with tls(pki, port, "ce", *gw1) as s:
        s.sendall(framing.encode_mix(7, mix.secure_shuffle(
            [sealed(t) for t in big])))  # sealed afresh, as a gateway re-sends them
        assert recv_frame(s) == framing.Ack(7)
    final = ce_rows(store)
    assert len(final) == 55 == len({r[1] for r in final})


def test_sighup_makes_a_gateway_reread_its_registry(site, procs):
    d, pki = site["dir"], site["pki"]
    if site["store"] != str(d / "ce.sqlite"):
        pytest.skip("the gateway side does not depend on the CE's store")
    cfg_path = _gateway_config(site, ahead=20)
    gw = spawn(procs, d, "gw0", "gateway", "--config", str(cfg_path))
    wait_for(lambda: listening(site["sensors"]), "the gateway to listen")
    t0 = time.time()
    (d / "clock.t0").write_text(f"{t0!r}\n")

    def line(sid: str) -> list[str]:  # a reading 15 cycles ahead of now (ahead = 20)
        return [f"{900 * (int((time.time() - t0) / 0.3) + 15)},{sid},4"]

    assert sensor(site, "m8", line("m8"))[0].startswith("ok ")
    # m8 taken out of the registry by an edit the file's stamp does not show (same size,
    # mtime put back): the poll cannot see it, SIGHUP re-reads the file all the same
    reg = pki / "sensors" / "gw0.txt"
    st = reg.stat()
    text = reg.read_text()
    assert "m8\n" in text
    reg.write_text(text.replace("m8\n", "m7\n"))
    os.utime(reg, ns=(st.st_atime_ns, st.st_mtime_ns))
    time.sleep(2.5)  # more than one poll of the files
    assert sensor(site, "m8", line("m8"))[0].startswith("ok ")
    gw.send_signal(signal.SIGHUP)
    log = d / "gw0.log"
    wait_for(lambda: "sensor registry reloaded" in log.read_text(), "the reload")
    assert sensor(site, "m8", line("m8"))[0].startswith("err refused")
    assert "not in this gateway's registry" in log.read_text()
    assert sensor(site, "m0", line("m0"))[0].startswith("ok ")
    assert gw.poll() is None

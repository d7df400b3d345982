"""Real processes on loopback: a CE and five gateways (mutual TLS) and a sensor replay (every
sensor node with its own certificate).

* A replayed day under attack: all day long an attacker injects z-1 invented sensor IDs for
  every value of the domain at every gateway (without a certificate, with a self-signed one,
  and with one stolen sensor credential). All of it is refused; the CE's table equals the
  in-process simulation's deZent publications on the legitimate readings tuple for tuple
  (exact structure, p_pub = 1 so no coin decides), no invented ID appears anywhere, the per
  (cycle, value) counts equal the centralized scenario's, ``streamanon verify z
  --privacy-only`` passes, the bytes of the ring frames per round equal the simulation's byte
  metric plus the framing overhead, and the bytes TCP carried equal the frames plus the TLS
  record overhead.
* A gateway killed in the middle of a cycle: no privacy violation, the others go on, it
  rejoins after a restart. Then three of the five are killed: the two left publish nothing
  (a ring below min_members = 3) and say why; after the restart publication resumes.
"""

from __future__ import annotations

import socket
import sqlite3
import ssl
import threading
import time
from collections import Counter, defaultdict

import numpy as np
import pytest
from typer.testing import CliRunner

from streamanon.cli import app
from streamanon.dezent.grid import bucket_grid
from streamanon.dezent.ring import Ring
from streamanon.harness.local_site import LocalSite, LocalSiteSpec, check_run, read_stats
from streamanon.net import framing
from streamanon.net.pki import sensor_paths, sensor_role, write_self_signed
from streamanon.net.tls import client_context, split_address
from streamanon.sim.scenarios import simulate

# live sites on 0.3-1 s wall-clock cycles: ./dev test runs this file beside short one-core
# test files only (tests/conftest.py)
pytestmark = pytest.mark.wallclock

TLS_RECORD_MAX = 16384  # plaintext bytes per TLS record
TLS_RECORD_OVERHEAD = 22  # TLS 1.3 AEAD: 5-byte header + 1-byte inner type + 16-byte tag


def _rows(path):
    with open(path, encoding="utf-8") as fh:
        assert fh.readline().strip() == "t,u,a"
        return [tuple(line.rstrip("\n").split(",")) for line in fh if line.strip()]


@pytest.mark.parametrize(("structure", "cycles", "period"),
                         [("exact", 96, 0.3), ("cbf", 32, 0.5)])
def test_a_replayed_day_equals_the_simulation(tmp_path, structure, cycles, period):
    """``exact``: a whole day; ``cbf`` (the paper's structure, 28 kB messages, a third of a day
    to bound the test's time): the same tuples as the simulation, false positives included.
    Readings are sent two periods ahead (accepted up to two cycles early), so a busy machine
    does not make them late."""
    spec = LocalSiteSpec(gateways=5, period=period, cycles=cycles, z=5, max_sn=20, seed=3,
                         p_pub=1.0, structure=structure, lead=2 * period)
    cluster = LocalSite(spec, tmp_path)
    attacker = None
    try:
        cluster.start()
        if structure == "exact":
            attacker = Injector(cluster)
            attacker.start()
        summary = cluster.finish()
    finally:
        cluster.stop_all()
        if attacker is not None:
            attacker.stop.set()
            attacker.join(30)
    assert all(code == 0 for code in summary["exit_codes"].values()), summary

    district = spec.district()
    sim = simulate(district, spec.cycles, spec.sim_config(), keep_published=True)
    readings = sim.readings
    ids = district.sensor_ids
    # the sensors delivered every reading of the day (else the comparison would be moot)
    measured = _rows(tmp_path / "measurements.csv")
    assert sorted(measured) == sorted(
        (str(c * 900), ids[s], str(int(readings[c, s])))
        for c in range(spec.cycles) for s in range(district.sensors))

    expected = sorted((str(c * 900), ids[s], str(int(readings[c, s])))
                      for c, s in zip(*np.nonzero(sim.published["dezent"]), strict=True))
    published = _rows(tmp_path / "published.csv")
    assert len(published) == len(set(published))  # no duplicate survived the retries
    assert sorted(published) == expected
    assert len(expected) > 0.3 * district.sensors * spec.cycles  # not a vacuous day
    if attacker is not None:
        # the attack ran all day, and not one of its lines was taken
        assert attacker.cycles >= spec.cycles - 4, attacker.cycles
        assert attacker.sent > attacker.cycles * (spec.z - 1) * 10
        assert attacker.accepted == 0 and attacker.refused == attacker.sent
        assert attacker.handshakes_refused >= attacker.cycles * (2 * spec.gateways - 1)
        assert not any(u.startswith("zz-fake") for _t, u, _a in published)
        assert not any(u.startswith("zz-fake") for _t, u, _a in measured)
        res = CliRunner().invoke(app, ["verify", "z", str(tmp_path / "measurements.csv"),
                                       str(tmp_path / "published.csv"), "--z", str(spec.z),
                                       "--delta-t", str(spec.delta_t), "--privacy-only",
                                       "--json"])
        assert res.exit_code == 0, res.output

    check = check_run(tmp_path, spec.z, spec.delta_t)
    assert check["output_tuples"] == len(expected), check
    # the checker finds exactly the violations the simulation counts (none with exact counts)
    violations = sim.metrics["dezent"].result["violations"]
    assert check["privacy_violations"] == violations
    if structure == "exact":
        assert check["ok"] and violations == 0, check
        # as many per (cycle, value) as the centralized rule
        central = Counter((str(c * 900), str(int(readings[c, s]))) for c, s in
                          zip(*np.nonzero(sim.published["centralized"]), strict=True))
        assert Counter((t, a) for t, _u, a in published) == central

    # every round went around all five gateways
    stats = read_stats(tmp_path)
    per_cycle = defaultdict(list)
    for row in stats:
        per_cycle[row["cycle"]].append(row)
    assert sorted(per_cycle) == list(range(spec.cycles))
    nbytes = sim.spec.nbytes
    for c, rows in per_cycle.items():
        assert all(r["members"] == list(range(5)) for r in rows), (c, rows)
        ccc = [r for r in rows if r["ccc"] == r["gateway"]]
        assert len(ccc) == 1 and ccc[0]["complete"], (c, rows)
        # bytes on the wire per round: the simulation counts one structure per message
        frames = sum(r["ring_frames"] for r in rows)
        assert frames == 2 * spec.gateways  # collection round + one pass (p_pub = 1)
        assert sum(r["payload_bytes"] for r in rows) == frames * nbytes
        overhead = sum(r["ring_bytes"] for r in rows) - frames * nbytes
        assert overhead == spec.gateways * (framing.ring_overhead(5, collect=True)
                                            + framing.ring_overhead(5, collect=False))
        # and what TCP carried (TCP_INFO of each link): the frames in TLS records
        sizes = [nbytes + framing.ring_overhead(5, collect=kind) for kind in (True, False)]
        records = spec.gateways * sum(-(-n // TLS_RECORD_MAX) for n in sizes)
        tls = sum(r["tcp_bytes"] for r in rows) - sum(r["ring_bytes"] for r in rows)
        if c > 0:  # the first frames of a link may still carry the tail of its TLS handshake
            assert tls == records * TLS_RECORD_OVERHEAD, (c, tls, records)
    m = sim.metrics["dezent"].result
    assert m["messages"]["gw_gw"] == sum(r["ring_frames"] for r in stats)
    assert m["bytes"]["gw_gw"] == sum(r["payload_bytes"] for r in stats)

    # the CE's own table: one row per tuple, keyed by (gateway, sequence)
    db = sqlite3.connect(tmp_path / "ce.sqlite")
    n_rows, n_keys = db.execute("SELECT COUNT(*), COUNT(DISTINCT gateway || ':' || seq) "
                                "FROM published").fetchone()
    db.close()
    assert n_rows == n_keys == len(expected)


class Injector(threading.Thread):
    """The sensor-injection attack, all day long: every cycle, at every gateway, z-1
    invented IDs for every value of the domain, sent (a) with one stolen sensor credential
    (its gateway lets it in, as that sensor: every line naming another ID is refused; the
    other gateways refuse the certificate), (b) without a client certificate and (c) with a
    self-signed sensor certificate (the handshake fails)."""

    def __init__(self, cluster: LocalSite) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.stop = threading.Event()
        self.cycles = self.sent = self.accepted = self.refused = self.handshakes_refused = 0
        district = cluster.district
        self.stolen = district.sensor_ids[0]
        self.stolen_gw = int(district.sn_gateway[0])
        self.domain = [int(v) for v in bucket_grid(district.max_reading())]
        pki = cluster.dir / "pki"
        self.ca = pki / "ca.crt"
        self.creds = sensor_paths(pki, self.stolen_gw, self.stolen)
        self.forged = write_self_signed(cluster.dir / "attacker", district.sensor_ids[1],
                                        role=sensor_role(int(district.sn_gateway[1])))

    def lines(self, cycle: int) -> list[str]:
        t = cycle * 900
        return [f"{t},zz-fake-{j}-{v},{v}" for v in self.domain
                for j in range(self.cluster.spec.z - 1)]

    def talk(self, g: int, ctx: ssl.SSLContext | None, lines: list[str]) -> list[str] | None:
        host, port = split_address(self.cluster.sensor_addrs[g])
        try:
            with socket.create_connection((host, port), timeout=5) as raw:
                if ctx is None:
                    raw.sendall("".join(x + "\n" for x in lines).encode())
                    data = raw.recv(1 << 16)
                    return None if not data else data.decode(errors="replace").splitlines()
                with ctx.wrap_socket(raw, server_hostname=f"gw{g}") as s:
                    s.sendall("".join(x + "\n" for x in lines).encode())
                    f = s.makefile("r", encoding="utf-8")
                    replies = []
                    for _ in lines:
                        reply = f.readline().strip()
                        if not reply:
                            break
                        replies.append(reply)
                        if reply.startswith("err refused"):
                            return None
                    return replies or None
        except (OSError, ssl.SSLError):
            return None

    def run(self) -> None:
        spec, t0 = self.cluster.spec, self.cluster.t0
        stolen_ctx = client_context(self.ca, *self.creds)
        forged_ctx = client_context(self.ca, *self.forged)
        bare = ssl.create_default_context(cafile=str(self.ca))  # no client certificate
        bare.minimum_version = ssl.TLSVersion.TLSv1_3
        for c in range(spec.start_cycle, spec.last_cycle + 1):
            # half a period before the cycle begins, when the replay sends too
            delay = t0 + (c - 0.5) * spec.period - time.time()
            if self.stop.wait(max(0.0, delay)):
                return
            lines = self.lines(c)
            for g in range(spec.gateways):
                replies = self.talk(g, stolen_ctx, lines)
                if replies is None:
                    self.handshakes_refused += 1
                else:
                    # the lines answered (a gateway closing at the end of the day may not
                    # answer the last ones; the published file shows none of them got in)
                    self.sent += len(replies)
                    self.accepted += sum(r.startswith("ok") for r in replies)
                    self.refused += sum("certificate is" in r for r in replies)
                for ctx in (bare, forged_ctx):
                    if self.talk(g, ctx, lines[:5]) is None:
                        self.handshakes_refused += 1
                    else:
                        self.accepted += 1  # any answer at all would be a failure
            self.cycles += 1


def test_gateways_killed_leak_nothing_small_rings_publish_nothing_and_all_rejoin(tmp_path):
    spec = LocalSiteSpec(gateways=5, period=0.4, cycles=52, z=3, max_sn=12, seed=2, p_pub=0.5,
                         structure="exact", lead=0.8)
    ring = Ring(spec.gateways, spec.seed, spec.sim_config().epoch_cycles)
    kill_cycle, back_cycle = 6, 12  # a restart takes seconds on a loaded machine
    victim = ring.ccc(kill_cycle)  # the coordinator of the cycle it dies in
    three = [g for g in range(spec.gateways) if g != victim][:3]
    two = [g for g in range(spec.gateways) if g not in three]
    kill3_cycle, back3_cycle = 22, 32
    cluster = LocalSite(spec, tmp_path)
    try:
        cluster.start()
        # just after the victim started the collection round of kill_cycle
        _sleep_until(cluster.t0 + (kill_cycle + spec.close) * spec.period + 0.02)
        cluster.kill(f"gw{victim}")
        _sleep_until(cluster.t0 + back_cycle * spec.period)
        cluster.start_gateway(victim)
        _sleep_until(cluster.t0 + (kill3_cycle + spec.close) * spec.period + 0.02)
        for g in three:
            cluster.kill(f"gw{g}")
        _sleep_until(cluster.t0 + back3_cycle * spec.period)
        for g in three:
            cluster.start_gateway(g)
        summary = cluster.finish()
    finally:
        cluster.stop_all()
    assert summary["exit_codes"]["ce"] == 0

    check = check_run(tmp_path, spec.z, spec.delta_t)
    assert check["ok"], check  # no tuple below z reached the CE
    assert check["output_tuples"] > 0

    stats = read_stats(tmp_path)
    by_cycle = defaultdict(dict)
    for row in stats:
        by_cycle[row["cycle"]][row["gateway"]] = row
    others = [g for g in range(spec.gateways) if g != victim]
    # while it is down (from the cycle after its death), the others run complete rounds
    down = range(kill_cycle + 2, back_cycle + 1)
    for c in down:
        rows = by_cycle[c]
        assert victim not in rows or rows[victim]["members"] is None
        members = {tuple(r["members"]) for r in rows.values() if r["members"]}
        assert members == {tuple(others)}, (c, rows)
        assert any(r.get("complete") for r in rows.values()), (c, rows)
    db = sqlite3.connect(tmp_path / "ce.sqlite")
    pubs = db.execute("SELECT gateway, cycle FROM published").fetchall()
    db.close()
    down_pubs = Counter(g for g, c in pubs if c in down)
    assert set(down_pubs) <= {f"gw{g}" for g in others} and sum(down_pubs.values()) > 0
    # it rejoins: in the ring again and publishing before the end
    rejoined = [c for c in range(back_cycle, spec.last_cycle + 1)
                if victim in (by_cycle[c].get(others[0], {}).get("members") or [])]
    assert rejoined, "the restarted gateway never rejoined the ring"
    assert any(g == f"gw{victim}" and c >= rejoined[0] for g, c in pubs)

    # three of five down: the two left form no ring of min_members = 3, publish nothing, and
    # both say why in their logs; the three rejoin and publication resumes
    small = range(kill3_cycle + 2, back3_cycle + 1)
    assert not [c for _g, c in pubs if c in small], "a ring of two published"
    for g in two:
        log = (tmp_path / "logs" / f"gw{g}.log").read_text()
        assert "skipped, publishes nothing" in log and "min_members 3" in log
        assert all(by_cycle[c].get(g, {}).get("skipped") for c in small), g
    after = [c for c in range(back3_cycle + 1, spec.last_cycle + 1)
             if set(by_cycle[c].get(two[0], {}).get("members") or []) == set(range(5))]
    assert after, "the three restarted gateways never rejoined"
    assert {g for g, c in pubs if c >= after[0]} >= {f"gw{g}" for g in three}


def _sleep_until(t):
    delay = t - time.time()
    if delay > 0:
        time.sleep(delay)


def test_the_mix_loses_and_duplicates_nothing_when_a_gateway_dies_holding_the_batch(tmp_path):
    """publication = "mix" with random pass starts, five gateways as real processes. The
    gateway third in the mix order of cycle 6 takes that cycle's batch (already holding the
    first two gateways' tuples) and is killed (SIGKILL) before passing it on; it is restarted
    at once. No acknowledgement comes for cycle 6, so two cycles later every gateway seals its
    tuples of cycle 6 afresh into a new batch (the dead one after its restart). At the end the
    CE holds every tuple of every complete cycle exactly once, cycle 6 included (per (cycle,
    value) what the centralized rule publishes), all under the name "mix", and nothing below z.
    (A cycle counts as complete when all five ran it and the cycles of its Δt: a restarted
    gateway has lost its readings of the Δt before, and so rightly publishes less for a while.)
    """
    spec = LocalSiteSpec(gateways=5, period=0.4, cycles=34, z=3, max_sn=12, seed=2, p_pub=1.0,
                         structure="exact", lead=0.8, publication="mix",
                         publication_order="random", delta_t=900.0)
    hold = 6
    victim = Ring(spec.gateways, spec.seed, spec.sim_config().epoch_cycles).from_ccc(hold)[2]
    cluster = LocalSite(spec, tmp_path)
    log = tmp_path / "logs" / f"gw{victim}.log"
    try:
        cluster.start(gateway_env={victim: {"STREAMANON_FAILPOINT": f"mix_hold:{hold}"}})
        end = time.time() + 30
        while "failpoint mix_hold: holding" not in (log.read_text() if log.exists() else ""):
            assert time.time() < end, "the victim never got the batch of cycle 6"
            time.sleep(0.02)
        cluster.kill(f"gw{victim}")
        killed_at = time.time()
        cluster.start_gateway(victim)
        summary = cluster.finish()
    finally:
        cluster.stop_all()
    assert all(code == 0 for code in summary["exit_codes"].values()), summary
    check = check_run(tmp_path, spec.z, spec.delta_t)
    assert check["ok"] and check["unmatched"] == 0, check

    db = sqlite3.connect(tmp_path / "ce.sqlite")
    rows = db.execute("SELECT gateway, cycle, u, a, received FROM published").fetchall()
    db.close()
    assert {g for g, *_ in rows} == {"mix"}
    keys = [(c, u) for _g, c, u, _a, _r in rows]
    assert len(keys) == len(set(keys))  # no tuple stored twice
    # cycle 6 reached the CE only in a later batch, and the dead gateway's own tuples too
    late = [r for _g, c, _u, _a, r in rows if c == hold]
    assert late and min(late) > killed_at
    prefix = f"gw{victim:03d}-"
    assert any(u.startswith(prefix) for _g, c, u, _a, _r in rows if c == hold)

    sim = simulate(spec.district(), spec.cycles, spec.sim_config(), keep_published=True)
    central = Counter((c, int(sim.readings[c, s])) for c, s in
                      zip(*np.nonzero(sim.published["centralized"]), strict=True))
    got = Counter((c, int(a)) for _g, c, _u, a, _r in rows)
    stats = {(r["cycle"], r["gateway"]): r for r in read_stats(tmp_path)}
    sensors = spec.district().sn_per_gw

    def ran(c: int) -> bool:  # all five took part, each with all its readings
        ccc = [r for (cc, _g), r in stats.items() if cc == c and r["ccc"] == r["gateway"]]
        return bool(ccc) and ccc[0].get("complete") and ccc[0]["members"] == list(range(5)) \
            and all(stats.get((c, g), {}).get("readings") == sensors[g] or
                    (g == victim and c <= hold) for g in range(5))  # (its stats died with it)

    w = spec.sim_config().window
    compared = [c for c in range(spec.last_cycle - 2) if all(ran(x) for x in
                                                            range(max(0, c - w + 1), c + 1))]
    assert hold in compared and len(compared) >= 10, compared
    for c in compared:
        want = {k: v for k, v in central.items() if k[0] == c}
        assert {k: v for k, v in got.items() if k[0] == c} == want, c


def test_a_site_over_mqtt_passes_the_z_checker_and_loses_nothing_across_a_broker_kill(tmp_path):
    """cluster up --sensor-transport mqtt --gateways 5 --period 1 --cycles 20 --z 3, one
    gateway's broker killed (SIGKILL) mid-run: the gateway starts it again on its database,
    every published tuple passes the independent z checker and every reading acknowledged
    (the gateway's receipt) was counted by its gateway, and no other."""
    import os
    import signal

    _need_mqtt()
    spec = LocalSiteSpec(gateways=5, period=1.0, cycles=20, z=3, sensor_transport="mqtt")
    site = LocalSite(spec, tmp_path)
    try:
        site.start()
        while site.current_cycle() < 8:
            time.sleep(0.1)
        pid = int((tmp_path / "state/gw2/mqtt/mosquitto.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        summary = site.finish()
    finally:
        site.stop_all()
    assert all(code == 0 for code in summary["exit_codes"].values()), summary
    check = check_run(tmp_path, spec.z, spec.delta_t)
    assert check["ok"] and check["output_tuples"] > 0, check
    with open(tmp_path / "measurements.csv") as fh:
        acknowledged = sum(1 for _ in fh) - 1
    assert sum(r["readings"] for r in read_stats(tmp_path)) == acknowledged
    assert "the MQTT broker exited" in (tmp_path / "logs/gw2.log").read_text()


def test_a_gateway_that_cannot_start_leaves_no_mqtt_broker_behind(tmp_path):
    """gw0's metrics port is taken by another process: the gateway exits with the error,
    and the mosquitto it had started for its sensors is stopped, not left running (CI saw
    one outlive its gateway, which had failed at the same point)."""
    import os
    import socket

    _need_mqtt()
    spec = LocalSiteSpec(gateways=3, period=1.0, cycles=2, z=3, sensor_transport="mqtt")
    site = LocalSite(spec, tmp_path)
    site.prepare()
    host, port = site.metrics_addrs["gw0"].rsplit(":", 1)
    with socket.create_server((host, int(port))):  # another process's listener, meanwhile
        try:
            site.start_gateway(0)
            code = site.wait("gw0", 60)
        finally:
            site.stop_all()
    assert code not in (None, 0)
    log = (tmp_path / "logs/gw0.log").read_text()
    assert "Address already in use" in log
    assert "mosquitto" in log  # its broker had started
    pid_file = tmp_path / "state/gw0/mqtt/mosquitto.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        assert not alive, f"mosquitto {pid} outlived its gateway"


def _need_mqtt() -> None:
    """Skip unless paho-mqtt and a mosquitto binary are here."""
    pytest.importorskip("paho.mqtt")
    from streamanon.errors import ConfigError
    from streamanon.net.mqtt_broker import find_mosquitto

    try:
        find_mosquitto()
    except ConfigError as exc:
        pytest.skip(str(exc))

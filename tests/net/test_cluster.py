"""Real processes on loopback: a CE and five gateways (mutual TLS) and a sensor replay.

* A replayed day: the CE's table equals the in-process simulation's deZent publications
  tuple for tuple (exact structure, p_pub = 1 so no coin decides), the per (cycle, value)
  counts equal the centralized scenario's, the independent z checker passes, the bytes of
  the ring frames per round equal the simulation's byte metric plus the framing overhead, and
  the bytes TCP carried equal the frames plus the TLS record overhead.
* A gateway killed in the middle of a cycle: no privacy violation, the others go on, it
  rejoins after a restart.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter, defaultdict

import numpy as np
import pytest

from streamanon.dezent.ring import Ring
from streamanon.net import framing
from streamanon.net.cluster import Cluster, ClusterSpec, check_run, read_stats
from streamanon.sim.scenarios import simulate

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
    spec = ClusterSpec(gateways=5, period=period, cycles=cycles, z=5, max_sn=20, seed=3,
                       p_pub=1.0, structure=structure, lead=2 * period)
    cluster = Cluster(spec, tmp_path)
    summary = cluster.run()
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


def test_a_gateway_killed_mid_cycle_leaks_nothing_and_rejoins(tmp_path):
    spec = ClusterSpec(gateways=5, period=0.4, cycles=40, z=3, max_sn=12, seed=2, p_pub=0.5,
                       structure="exact", lead=0.8)
    ring = Ring(spec.gateways, spec.seed, spec.sim_config().epoch_cycles)
    kill_cycle, back_cycle = 6, 12  # a restart takes seconds on a loaded machine
    victim = ring.ccc(kill_cycle)  # the coordinator of the cycle it dies in
    cluster = Cluster(spec, tmp_path)
    try:
        cluster.start()
        # just after the victim started the collection round of kill_cycle
        _sleep_until(cluster.t0 + (kill_cycle + spec.close) * spec.period + 0.02)
        cluster.kill(f"gw{victim}")
        _sleep_until(cluster.t0 + back_cycle * spec.period)
        cluster.start_gateway(victim)
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


def _sleep_until(t):
    delay = t - time.time()
    if delay > 0:
        time.sleep(delay)

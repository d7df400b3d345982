"""Benchmark: one deZent cycle over the network (collection round + publication passes + the
CE's commit of the published tuples) for 5, 10 and 25 gateways on loopback, 20 sensor nodes
each: every gateway, the CE and the sensor replay are separate processes talking mutual TLS.

Per cycle: from the coordinator starting the collection round to (a) the structure coming back
after the last publication pass ("round") and (b) the CE's commit of the cycle's last tuple
("to CE commit"). Median and worst over the measured cycles (the first two warm up).
Target (issue 4): a 15-minute cycle should be a sub-second affair.

Then (issue 11), side by side on the same district: the round with TLS sensor nodes (one
connection and certificate per sensor node, the default) against plaintext sensor nodes
(``insecure_plaintext_sensors``), 25 gateways with 20 sensor nodes each: target, TLS adds at
most 10 % to the median round. And the CE's commit throughput, PostgreSQL (a temporary server
of this machine's binaries) against SQLite: batches of 1,000 tuples, each committed durably.

Run:  .venv/bin/python benchmarks/bench_dezent_net.py [--gateways 5,10,25] [--cycles 8]
      [--skip-sizes] [--skip-tls] [--skip-store]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from streamanon.net.cluster import Cluster, ClusterSpec, free_ports, read_stats
from streamanon.net.framing import WireTuple
from streamanon.net.pg_server import NoServer, temporary_server
from streamanon.net.store import open_store

CYCLE_SECONDS = 900.0


def one_size(gateways: int, cycles: int, period: float, structure: str, workdir: Path,
             insecure: bool = False) -> dict[str, float]:
    spec = ClusterSpec(gateways=gateways, period=period, cycles=cycles, z=10, max_sn=40,
                       sn_sd=0.0, seed=1, p_pub=0.5, structure=structure, lead=period,
                       insecure_plaintext_sensors=insecure)
    began = time.perf_counter()
    summary = Cluster(spec, workdir).run()
    wall = time.perf_counter() - began
    stats = read_stats(workdir)
    db = sqlite3.connect(workdir / "ce.sqlite")
    committed = dict(db.execute("SELECT cycle, MAX(received) FROM published GROUP BY cycle"))
    n_tuples = dict(db.execute("SELECT cycle, COUNT(*) FROM published GROUP BY cycle"))
    db.close()
    by_cycle = defaultdict(list)
    for row in stats:
        by_cycle[row["cycle"]].append(row)
    rounds, to_ce, frames, full = [], [], [], 0
    for c in range(2, cycles):
        rows = by_cycle[c]
        ccc = [r for r in rows if r["ccc"] == r["gateway"] and r.get("complete")]
        if not ccc:
            continue
        start = ccc[0]["started_at"]
        rounds.append(ccc[0]["completed_at"] - start)
        if c in committed:
            to_ce.append(committed[c] - start)
        frames.append(sum(r["ring_frames"] for r in rows))
        full += len(ccc[0]["members"]) == gateways
    sensors = spec.district().sensors
    return {"gateways": gateways, "sensors": sensors, "cycles_measured": len(rounds),
            "full_rings": full, "round_median": statistics.median(rounds),
            "round_max": max(rounds), "ce_median": statistics.median(to_ce),
            "ce_max": max(to_ce), "frames_per_cycle": statistics.mean(frames),
            "published_per_cycle": statistics.mean(n_tuples.get(c, 0)
                                                   for c in range(2, cycles)),
            "run_seconds": wall, "published_total": summary["published"]}


def store_throughput(store: str, batches: int, size: int = 1000) -> float:
    """Tuples per second committed by the CE's store, batch by batch (each durable)."""
    st = open_store(store)
    inc = bytes(16)
    began = time.perf_counter()
    for b in range(batches):
        st.store("gw0", inc, tuple(WireTuple(b * size + i + 1, b, b * 900.0, f"sn{i}", i % 500)
                                   for i in range(size)))
    seconds = time.perf_counter() - began
    st.close()
    return batches * size / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gateways", default="5,10,25")
    ap.add_argument("--cycles", type=int, default=8)
    ap.add_argument("--period", type=float, default=2.0, help="Wall seconds per cycle.")
    ap.add_argument("--structure", default="cbf", help="cbf (the paper's) or exact.")
    ap.add_argument("--skip-sizes", action="store_true")
    ap.add_argument("--skip-tls", action="store_true")
    ap.add_argument("--skip-store", action="store_true")
    ap.add_argument("--batches", type=int, default=100, help="Store benchmark: batches of "
                    "1,000 tuples.")
    args = ap.parse_args()
    if not args.skip_sizes:
        sizes(args)
    if not args.skip_tls:
        print(f"\nsensor nodes over TLS vs plaintext: 25 gateways x 20 sensor nodes, "
              f"{args.structure}, {args.cycles} cycles of {args.period:g} s (first 2 not "
              "measured); round = coordinator's start to the structure's return")
        med = {}
        for insecure in (True, False):
            with tempfile.TemporaryDirectory(prefix="bench-net-tls-") as tmp:
                r = one_size(25, args.cycles, args.period, args.structure, Path(tmp),
                             insecure=insecure)
            name = "plaintext" if insecure else "TLS"
            med[name] = r["round_median"]
            print(f"  {name:>9} sensors: round median {r['round_median'] * 1e3:8.1f} ms, max "
                  f"{r['round_max'] * 1e3:8.1f} ms, to CE median {r['ce_median'] * 1e3:8.1f} "
                  f"ms ({r['full_rings']}/{r['cycles_measured']} full rings)")
        print(f"  TLS / plaintext median round: {med['TLS'] / med['plaintext']:.3f} "
              "(target <= 1.10)")
    if not args.skip_store:
        print(f"\nCE store commit throughput: {args.batches} batches of 1,000 tuples, one "
              "durable transaction each")
        with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
            sqlite_rate = store_throughput(str(Path(tmp) / "ce.sqlite"), args.batches)
        print(f"  SQLite     {sqlite_rate:>12,.0f} tuples/s")
        try:
            with temporary_server(free_ports(1)[0]) as dsn:
                pg_rate = store_throughput(dsn, args.batches)
            print(f"  PostgreSQL {pg_rate:>12,.0f} tuples/s")
            print(f"  PostgreSQL / SQLite: {pg_rate / sqlite_rate:.2f}")
        except NoServer as exc:
            print(f"  PostgreSQL: not measured ({exc})")


def sizes(args: argparse.Namespace) -> None:
    print(f"deZent over mutual TLS on loopback, {args.structure} structure, z=10, p_pub=0.5, "
          f"20 sensor nodes per gateway, {args.cycles} cycles of {args.period:g} s "
          "(first 2 not measured)")
    print(f"{'gateways':>8} {'SNs':>5} {'full rings':>10} {'frames/cycle':>12} "
          f"{'tuples/cycle':>12} {'round med':>10} {'round max':>10} {'to CE med':>10} "
          f"{'to CE max':>10} {'x faster than 15 min':>21}")
    for g in [int(x) for x in args.gateways.split(",")]:
        with tempfile.TemporaryDirectory(prefix=f"bench-net-{g}-") as tmp:
            r = one_size(g, args.cycles, args.period, args.structure, Path(tmp))
        print(f"{r['gateways']:>8} {r['sensors']:>5} "
              f"{r['full_rings']:>4}/{r['cycles_measured']:<5} {r['frames_per_cycle']:>12.1f} "
              f"{r['published_per_cycle']:>12.1f} {r['round_median'] * 1e3:>8.1f}ms "
              f"{r['round_max'] * 1e3:>8.1f}ms {r['ce_median'] * 1e3:>8.1f}ms "
              f"{r['ce_max'] * 1e3:>8.1f}ms {CYCLE_SECONDS / r['ce_max']:>21,.0f}")


if __name__ == "__main__":
    main()

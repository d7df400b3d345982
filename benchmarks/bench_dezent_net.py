"""Benchmark: one deZent cycle over the network (collection round + publication passes + the
CE's commit of the published tuples) for 5, 10 and 25 gateways on loopback, 20 sensor nodes
each: every gateway, the CE and the sensor replay are separate processes talking mutual TLS.

Per cycle: from the coordinator starting the collection round to (a) the structure coming back
after the last publication pass ("round") and (b) the CE's commit of the cycle's last tuple
("to CE commit"). Median and worst over the measured cycles (the first two warm up).
Target: a 15-minute cycle should be a sub-second affair.

Then, side by side on the same district: the round with TLS sensor nodes (one
connection and certificate per sensor node, the default) against plaintext sensor nodes
(``insecure_plaintext_sensors``), 25 gateways with 20 sensor nodes each: target, TLS adds at
most 10 % to the median round. And the CE's commit throughput, PostgreSQL (a temporary server
of this machine's binaries) against SQLite: batches of 1,000 tuples, each committed durably.

Then, side by side on the same district, 25 gateways x 20 sensor nodes: direct
sending against the mix (``publication = "mix"``: sealed tuples, a shuffle per gateway, one
batch per cycle to the CE), cycle time from the coordinator's start to the CE's commit of the
cycle's last tuple, in back-to-back pairs of runs; and, load-proof, within each run the cycle
over its own publication round (direct sending commits during the round, so its cycle is its
round; the mix adds its pass and the CE's opening of the batch). Target: the mix at most 1.5x
the direct mode. Bytes per day (96 cycles) on the ring and to the CE, as framed on the wire.

Then, side by side on the same district, 25 gateways x 20 sensor nodes: the sensors over MQTT
(``[sensors] transport = "mqtt"``: a mosquitto broker per gateway, TLS 1.2+ with the sensors'
client certificates, QoS 1, the gateway's receipts) against the TLS line port, runs
interleaved with the order swapped every pair; median cycle round over all measured cycles of
each side, and per pair. Target: MQTT at most 1.2x the line port. Per run, the round's stages
(from the gateways' stats): the ring messages' handling (wall, CPU and page faults per
message) and the rest (transfer, waits for a CPU), and when the sensors' messages ended.

Run:  .venv/bin/python benchmarks/bench_dezent_net.py [--gateways 5,10,25] [--cycles 8]
      [--skip-sizes] [--skip-tls] [--skip-store] [--skip-mix] [--skip-mqtt] [--repeat 3]
      [--mqtt-repeat 6] [--mqtt-gateways 25]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from streamanon.harness.local_site import LocalSite, LocalSiteSpec, free_ports, read_stats
from streamanon.harness.pg_server import NoServer, temporary_server
from streamanon.net import framing
from streamanon.net.framing import WireTuple
from streamanon.net.store import open_store

CYCLE_SECONDS = 900.0


def one_size(gateways: int, cycles: int, period: float, structure: str, workdir: Path,
             insecure: bool = False, publication: str = "direct",
             sensor_transport: str = "line") -> dict[str, Any]:
    spec = LocalSiteSpec(gateways=gateways, period=period, cycles=cycles, z=10, max_sn=40,
                         sn_sd=0.0, seed=1, p_pub=0.5, structure=structure, lead=period,
                         insecure_plaintext_sensors=insecure, publication=publication,
                         sensor_transport=sensor_transport)
    began = time.perf_counter()
    summary = LocalSite(spec, workdir).run()
    wall = time.perf_counter() - began
    stats = read_stats(workdir)
    db = sqlite3.connect(workdir / "ce.sqlite")
    committed = dict(db.execute("SELECT cycle, MAX(received) FROM published GROUP BY cycle"))
    n_tuples = dict(db.execute("SELECT cycle, COUNT(*) FROM published GROUP BY cycle"))
    rows = db.execute("SELECT gateway, cycle, t, u, a FROM published").fetchall()
    db.close()
    ce_bytes: dict[int, int] = defaultdict(int)  # framed as sent (direct: a batch per gateway)
    if publication == "mix":
        for row in stats:
            if row.get("mix_bytes") is not None:
                ce_bytes[row["cycle"]] += row["mix_bytes"] + len(framing.encode_mix(0, []))
    else:
        batches: dict[tuple[int, str], list[WireTuple]] = defaultdict(list)
        for g, c, t, u, a in rows:
            batches[c, g].append(WireTuple(1, c, t, u, int(a)))
        for (c, _g), tuples in batches.items():
            ce_bytes[c] += len(framing.encode_batch(bytes(16), tuples))
    by_cycle = defaultdict(list)
    for row in stats:
        by_cycle[row["cycle"]].append(row)
    rounds, to_ce, frames, full, ring_bytes, to_ce_bytes = [], [], [], 0, [], []
    per_cycle = []  # to the CE's commit / the publication round, in the same cycle
    stages: dict[str, list[float]] = defaultdict(list)  # per measured cycle
    for c in range(2, cycles):
        rows = by_cycle[c]
        ccc = [r for r in rows if r["ccc"] == r["gateway"] and r.get("complete")]
        if not ccc:
            continue
        start = ccc[0]["started_at"]
        rounds.append(ccc[0]["completed_at"] - start)
        if c in committed:
            to_ce.append(committed[c] - start)
            per_cycle.append(to_ce[-1] / rounds[-1])
        frames.append(sum(r["ring_frames"] for r in rows))
        ring_bytes.append(sum(r["ring_bytes"] for r in rows))
        to_ce_bytes.append(ce_bytes.get(c, 0))
        full += len(ccc[0]["members"]) == gateways
        handled = sum(r.get("handled", 0) for r in rows)
        if handled:  # the ring's messages are handled one after the other: the round is
            # their handling plus their transfer (and the waits for a CPU between)
            handle = sum(r.get("handle_ms", 0.0) for r in rows) / 1e3
            stages["handle"].append(handle)
            stages["transfer"].append(rounds[-1] - handle)
            stages["handle_per_msg"].append(handle / handled)
            stages["cpu_per_msg"].append(sum(r.get("thread_cpu_ms", 0.0) for r in rows)
                                         / 1e3 / handled)
            stages["faults_per_msg"].append(sum(r.get("page_faults", 0) for r in rows)
                                            / handled)
        spans = [r["intake_span"] for r in rows if r.get("intake_span")]
        if spans:  # the sensors' messages (for a later cycle) came in this long before
            stages["intake_end_before_round"].append(start - max(s[1] for s in spans))
    sensors = spec.district().sensors
    return {"gateways": gateways, "sensors": sensors, "cycles_measured": len(rounds),
            "full_rings": full, "round_median": statistics.median(rounds),
            "round_max": max(rounds), "ce_median": statistics.median(to_ce),
            "ce_max": max(to_ce), "frames_per_cycle": statistics.mean(frames),
            "published_per_cycle": statistics.mean(n_tuples.get(c, 0)
                                                   for c in range(2, cycles)),
            "rounds": rounds, "run_seconds": wall, "published_total": summary["published"],
            "ce_over_round": statistics.median(per_cycle),
            "ring_bytes_per_day": 96 * statistics.mean(ring_bytes),
            "ce_bytes_per_day": 96 * statistics.mean(to_ce_bytes),
            "stages": {k: statistics.median(v) for k, v in stages.items()}}


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
    ap.add_argument("--skip-mix", action="store_true")
    ap.add_argument("--skip-mqtt", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="Mix part: runs of each mode.")
    ap.add_argument("--mqtt-repeat", type=int, default=6, help="MQTT part: runs of each "
                    "transport, interleaved.")
    ap.add_argument("--mqtt-gateways", type=int, default=25, help="MQTT part: gateways "
                    "(the target is for 25).")
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
    if not args.skip_mix:
        mix_vs_direct(args)
    if not args.skip_mqtt:
        mqtt_vs_line(args)
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


def mix_vs_direct(args: argparse.Namespace) -> None:
    print(f"\ndirect sending vs the mix: 25 gateways x 20 sensor nodes, {args.structure}, "
          f"{args.cycles} cycles of {args.period:g} s (first 2 not measured); cycle = "
          "coordinator's start to the CE's commit of the cycle's last tuple")
    med: dict[str, list[float]] = {"direct": [], "mix": []}
    extra, within = [], []
    for _ in range(args.repeat):  # pairs back to back, so that a change of load hits both
        for publication in ("direct", "mix"):
            with tempfile.TemporaryDirectory(prefix=f"bench-net-{publication}-") as tmp:
                r = one_size(25, args.cycles, args.period, args.structure, Path(tmp),
                             publication=publication)
            med[publication].append(r["ce_median"])
            if publication == "mix":
                extra.append(r["ce_median"] - r["round_median"])
            within.append(f"{publication} {r['ce_over_round']:.2f}")
            print(f"  {publication:>6}: to CE median {r['ce_median'] * 1e3:8.1f} ms, max "
                  f"{r['ce_max'] * 1e3:8.1f} ms, round median {r['round_median'] * 1e3:8.1f} "
                  f"ms ({r['full_rings']}/{r['cycles_measured']} full rings, "
                  f"{r['published_per_cycle']:.0f} tuples/cycle); bytes/day ring "
                  f"{r['ring_bytes_per_day']:,.0f}, to CE {r['ce_bytes_per_day']:,.0f}; load "
                  f"{os.getloadavg()[0]:.1f}")
    pairs = [m / d for m, d in zip(med["mix"], med["direct"], strict=True)]
    ratio = statistics.median(med["mix"]) / statistics.median(med["direct"])
    print(f"  mix / direct median cycle, per pair: {', '.join(f'{x:.2f}' for x in pairs)}; "
          f"median of the pairs {statistics.median(pairs):.3f}, ratio of the medians "
          f"{ratio:.3f} (target <= 1.5); the mix pass and the CE's opening of the batch "
          f"(to CE - round, mix runs): {', '.join(f'{x * 1e3:.0f}' for x in extra)} ms")
    print("  within each run, same load: cycle to the CE's commit / its publication round "
          "(median over cycles; direct sending commits during the round, so its cycle is its "
          f"round): {', '.join(within)}")


def mqtt_vs_line(args: argparse.Namespace) -> None:
    n = args.mqtt_gateways
    print(f"\nsensors over MQTT/TLS vs the TLS line port: {n} gateways x 20 sensor nodes, "
          f"{args.structure}, {args.cycles} cycles of {args.period:g} s (first 2 not measured); "
          "round = coordinator's start to the structure's return; runs interleaved, the order "
          "swapped every pair (line, mqtt, mqtt, line, ...) so that a drift of the load hits "
          "both alike")
    med: dict[str, list[float]] = {"line": [], "mqtt": []}
    rounds: dict[str, list[float]] = {"line": [], "mqtt": []}
    loads: list[float] = []
    for i in range(args.mqtt_repeat):
        for transport in (("line", "mqtt") if i % 2 == 0 else ("mqtt", "line")):
            with tempfile.TemporaryDirectory(prefix=f"bench-net-{transport}-") as tmp:
                r = one_size(n, args.cycles, args.period, args.structure, Path(tmp),
                             sensor_transport=transport)
            med[transport].append(r["round_median"])
            rounds[transport] += r["rounds"]
            loads.append(os.getloadavg()[0])
            print(f"  {transport:>4}: round median {r['round_median'] * 1e3:8.1f} ms, max "
                  f"{r['round_max'] * 1e3:8.1f} ms, to CE median {r['ce_median'] * 1e3:8.1f} "
                  f"ms ({r['full_rings']}/{r['cycles_measured']} full rings, "
                  f"{r['published_per_cycle']:.0f} tuples/cycle, {r['published_total']} "
                  f"published); load {loads[-1]:.1f}")
            st = r["stages"]
            if "handle" in st:
                print(f"        per stage (medians): ring messages handled "
                      f"{st['handle'] * 1e3:.0f} ms + transfer and waits "
                      f"{st['transfer'] * 1e3:.0f} ms; per message {st['handle_per_msg'] * 1e3:.2f}"
                      f" ms, {st['cpu_per_msg'] * 1e3:.2f} ms CPU, "
                      f"{st['faults_per_msg']:.0f} page faults; the sensors' messages ended "
                      f"{st.get('intake_end_before_round', float('nan')):.2f} s before the "
                      "round")
    pairs = [m / d for m, d in zip(med["mqtt"], med["line"], strict=True)]
    line, mqtt = statistics.median(rounds["line"]), statistics.median(rounds["mqtt"])
    print(f"  median round over all measured cycles ({len(rounds['line'])} each): line port "
          f"{line * 1e3:.1f} ms, MQTT {mqtt * 1e3:.1f} ms, MQTT / line {mqtt / line:.3f} "
          f"(target <= 1.2); per pair: {', '.join(f'{x:.2f}' for x in pairs)}, median of the "
          f"pairs {statistics.median(pairs):.3f}; load {min(loads):.1f}-{max(loads):.1f}")


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

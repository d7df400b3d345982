"""Benchmark: one simulated year (35,040 cycles) of 100 gateways, max 20 sensor nodes each,
three scenarios (centralized, fully decentralized, deZent with the default CBF), one core.

Target: under 60 s, and still so with the privacy options (random order, mix, counters from
the bound) off (the defaults).
The authors' simulation needed 134 s for one simulated *day* of 25 gateways (24,096
measurements with seed 1 here), i.e. about 180 measurements/s.

Then, each side by side on the same districts:

* **position bias**: 25 gateways, z = 25, the paper's publication order vs random pass starts,
  p_pub in {1, 0.5, 0.1}, seeds 1..10 (a day each): max/min publication ratio over ring
  positions (pooled over seeds), next to the centralized scenario's (no ring order: the
  spread of the data itself), the publication ratio and violations. Targets: random <= 1.02,
  ratio within 0.005 of the paper order, zero violations.
* **gateway linkability**: 25 gateways, a day, z = 10: the CE's best guess of a tuple's gateway
  (balanced accuracy, floor 1/n) with direct sending vs the mix, from what it sees, from the
  channel alone and from the values alone; the mix also through the message-level core (real
  sealing, OS-random shuffles, the CE opening every batch). Target: mix <= 1/n + 0.01.
* **counter width and bytes per day**: the CBF and the exact counter with 20-bit counters vs
  counters from the bound (bytes per ring message and per day); and the trade-off: bytes per
  day and violations of the CBF at several false-positive rates, the exact counter and the
  centralized scheme, direct and mix (seeds 1..10).

Run:  .venv/bin/python benchmarks/bench_dezent_sim.py [--days 365] [--gateways 100]
      [--skip-year] [--skip-options] [--plots DIR]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the target says
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import resource
import time
from pathlib import Path

import numpy as np

from streamanon.dezent.grid import CYCLES_PER_DAY
from streamanon.sim.config import SimConfig
from streamanon.sim.district import District, DistrictConfig, load_profiles
from streamanon.sim.linkability import channel, gateway_linkability, position_decile
from streamanon.sim.scenarios import run_protocol, simulate

REFERENCE_MEASUREMENTS_PER_S = 24_096 / 134.0


def year(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    load_profiles(2024)
    t_profiles = time.perf_counter() - t0
    district = District(DistrictConfig(gateways=args.gateways, max_sn=args.max_sn,
                                       seed=args.seed))
    cycles = args.days * CYCLES_PER_DAY
    t1 = time.perf_counter()
    result = simulate(district, cycles, SimConfig(z=args.z, structure="cbf"))
    seconds = time.perf_counter() - t1
    measured = cycles * district.sensors
    rate = measured / seconds
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = result.to_dict()["scenarios"]
    print(f"district: {args.gateways} gateways, {district.sensors} sensor nodes, "
          f"{cycles:,} cycles ({args.days} days), z={args.z}, seed {args.seed}; new options "
          "off (direct publication, paper order, counters from the bound)")
    print(f"profiles (demandlib, once): {t_profiles:.2f} s")
    print(f"simulation, three scenarios: {seconds:.2f} s  (target < 60 s: "
          f"{'met' if seconds < 60 else 'MISSED'})")
    print(f"measurements: {measured:,}  ->  {rate:,.0f} measurements/s "
          f"({rate / REFERENCE_MEASUREMENTS_PER_S:,.0f}x the reference's ~180/s)")
    print(f"peak memory (max RSS): {peak_mb:,.0f} MiB")
    print("publication ratio: " + ", ".join(f"{k} {v['publication_ratio']:.4f}"
                                            for k, v in s.items()))
    print(f"deZent: violations {s['dezent']['violations']}, contested cycles "
          f"{s['dezent']['contested_cycles']}, CBF {s['dezent']['structure_bytes']:,} B "
          f"({result.spec.bits}-bit counters)")


def position_bias(seeds: list[int]) -> None:
    print(f"\nposition bias: 25 gateways, max 20 SNs, z=25, a day per seed, seeds "
          f"{seeds[0]}..{seeds[-1]}; max/min publication ratio over ring positions (pooled)")
    print(f"{'p_pub':>5} {'order':>7} {'max/min':>8} {'CCC':>6} {'succ.':>6} {'centralized':>12} "
          f"{'ratio':>8} {'violations':>10} {'seconds':>8}")
    for p_pub in (1.0, 0.5, 0.1):
        ratios = {}
        for order in ("paper", "random"):
            began = time.perf_counter()
            pub = meas = cpub = 0
            published = measured = violations = 0
            for seed in seeds:
                d = District(DistrictConfig(gateways=25, max_sn=20, seed=seed))
                r = simulate(d, CYCLES_PER_DAY, SimConfig(z=25, p_pub=p_pub, structure="cbf",
                                                          publication_order=order))
                m, c = r.metrics["dezent"], r.metrics["centralized"]
                pub = pub + m.by_position
                meas = meas + m.measured_by_position
                cpub = cpub + c.by_position
                published += m.published
                measured += m.measured
                violations += m.violations
            per, cper = pub / meas, cpub / meas
            ratios[order] = published / measured
            print(f"{p_pub:>5g} {order:>7} {per.max() / per.min():>8.4f} {per[0]:>6.3f} "
                  f"{per[1]:>6.3f} {cper.max() / cper.min():>12.4f} {ratios[order]:>8.4f} "
                  f"{violations:>10} {time.perf_counter() - began:>8.1f}")
        print(f"      random - paper publication ratio: {ratios['random'] - ratios['paper']:+.4f}"
              " (target within 0.005)")


def linkability(seeds: list[int]) -> None:
    print(f"\ngateway linkability: 25 gateways, max 20 SNs, z=10, exact counter, first day, "
          f"seeds {seeds[0]}..{seeds[-1]}; the CE's best guess (balanced accuracy; floor 1/25 "
          "= 0.040; target mix <= 0.050)")
    print(f"{'publication':>11} {'what it sees':>12} {'channel only':>12} {'values only':>12} "
          f"{'bytes/day':>13}")
    for publication in ("direct", "mix"):
        acc = {k: [] for k in ("what_the_ce_sees", "channel_only", "content_only")}
        per_day = []
        for seed in seeds:
            d = District(DistrictConfig(gateways=25, max_sn=20, seed=seed))
            r = simulate(d, CYCLES_PER_DAY, SimConfig(z=10, structure="exact",
                                                      publication=publication))
            link = r.metrics["dezent"].result["gateway_linkability"]
            for k in acc:
                acc[k].append(link[k]["balanced_accuracy"])
            per_day.append(r.metrics["dezent"].result["bytes_per_day"])
        print(f"{publication:>11} " + " ".join(f"{np.mean(v):>12.4f}" for v in acc.values())
              + f" {np.mean(per_day):>13,.0f}")
    d = District(DistrictConfig(gateways=25, max_sn=20, seed=seeds[0]))
    began = time.perf_counter()
    core = run_protocol(d, CYCLES_PER_DAY, SimConfig(z=10, structure="exact", publication="mix"))
    v = {k: np.asarray(x) for k, x in core.ce_view.items()}
    ch = channel(v["sender"], position_decile(v["position"], v["size"]))
    cards = [250, int(v["value"].max()) + 1]
    seen = gateway_linkability(v["label"], np.column_stack([ch, v["value"]]), cards, 25,
                               v["fold"])["balanced_accuracy"]
    only = gateway_linkability(v["label"], ch[:, None], cards[:1], 25,
                               v["fold"])["balanced_accuracy"]
    print(f"{'mix (core)':>11} {seen:>12.4f} {only:>12.4f} {'':>12} {'':>13}  seed "
          f"{seeds[0]}: {core.ce_messages} batches, {len(v['label']):,} tuples, "
          f"{core.dummies} dummies, {time.perf_counter() - began:.1f} s")


def counters_and_bytes(seeds: list[int], plots: Path | None) -> None:
    d = District(DistrictConfig(gateways=25, max_sn=20, seed=seeds[0]))
    print("\ncounter width: 25 gateways, max 20 SNs, z=10, a day (seed "
          f"{seeds[0]}); ring bytes per message and per day")
    for structure in ("cbf", "exact"):
        got = {}
        for bits in (20, None):
            r = simulate(d, CYCLES_PER_DAY, SimConfig(z=10, structure=structure,
                                                      counter_bits=bits))
            got[bits] = (r.spec.bits, r.spec.nbytes, r.metrics["dezent"].result["bytes"]["gw_gw"])
        (b20, n20, d20), (bb, nb, db) = got[20], got[None]
        print(f"  {structure:>5}: {b20} bits {n20:>7,} B/msg {d20:>12,} B/day  ->  from the "
              f"bound {bb} bits {nb:>7,} B/msg {db:>12,} B/day  (saved {1 - db / d20:.1%})")
    print(f"\nbytes per day vs violations: 25 gateways, max 20 SNs, z=10, seeds "
          f"{seeds[0]}..{seeds[-1]} (means; counters from the bound)")
    print(f"{'scheme':>16} {'publication':>11} {'B/ring msg':>10} {'bytes/day':>13} "
          f"{'violations/day':>14} {'ratio':>7}")
    points = []
    choices = [(f"CBF P={p:g}", {"structure": "cbf", "fp_rate": p})
               for p in (0.2, 0.1, 0.05, 0.01, 0.001)] + [("exact counter",
                                                           {"structure": "exact"})]
    central: list[float] = []
    for publication in ("direct", "mix"):
        for label, kw in choices:
            rows = []
            for seed in seeds:
                dd = District(DistrictConfig(gateways=25, max_sn=20, seed=seed))
                r = simulate(dd, CYCLES_PER_DAY, SimConfig(z=10, publication=publication, **kw))
                m = r.metrics["dezent"].result
                rows.append((r.spec.nbytes, m["bytes_per_day"], m["violations"],
                             m["publication_ratio"]))
                if publication == "direct" and label == "exact counter":
                    central.append(r.metrics["centralized"].result["bytes_per_day"])
            nb, per_day, viol, ratio = np.mean(rows, axis=0)
            print(f"{label:>16} {publication:>11} {nb:>10,.0f} {per_day:>13,.0f} {viol:>14.2f} "
                  f"{ratio:>7.4f}")
            if publication == "direct":
                points.append((label, float(per_day), float(viol)))
    print(f"{'centralized':>16} {'-':>11} {'-':>10} {np.mean(central):>13,.0f} {0:>14.2f}")
    points.append(("centralized", float(np.mean(central)), 0.0))
    if plots is not None:
        from streamanon.plots import bytes_per_day_tradeoff

        plots.mkdir(parents=True, exist_ok=True)
        path = bytes_per_day_tradeoff(points, plots / "dezent_bytes_per_day_tradeoff.png",
                                      "deZent: bytes per day vs violations (25 gateways, z=10, "
                                      f"seeds {seeds[0]}..{seeds[-1]})")
        print(f"plot: {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--gateways", type=int, default=100)
    ap.add_argument("--max-sn", type=int, default=20)
    ap.add_argument("--z", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seeds", type=int, default=10, help="Seeds 1..N of the issue-15 parts.")
    ap.add_argument("--skip-year", action="store_true")
    ap.add_argument("--skip-options", action="store_true")
    ap.add_argument("--plots", type=Path, default=None, help="Write the trade-off plot here.")
    args = ap.parse_args()
    if not args.skip_year:
        year(args)
    if not args.skip_options:
        seeds = list(range(1, args.seeds + 1))
        position_bias(seeds)
        linkability(seeds)
        counters_and_bytes(seeds, args.plots)


if __name__ == "__main__":
    main()

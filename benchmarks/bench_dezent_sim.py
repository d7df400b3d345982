"""Benchmark: one simulated year (35,040 cycles) of 100 gateways, max 20 sensor nodes each,
three scenarios (centralized, fully decentralized, deZent with the default CBF), one core.

Target (issue 3): under 60 s. The authors' simulation needed 134 s for one simulated *day* of
25 gateways (24,096 measurements with seed 1 here), i.e. about 180 measurements/s.

Run:  .venv/bin/python benchmarks/bench_dezent_sim.py [--days 365] [--gateways 100]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the target says
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import resource
import time

from streamanon.sim.district import CYCLES_PER_DAY, District, DistrictConfig, load_profiles
from streamanon.sim.scenarios import SimConfig, simulate

REFERENCE_MEASUREMENTS_PER_S = 24_096 / 134.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--gateways", type=int, default=100)
    ap.add_argument("--max-sn", type=int, default=20)
    ap.add_argument("--z", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    t0 = time.perf_counter()
    load_profiles(2024)
    t_profiles = time.perf_counter() - t0
    district = District(DistrictConfig(gateways=args.gateways, max_sn=args.max_sn,
                                       seed=args.seed))
    cycles = args.days * CYCLES_PER_DAY
    t1 = time.perf_counter()
    result = simulate(district, cycles, SimConfig(z=args.z))
    seconds = time.perf_counter() - t1
    measured = cycles * district.sensors
    rate = measured / seconds
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = result.to_dict()["scenarios"]
    print(f"district: {args.gateways} gateways, {district.sensors} sensor nodes, "
          f"{cycles:,} cycles ({args.days} days), z={args.z}, seed {args.seed}")
    print(f"profiles (demandlib, once): {t_profiles:.2f} s")
    print(f"simulation, three scenarios: {seconds:.2f} s  (target < 60 s: "
          f"{'met' if seconds < 60 else 'MISSED'})")
    print(f"measurements: {measured:,}  ->  {rate:,.0f} measurements/s "
          f"({rate / REFERENCE_MEASUREMENTS_PER_S:,.0f}x the reference's ~180/s)")
    print(f"peak memory (max RSS): {peak_mb:,.0f} MiB")
    print("publication ratio: " + ", ".join(f"{k} {v['publication_ratio']:.4f}"
                                            for k, v in s.items()))
    print(f"deZent: violations {s['dezent']['violations']}, contested cycles "
          f"{s['dezent']['contested_cycles']}, CBF {s['dezent']['structure_bytes']:,} B")


if __name__ == "__main__":
    main()

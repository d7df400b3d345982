"""Benchmark: streamanon's deZent side by side with the deZent authors' reference simulation.

The reference (SimPy, the public repository cheater78/deZent-demo, its ``deZent/src/main.py``)
is run from a checkout given as ``REF_DIR`` with its own Python (``--ref-python``: a virtual
environment with simpy, numpy, pandas, scipy, mmh3, bitarray, fnvhash); nothing of its code is
imported or copied. Its printed totals and its simulation log (to count its sensor nodes per
gateway, for its CBF sizes) are read back.

For every z and seed (defaults: 25 gateways, at most 20 sensor nodes, one day, z in {10, 25},
seeds 1..3): publication ratio per scenario, reference vs streamanon's default district vs
``district = "reference"`` (the reference's data choices), as mean ± standard deviation over
seeds; messages per link counted both ways (the reference's way: 2 messages per reading in
GW-GW and one CE trigger per cycle and gateway in GW-CE; streamanon's way: ring messages
and tuples only); ring message sizes (the reference's CBF changes with the cycle's
coordinator) beside streamanon's and the paper summary's ~6.1 kB; memory per gateway.

Target: with ``district = "reference"``, streamanon's ratios inside the reference's
seed-to-seed spread (mean ± 2 sd).

The reference does not seed numpy, so its district (sensor nodes per gateway) differs from
run to run even for one seed; its runs take about 2 minutes each (a shared machine: longer).
Outputs (the reference's runs and streamanon's, per seed) are cached in ``--workdir`` (rerun
without ``--rerun`` to reuse them).

Run:  .venv/bin/python benchmarks/bench_dezent_reference.py REF_DIR --ref-python PY
      [--seeds 1,2,3] [--z 10,25] [--gateways 25] [--max-sn 20] [--workdir DIR]
      [--sim-seeds 1..10] [--only reference|streamanon]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path

PAPER_MESSAGE_BYTES = 6_100  # the paper's summary: "a CBF of about 6.1 kB"
REF_COUNTER_BITS = 20
REF_FP = 0.05
REF_DELTA_MIN = 121
SCENARIO_LABELS = {"centralized": "Central", "fully_decentralized": "Fully decentral",
                   "dezent": "Decentral"}

_PATTERNS = {
    "sensors": "Total # SMs in network:",
    "cycles": "Rounds:",
    "centralized.measured": "Central total tuples:",
    "centralized.published": "Central published tuples:",
    "centralized.gw_gw": "Central MSG CNT GWGW:",
    "centralized.gw_ce": "Central MSG CNT GW CE:",
    "fully_decentralized.measured": "Fully decentral total tuples:",
    "fully_decentralized.published": "Fully decentral published tuples:",
    "fully_decentralized.gw_gw": "Fully Decentral MSG CNT GWGW:",
    "fully_decentralized.gw_ce": "Fully Decentral MSG CNT GW CE:",
    "dezent.measured": "Decentral total tuples:",
    "dezent.published": "Decentral published tuples:",
    "dezent.gw_gw": "Decentral measured MSG CNT GW-GW:",
    "dezent.gw_ce": "Decentral measured MSG CNT GW CE:",
}


def parse_reference(stdout: str) -> dict[str, int]:
    """The reference's printed totals (first occurrence of each label)."""
    out: dict[str, int] = {}
    for line in stdout.splitlines():
        for key, label in _PATTERNS.items():
            if key not in out and line.strip().startswith(label):
                out[key] = int(float(line.split(":", 1)[1].strip()))
    missing = sorted(set(_PATTERNS) - set(out))
    if missing:
        raise RuntimeError(f"reference output lacks {missing}")
    return out


def ref_cbf_bytes(sensors_at_ccc: int) -> int:
    """The reference's CBF size for a coordinator with ``sensors_at_ccc`` sensor nodes: its
    ``n = 10 x SNs x Δt / 15 min``, ``m = int(-n ln P / ln² 2)`` counters of 20 bits."""
    n = 10 * sensors_at_ccc * max(1.0, REF_DELTA_MIN * 60 / 900)
    m = int(-n * math.log(REF_FP) / math.log(2) ** 2)
    return math.ceil(m * REF_COUNTER_BITS / 8)


def run_reference(ref_dir: Path, python: str, *, gateways: int, max_sn: int, z: int,
                  seed: int, workdir: Path, rerun: bool) -> dict[str, object]:
    """One run of the reference (cached in ``workdir``)."""
    cache = workdir / f"ref-g{gateways}-m{max_sn}-z{z}-s{seed}.json"
    if cache.exists() and not rerun:
        return json.loads(cache.read_text())
    src = ref_dir / "deZent" / "src"
    if not (src / "main.py").exists():
        raise SystemExit(f"{src / 'main.py'} not found: REF_DIR must be a checkout of the "
                         "reference's SimPy simulation (deZent/src/main.py)")
    for sub in ("anonymized_data/deZent", "log_data/deZent"):
        (ref_dir / "data" / sub).mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.run([python, "main.py", str(gateways), str(max_sn), str(z), str(seed)],
                          cwd=src, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"reference failed (z={z}, seed={seed}):\n{proc.stderr[-2000:]}")
    totals = parse_reference(proc.stdout)
    log = (ref_dir / "data" / "log_data" / "deZent" /
           f"simu_log_decent_w_comm_zanon_z_{z}_dt_{REF_DELTA_MIN * 60}_nGw_{gateways}"
           f"_distSm_normal_maxSm_{max_sn}_seed_{seed}.csv")
    per_gw: Counter[str] = Counter()
    with log.open(newline="") as f:
        seen = set()
        for row in csv.DictReader(f):
            if row["ID"] not in seen:
                seen.add(row["ID"])
                per_gw[row["ID"].split("-")[0]] += 1
    sizes = [ref_cbf_bytes(n) for n in per_gw.values()]
    result = {"totals": totals, "sn_per_gw": sorted(per_gw.values()), "cbf_bytes": sizes,
              "seconds": round(seconds, 1)}
    workdir.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(result))
    return result


def run_streamanon(*, gateways: int, max_sn: int, z: int, seed: int, district: str,
                   structure: str, workdir: Path | None = None) -> dict[str, object]:
    """One simulated day of streamanon's engine with the reference's p_pub (0.5 on average);
    cached in ``workdir`` when given (deterministic per seed)."""
    cache = None if workdir is None else (
        workdir / f"ours-g{gateways}-m{max_sn}-z{z}-s{seed}-{district}-{structure}.json")
    if cache is not None and cache.exists():
        return json.loads(cache.read_text())
    out = _simulate(gateways=gateways, max_sn=max_sn, z=z, seed=seed, district=district,
                    structure=structure)
    if cache is not None:
        workdir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
        cache.write_text(json.dumps(out))
    return out


def _simulate(*, gateways: int, max_sn: int, z: int, seed: int, district: str,
              structure: str) -> dict[str, object]:
    from streamanon.sim.config import SimConfig
    from streamanon.sim.district import District, DistrictConfig
    from streamanon.sim.scenarios import simulate

    d = District(DistrictConfig(gateways=gateways, max_sn=max_sn, seed=seed, kind=district))
    res = simulate(d, 96, SimConfig(z=z, p_pub=0.5, structure=structure)).to_dict()
    return {"scenarios": res["scenarios"], "structure_bytes": res["structure"]["bytes"],
            "sensors": d.sensors, "cycles": 96}


def gateway_memory(*, max_sn: int, structure: str, cycles: int = 96) -> dict[str, int]:
    """Peak Python heap (tracemalloc) of one protocol gateway over ``cycles`` cycles of a
    5-gateway district, through the message-level core: its record log (Δt), the
    structure it holds while the ring passes through it, and its pending tuples."""
    import numpy as np

    from streamanon.dezent.protocol import Gateway, ProtocolConfig, run_cycle
    from streamanon.dezent.ring import Ring
    from streamanon.sim.config import SimConfig
    from streamanon.sim.district import District, DistrictConfig

    d = District(DistrictConfig(gateways=5, max_sn=max_sn, seed=1))
    cfg = SimConfig(z=2, structure=structure)
    spec = cfg.structure_spec(d)
    pcfg = ProtocolConfig(z=cfg.z, delta_t=cfg.delta_t, structure=spec,
                          sensors_total=d.sensors, period=900.0, p_pub=cfg.p_pub,
                          min_members=1)
    ring = Ring(d.gateways, 1)
    members = [np.flatnonzero(d.sn_gateway == g) for g in range(d.gateways)]
    values = d.readings(0, cycles)
    coins = d.coins(0, cycles)
    tracemalloc.start()
    gws = [Gateway(g, pcfg, ring) for g in range(d.gateways)]
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    for c in range(cycles):
        for g, ix in enumerate(members):
            gws[g].measure(c, [(d.sensor_ids[i], int(values[c, i])) for i in ix],
                           coins=coins[c, ix])
        run_cycle(gws, c)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"gateways": d.gateways, "structure_bytes": spec.nbytes,
            "current_per_gw": (current - base) // d.gateways,
            "peak_total": peak - base}


def _ms(values: list[float]) -> tuple[float, float]:
    mean = statistics.fmean(values)
    return mean, statistics.stdev(values) if len(values) > 1 else 0.0


def _fmt(values: list[float]) -> str:
    m, s = _ms(values)
    return f"{m:.3f} ± {s:.3f} ({len(values)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref_dir", type=Path)
    ap.add_argument("--ref-python", default=sys.executable)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--sim-seeds", default="1,2,3,4,5,6,7,8,9,10")
    ap.add_argument("--z", default="10,25")
    ap.add_argument("--gateways", type=int, default=25)
    ap.add_argument("--max-sn", type=int, default=20)
    ap.add_argument("--structure", default="cbf", choices=("cbf", "exact"))
    ap.add_argument("--workdir", type=Path, default=Path("dezent-reference-runs"))
    ap.add_argument("--rerun", action="store_true")
    ap.add_argument("--only", choices=("reference", "streamanon"))
    args = ap.parse_args(argv)
    zs = [int(x) for x in args.z.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
    sim_seeds = [int(x) for x in args.sim_seeds.split(",")]
    ref: dict[int, list[dict]] = {z: [] for z in zs}
    if args.only != "streamanon":
        for z in zs:
            for s in seeds:
                r = run_reference(args.ref_dir, args.ref_python, gateways=args.gateways,
                                  max_sn=args.max_sn, z=z, seed=s, workdir=args.workdir,
                                  rerun=args.rerun)
                print(f"reference z={z} seed={s}: {r['seconds']} s", file=sys.stderr)
                ref[z].append(r)
    if args.only == "reference":
        return 0
    ours: dict[tuple[str, int], list[dict]] = {}
    for district in ("spec", "reference"):
        for z in zs:
            ours[district, z] = [run_streamanon(gateways=args.gateways, max_sn=args.max_sn,
                                                z=z, seed=s, district=district,
                                                structure=args.structure,
                                                workdir=None if args.rerun else args.workdir)
                                 for s in sim_seeds]
    have_ref = all(ref[z] for z in zs)
    verdicts = []
    print(f"\n### Publication ratio ({args.gateways} gateways, at most {args.max_sn} sensor "
          f"nodes, one day, rule paper, p_pub 0.5; mean ± sd (runs))\n")
    print("| z | scenario | reference | streamanon (default district) | "
          "streamanon (`--district reference`) | inside the reference's spread |")
    print("| --- | --- | --- | --- | --- | --- |")
    for z in zs:
        for sc in SCENARIO_LABELS:
            r = [x["totals"][f"{sc}.published"] / x["totals"][f"{sc}.measured"] for x in ref[z]]
            a = [x["scenarios"][sc]["publication_ratio"] for x in ours["spec", z]]
            b = [x["scenarios"][sc]["publication_ratio"] for x in ours["reference", z]]
            inside = "—"
            if have_ref:
                rm, rs = _ms(r)
                bm = statistics.fmean(b)
                ok = abs(bm - rm) <= max(2 * rs, 0.002)
                inside = "yes" if ok else "no"
                verdicts.append(ok)
            print(f"| {z} | {sc} | {_fmt(r) if r else '—'} | {_fmt(a)} | {_fmt(b)} | {inside} |")
    print("\n### Messages per simulated day (deZent scenario, first z, means over runs)\n")
    z = zs[0]
    print("| | counted as the reference (GW-GW incl. 2 per reading; GW-CE incl. triggers) | "
          "counted as streamanon (ring messages; tuples) |")
    print("| --- | --- | --- |")
    for label, runs, kind in (("reference", ref[z], "ref"),
                              ("streamanon (`--district reference`)", ours["reference", z],
                               "ours")):
        if not runs:
            continue
        gg_r, gc_r, gg_s, gc_s = [], [], [], []
        for x in runs:
            if kind == "ref":
                t = x["totals"]
                readings = t["dezent.measured"]
                gg_r.append(t["dezent.gw_gw"])
                gc_r.append(t["dezent.gw_ce"])
                gg_s.append(t["dezent.gw_gw"] - 2 * readings)
                gc_s.append(t["dezent.gw_ce"] - t["cycles"])
            else:
                m = x["scenarios"]["dezent"]
                readings = m["measured"]
                gg_s.append(m["messages"]["gw_gw"])
                gc_s.append(m["messages"]["gw_ce"])
                gg_r.append(m["messages"]["gw_gw"] + 2 * readings)
                gc_r.append(m["messages"]["gw_ce"] + x["cycles"])
        print(f"| {label} | GW-GW {statistics.fmean(gg_r):,.0f}; GW-CE "
              f"{statistics.fmean(gc_r):,.0f} | GW-GW {statistics.fmean(gg_s):,.0f} "
              f"(per cycle {statistics.fmean(gg_s) / 96:.1f}); GW-CE "
              f"{statistics.fmean(gc_s):,.0f} |")
    print("\n### Ring message size\n")
    print("| | bytes per ring message |")
    print("| --- | --- |")
    print(f"| paper's summary | ~{PAPER_MESSAGE_BYTES:,} |")
    sizes = [b for z in zs for x in ref[z] for b in x["cbf_bytes"]]
    if sizes:
        print(f"| reference (CBF sized by each cycle's coordinator, 20-bit counters) | "
              f"{min(sizes):,} .. {max(sizes):,} (mean {statistics.fmean(sizes):,.0f}) |")
    from streamanon.sim.config import SimConfig
    from streamanon.sim.district import District, DistrictConfig

    d = District(DistrictConfig(gateways=args.gateways, max_sn=args.max_sn, seed=1))
    for label, cfg in (
            ("streamanon CBF (counters from the bound)", SimConfig(structure="cbf")),
            ("streamanon CBF, 20-bit counters", SimConfig(structure="cbf", counter_bits=20)),
            ("streamanon CBF, paper's k (no cap), 20-bit",
             SimConfig(structure="cbf", counter_bits=20, max_hashes=None)),
            ("streamanon exact counter (counters from the bound)", SimConfig(structure="exact"))):
        spec = cfg.structure_spec(d)
        print(f"| {label} | {spec.nbytes:,} (m = {spec.m:,}, k = {spec.k}, "
              f"{spec.bits} bits) |")
    print("\n### Memory per gateway (tracemalloc, message-level core, 96 cycles)\n")
    print("| structure | ring message (B) | heap held per gateway after a day (B) | "
          "peak heap of the ring (B) |")
    print("| --- | --- | --- | --- |")
    for structure in ("cbf", "exact"):
        mem = gateway_memory(max_sn=args.max_sn, structure=structure)
        print(f"| {structure} | {mem['structure_bytes']:,} | {mem['current_per_gw']:,} | "
              f"{mem['peak_total']:,} ({mem['gateways']} gateways) |")
    if verdicts:
        print(f"\ntarget (inside the reference's spread): {'met' if all(verdicts) else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The intersection attack on CASTLE's release of the ASHRAE-shaped stream: how far each
building's quasi-identifiers narrow when its releases are intersected.

    .venv/bin/python benchmarks/bench_attack.py [--n 100000] [--k 5] [--l 2] [--delta 1250]
        [--static]

``--n`` rows of :func:`streamanon.data.ashrae.generate` (89 buildings, one row per building
and hour) released by ``streamanon castle --k K --l L --delta D``, then attacked by
``streamanon attack intersect --rules --input --k K``. Printed per attribute: the median,
p10 and p90 of the intersected width relative to the widest single release of each building
(0 = pinned to one value or one leaf), the share narrower than the first release, the share
pinned, and the share whose releases do not intersect (a varying attribute: weather and
time; the attack does not apply); then the share of buildings left with fewer compatible
candidates than their first class held, and fewer than k. ``--static`` marks the attributes
constant per building (square_feet, year_built, floor_count, primary_use) ``static = true``
in the rules: the bound on the intersection (every release covers the building's first one).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the quasi-identifiers constant per building
STATIC = ("square_feet", "year_built", "floor_count", "primary_use")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--l", type=int, default=2)
    parser.add_argument("--delta", type=int, default=1250)
    parser.add_argument("--static", action="store_true",
                        help="bound the intersection on the attributes constant per building")
    args = parser.parse_args()
    from streamanon.data import ashrae

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = ashrae.write_csv(folder / "in.csv", ashrae.generate(args.n, seed=1))
        rules = folder / "rules.toml"
        text = ashrae.rules_toml()
        if args.static:
            for name in STATIC:
                text = text.replace(f'name = "{name}"\n', f'name = "{name}"\nstatic = true\n')
        rules.write_text(text)
        out = folder / "out.csv"
        t0 = time.perf_counter()
        castle = json.loads(subprocess.run(
            [sys.executable, "-m", "streamanon", "castle", "--rules", str(rules), "--k",
             str(args.k), "--l", str(args.l), "--delta", str(args.delta), str(data), "-o",
             str(out), "--json"], check=True, capture_output=True, text=True).stdout)
        castle_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        report = json.loads(subprocess.run(
            [sys.executable, "-m", "streamanon", "attack", "intersect", str(out), "--rules",
             str(rules), "--input", str(data), "--k", str(args.k), "--json"],
            check=True, capture_output=True, text=True).stdout)
        seconds = time.perf_counter() - t0
    static = " (static: " + ", ".join(STATIC) + ")" if args.static else ""
    print(f"castle --k {args.k} --l {args.l} --delta {args.delta} on {args.n:,} ASHRAE-shaped "
          f"rows{static}: {castle['published']:,} released, mean loss "
          f"{castle['mean_info_loss']:.3f} ({castle_seconds:.1f} s, the whole command)")
    losses = castle.get("info_loss") or {}
    if losses:
        print("loss per attribute: " + ", ".join(f"{n} {v:.3f}" for n, v in losses.items()))
    print(f"attack intersect: {report['individuals']} buildings, "
          f"{report['released_twice_or_more']} released twice or more ({seconds:.1f} s)")
    print(f"{'attribute':<20}{'median':>8}{'p10':>8}{'p90':>8}{'narrowed':>10}{'pinned':>8}"
          f"{'varying':>9}")
    for name, a in report["attributes"].items():
        def cell(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"
        print(f"{name:<20}{cell(a['median']):>8}{cell(a['p10']):>8}{cell(a['p90']):>8}"
              f"{a['narrowed']:>10.2f}{a['pinned']:>8.2f}{a['varying']:>9.2f}")
    cands = report["candidates"]
    print(f"compatible candidates in the first class: median {cands['median']:g}, p10 "
          f"{cands['p10']:g}, p90 {cands['p90']:g}; fewer than the first class held: "
          f"{report['below_first_class']:.0%}; fewer than k={args.k}: {report['below_k']:.0%}")


if __name__ == "__main__":
    main()

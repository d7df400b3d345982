"""``streamanon risk`` speed on a released stream: rows/s next to the 200,000 rows/s target.

    .venv/bin/python benchmarks/bench_risk.py [--n 100000] [--copies 10] [--repeat 3]

The release: ``--n`` ASHRAE-shaped rows (``streamanon.data.ashrae``) anonymized by
``streamanon castle --k 5 --l 2 --delta 1250``, then written ``--copies`` times one after
the other (a longer release of the same shape, 1,000,000 rows by default). Measured, each the
best of ``--repeat`` runs, with its 11 quasi-identifiers:

* whole command: ``python -m streamanon risk OUT --qi ... --window 10000 --json`` as a process
  (interpreter start, imports, pyarrow's CSV reader, the figures), wall clock;
* in-process: :func:`streamanon.risk.reidentification_risk` alone on the columns as read, per
  10,000-row window and per day of the timestamp column (ranges counted at their end).

The machine may be shared: figures are noisy, take the best of several runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 200_000
QI = ["primary_use", "square_feet", "year_built", "floor_count", "air_temperature",
      "cloud_coverage", "dew_temperature", "sea_level_pressure", "wind_direction",
      "wind_speed", "timestamp"]


def release(folder: Path, n: int, copies: int) -> tuple[Path, int]:
    """A CASTLE release of ``n`` ASHRAE-shaped rows, repeated ``copies`` times."""
    from streamanon.data import ashrae

    data = ashrae.write_csv(folder / "in.csv", ashrae.generate(n, seed=1))
    rules = folder / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    once = folder / "once.csv"
    subprocess.run([sys.executable, "-m", "streamanon", "castle", "--rules", str(rules),
                    "--k", "5", "--l", "2", "--delta", "1250", str(data), "-o", str(once),
                    "--json"], check=True, capture_output=True)
    header, *rows = once.read_text(encoding="utf-8").splitlines(keepends=True)
    out = folder / "release.csv"
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(header)
        for _ in range(copies):
            fh.writelines(rows)
    return out, len(rows) * copies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from streamanon.cli.risk import read_columns, release_times
    from streamanon.risk import reidentification_risk

    with tempfile.TemporaryDirectory() as tmp:
        path, rows = release(Path(tmp), args.n, args.copies)
        size = os.path.getsize(path) / 1e6
        print(f"release: {rows:,} rows ({size:.0f} MB), {len(QI)} quasi-identifiers")
        command = [sys.executable, "-m", "streamanon", "risk", str(path), "--qi", ",".join(QI),
                   "--window", "10000", "--json"]
        best = float("inf")
        summary = {}
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = subprocess.run(command, check=True, capture_output=True, text=True)
            best = min(best, time.perf_counter() - t0)
            summary = json.loads(res.stdout)
        print(f"whole command (--window 10000): {rows / best:>12,.0f} rows/s  ({best:.2f} s; "
              f"target >= {TARGET:,})  {'ok' if rows / best >= TARGET else 'BELOW TARGET'}")
        print(f"  worst window: {summary['worst_window']}")
        cols = read_columns(path, QI)
        times = release_times(cols[QI.index("timestamp")])
        for label, kw in (("per 10,000 rows", {"window": 10_000}),
                          ("per day", {"every": 86_400.0, "times": times}),
                          ("whole release", {})):
            best = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                reidentification_risk(cols, **kw)
                best = min(best, time.perf_counter() - t0)
            print(f"in-process, {label:<16}: {rows / best:>12,.0f} rows/s  ({best:.2f} s)")


if __name__ == "__main__":
    main()

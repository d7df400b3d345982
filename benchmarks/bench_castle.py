"""CASTLE speed: 100,000 ASHRAE-shaped tuples, k=5, δ=1250, β=50, μ=100, l=0 and l=2.

    .venv/bin/python benchmarks/bench_castle.py [--n 100000]

Prints tuples/s of the operator (process + flush, single core, input built beforehand),
memory held by the operator along the stream (tracemalloc, a separate pass, so that tracing
does not slow the timed pass), and the mean information loss per attribute over released
tuples. Targets (issue 5): >= 10,000 tuples/s (CASTLEGUARD measured ~20 tuples/s at 2,000
tuples, 12 tuples/s by 4,000: 500x), memory flat in stream length, and a mean loss clearly
below CASTLEGUARD's 0.66 over seven numeric quasi-identifiers.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
import tracemalloc

from streamanon.castle import CastleAnonymizer, Row, RuleSet
from streamanon.data import ashrae

TARGET_TPS = 10_000
CASTLEGUARD_TPS = 20
CASTLEGUARD_LOSS = 0.66


def make(l: int) -> CastleAnonymizer:  # noqa: E741
    rules = RuleSet.from_toml(ashrae.rules_toml())
    return CastleAnonymizer(rules, k=5, l=l, delta=1250, beta=50, mu=100, zeta=10)


def timed(rows: list[Row], l: int) -> tuple[float, float, CastleAnonymizer]:  # noqa: E741
    """Wall-clock and CPU seconds of one run (CPU time is the fairer figure on a shared
    machine: it leaves out the time other processes held the core)."""
    op = make(l)
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    for r in rows:
        op.process(r)
    op.flush()
    return time.perf_counter() - start, time.process_time() - cpu, op


def memory(n: int, l: int, checkpoints: int = 5) -> list[tuple[int, float]]:  # noqa: E741
    """Traced memory (MiB) held after each fifth of the stream, rows streamed (not kept)."""
    op = make(l)
    marks = {n * i // checkpoints for i in range(1, checkpoints + 1)}
    out = []
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for i, r in enumerate(ashrae.generate(n, seed=1), start=1):
        op.process(Row(r))
        if i in marks:
            out.append((i, (tracemalloc.get_traced_memory()[0] - base) / 2**20))
    peak = (tracemalloc.get_traced_memory()[1] - base) / 2**20
    tracemalloc.stop()
    out.append((-1, peak))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    args = ap.parse_args()
    n = args.n
    rows = [Row(r, i + 2) for i, r in enumerate(ashrae.generate(n, seed=1))]
    print(f"CASTLE on {n:,} ASHRAE-shaped tuples (k=5, δ=1250, β=50, μ=100, ζ=10); "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPU(s)")
    for l in (0, 2):  # noqa: E741
        seconds, cpu, op = timed(rows, l)
        s = op.summary()
        tps = n / seconds
        seven = sum(s["info_loss"][a] for a in ashrae.SEVEN_NUMERIC) / 7
        print(f"\nl={l}: {tps:,.0f} tuples/s wall clock ({seconds:.2f} s), {n / cpu:,.0f} "
              f"tuples/s CPU time ({cpu:.2f} s); target {TARGET_TPS:,} -> "
              f"{tps / TARGET_TPS:.2f}x (wall), {n / cpu / TARGET_TPS:.2f}x (CPU); "
              f"{tps / CASTLEGUARD_TPS:,.0f}x CASTLEGUARD")
        print(f"  released {s['released']:,}, suppressed {s['suppressed']:,}, clusters "
              f"{s['clusters_released']:,}, best selection {op.timing['best_selection']:.2f} s, "
              f"delay constraint {op.timing['delay_constraint']:.2f} s")
        print(f"  mean information loss, seven numeric ({', '.join(ashrae.SEVEN_NUMERIC)}): "
              f"{seven:.3f} (CASTLEGUARD {CASTLEGUARD_LOSS}); all attributes: "
              f"{s['mean_info_loss']:.3f}")
        print("  per attribute: " + ", ".join(f"{a} {v:.3f}" for a, v in s["info_loss"].items()))
    del rows
    print(f"\nload average after the timed runs: {os.getloadavg()[0]:.2f} (other processes "
          "share the cores; the CPU-time figure leaves their share out)")
    mem = memory(n, 2)
    print("\nmemory held by the operator (l=2, tracemalloc, MiB) after "
          + ", ".join(f"{i:,}: {m:.1f}" for i, m in mem[:-1]) + f"; peak {mem[-1][1]:.1f}")


if __name__ == "__main__":
    main()

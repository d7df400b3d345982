"""The headline speed figures in one go (about a minute on 2 cores), each next to its target.

    .venv/bin/python benchmarks/quick.py [--z-n 1000000] [--castle-n 100000]

Each pair is run side by side in the same run, alternating, best of ``--repeat``, one core
(``taskset -c 0`` when available); the machine may be shared, so read them as such. A missed
target prints its ratio and ``MISS``; the script never fails on one. The generators and
helpers are those of ``bench_zanon.py``, ``bench_castle.py`` and ``bench_flink.py``.

What is measured: CPU seconds of whole processes (the kernel's accounting of the child:
interpreter start, imports, reading, work, writing), for both sides of every pair, except
Flink, whose job runs in a JVM beside Python: wall clock for both sides of that pair. The
in-process CASTLE operator is CPU time of its ``process``/``flush`` loop (``bench_castle.py``).
z against the original: the same measure as ``bench_zanon.py``'s CPU ratio (whole
``streamanon z`` process against the whole process of the original's harness, its 1,000-tuple
warm-up included), the original on ``--ref-n`` tuples (its rate is flat) scaled to ``--z-n``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_castle  # noqa: E402
import bench_zanon  # noqa: E402

PIN = bench_zanon.PIN
CLI = [sys.executable, "-m", "streamanon"]
Z, DELTA_T = 10, 3600.0


def verdict(value: float, target: float, unit: str, higher: bool = True) -> str:
    ratio = value / target if higher else target / max(value, 1e-9)
    ok = value >= target if higher else value <= target
    sign = ">=" if higher else "<="
    return (f"{value:>12,.2f} {unit:<10} target {sign} {target:,g}: {ratio:5.2f}x "
            f"{'ok' if ok else 'MISS'}")


def cpu_of(cmd: list[str], **kw: object) -> tuple[float, str]:
    """CPU seconds of a child process (wall clock on a shared machine says little)."""
    _, cpu, proc = bench_zanon.timed([*PIN, *cmd], **kw)
    return cpu, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--z-n", type=int, default=1_000_000, help="tuples of the z trace")
    ap.add_argument("--castle-n", type=int, default=100_000, help="CASTLE rows")
    ap.add_argument("--verify-n", type=int, default=500_000,
                    help="tuples of the verify z trace (2,500 users, 6,000 values)")
    ap.add_argument("--ref-n", type=int, default=60_000,
                    help="tuples the original zanon runs on (its rate is flat; it is slow)")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    from streamanon.data import ashrae
    from streamanon.data.traces import write_trace, zipf_trace

    print(f"quick benchmark; {'one core (taskset -c 0)' if PIN else 'not pinned'}; "
          f"load average {bench_zanon.load()} on {os.cpu_count()} CPU(s)")
    with tempfile.TemporaryDirectory(prefix="quick-") as tmpdir:
        tmp = Path(tmpdir)
        # -- z whole command vs the original zanon ------------------------------------------
        trace = write_trace(tmp / "trace.csv", zipf_trace(args.z_n, seed=1))
        ours = ref = float("inf")
        ref_out = tmp / "zanon" / "published.tsv"
        ref_out.parent.mkdir()
        ref_trace = write_trace(tmp / "ref.csv", zipf_trace(args.ref_n, seed=1))
        have_ref = importlib.util.find_spec("zanonymity") is not None
        for _ in range(args.repeat):
            cpu, _ = cpu_of([*CLI, "z", "--z", str(Z), "--delta-t", str(DELTA_T), str(trace),
                             "-o", str(tmp / "z.csv"), "--json"])
            ours = min(ours, cpu)
            if have_ref:
                cpu, out = cpu_of([sys.executable, str(HERE / "bench_zanon.py"), "--child",
                                   "zanon", "--trace", str(ref_trace), "--out", str(ref_out),
                                   "--z", str(Z), "--delta-t", str(DELTA_T)])
                got = json.loads(out.strip().splitlines()[-1])
                ref = min(ref, cpu / got["tuples"] * args.z_n)  # whole process, CPU
        n = args.z_n
        print(f"\nz on {n:,} tuples: whole command {n / ours:,.0f} tuples/s ({ours:.2f} s CPU)")
        if have_ref:
            print(f"  original zanon (whole process, CPU, on {args.ref_n:,} tuples): "
                  f"{n / ref:,.0f} tuples/s")
            print(f"  z whole command / zanon   {verdict(ref / ours, 40, 'x')}")
        else:
            print("  SKIP z vs zanon: the original zanonymity package is not installed")

        # -- CASTLE whole command vs the in-process operator ---------------------------------
        cn = args.castle_n
        data = ashrae.write_csv(tmp / "in.csv", ashrae.generate(cn, seed=1))
        rules = tmp / "rules.toml"
        rules.write_text(ashrae.rules_toml(), encoding="utf-8")
        cmd = [*CLI, "castle", "--rules", str(rules), "--k", "5", "--l", "2", "--delta", "1250",
               "--beta", "50", "--mu", "100", "--zeta", "10", str(data), "-o",
               str(tmp / "castle.csv")]
        whole = op = float("inf")
        for _ in range(args.repeat):
            whole = min(whole, cpu_of(cmd)[0])
            _, out = cpu_of([sys.executable, "-c", bench_castle.IN_PROCESS, str(cn), "2"])
            op = min(op, float(out.splitlines()[0].split()[1]))
        print(f"\nCASTLE l=2 on {cn:,} ASHRAE-shaped rows: whole command {cn / whole:,.0f} "
              f"tuples/s ({whole:.2f} s CPU), in-process operator {cn / op:,.0f} tuples/s "
              f"({op:.2f} s CPU)")
        print(f"  whole / operator          {verdict(op / whole, 0.9, 'x')}")
        print(f"  whole command             {verdict(cn / whole, 40_000, 'tuples/s')}")

        # -- the checkers ----------------------------------------------------------------------
        vn = args.verify_n
        vtrace = write_trace(tmp / "vtrace.csv", zipf_trace(vn, n_users=2500, n_values=6000,
                                                            seed=2))
        cpu_of([*CLI, "z", "--z", str(Z), "--delta-t", str(DELTA_T), str(vtrace), "-o",
                str(tmp / "vpub.csv")])
        vz = min(cpu_of([*CLI, "verify", "z", "--z", str(Z), "--delta-t", str(DELTA_T),
                         str(vtrace), str(tmp / "vpub.csv"), "--json"])[0]
                 for _ in range(args.repeat))
        print(f"\nverify z on {vn:,} tuples (2,500 users, 6,000 values), verify castle on "
              f"{cn:,} rows; whole commands, CPU")
        print(f"  verify z                  {verdict(vn / vz, 750_000, 'tuples/s')}")
        vc = min(cpu_of([*CLI, "verify", "castle", str(tmp / "castle.csv"), "--id",
                         "building_id", "--qi", ",".join([*ashrae.NUMERIC_QI, "primary_use"]),
                         "--sa", "meter_reading", "--k", "5", "--l", "2", "--input", str(data),
                         "--json"])[0] for _ in range(args.repeat))
        print(f"  verify castle             {verdict(cn / vc, 100_000, 'rows/s')}")

        # -- start-up ------------------------------------------------------------------------
        print("\nstart-up (best of 5, CPU seconds)")
        for sub in ([], ["z"], ["castle"]):
            best = min(cpu_of([*CLI, *sub, "--help"])[0] for _ in range(5))
            label = " ".join(["streamanon", *sub, "--help"])
            print(f"  {label:<26}{verdict(best, 0.2, 's', higher=False)}")

        # -- Flink -----------------------------------------------------------------------------
        print()
        if importlib.util.find_spec("pyflink") is None:
            print("SKIP Flink z whole command vs pure: PyFlink is not installed")
        else:
            import bench_flink

            ftrace = bench_flink.z_trace(tmp / "ftrace.csv", 100_000)
            pure = min(bench_zanon.timed([*PIN, *CLI, "z", "--z", str(Z), "--delta-t",
                                          str(DELTA_T), str(ftrace), "-o",
                                          str(tmp / "fpure.csv"), "--json"])[0]
                       for _ in range(args.repeat))
            _, flink_s, _ = bench_flink.timed([*bench_flink.cli(), "flink", "z", "--z", str(Z),
                                               "--delta-t", str(DELTA_T), str(ftrace), "-o",
                                               str(tmp / "fflink.csv"), "--json"])
            same = (tmp / "fpure.csv").read_bytes() == (tmp / "fflink.csv").read_bytes()
            print(f"Flink z on 100,000 tuples (wall clock, both): {flink_s:.2f} s vs pure "
                  f"{pure:.2f} s ({flink_s / pure:.1f}x the pure command's time; output "
                  f"identical: {same})")

if __name__ == "__main__":
    try:
        main()
    except subprocess.CalledProcessError as exc:  # a figure that could not be measured
        print(f"a run failed ({exc.returncode}): {' '.join(map(str, exc.cmd))}\n{exc.stderr}")

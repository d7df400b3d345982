"""The headline speed figures in one go (about 80 s on 2 cores), each next to its target.

    .venv/bin/python benchmarks/quick.py [--z-n 1000000] [--castle-n 100000]

Each pair (and each group: the checkers, the start-ups) is run side by side, interleaved
(A, B, A, B, ...) up to ``--repeat`` times (CASTLE: ``--castle-repeat``, its rounds are the
longest; Flink: ``--flink-repeat``; 0 skips that pair), and
every figure is the best (least CPU or wall time) of its runs, for both sides alike: a burst
of load on a shared machine then slows one run, not one side. A pair stops after two rounds
when, on each side, the two best runs agree within ``--agree`` (2%): a third run could only
lower a best that a second run already confirmed. The start-ups run 5 times each with a fresh
help cache, after one first run each that renders the page (shown too). One core
(``taskset -c 0`` when available) for the measured processes; the inputs are generated
meanwhile, in a thread of this process (not a measured child). The closing line gives the
total time and each part's. A missed target prints its ratio and ``MISS``; the script
never fails on one. The package is byte-compiled first, as an installed one is. The generators and
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
import compileall
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_castle  # noqa: E402
import bench_zanon  # noqa: E402
from streamanon.castle.defaults import DEFAULTS  # noqa: E402

PIN = bench_zanon.PIN
CLI = [sys.executable, "-m", "streamanon"]
Z, DELTA_T = 10, 3600.0
#: the trace on which the verify z target is set: 1,000,000 tuples, 2,500 users, 6,000 values
VERIFY_N = 1_000_000


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


#: Rounds each group of runs took (for the closing line).
ROUNDS: dict[str, int] = {}
#: Wall-clock seconds of each part (for the closing line).
PARTS: dict[str, float] = {}


@contextmanager
def part(label: str) -> Iterator[None]:
    """Add the wall-clock time of the block to ``PARTS[label]``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        PARTS[label] = PARTS.get(label, 0.0) + time.perf_counter() - start


def interleaved(runs: dict[str, Callable[[], float]], repeat: int, *, label: str,
                agree: float = 0.0) -> dict[str, float]:
    """The best (least) time of each of ``runs``, run in turn up to ``repeat`` times; done
    after two rounds or more once every side's two best runs agree within ``agree``."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for done in range(1, repeat + 1):
        for name, run in runs.items():
            times[name].append(run())
        ROUNDS[label] = done
        if agree > 0 and done >= 2 and all(
                (two[1] - two[0]) <= agree * two[0]
                for two in (sorted(t)[:2] for t in times.values())):
            break
    return {name: min(t) for name, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--z-n", type=int, default=1_000_000, help="tuples of the z trace")
    ap.add_argument("--castle-n", type=int, default=100_000, help="CASTLE rows")
    ap.add_argument("--verify-n", type=int, default=VERIFY_N,
                    help="tuples of the verify z trace (2,500 users, 6,000 values; the "
                         "target's shape: 1,000,000)")
    ap.add_argument("--ref-n", type=int, default=60_000,
                    help="tuples the original zanon runs on (its rate is flat; it is slow)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="interleaved runs of each pair (best of them is shown)")
    ap.add_argument("--castle-repeat", type=int, default=2,
                    help="interleaved runs of the CASTLE pair (~13 s a round)")
    ap.add_argument("--flink-repeat", type=int, default=2,
                    help="interleaved runs of the Flink pair (a JVM start each; 0: skip the "
                         "pair)")
    ap.add_argument("--agree", type=float, default=0.02,
                    help="stop a pair after two rounds when each side's two best runs "
                         "differ by at most this share (0: always --repeat rounds)")
    args = ap.parse_args()
    if args.repeat < 1 or args.castle_repeat < 1:
        ap.error("--repeat and --castle-repeat must be at least 1")
    if args.flink_repeat < 0:
        ap.error("--flink-repeat must be 0 (skip the Flink pair) or more")
    started = time.perf_counter()
    import streamanon
    from streamanon.data import ashrae
    from streamanon.data.traces import write_trace, zipf_trace

    with part("byte-compile"):
        compileall.compile_dir(Path(streamanon.__file__).parent, quiet=1)
    print(f"quick benchmark; {'one core (taskset -c 0)' if PIN else 'not pinned'}; "
          f"load average {bench_zanon.load()} on {os.cpu_count()} CPU(s); every figure the "
          f"best of up to {args.repeat} interleaved runs (CASTLE: {args.castle_repeat}), 2 "
          f"when each side's two best agree within {args.agree:.0%} (Flink: "
          f"{args.flink_repeat})")
    flink = args.flink_repeat > 0 and importlib.util.find_spec("pyflink") is not None
    with tempfile.TemporaryDirectory(prefix="quick-") as tmpdir, \
            ThreadPoolExecutor(1, thread_name_prefix="inputs") as inputs:
        tmp = Path(tmpdir)
        cn, vn = args.castle_n, args.verify_n
        # the inputs, in the order the parts need them, generated in a thread while the
        # measured children run (on the pinned core; this process is not pinned)
        trace_f = inputs.submit(lambda: write_trace(tmp / "trace.csv",
                                                    zipf_trace(args.z_n, seed=1)))
        ref_trace_f = inputs.submit(lambda: write_trace(tmp / "ref.csv",
                                                        zipf_trace(args.ref_n, seed=1)))
        data_f = inputs.submit(lambda: ashrae.write_csv(tmp / "in.csv",
                                                        ashrae.generate(cn, seed=1)))
        vtrace_f = inputs.submit(lambda: write_trace(
            tmp / "vtrace.csv", zipf_trace(vn, n_users=2500, n_values=6000, seed=2)))
        if flink:
            import bench_flink

            ftrace_f = inputs.submit(bench_flink.z_trace, tmp / "ftrace.csv", 100_000)

        # -- start-up (measured first, needing no input; shown after the checkers) ----------
        with part("start-up"):
            helps = {" ".join(["streamanon", *sub, "--help"]): [*CLI, *sub, "--help"]
                     for sub in ([], ["z"], ["castle"])}
            fresh = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache")}  # no page cached yet
            fresh.pop("STREAMANON_NO_HELP_CACHE", None)
            first = {label: cpu_of(c, env=fresh)[0] for label, c in helps.items()}
            starts = interleaved({label: (lambda c=c: cpu_of(c, env=fresh)[0])
                                  for label, c in helps.items()}, max(5, args.repeat),
                                 label="start-up")

        # -- z whole command vs the original zanon ------------------------------------------
        ref_out = tmp / "zanon" / "published.tsv"
        ref_out.parent.mkdir()
        have_ref = importlib.util.find_spec("zanonymity") is not None
        with part("inputs (waited for)"):
            trace, ref_trace = trace_f.result(), ref_trace_f.result()

        def run_ours() -> float:
            return cpu_of([*CLI, "z", "--z", str(Z), "--delta-t", str(DELTA_T), str(trace),
                           "-o", str(tmp / "z.csv"), "--json"])[0]

        def run_ref() -> float:
            cpu, out = cpu_of([sys.executable, str(HERE / "bench_zanon.py"), "--child",
                               "zanon", "--trace", str(ref_trace), "--out", str(ref_out),
                               "--z", str(Z), "--delta-t", str(DELTA_T)])
            got = json.loads(out.strip().splitlines()[-1])
            return cpu / got["tuples"] * args.z_n  # whole process, CPU

        with part("z"):
            z_pair = interleaved({"ours": run_ours, **({"ref": run_ref} if have_ref else {})},
                                 args.repeat, label="z", agree=args.agree)
        ours, ref = z_pair["ours"], z_pair.get("ref", float("inf"))
        n = args.z_n
        print(f"\nz on {n:,} tuples: whole command {n / ours:,.0f} tuples/s ({ours:.2f} s CPU)")
        if have_ref:
            print(f"  original zanon (whole process, CPU, on {args.ref_n:,} tuples): "
                  f"{n / ref:,.0f} tuples/s")
            print(f"  z whole command / zanon   {verdict(ref / ours, 40, 'x')}")
        else:
            print("  SKIP z vs zanon: the original zanonymity package is not installed")

        # -- CASTLE whole command vs the in-process operator ---------------------------------
        with part("inputs (waited for)"):
            data = data_f.result()
        rules = tmp / "rules.toml"
        rules.write_text(ashrae.rules_toml(), encoding="utf-8")
        cmd = [*CLI, "castle", "--rules", str(rules), "--k", "5", "--l", "2", "--delta", "1250",
               "--beta", "50", "--mu", "100", "--zeta", "10", str(data), "-o",
               str(tmp / "castle.csv")]

        def run_operator() -> float:
            _, out = cpu_of([sys.executable, "-c", bench_castle.IN_PROCESS, str(cn), "2"])
            return float(out.splitlines()[0].split()[1])

        with part("CASTLE"):
            castle_pair = interleaved({"whole": lambda: cpu_of(cmd)[0], "op": run_operator},
                                      args.castle_repeat, label="CASTLE", agree=args.agree)
        whole, op = castle_pair["whole"], castle_pair["op"]
        print(f"\nCASTLE l=2, split {DEFAULTS['split']} (the default), on {cn:,} ASHRAE-shaped "
              f"rows: whole command {cn / whole:,.0f} "
              f"tuples/s ({whole:.2f} s CPU), in-process operator {cn / op:,.0f} tuples/s "
              f"({op:.2f} s CPU)")
        print(f"  whole / operator          {verdict(op / whole, 0.9, 'x')}")
        print(f"  whole command             {verdict(cn / whole, 40_000, 'tuples/s')}")

        # -- the checkers ----------------------------------------------------------------------
        with part("inputs (waited for)"):
            vtrace = vtrace_f.result()
        with part("checkers"):
            cpu_of([*CLI, "z", "--z", str(Z), "--delta-t", str(DELTA_T), str(vtrace), "-o",
                    str(tmp / "vpub.csv")])
            verify_z = [*CLI, "verify", "z", "--z", str(Z), "--delta-t", str(DELTA_T),
                        str(vtrace), str(tmp / "vpub.csv"), "--json"]
            verify_castle = [*CLI, "verify", "castle", str(tmp / "castle.csv"), "--id",
                             "building_id", "--qi", ",".join([*ashrae.NUMERIC_QI,
                                                              "primary_use"]),
                             "--sa", "meter_reading", "--k", "5", "--l", "2", "--input",
                             str(data), "--json"]
            checkers = interleaved({"z": lambda: cpu_of(verify_z)[0],
                                    "castle": lambda: cpu_of(verify_castle)[0]}, args.repeat,
                                   label="checkers", agree=args.agree)
        vz, vc = checkers["z"], checkers["castle"]
        shape = ("the target's shape" if vn == VERIFY_N
                 else f"not the target's shape of {VERIFY_N:,} tuples")
        print(f"\nverify z on {vn:,} tuples (2,500 users, 6,000 values: {shape}), verify "
              f"castle on {cn:,} rows; whole commands, CPU")
        print(f"  verify z                  {verdict(vn / vz, 750_000, 'tuples/s')}")
        print(f"  verify castle             {verdict(cn / vc, 100_000, 'rows/s')}")

        # -- start-up (measured first) -------------------------------------------------------
        print(f"\nstart-up (best of {max(5, args.repeat)} interleaved runs, CPU seconds, from "
              "bytecode)")
        for label, best in starts.items():
            print(f"  {label:<26}{verdict(best, 0.2, 's', higher=False)}")
        print("  first runs (render, then cache the page): "
              + " / ".join(f"{cpu:.2f}" for cpu in first.values()) + " s")

        # -- Flink -----------------------------------------------------------------------------
        print()
        if args.flink_repeat == 0:
            print("SKIP Flink z whole command vs pure: --flink-repeat 0")
        elif not flink:
            print("SKIP Flink z whole command vs pure: PyFlink is not installed")
        else:
            with part("inputs (waited for)"):
                ftrace = ftrace_f.result()  # (every input is ready: nothing runs beside)
            with part("Flink"):
                flink_pair = interleaved({
                    "pure": lambda: bench_zanon.timed([
                        *PIN, *CLI, "z", "--z", str(Z), "--delta-t", str(DELTA_T),
                        str(ftrace), "-o", str(tmp / "fpure.csv"), "--json"])[0],
                    "flink": lambda: bench_flink.timed([
                        *bench_flink.cli(), "flink", "z", "--z", str(Z), "--delta-t",
                        str(DELTA_T), str(ftrace), "-o", str(tmp / "fflink.csv"),
                        "--json"])[1]},
                    args.flink_repeat, label="Flink")
            pure, flink_s = flink_pair["pure"], flink_pair["flink"]
            same = (tmp / "fpure.csv").read_bytes() == (tmp / "fflink.csv").read_bytes()
            print(f"Flink z on 100,000 tuples (wall clock, both): {flink_s:.2f} s vs pure "
                  f"{pure:.2f} s ({flink_s / pure:.1f}x the pure command's time; output "
                  f"identical: {same})")
    rounds = ", ".join(f"{label} {n}" for label, n in ROUNDS.items())
    parts = ", ".join(f"{label} {s:.0f} s" for label, s in PARTS.items())
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"\n(quick.py took {time.perf_counter() - started:.0f} s wall clock, its child "
          f"processes {kids.ru_utime + kids.ru_stime:.0f} s CPU; load average "
          f"{bench_zanon.load()}; rounds: {rounds}; parts: {parts})")


if __name__ == "__main__":
    try:
        main()
    except subprocess.CalledProcessError as exc:  # a figure that could not be measured
        print(f"a run failed ({exc.returncode}): {' '.join(map(str, exc.cmd))}\n{exc.stderr}")

"""z-anonymity throughput: streamanon vs the authors' ``zanon`` 0.3.4 on the same trace.

    .venv/bin/python benchmarks/bench_zanon.py            # 2,000,000 tuples, flat values
    .venv/bin/python benchmarks/bench_zanon.py --levels 3 # 3-level hierarchies

Generates a seeded trace (2,000 users, Zipf-like values) and runs, each in its own process on
one core (``taskset -c 0`` when available, as the README's figures were measured):

* each engine in process (file read + anonymize + file write, after a 1,000-tuple warm-up of
  each), checking that both published the identical tuples: throughputs, their ratio, each
  process's peak memory (max RSS);
* the whole ``streamanon z`` command (interpreter start, imports, reading, anonymizing,
  writing; best of ``--repeat``) against the whole ``zanon`` process (its harness: read lines,
  anonymize, write; the warm-up included, 0.05 % of the work): wall clock and CPU time (the
  machine is shared: CPU time leaves the other jobs' share out), and their ratio (target
  >= 40x; the CPU ratio is the measure ``quick.py`` prints too); its output is checked against
  zanon's too;
* the start-up: ``streamanon --help``, ``streamanon z --help`` and the import of the CLI
  (median of 5 or ``--repeat`` runs; target <= 0.2 s);
* the independent checker, ``streamanon verify z`` (target >= 750,000 tuples/s).

The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PIN = ["taskset", "-c", "0"] if shutil.which("taskset") else []
TARGET_RATIO = 40


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(cmd: list[str], **kw: object) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds of one child process (CPU from the kernel's accounting)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, **kw)  # type: ignore[call-overload]
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, proc


def run_streamanon(trace: Path, out: Path, z: int, delta_t: float) -> dict[str, float]:
    from streamanon.cli.zanon import run_z
    from streamanon.zanon import ZAnonymizer

    start = time.perf_counter()
    stats = run_z(trace, out, ZAnonymizer(z=z, delta_t=delta_t))
    elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "tuples": stats.read, "published": stats.published}


def run_reference(trace: Path, out: Path, z: int, delta_t: float) -> dict[str, float]:
    """The authors' harness: read lines, anonymize each, the oracle writes output.txt."""
    import zanonymity.zanon as zmod

    zmod.z_change = lambda self, t: None  # fixed z, as the spec prescribes
    os.chdir(out.parent)
    start = time.perf_counter()
    oracle = zmod.zanon(delta_t, 0.8, 2)
    oracle.z = z
    n = 0
    with open(trace) as fh:
        next(fh)
        for line in fh:
            t, u, a = line.split(",")
            oracle.anonymize((float(t), u, a.strip()))
            n += 1
    oracle.endFiles()
    elapsed = time.perf_counter() - start
    os.replace(out.parent / "output.txt", out if n > 1000 else out.parent / "warmup-out.tsv")
    return {"seconds": elapsed, "tuples": n}


def time_verify_z(trace: Path, published: Path, z: int, delta_t: float
                  ) -> tuple[float, float, float, bool]:
    """The independent checker on the operator's output: the whole `streamanon verify z`
    command (exact mode; wall and CPU seconds, as the machine is shared), and the checker
    alone in this process (its reader included)."""
    from streamanon.verify.z import check_z_files

    exe = Path(sys.executable).with_name("streamanon")
    whole, whole_cpu, res = timed([*PIN, str(exe), "verify", "z", "--z", str(z), "--delta-t",
                                   str(delta_t), str(trace), str(published), "--json"])
    start = time.perf_counter()
    report = check_z_files(trace, published, z, delta_t)
    alone = time.perf_counter() - start
    ok = res.returncode == 0 and json.loads(res.stdout)["ok"] and report.ok
    return whole, whole_cpu, alone, ok


def child(engine: str, trace: Path, out: Path, z: int, delta_t: float) -> None:
    fn = run_streamanon if engine == "streamanon" else run_reference
    # warm-up on the first 1,000 tuples: both engines load their lazy modules (pyarrow pulls
    # in pandas on first use, for one) before the clock starts
    warm = out.parent / "warmup.csv"
    with open(trace) as src, open(warm, "w") as dst:
        dst.writelines(line for _, line in zip(range(1001), src, strict=False))
    fn(warm, out.parent / "warmup-out.csv", z, delta_t)
    result = fn(trace, out, z, delta_t)
    result["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def published(path: Path, sep: str) -> list[tuple[float, str, str]]:
    rows = []
    with open(path) as fh:
        if sep == ",":
            next(fh)
        for line in fh:
            t, u, a = line.rstrip("\n").split(sep)
            rows.append((float(t), u, a))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, default=2_000_000)
    p.add_argument("--users", type=int, default=2000)
    p.add_argument("--values", type=int, default=10_000)
    p.add_argument("--levels", type=int, default=1)
    p.add_argument("--z", type=int, default=10)
    p.add_argument("--delta-t", type=float, default=3600.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3, help="runs of the whole command (best)")
    p.add_argument("--child", choices=["streamanon", "zanon"], help=argparse.SUPPRESS)
    p.add_argument("--trace", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.trace, args.out, args.z, args.delta_t)
        return

    from streamanon.data.traces import write_trace, zipf_trace

    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        trace = write_trace(tmpdir / "trace.csv", zipf_trace(
            args.n, n_users=args.users, n_values=args.values, levels=args.levels,
            seed=args.seed))
        n = args.n
        print(f"trace: {n:,} tuples, {args.users:,} users, {args.values:,} Zipf values, "
              f"{args.levels} level(s); z={args.z}, Δt={args.delta_t:g} s; "
              f"{'one core (taskset -c 0)' if PIN else 'no taskset: not pinned'}; "
              f"load average {load()} on {os.cpu_count()} CPU(s)")
        results = {}
        for engine in ("streamanon", "zanon"):
            workdir = tmpdir / engine
            workdir.mkdir()
            out = workdir / ("published.csv" if engine == "streamanon" else "published.tsv")
            cmd = [*PIN, sys.executable, __file__, "--child", engine, "--trace", str(trace),
                   "--out", str(out), "--z", str(args.z), "--delta-t", str(args.delta_t)]
            wall, cpu, res = timed(cmd)
            results[engine] = json.loads(res.stdout.strip().splitlines()[-1])
            results[engine].update(out=out, process_wall=wall, process_cpu=cpu)
            r = results[engine]
            print(f"{engine:>10} in process: {r['seconds']:8.2f} s  "
                  f"{r['tuples'] / r['seconds']:>12,.0f} tuples/s  "
                  f"peak memory {r['max_rss_mib']:,.0f} MiB")
        ours = published(results["streamanon"]["out"], ",")
        ref = published(results["zanon"]["out"], "\t")
        same = ours == ref
        print(f"identical published tuples: {same} ({len(ours):,} of {n:,})")
        ratio = results["zanon"]["seconds"] / results["streamanon"]["seconds"]
        print(f"in-process throughput ratio streamanon / zanon: {ratio:.1f}x")

        exe = Path(sys.executable).with_name("streamanon")
        # whole processes start as an installed package does: from compiled bytecode (an
        # editable install under PYTHONDONTWRITEBYTECODE would compile every module each run)
        import compileall

        import streamanon

        compileall.compile_dir(Path(streamanon.__file__).parent, quiet=1)
        cli_out = tmpdir / "cli.csv"
        best = (float("inf"), float("inf"))
        for _ in range(args.repeat):
            wall, cpu, _ = timed([*PIN, str(exe), "z", "--z", str(args.z), "--delta-t",
                                  str(args.delta_t), str(trace), "-o", str(cli_out), "--json"])
            best = (min(best[0], wall), min(best[1], cpu))
        same_cli = published(cli_out, ",") == ref
        zw, zc = results["zanon"]["process_wall"], results["zanon"]["process_cpu"]
        print(f"whole commands, one core (best of {args.repeat}; wall clock / CPU time):")
        print(f"  streamanon z: {best[0]:.2f} s / {best[1]:.2f} s = {n / best[0]:,.0f} / "
              f"{n / best[1]:,.0f} tuples/s (output identical to zanon's: {same_cli})")
        print(f"  zanon       : {zw:.2f} s / {zc:.2f} s = {n / zw:,.0f} / {n / zc:,.0f} tuples/s")
        print(f"  ratio streamanon / zanon: {zw / best[0]:.1f}x wall, {zc / best[1]:.1f}x CPU "
              f"(target >= {TARGET_RATIO}x)")

        runs = max(5, args.repeat)
        figures = []
        for what, cmd in (("streamanon --help", [str(exe), "--help"]),
                          ("streamanon z --help", [str(exe), "z", "--help"]),
                          ("import streamanon.cli", [sys.executable, "-c",
                                                     "import streamanon.cli"])):
            times = [timed([*PIN, *cmd])[:2] for _ in range(runs)]
            figures.append(f"`{what}` {statistics.median(w for w, _ in times):.2f} / "
                           f"{statistics.median(c for _, c in times):.2f} s")
        print(f"start-up (median of {runs}, wall / CPU; target for --help: <= 0.2 s): "
              + ", ".join(figures))
        whole, whole_cpu, alone, ok = time_verify_z(trace, cli_out, args.z, args.delta_t)
        print(f"verify z (independent checker, exact mode): whole command {whole:.2f} s = "
              f"{n / whole:,.0f} tuples/s ({whole_cpu:.2f} s CPU = "
              f"{n / whole_cpu:,.0f} tuples/s), checker alone {alone:.2f} s = "
              f"{n / alone:,.0f} tuples/s (target >= 750,000); ok: {ok}")
        print(f"load average after: {load()}")
        if not (same and same_cli and ok):
            sys.exit(1)


if __name__ == "__main__":
    main()

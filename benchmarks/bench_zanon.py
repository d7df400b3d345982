"""z-anonymity throughput: streamanon vs the authors' ``zanon`` 0.3.4 on the same trace.

    .venv/bin/python benchmarks/bench_zanon.py            # 1,000,000 tuples, flat values
    .venv/bin/python benchmarks/bench_zanon.py --levels 3 # 3-level hierarchies

Generates a seeded trace (2,000 users, Zipf-like values), runs each engine in its own process
(file read + anonymize + file write, single core, after a 1,000-tuple warm-up of each),
checks that both published the identical tuples, and prints throughputs, their ratio, each
process's peak memory (max RSS), and the wall time of the whole `streamanon z` command.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


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
    from streamanon.zanon.verify import check_z_files

    exe = Path(sys.executable).with_name("streamanon")
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    res = subprocess.run([str(exe), "verify", "z", "--z", str(z), "--delta-t", str(delta_t),
                          str(trace), str(published), "--json"], capture_output=True, text=True)
    whole = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    whole_cpu = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
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
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--users", type=int, default=2000)
    p.add_argument("--values", type=int, default=10_000)
    p.add_argument("--levels", type=int, default=1)
    p.add_argument("--z", type=int, default=10)
    p.add_argument("--delta-t", type=float, default=3600.0)
    p.add_argument("--seed", type=int, default=1)
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
        print(f"trace: {args.n:,} tuples, {args.users:,} users, {args.values:,} Zipf values, "
              f"{args.levels} level(s); z={args.z}, Δt={args.delta_t:g} s")
        results = {}
        for engine in ("streamanon", "zanon"):
            workdir = tmpdir / engine
            workdir.mkdir()
            out = workdir / ("published.csv" if engine == "streamanon" else "published.tsv")
            cmd = [sys.executable, __file__, "--child", engine, "--trace", str(trace),
                   "--out", str(out), "--z", str(args.z), "--delta-t", str(args.delta_t)]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            results[engine] = json.loads(res.stdout.strip().splitlines()[-1])
            results[engine]["out"] = out
            r = results[engine]
            print(f"{engine:>10}: {r['seconds']:8.2f} s  {r['tuples'] / r['seconds']:>12,.0f} "
                  f"tuples/s  peak memory {r['max_rss_mib']:,.0f} MiB")
        ours = published(results["streamanon"]["out"], ",")
        ref = published(results["zanon"]["out"], "\t")
        same = ours == ref
        print(f"identical published tuples: {same} ({len(ours):,} of {args.n:,})")
        ratio = results["zanon"]["seconds"] / results["streamanon"]["seconds"]
        print(f"throughput ratio streamanon / zanon: {ratio:.1f}x (target >= 30x)")
        exe = Path(sys.executable).with_name("streamanon")
        start = time.perf_counter()
        subprocess.run([str(exe), "z", "--z", str(args.z), "--delta-t", str(args.delta_t),
                        str(trace), "-o", str(tmpdir / "cli.csv"), "--json"],
                       check=True, capture_output=True)
        cli = time.perf_counter() - start
        print(f"whole `streamanon z` command (interpreter start, imports, I/O): {cli:.2f} s "
              f"= {args.n / cli:,.0f} tuples/s")
        whole, whole_cpu, alone, ok = time_verify_z(trace, tmpdir / "cli.csv", args.z,
                                                    args.delta_t)
        print(f"verify z (independent checker, exact mode): whole command {whole:.2f} s = "
              f"{args.n / whole:,.0f} tuples/s ({whole_cpu:.2f} s CPU = "
              f"{args.n / whole_cpu:,.0f} tuples/s), checker alone {alone:.2f} s = "
              f"{args.n / alone:,.0f} tuples/s (target >= 500,000); ok: {ok}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()

"""CASTLE speed, before and after: 100,000 ASHRAE-shaped tuples, k=5, δ=1250, β=50, μ=100, ζ=10.

    .venv/bin/python benchmarks/bench_castle.py [--n 100000] [--repeat 3] [--cases 100]

"Before" is the code of commit dc80046 (the last one before the compiled best selection),
unpacked from this repository's history with ``git archive`` into a temporary folder and run
with ``PYTHONPATH`` pointing there; "after" is the working tree. Both run on the same input in
the same run, each figure the best of ``--repeat`` interleaved runs, on one core
(``taskset -c 0`` when available, as the README's figures were measured):

* whole command: ``python -m streamanon castle ... in.csv -o out.csv`` as a whole process
  (interpreter start, imports, numba's load, reading, anonymizing, writing), wall clock and
  CPU time; the first run of "after" uses an empty numba cache, so its time includes compiling
  the kernel (printed apart: what the first run after an install costs);
* in-process: the operator alone (``process`` + ``flush`` over rows built beforehand, after
  a warm-up of 100 tuples on another operator so that one-off loads are left out).

Then it checks identical output: the whole command's output files of before and after, byte
for byte (l=0 and l=2), and ``castle_cases.py`` (seeded random streams and rule sets covering
hierarchies, reduction, a plug-in, max_delay, every suppression mode, rule changes, PRL/NCP)
run on both; its file cases (the streams as CSV files with broken lines, through the row
reader and writer) run on this tree and on commit 5461bb8, the last that read CSV line by line
(dc80046 still rebuilt the text of refused lines). Targets: >= 40,000 tuples/s whole
command and >= 0.9x the in-process operator (CPU); CASTLEGUARD measured ~20 tuples/s. The
whole command also runs on the same rows with CRLF line ends (as spreadsheets write them),
printed next to LF. Memory held by the operator is printed last (tracemalloc; should stay
flat).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

REFERENCE = "dc80046"
IO_REFERENCE = "5461bb8"  # the last commit that read CSV files line by line
TARGET_TPS = 40_000
CASTLEGUARD_TPS = 20
CASTLEGUARD_LOSS = 0.66
HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PIN = ["taskset", "-c", "0"] if shutil.which("taskset") else []

IN_PROCESS = """
import gc, json, sys, time
from streamanon.castle import CastleAnonymizer, RuleSet
try:
    from streamanon.castle import CastleRow
except ImportError:  # the reference commit's name of the record type
    from streamanon.castle import Row as CastleRow
from streamanon.data import ashrae
n, l = int(sys.argv[1]), int(sys.argv[2])
rows = [CastleRow(r, i + 2) for i, r in enumerate(ashrae.generate(n, seed=1))]
def make():
    return CastleAnonymizer(RuleSet.from_toml(ashrae.rules_toml()), k=5, l=l, delta=1250,
                            beta=50, mu=100, zeta=10)
warm = make()  # one-off loads (numba) are the whole command's, not the operator's
for r in rows[:100]:
    warm.process(r)
op = make()
gc.collect()
start, cpu = time.perf_counter(), time.process_time()
for r in rows:
    op.process(r)
op.flush()
print(time.perf_counter() - start, time.process_time() - cpu)
print(json.dumps(op.summary()))
"""

PARTS = """
import io, sys, time
t0 = time.process_time()
from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.cli import app  # what the command imports
from streamanon.io.rows import RowReader, RowWriter
t1 = time.process_time()
rules = RuleSet.load(sys.argv[2])
numeric = [r.name for r in rules.qi_rules if type(r.generalizer).__name__ == "RangeGeneralizer"]
reader = RowReader(sys.argv[1], numeric=numeric, required=[rules.id_field])
rows = list(reader)
t2 = time.process_time()
op = CastleAnonymizer(rules, k=5, l=2, delta=1250, beta=50, mu=100, zeta=10)
op.process(rows[0])
op.process(rows[1])
t3 = time.process_time()
out = [x for r in rows[2:] for x in op.process(r)] + op.flush()
t4 = time.process_time()
w = RowWriter(io.StringIO(), "csv", reader.columns)
for x in out:
    if isinstance(x, Released):
        w.write(x.values)
t5 = time.process_time()
print(t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)
"""


def load() -> str:
    return f"{os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}"


def run(cmd: list[str], env: dict[str, str], **kw: object) -> tuple[float, float, str]:
    """Wall and CPU seconds of one child process (CPU from the kernel's accounting)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, **kw)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def reference_tree(tmp: Path, commit: str = REFERENCE) -> Path | None:
    """The sources of a reference commit, unpacked from git history (None if unavailable)."""
    dest = tmp / f"reference-{commit}"
    dest.mkdir()
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src"],
                                 capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "src"


def memory(n: int, l: int, checkpoints: int = 5) -> list[tuple[int, float]]:  # noqa: E741
    """Traced memory (MiB) held after each fifth of the stream, rows streamed (not kept)."""
    from streamanon.castle import CastleAnonymizer, CastleRow, RuleSet
    from streamanon.data import ashrae

    op = CastleAnonymizer(RuleSet.from_toml(ashrae.rules_toml()), k=5, l=l, delta=1250,
                          beta=50, mu=100, zeta=10)
    warm = CastleAnonymizer(RuleSet.from_toml(ashrae.rules_toml()), k=5, l=l, delta=1250,
                            beta=50, mu=100, zeta=10)
    for r in ashrae.generate(100, seed=1):  # numba's one-off load is not the operator's state
        warm.process(CastleRow(r))
    marks = {n * i // checkpoints for i in range(1, checkpoints + 1)}
    out = []
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for i, r in enumerate(ashrae.generate(n, seed=1), start=1):
        op.process(CastleRow(r))
        if i in marks:
            out.append((i, (tracemalloc.get_traced_memory()[0] - base) / 2**20))
    peak = (tracemalloc.get_traced_memory()[1] - base) / 2**20
    tracemalloc.stop()
    out.append((-1, peak))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (best is shown)")
    ap.add_argument("--cases", type=int, default=100, help="random cases compared")
    args = ap.parse_args()
    n = args.n
    from streamanon.castle import RuleSet
    from streamanon.data import ashrae

    with tempfile.TemporaryDirectory(prefix="bench-castle-") as tmpdir:
        tmp = Path(tmpdir)
        data = ashrae.write_csv(tmp / "in.csv", ashrae.generate(n, seed=1))
        rules = tmp / "rules.toml"
        rules.write_text(ashrae.rules_toml(), encoding="utf-8")
        RuleSet.load(rules)
        ref = reference_tree(tmp)
        base_env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp / "numba-cache")}
        base_env.pop("PYTHONPATH", None)
        versions = {"after": base_env}
        if ref is not None:
            versions["before"] = {**base_env, "PYTHONPATH": str(ref)}
        order = [v for v in ("before", "after") if v in versions]
        print(f"CASTLE on {n:,} ASHRAE-shaped tuples (k=5, δ=1250, β=50, μ=100, ζ=10); "
              f"{'one core (taskset -c 0)' if PIN else 'no taskset: not pinned to one core'}; "
              f"load average {load()} on {os.cpu_count()} CPU(s)")
        if ref is None:
            print(f"  (commit {REFERENCE} not in this clone's history: no 'before' figures)")
        else:
            print(f"  before = commit {REFERENCE} (pure numpy best selection), after = this "
                  "tree (compiled best selection, numba)")

        crlf = tmp / "in-crlf.csv"  # the same rows as a spreadsheet writes them
        crlf.write_bytes(data.read_bytes().replace(b"\n", b"\r\n"))

        def command(version: str, l: int, source: Path = data) -> list[str]:  # noqa: E741
            name = f"out-{version}-l{l}{'-crlf' if source == crlf else ''}.csv"
            return [*PIN, sys.executable, "-m", "streamanon", "castle", "--rules", str(rules),
                    "--k", "5", "--l", str(l), "--delta", "1250", "--beta", "50", "--mu", "100",
                    "--zeta", "10", str(source), "-o", str(tmp / name)]

        wall, cpu, _ = run(command("after", 2), versions["after"])
        print(f"\nfirst run after an install (empty numba cache: compiles the kernel): "
              f"{wall:.2f} s wall, {cpu:.2f} s CPU; later runs load it from the cache")

        best: dict[tuple[str, str, int], tuple[float, float]] = {}
        summaries: dict[tuple[str, int], dict[str, Any]] = {}
        for _ in range(args.repeat):
            for l in (0, 2):  # noqa: E741
                for v in order:
                    w, c, _ = run(command(v, l), versions[v])
                    old = best.get(("cmd", v, l), (float("inf"), float("inf")))
                    best["cmd", v, l] = (min(old[0], w), min(old[1], c))
                    w, c, out = run([*PIN, sys.executable, "-c", IN_PROCESS, str(n), str(l)],
                                    versions[v])
                    first, summary = out.splitlines()[:2]
                    summaries[v, l] = json.loads(summary)
                    ow, oc = (float(x) for x in first.split())
                    old = best.get(("op", v, l), (float("inf"), float("inf")))
                    best["op", v, l] = (min(old[0], ow), min(old[1], oc))
            w, c, _ = run(command("after", 2, crlf), versions["after"])  # CRLF vs LF
            old = best.get(("crlf", "after", 2), (float("inf"), float("inf")))
            best["crlf", "after", 2] = (min(old[0], w), min(old[1], c))

        print(f"\nbest of {args.repeat} runs, tuples/s (wall clock / CPU time):")
        print(f"{'':26}{'before':>22}{'after':>22}{'after/before (wall, CPU)':>27}")
        for kind, label in (("cmd", "whole command"), ("op", "in-process operator")):
            for l in (0, 2):  # noqa: E741
                row = f"{label + f', l={l}':26}"
                for v in ("before", "after"):
                    if ("cmd", v, l) in best:
                        w, c = best[kind, v, l]
                        row += f"{f'{n / w:,.0f} / {n / c:,.0f}':>22}"
                    else:
                        row += f"{'-':>22}"
                if ("cmd", "before", l) in best:
                    (bw, bc), (aw, ac) = best[kind, "before", l], best[kind, "after", l]
                    row += f"{f'{bw / aw:.2f}x, {bc / ac:.2f}x':>27}"
                print(row)
        for l in (0, 2):  # noqa: E741
            w, c = best["cmd", "after", l]
            print(f"l={l}: whole command {n / w:,.0f} tuples/s wall, {n / c:,.0f} tuples/s CPU "
                  f"({w:.2f} s wall, {c:.2f} s CPU): target {TARGET_TPS:,} -> "
                  f"{n / w / TARGET_TPS:.2f}x wall, {n / c / TARGET_TPS:.2f}x CPU; "
                  f"{n / w / CASTLEGUARD_TPS:,.0f}x CASTLEGUARD (~{CASTLEGUARD_TPS} tuples/s)")
        (lw, lc), (cw, cc) = best["cmd", "after", 2], best["crlf", "after", 2]
        (_, oc) = best["op", "after", 2]
        same = (tmp / "out-after-l2.csv").read_bytes() == (tmp / "out-after-l2-crlf.csv"
                                                           ).read_bytes()
        print(f"l=2, same rows with LF and with CRLF line ends (same run): LF {n / lw:,.0f} / "
              f"{n / lc:,.0f}, CRLF {n / cw:,.0f} / {n / cc:,.0f} tuples/s (wall / CPU): "
              f"CRLF/LF {lc / cc:.2f}x CPU; outputs {'identical' if same else 'DIFFERENT'}")
        print(f"l=2: whole command / in-process operator (CPU): LF {oc / lc:.2f}x, "
              f"CRLF {oc / cc:.2f}x (target 0.9x)")
        for l in (0, 2):  # noqa: E741
            s = summaries["after", l]
            seven = sum(s["info_loss"][a] for a in ashrae.SEVEN_NUMERIC) / 7
            print(f"  l={l}: released {s['released']:,}, suppressed {s['suppressed']:,}, "
                  f"clusters {s['clusters_released']:,}; mean information loss, seven numeric "
                  f"({', '.join(ashrae.SEVEN_NUMERIC)}): {seven:.3f} (CASTLEGUARD "
                  f"{CASTLEGUARD_LOSS}); all attributes: {s['mean_info_loss']:.3f}")
        print("  per attribute (l=2): " + ", ".join(
            f"{a} {v:.3f}" for a, v in summaries["after", 2]["info_loss"].items()))
        parts = {}
        for v in order:
            got = [[float(x) for x in run([*PIN, sys.executable, "-c", PARTS, str(data),
                                           str(rules)], versions[v])[2].split()]
                   for _ in range(args.repeat)]
            parts[v] = [min(col) for col in zip(*got, strict=True)]
        print("where the CPU time of the command goes (l=2, best of "
              f"{args.repeat}, s): imports, reading the CSV, first two tuples (numba's load), "
              "the operator, writing the CSV")
        for v in order:
            imp, rd, first, oper, wr = parts[v]
            print(f"  {v:6}: imports {imp:.2f}, reading {rd:.2f}, first tuples {first:.2f}, "
                  f"operator {oper:.2f}, writing {wr:.2f}")
        print(f"load average after the timed runs: {load()} (other processes share the cores: "
              "the CPU-time figures leave their share out)")

        if ref is not None:
            print("\nidentical output, before vs after:")
            for l in (0, 2):  # noqa: E741
                a = (tmp / f"out-before-l{l}.csv").read_bytes()
                b = (tmp / f"out-after-l{l}.csv").read_bytes()
                print(f"  whole command l={l}: {len(b):,} bytes, "
                      f"{'identical' if a == b else 'DIFFERENT'}")
            cases = [sys.executable, str(HERE / "castle_cases.py"), "--cases", str(args.cases),
                     "--ashrae", "3000"]
            outs = {v: run(cases, versions[v])[2] for v in order}
            same = outs["before"] == outs["after"]
            lines = outs["after"].splitlines()
            print(f"  castle_cases.py, {args.cases} seeded random cases + 3,000 ASHRAE tuples "
                  f"at l=0 and l=2: {len(lines):,} output lines, "
                  f"{'identical' if same else 'DIFFERENT'}")
            if not same:
                for x, y in zip(outs["before"].splitlines(), lines, strict=False):
                    if x != y:
                        print(f"    first difference:\n    before {x[:300]}\n    after  {y[:300]}")
                        break
                raise SystemExit(1)
            for l in (0, 2):  # noqa: E741
                if (tmp / f"out-before-l{l}.csv").read_bytes() != (
                        tmp / f"out-after-l{l}.csv").read_bytes():
                    raise SystemExit(1)
        io_ref = reference_tree(tmp, IO_REFERENCE)
        if io_ref is not None:
            files = [sys.executable, str(HERE / "castle_cases.py"), "--cases", "0", "--files",
                     str(args.cases)]
            old_io = run(files, {**base_env, "PYTHONPATH": str(io_ref)})[2]
            new_io = run(files, base_env)[2]
            kinds = [line.split(" ", 1)[0] for line in new_io.splitlines()]
            print(f"  castle_cases.py --files {args.cases} (CSV files with broken lines, read, "
                  f"anonymized, written) vs commit {IO_REFERENCE}: {kinds.count('W'):,} rows "
                  f"written, {kinds.count('J'):,} lines refused, "
                  f"{'identical' if old_io == new_io else 'DIFFERENT'}")
            if old_io != new_io:
                raise SystemExit(1)

    mem = memory(n, 2)
    print("\nmemory held by the operator (l=2, tracemalloc, MiB) after "
          + ", ".join(f"{i:,}: {m:.1f}" for i, m in mem[:-1]) + f"; peak {mem[-1][1]:.1f}")


if __name__ == "__main__":
    main()

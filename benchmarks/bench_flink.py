"""The batched Flink jobs against the pure-Python commands and against today's per-record jobs.

    .venv/bin/python benchmarks/bench_flink.py            # the full run (about 10 minutes)
    .venv/bin/python benchmarks/bench_flink.py --quick    # smaller inputs (about 4 minutes)
    .venv/bin/python benchmarks/bench_flink.py --parts z castle   # some parts only

Five parts, each printing a table; every run's output is checked before a figure is printed:

* ``z``: ``streamanon z`` vs ``streamanon flink z -p 1`` file to file on a 1,000,000-tuple
  Zipf trace (3 levels): Flink's job time (its net runtime: the job on the cluster from start
  to end, task deployment, Python start and the final checkpoint included), the marginal
  throughput (the same job on 1,000 tuples gives the fixed cost), the whole command (JVM and
  mini-cluster start included) against ``streamanon z``'s whole command; output byte-identical.
* ``castle``: ``streamanon castle`` vs ``streamanon flink castle -p 1`` (one partition) on
  100,000 ASHRAE-shaped tuples (k=5, l=2, δ=1250); released rows equal to pure CASTLE's (as
  a multiset: Flink writes input order, the pure command release order) and the CASTLE
  checker passes. The pure command and the one-partition job run ``--repeat`` times each
  (default 3), alternating, and their medians are compared (all times are printed).
* ``scale``: CASTLE on a standalone cluster (JobManager + 2 TaskManagers started with the
  distribution's ``start-cluster.sh``, jobs submitted with ``flink run``) on 300,000 tuples,
  after a warm-up job: p = 1 (one partition) and p = 2 (two partitions); released rows equal
  pure CASTLE per partition. The cluster's CPU seconds per run give the cores the job kept
  busy, and so the most p = 2 could gain on this machine.
* ``latency``: z over TCP at a fixed 1,000 tuples/s (one line per send, 20 s): per-tuple
  latency from the load client's send to its receipt of the outcome line
  (``--release-to``), for several ``--batch-ms``, over the tuples sent after the first 2 s
  (the job's sockets connect before all its tasks run; the first tuples' worst case is
  printed too); published rows equal ``streamanon z``'s.
* ``flink-kafka``: ``streamanon flink z -p 1`` and ``-p 2`` (``--kafka-p``) kafka -> kafka
  (Flink's Kafka connector) vs ``streamanon z`` kafka -> kafka on the same 1,000,000-tuple
  topic (Tansu broker, one partition, filled by a plain confluent-kafka producer, linger
  20 ms): whole commands, Flink's net runtime and the job's throughput (its first record
  read to its last output message's create time), outputs equal per record (tag and text),
  repeats counted; then (unless ``--no-kafka-latency``) end-to-end latency of live runs at
  1,000 tuples/s (a producer at that rate, a consumer timing each published message from
  its produce call to its receipt, found by its ``streamanon-in`` tag), the pure command
  beside the Flink job. ``--kafka-before REF`` runs each of these commands twice, with REF's
  ``src`` and with this checkout's, one right after the other, and prints the CPU seconds of
  each throughput run: before and after side by side in one run. Then ``streamanon flink
  castle -p 1`` vs ``streamanon castle`` kafka -> kafka on 100,000 ASHRAE-shaped rows
  (``--kafka-castle-n``): releases and suppressed rows equal per record, ``verify castle`` on
  the releases; with ``--kafka-castle-before REF`` the Flink job of REF's ``src`` runs beside
  this checkout's (before / after, alternating, ``--kafka-castle-repeat`` times each; medians
  compared, CPU seconds of each whole command too). ``--kafka-n 0`` runs the CASTLE part only.

Baseline column: today's per-record jobs, measured in the same run from the last commit that
has them (``--baseline-ref``, default the commit this work started from): its ``src`` is
extracted with ``git archive`` into a temporary folder and run with that folder first on the
path. They are about 100x slower, so they run on a smaller sample (named in each row) and
their figures are throughputs. Peak memory is the peak resident set (VmHWM) of the JVMs: the
mini-cluster's one JVM (JobManager, TaskManager and the thread-mode Python inside it), or each
TaskManager of the standalone cluster (the JVM grows its heap lazily: this is not the size of
the operators' state, which is bounded by Δt for z and by δ for CASTLE). The machine is
shared: the load average is printed with each part. Results go to ``--out-dir`` (CSV and PNG plots).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
BASELINE_REF = "dc80046"  # the last commit with the per-record Flink jobs
Z, DELTA_T = 3, 600.0
CASTLE = {"k": 5, "l": 2, "delta": 1250, "beta": 50, "mu": 10, "zeta": 10}


def cpu_seconds(pids: list[int]) -> float:
    """CPU time of processes so far, with their reaped children's (``/proc/PID/stat``: utime,
    stime, cutime, cstime): a TaskManager's embedded Python runs in its JVM, and its read-ahead
    helpers are its children, counted once they end."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(x) for x in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


# -- running commands ---------------------------------------------------------------------------
def cli(old_src: Path | None = None) -> list[str]:
    """The streamanon CLI of this checkout, or of the baseline's extracted ``src``."""
    if old_src is None:
        return [sys.executable, "-c", "from streamanon.cli import main; main()"]
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(old_src)!r}); "
            "import streamanon; assert streamanon.__file__.startswith("
            f"{str(old_src)!r}), streamanon.__file__; "
            "from streamanon.cli import main; main()"]


def descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def is_java(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/exe").resolve().name == "java"
    except OSError:
        return False


class Run:
    """A command as a child process: wall time and the peak memory of its JVM."""

    def __init__(self, cmd: list[str], **popen: object) -> None:
        self.start = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, **popen)  # type: ignore[call-overload]
        self.peak = 0
        self._watch = threading.Thread(target=self._poll, daemon=True)
        self._watch.start()

    def _poll(self) -> None:
        from streamanon.flink.standalone import peak_rss

        while self.proc.poll() is None:
            for pid in descendants(self.proc.pid):
                if is_java(pid):
                    self.peak = max(self.peak, peak_rss(pid))
            time.sleep(0.2)

    def wait(self, timeout: float = 3600) -> dict:
        out, err = self.proc.communicate(timeout=timeout)
        self.seconds = time.perf_counter() - self.start
        if self.proc.returncode != 0:
            raise RuntimeError(f"{self.proc.args[3:8]} failed: {err[-3000:]}")
        return json.loads(out.strip().splitlines()[-1])


def timed(cmd: list[str]) -> tuple[dict, float, int]:
    run = Run(cmd)
    summary = run.wait()
    return summary, run.seconds, run.peak


def timed_cpu(cmd: list[str]) -> tuple[dict, float, int, float]:
    """:func:`timed` and the CPU seconds (user + system) of the command and its children
    (the JVM is the CLI's child, reaped by it): runs must not overlap."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary, seconds, peak = timed(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return summary, seconds, peak, cpu


# -- data ------------------------------------------------------------------------------------
def z_trace(path: Path, n: int) -> Path:
    from streamanon.data.traces import write_trace, zipf_trace

    return write_trace(path, zipf_trace(n, n_users=2000, n_values=10_000, levels=3,
                                        duration=n / 20_000 * 86_400, seed=5))


def head(path: Path, out: Path, rows: int) -> Path:
    with path.open() as src, out.open("w") as dst:
        for i, line in enumerate(src):
            if i > rows:
                break
            dst.write(line)
    return out


def baseline_src(ref: str, work: Path) -> Path | None:
    """``git archive REF src`` of this repository into ``work``; None when not possible."""
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"baseline {ref} not available ({exc}): no baseline column", flush=True)
        return None
    return work / "src"


def castle_released(path: Path) -> Counter:
    return Counter(path.read_text().splitlines()[1:])


def check_castle_output(out: Path, data: Path, rules: Path, expected: Counter) -> int:
    """Released rows equal ``expected`` (a multiset) and pass the CASTLE checker."""
    from streamanon.castle import RuleSet
    from streamanon.io.rows import read_rows
    from streamanon.verify.castle import check_castle

    got = castle_released(out)
    if got != expected:
        raise RuntimeError(f"{out}: released rows differ from pure CASTLE "
                           f"({sum(got.values())} vs {sum(expected.values())})")
    rs = RuleSet.load(rules)
    report = check_castle(read_rows(out), rs.id_field, rs.quasi_identifiers, rs.sensitive,
                          k=CASTLE["k"], l=CASTLE["l"], inputs=read_rows(data))
    if not report.ok:
        raise RuntimeError(f"{out}: CASTLE checker: {report.first_problem}")
    return report.rows


def pure_castle_per_partition(data: Path, rules: Path, partitions: int, work: Path) -> Counter:
    """Released rows of ``streamanon castle`` run on each partition's sub-stream."""
    from streamanon.castle import RuleSet
    from streamanon.flink.castle_rows import partition_of

    lines = data.read_text().splitlines()
    id_col = lines[0].split(",").index(RuleSet.load(rules).id_field)
    released: Counter = Counter()
    for p in range(partitions):
        part = work / f"part{p}of{partitions}.csv"
        part.write_text("\n".join([lines[0], *(x for x in lines[1:] if partition_of(
            x.split(",")[id_col], partitions) == p)]) + "\n")
        out = work / f"pure-part{p}of{partitions}.csv"
        timed([*cli(), "castle", str(part), "--rules", str(rules), "-o", str(out), "--json",
               *(x for k, v in CASTLE.items() for x in (f"--{k}", str(v)))])
        released += castle_released(out)
    return released


def mb(n: int) -> str:
    return f"{n / 2**20:,.0f}" if n else "-"


def table(title: str, header: list[str], rows: list[list[object]]) -> None:
    print(f"\n{title}")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")


# -- part z ------------------------------------------------------------------------------------
def part_z(args: argparse.Namespace, work: Path, old_src: Path | None) -> list[dict]:
    n = args.z_n
    trace = z_trace(work / "z.csv", n)
    small = head(trace, work / "z-1k.csv", 1000)
    pure_out = work / "z-pure.csv"
    pure, pure_cmd, _ = timed([*cli(), "z", "--z", str(Z), "--delta-t", str(DELTA_T),
                               str(trace), "-o", str(pure_out), "--json"])
    rows = [{"part": "z", "run": "streamanon z (pure)", "tuples": n,
             "job_s": pure["seconds"], "tuples_per_s": pure["tuples_per_second"],
             "command_s": round(pure_cmd, 2), "peak_jvm_bytes": 0, "output": "reference"}]

    def flink(src: Path, label: str, expected: Path, tuples: int, old: Path | None = None,
              extra: tuple[str, ...] = ()) -> dict:
        out = work / f"z-{label.replace(' ', '_')}.csv"
        summary, cmd_s, peak = timed([*cli(old), "flink", "z", "--z", str(Z), "--delta-t",
                                      str(DELTA_T), "-p", "1", str(src), "-o", str(out),
                                      "--json", *extra])
        if out.read_bytes() != expected.read_bytes():
            raise RuntimeError(f"{label}: output differs from streamanon z")
        return {"part": "z", "run": label, "tuples": tuples, "job_s": summary["job_seconds"],
                "tuples_per_s": round(tuples / summary["job_seconds"]),
                "command_s": round(cmd_s, 2), "peak_jvm_bytes": peak,
                "output": "identical to streamanon z"}

    small_pure = work / "z-1k-pure.csv"
    timed([*cli(), "z", "--z", str(Z), "--delta-t", str(DELTA_T), str(small), "-o",
           str(small_pure), "--json"])
    fixed = flink(small, "flink z batched, 1,000 tuples (fixed cost)", small_pure, 1000)
    big = flink(trace, "flink z batched", pure_out, n)
    big["marginal_tuples_per_s"] = round((n - 1000) / max(1e-9, big["job_s"] - fixed["job_s"]))
    inline = flink(trace, "flink z batched, --no-read-ahead", pure_out, n,
                   extra=("--no-read-ahead",))
    rows += [fixed, big, inline]
    if old_src is not None:
        sample = head(trace, work / "z-old.csv", args.old_z_n)
        sample_pure = work / "z-old-pure.csv"
        timed([*cli(), "z", "--z", str(Z), "--delta-t", str(DELTA_T), str(sample), "-o",
               str(sample_pure), "--json"])
        old = flink(sample, "flink z per-record (baseline)", sample_pure, args.old_z_n,
                    old=old_src)
        old["note"] = "job_s is the baseline's execute() wall time (mini-cluster start incl.)"
        rows.append(old)
    table(f"z, -p 1, file to file ({n:,}-tuple Zipf trace, z={Z}, Δt={DELTA_T:g} s; {load()})",
          ["run", "tuples", "job s", "tuples/s (job)", "command s", "command / pure (same input)",
           "peak JVM MB", "output"],
          [[r["run"], f"{r['tuples']:,}", r["job_s"], f"{r['tuples_per_s']:,}",
            r["command_s"], f"{r['command_s'] / pure_cmd:.1f}x" if r["tuples"] == n else "-",
            mb(r["peak_jvm_bytes"]), r["output"]] for r in rows])
    print(f"marginal throughput of the batched job ({n:,} minus 1,000 tuples over the "
          f"difference of job times): {big['marginal_tuples_per_s']:,} tuples/s")
    print(f"targets: job >= 250,000 tuples/s: {big['tuples_per_s']:,}; whole command <= 10x "
          f"streamanon z: {big['command_s'] / pure_cmd:.1f}x")
    return rows


# -- part castle ------------------------------------------------------------------------------
def castle_data(work: Path, n: int) -> tuple[Path, Path]:
    from streamanon.data import ashrae

    data = ashrae.write_csv(work / f"ashrae-{n}.csv", ashrae.generate(n, seed=1))
    rules = work / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    return data, rules


def castle_flags() -> list[str]:
    return [x for k, v in CASTLE.items() for x in (f"--{k}", str(v))]


def part_castle(args: argparse.Namespace, work: Path, old_src: Path | None) -> list[dict]:
    n = args.castle_n
    data, rules = castle_data(work, n)
    pure_out = work / "castle-pure.csv"

    def pure_run() -> dict:
        pure, pure_cmd, _ = timed([*cli(), "castle", str(data), "--rules", str(rules), "-o",
                                   str(pure_out), "--json", *castle_flags()])
        return {"part": "castle", "run": "streamanon castle (pure)", "tuples": n,
                "job_s": pure["seconds"], "tuples_per_s": pure["tuples_per_second"],
                "command_s": round(pure_cmd, 2), "peak_jvm_bytes": 0, "output": "reference"}

    def flink(src: Path, label: str, tuples: int, want: Counter,
              old: Path | None = None, extra: tuple[str, ...] = ()) -> dict:
        out = work / f"castle-{label.replace(' ', '_')}.csv"
        summary, cmd_s, peak = timed([*cli(old), "flink", "castle", str(src), "--rules",
                                      str(rules), "-p", "1", "--partitions", "1", "-o",
                                      str(out), "--json", *castle_flags(), *extra])
        released = check_castle_output(out, src, rules, want)
        return {"part": "castle", "run": label, "tuples": tuples,
                "job_s": summary["job_seconds"],
                "tuples_per_s": round(tuples / summary["job_seconds"]),
                "command_s": round(cmd_s, 2), "peak_jvm_bytes": peak,
                "output": f"= pure CASTLE, checker ok ({released:,} released)"}

    small = head(data, work / "castle-1k.csv", 1000)
    small_out = work / "castle-1k-pure.csv"
    timed([*cli(), "castle", str(small), "--rules", str(rules), "-o", str(small_out),
           "--json", *castle_flags()])
    fixed = flink(small, "flink castle batched, 1,000 tuples (fixed cost)", 1000,
                  castle_released(small_out))
    # pure and Flink runs alternate, args.repeat times each, and the medians are compared:
    # a shared machine drifts by +-10% between runs, as much as the target's margin
    pures, news = [], []
    for _ in range(args.repeat):
        pures.append(pure_run())
        expected = castle_released(pure_out)
        news.append(flink(data, "flink castle batched, 1 partition", n, expected))
    pure, new = median_run(pures), median_run(news)
    if args.repeat > 1:
        for r, runs in ((pure, pures), (new, news)):
            r["run"] += f" (median of {len(runs)}: " + ", ".join(
                f"{x['job_s']:.3f}" for x in runs) + " s)"
    new["marginal_tuples_per_s"] = round((n - 1000) / max(1e-9, new["job_s"] - fixed["job_s"]))
    inline = flink(data, "flink castle batched, 1 partition, --no-read-ahead", n, expected,
                   extra=("--no-read-ahead",))
    rows = [pure, fixed, new, inline]
    if old_src is not None:
        sample = head(data, work / "castle-old.csv", args.old_castle_n)
        sample_pure = work / "castle-old-pure.csv"
        timed([*cli(), "castle", str(sample), "--rules", str(rules), "-o", str(sample_pure),
               "--json", *castle_flags()])
        old = flink(sample, "flink castle per-record (baseline)", args.old_castle_n,
                    castle_released(sample_pure), old=old_src)
        old["note"] = "job_s is the baseline's execute() wall time (mini-cluster start incl.)"
        rows.append(old)
    base = rows[0]["tuples_per_s"]
    table(f"CASTLE, one partition ({n:,} ASHRAE-shaped tuples, {CASTLE}; {load()})",
          ["run", "tuples", "job s", "tuples/s", "vs pure", "command s", "peak JVM MB",
           "output"],
          [[r["run"], f"{r['tuples']:,}", r["job_s"], f"{r['tuples_per_s']:,}",
            f"{r['tuples_per_s'] / base:.2f}x", r["command_s"], mb(r["peak_jvm_bytes"]),
            r["output"]] for r in rows])
    print(f"marginal throughput of the batched job ({n:,} minus 1,000 tuples over the "
          f"difference of job times): {new['marginal_tuples_per_s']:,} tuples/s "
          f"({new['marginal_tuples_per_s'] / base:.2f}x pure)")
    print(f"target: >= 0.7x pure: {new['tuples_per_s'] / base:.2f}x")
    return rows


def median_run(runs: list[dict]) -> dict:
    """The run of median job time (the middle one of an odd number)."""
    return dict(sorted(runs, key=lambda r: r["job_s"])[(len(runs) - 1) // 2])


# -- part scale ---------------------------------------------------------------------------------
def part_scale(args: argparse.Namespace, work: Path) -> list[dict]:
    from streamanon.flink.standalone import StandaloneCluster, job_id_of

    n = args.scale_n
    data, rules = castle_data(work, n)
    rows: list[dict] = []
    with StandaloneCluster(work / "cluster", taskmanagers=2) as cluster:
        print(f"\nstandalone cluster up: JobManager + 2 TaskManagers, REST port "
              f"{cluster.rest_port} ({load()})", flush=True)
        wants = {p: pure_castle_per_partition(data, rules, p, work) for p in (1, 2)}
        # a warm-up job on both TaskManagers first: the first job on a fresh JVM also pays
        # its class loading and JIT compilation, which no measured run should carry
        warm = cluster.submit([
            "castle", str(head(data, work / "scale-warmup.csv", 20_000)), "--rules",
            str(rules), "-p", "2", "--partitions", "2", "-o", str(work / "scale-warmup-out.csv"),
            "--work-dir", str(work / "scale-run-warmup"), "--json", *castle_flags()])
        if warm.returncode != 0:
            raise RuntimeError(f"the warm-up job failed: {warm.stderr[-3000:]}")
        for p, ahead in ((1, True), (2, True), (1, False), (2, False)):
            want = wants[p]
            tag = f"p{p}" + ("" if ahead else "-inline")
            out = work / f"scale-{tag}.csv"
            start, cpu0 = time.perf_counter(), cpu_seconds(cluster.pids())
            proc = cluster.submit([
                "castle", str(data), "--rules", str(rules), "-p", str(p), "--partitions",
                str(p), "-o", str(out), "--work-dir", str(work / f"scale-run-{tag}"),
                "--json", *castle_flags(), *([] if ahead else ["--no-read-ahead"])])
            cmd_s = time.perf_counter() - start
            cluster_cpu = cpu_seconds(cluster.pids()) - cpu0
            if proc.returncode != 0:
                raise RuntimeError(f"flink run p={p} failed: {proc.stderr[-3000:]}")
            summary = json.loads(next(x for x in reversed(proc.stdout.splitlines())
                                      if x.startswith("{")))
            released = check_castle_output(out, data, rules, want)
            job = job_id_of(proc.stdout + proc.stderr)
            tms = {name: len(v) for name, v in cluster.taskmanagers_of(job).items()} \
                if job else {}
            castle_tms = next((v for k, v in tms.items() if k.startswith("CASTLE")), 0)
            rows.append({"part": "scale", "run": f"CASTLE p={p}, {p} partition(s)" + (
                             "" if ahead else ", --no-read-ahead"), "read_ahead": ahead,
                         "parallelism": p, "tuples": n, "job_s": summary["job_seconds"],
                         "tuples_per_s": round(n / summary["job_seconds"]),
                         "command_s": round(cmd_s, 2),
                         "cluster_cpu_s": round(cluster_cpu, 2),
                         "cores_busy": round(cluster_cpu / summary["job_seconds"], 2),
                         "taskmanagers_used": castle_tms,
                         "peak_tm_bytes": max(cluster.peak_rss_bytes().values(), default=0),
                         "output": f"= pure CASTLE per partition, checker ok "
                                   f"({released:,} released)"})
            print(json.dumps(rows[-1]), flush=True)
    table(f"Scale-out on the standalone cluster (CASTLE, {n:,} tuples, {CASTLE}; "
          f"2 TaskManagers, 1 slot each; 2 shared cores; {load()})",
          ["run", "job s", "tuples/s", "vs p=1 (same reading)", "vs p=1 (default)",
           "cluster CPU s", "cores busy (CPU s / job s)", "TaskManagers running CASTLE",
           "peak TaskManager MB", "output"],
          [[r["run"], r["job_s"], f"{r['tuples_per_s']:,}",
            f"{r['tuples_per_s'] / one[r['read_ahead']]:.2f}x",
            f"{r['tuples_per_s'] / one[True]:.2f}x", r["cluster_cpu_s"], r["cores_busy"],
            r["taskmanagers_used"],
            mb(r["peak_tm_bytes"]), r["output"]] for r in rows
           for one in [{x["read_ahead"]: x["tuples_per_s"] for x in rows
                        if x["parallelism"] == 1}]])
    by = {(r["parallelism"], r["read_ahead"]): r["tuples_per_s"] for r in rows}
    print(f"target: p=2 >= 1.5x p=1: {by[2, True] / by[1, True]:.2f}x with the read-ahead "
          f"helper (p=1 already parses on the second core), {by[2, False] / by[1, False]:.2f}x "
          f"with --no-read-ahead; p=2 (default) is {by[2, True] / by[1, False]:.2f}x the p=1 "
          f"job without read-ahead (the machine has {os.cpu_count()} cores, shared)")
    cores = os.cpu_count() or 1
    for ahead in (True, False):
        one = next(r for r in rows if r["parallelism"] == 1 and r["read_ahead"] == ahead)
        print(f"ceiling on this machine{'' if ahead else ' (--no-read-ahead)'}: p=1 keeps "
              f"{one['cores_busy']} of {cores} cores busy (the cluster's CPU seconds over the "
              f"job's seconds), so p=2 can gain at most {cores / one['cores_busy']:.2f}x "
              f"however well it scales")
    return rows


# -- part latency -------------------------------------------------------------------------------
class LoadClient:
    """Serves ``lines`` on one socket at ``rate`` lines per second (one line per send),
    collects outcome lines on another and times each tuple (send -> outcome received)."""

    def __init__(self, lines: list[str], rate: float) -> None:
        self.lines, self.rate = lines, rate
        self.src_srv = socket.create_server((HOST, 0))
        self.rel_srv = socket.create_server((HOST, 0))
        self.src_port = self.src_srv.getsockname()[1]
        self.rel_port = self.rel_srv.getsockname()[1]
        self.sent = np.zeros(len(lines) + 1, dtype=np.int64)
        self.received = np.zeros(len(lines) + 1, dtype=np.int64)
        self.outcomes: list[str] = []

    def run(self, timeout: float = 600.0) -> None:
        for srv in (self.src_srv, self.rel_srv):
            srv.settimeout(timeout)
        conns: dict[str, socket.socket] = {}
        acceptors = [threading.Thread(target=lambda n, s: conns.__setitem__(n, s.accept()[0]),
                                      args=a) for a in (("src", self.src_srv),
                                                        ("rel", self.rel_srv))]
        for th in acceptors:
            th.start()
        for th in acceptors:
            th.join()
        if set(conns) != {"src", "rel"}:
            raise RuntimeError("the job did not connect to both sockets in time")
        receiver = threading.Thread(target=self._receive, args=(conns["rel"],))
        receiver.start()
        self._send(conns["src"])
        conns["src"].shutdown(socket.SHUT_WR)
        receiver.join(timeout)
        for c in conns.values():
            c.close()

    def _send(self, conn: socket.socket) -> None:
        start = time.perf_counter_ns()
        for i, line in enumerate(self.lines):
            due = start + int(i / self.rate * 1e9)
            while time.perf_counter_ns() < due:
                time.sleep(0.0002)
            self.sent[i + 1] = time.perf_counter_ns()
            conn.sendall((line + "\n").encode())

    def _receive(self, conn: socket.socket) -> None:
        got, n = 0, len(self.lines)
        with conn.makefile("r", encoding="utf-8", newline="\n") as fh:
            for line in fh:
                now = time.perf_counter_ns()
                line = line.rstrip("\n")
                if not line or line.startswith("#\t"):
                    continue
                self.received[int(line[: line.index("\t")])] = now
                self.outcomes.append(line)
                got += 1
                if got == n:
                    break

    def figures(self, warm_up: float = 2.0) -> dict[str, float]:
        """Latency over the tuples sent after the first ``warm_up`` seconds (the job's
        sockets connect before all its tasks have started: the first tuples wait for them),
        throughput over all."""
        sent, received = self.sent[2:], self.received[2:]  # line 1 is the header
        if not (received > 0).all():
            raise RuntimeError(f"{int((received == 0).sum())} tuples never came back")
        lat = (received - sent) / 1e6
        steady = lat[sent - sent[0] >= warm_up * 1e9]
        return {"latency_median_ms": round(float(np.median(steady)), 2),
                "latency_p99_ms": round(float(np.percentile(steady, 99)), 2),
                "latency_max_ms": round(float(steady.max()), 2),
                "latency_max_all_ms": round(float(lat.max()), 2),
                "throughput": round(len(lat) / ((received.max() - sent.min()) / 1e9), 1)}


def published_rows(outcomes: list[str]) -> list[tuple[str, str, str]]:
    rows = sorted((int(x.split("\t", 1)[0]), x) for x in outcomes if x.split("\t")[1] == "P")
    return [tuple(json.loads(x.split("\t", 4)[4])) for _, x in rows]


def part_latency(args: argparse.Namespace, work: Path, old_src: Path | None) -> list[dict]:
    from streamanon.io import read_records
    from streamanon.records import Suppressed
    from streamanon.zanon import ZAnonymizer

    n = int(args.rate * args.latency_seconds)
    trace = z_trace(work / "latency.csv", n)
    lines = trace.read_text().splitlines()
    op = ZAnonymizer(z=Z, delta_t=DELTA_T)
    expected = [(r.time_text(), r.u, r.a) for rec in read_records(trace)
                for r in op.process(rec) if not isinstance(r, Suppressed)]
    configs: list[tuple[str, Path | None, list[str]]] = [
        (f"batched, --batch-ms {ms:g}" + (" (default)" if ms == 5 else ""), None,
         ["--batch-ms", f"{ms:g}"]) for ms in args.batch_ms]
    if old_src is not None:
        configs.append(("per-record (baseline)", old_src, []))
    rows = []
    for label, old, extra in configs:
        client = LoadClient(lines, args.rate)
        run = Run([*cli(old), "flink", "z", f"tcp://{HOST}:{client.src_port}", "--release-to",
                   f"{HOST}:{client.rel_port}", "-p", "1", "--z", str(Z), "--delta-t",
                   str(DELTA_T), "-o", str(work / "latency-out.csv"), "--json", *extra])
        client.run()
        run.wait()
        if published_rows(client.outcomes) != expected:
            raise RuntimeError(f"{label}: published tuples differ from streamanon z")
        rows.append({"part": "latency", "run": label, "tuples": n, "rate": args.rate,
                     **client.figures(), "peak_jvm_bytes": run.peak,
                     "batch_ms": float(extra[1]) if extra else None,
                     "output": "published = streamanon z"})
        print(json.dumps(rows[-1]), flush=True)
    table(f"z over TCP at {args.rate:,.0f} tuples/s ({n:,} tuples, p=1, one line per send; "
          f"latency after the first 2 s; {load()})",
          ["run", "latency median ms", "p99 ms", "max ms", "max ms incl. the first 2 s",
           "tuples/s", "peak JVM MB", "output"],
          [[r["run"], r["latency_median_ms"], r["latency_p99_ms"], r["latency_max_ms"],
            r["latency_max_all_ms"], f"{r['throughput']:,}", mb(r["peak_jvm_bytes"]),
            r["output"]] for r in rows])
    default = next((r for r in rows if "(default)" in r["run"]), None)
    if default:
        print(f"targets: median <= 20 ms: {default['latency_median_ms']} ms; p99 <= 100 ms: "
              f"{default['latency_p99_ms']} ms")
    return rows


# -- flink + kafka -----------------------------------------------------------------------------
def _tagged(bootstrap: str, topic: str, n: int) -> tuple[Counter, float]:
    """``(streamanon-in tag, value)`` of the messages of a one-partition topic, counted, and
    the newest message's timestamp (s; the producer's create time, a message's send): read
    from offset 0 until ``n`` messages (the run's summary) or 15 s without a new one (Tansu's
    end-offset answers are not trusted here)."""
    from confluent_kafka import Consumer, TopicPartition

    from streamanon.pipeline.kafka.connection import quiet_logs

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-reader",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10, **quiet_logs()})
    c.assign([TopicPartition(topic, 0, 0)])
    out: Counter = Counter()
    got, idle, newest = 0, time.monotonic(), 0
    while got < n and time.monotonic() - idle < 15:
        for m in c.consume(10_000, 0.2):
            if m.error() is None:
                out[(dict(m.headers() or []).get("streamanon-in", b""), m.value())] += 1
                newest = max(newest, m.timestamp()[1])
                got += 1
                idle = time.monotonic()
    c.close()
    if got < n:
        print(f"warning: {topic}: read {got:,} messages of {n:,}", flush=True)
    return out, newest / 1000


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    from streamanon.pipeline.kafka.connection import quiet_logs

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True,
                  "queue.buffering.max.messages": 2_000_000, **quiet_logs()})
    for v in values:
        while True:
            try:
                p.produce(topic, v, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


class KafkaLoad:
    """Produce to ``inp`` at ``rate`` messages/s (one partition: message i has offset i) and
    consume ``out``: per published message, the time from its produce call to its receipt,
    found through its ``streamanon-in`` tag."""

    def __init__(self, bootstrap: str, inp: str, out: str, values: list[bytes],
                 rate: float) -> None:
        self.bootstrap, self.inp, self.out = bootstrap, inp, out
        self.values, self.rate = values, rate
        self.sent: dict[int, float] = {}
        self.latency: dict[int, float] = {}
        self.stop = threading.Event()

    def consume(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        from streamanon.pipeline.kafka.connection import quiet_logs

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bench-latency",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 1,
                      "fetch.min.bytes": 1, **quiet_logs()})
        c.assign([TopicPartition(self.out, 0, 0)])
        while not self.stop.is_set():
            # the first message as soon as it comes, then what came with it: consume(n, t)
            # alone returns after t unless n messages came, and would add up to t to each
            first = c.poll(0.05)
            if first is None:
                continue
            now = time.perf_counter()
            for m in [first, *c.consume(1000, 0)]:
                if m.error() is not None:
                    continue
                tag = dict(m.headers() or []).get("streamanon-in", b"")
                offset = int(tag.split(b"@")[1]) if b"@" in tag else -1
                if offset in self.sent and offset not in self.latency:
                    self.latency[offset] = now - self.sent[offset]
        c.close()

    def produce(self, first: int) -> None:
        """Send ``values`` at the rate; the first one has offset ``first``."""
        from confluent_kafka import Producer

        from streamanon.pipeline.kafka.connection import quiet_logs

        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, **quiet_logs()})
        start = time.perf_counter()
        for i, v in enumerate(self.values):
            due = start + i / self.rate
            while (now := time.perf_counter()) < due:
                time.sleep(min(0.001, due - now))
            self.sent[first + i] = time.perf_counter()
            p.produce(self.inp, v, partition=0)
            p.poll(0)
        p.flush(30)

    def figures(self, warm_up: int) -> dict[str, float]:
        ms = np.array([v for k, v in self.latency.items() if k >= warm_up]) * 1000
        if not len(ms):
            return {"measured": 0, "median_ms": float("nan"), "p99_ms": float("nan"),
                    "max_ms": float("nan")}
        return {"measured": len(ms), "median_ms": float(np.median(ms)),
                "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max())}


def _latency_run(cmd: list[str], bootstrap: str, inp: str, out: str, lines: list[bytes],
                 args: argparse.Namespace) -> dict[str, float]:
    """Start a live run (no --until-end), warm it up, then measure at ``args.rate``."""
    from streamanon.pipeline.kafka.client import end_offsets

    warm = 500
    _produce(bootstrap, inp, lines[:warm])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    load_ = KafkaLoad(bootstrap, inp, out,
                      lines[warm: warm + int(args.rate * args.latency_seconds)], args.rate)
    try:
        deadline = time.monotonic() + 180
        while True:  # running: the warm-up's output is there
            assert proc.poll() is None, proc.stderr.read()[-2000:] if proc.stderr else ""
            assert time.monotonic() < deadline, "the run produced nothing in 180 s"
            try:
                if end_offsets(bootstrap, out, [0])[0] > 0:
                    break
            except Exception:
                pass
            time.sleep(0.2)
        reader = threading.Thread(target=load_.consume, daemon=True)
        reader.start()
        load_.produce(warm)
        time.sleep(3.0)  # the last messages' way out
        load_.stop.set()
        reader.join()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return load_.figures(warm + int(2 * args.rate))  # after the first 2 s


def part_flink_kafka(args: argparse.Namespace, work: Path) -> list[dict]:
    """``streamanon flink z`` kafka -> kafka vs ``streamanon z`` kafka -> kafka on the same
    topic (throughput; outputs equal per record), then end-to-end latency at 1,000 tuples/s.
    With ``--kafka-before REF`` every run is made twice, REF's ``src`` then this checkout's,
    one after the other (the machine's load drifts: interleaved pairs compare fairly), and
    the CPU seconds of each command (its processes and the JVM's) are printed beside."""
    from streamanon.harness.kafka_broker import Broker, create_topics

    rows: list[dict] = []
    if not args.kafka_n:  # the CASTLE part only
        with Broker(work / "broker", storage="memory") as broker:
            if args.kafka_castle_n:
                rows += _flink_kafka_castle(args, work, f"{broker.host}:{broker.port}")
        return rows
    print(f"\n== flink+kafka: z, {args.kafka_n:,} tuples, one partition; {load()}",
          flush=True)
    variants: list[tuple[str, Path | None]] = [("", None)]
    if args.kafka_before:
        (work / "before").mkdir(exist_ok=True)
        before = baseline_src(args.kafka_before, work / "before")
        if before is not None:
            variants = [(f"before ({args.kafka_before}): ", before), ("after: ", None)]
    trace = z_trace(work / "kafka-trace.csv", args.kafka_n + int(
        args.rate * args.latency_seconds) + 1000)
    lines = trace.read_bytes().splitlines()[1:]
    zargs = ["--z", str(Z), "--delta-t", f"{DELTA_T:g}"]
    with Broker(work / "broker", storage="memory") as broker:
        bs = f"{broker.host}:{broker.port}"
        create_topics(bs, {"in": 1})
        _produce(bs, "in", lines[:args.kafka_n])
        url = f"kafka://{bs}"
        n = args.kafka_n
        body: list[list[str]] = []
        want: Counter | None = None
        pure_s: dict[str, float] = {}
        for tag, src in variants:
            pure, secs, _, cpu = timed_cpu([*cli(src), "z", f"{url}/in", "-o",
                                         f"{url}/pure{len(pure_s)}", *zargs, "--from",
                                         "earliest", "--until-end", "--json"])
            assert pure["read"] == n
            got, _ = _tagged(bs, f"pure{len(pure_s)}", pure["published"])
            assert want is None or got == want, "pure z's outputs differ between the runs"
            want = got
            pure_s[tag] = secs
            body.append([f"{tag}streamanon z (exactly once), whole command", f"{secs:.2f}",
                         f"{n / secs:,.0f}", "1.00", f"{cpu:.1f}", "", ""])
        assert want is not None
        for p in args.kafka_p:
            for tag, src in variants:
                topic = f"flink-p{p}-{len(rows)}"
                fl, fl_s, _, cpu = timed_cpu([*cli(src), "flink", "z", f"{url}/in", "-o",
                                           f"{url}/{topic}", *zargs, "-p", str(p),
                                           "--until-end", "--json"])
                got, newest = _tagged(bs, topic, fl["published"])
                assert set(got) == set(want), f"flink -p {p} output differs from pure z's"
                assert fl["read"] == n
                repeats = sum(got.values()) - len(got)
                # the job's throughput: first record read (taken in the JVM) to the last
                # output message sent (its create time in the output topic)
                stream_s = max(1e-3, newest - fl["first_read_at"]) if fl.get(
                    "first_read_at") else float("nan")
                ps = pure_s[tag]
                label = f"{tag}streamanon flink z -p {p}"
                body += [[f"{label}, whole command", f"{fl_s:.2f}", f"{n / fl_s:,.0f}",
                          f"{ps / fl_s:.3f}", f"{cpu:.1f}", f"{repeats}", ""],
                         [f"{label}, Flink net runtime", f"{fl['job_seconds']:.2f}",
                          f"{n / fl['job_seconds']:,.0f}", f"{ps / fl['job_seconds']:.3f}",
                          "", "", ""],
                         [f"{label}, job: first read -> last output", f"{stream_s:.2f}",
                          f"{n / stream_s:,.0f}", f"{ps / stream_s:.3f}", "", "", ""]]
                rows.append({"part": "flink-kafka", "variant": tag, "tuples": n,
                             "parallelism": p, "pure_s": ps, "flink_s": fl_s,
                             "flink_cpu_s": cpu, "flink_job_s": fl["job_seconds"],
                             "flink_stream_s": stream_s, "repeats": repeats})
        table(f"throughput kafka -> kafka, {n:,} tuples, one partition (outputs equal per "
              f"record to pure z's: {len(want):,} published; 'vs pure z': the pure command's "
              f"seconds of the same code over these; {load()})",
              ["run", "seconds", "tuples/s", "vs pure z", "CPU s", "repeats", ""], body)
        if args.kafka_castle_n:
            rows += _flink_kafka_castle(args, work, bs)
        if not args.kafka_latency:
            return rows
        lat_lines = lines[args.kafka_n:]
        lat = []
        runs = 0
        for label, command, options in (
                ("streamanon z (live)", ["z"], ["--checkpoint-every", "1"]),
                ("streamanon flink z -p 1 --batch-ms 5", ["flink", "z"],
                 ["-p", "1", "--batch-ms", "5", "--checkpoint-interval", "1000"])):
            for tag, src in variants:
                inp, out = f"lat-in{runs}", f"lat-out{runs}"
                runs += 1
                create_topics(bs, {inp: 1})
                f = _latency_run([*cli(src), *command, f"{url}/{inp}", "-o", f"{url}/{out}",
                                  *zargs, "--from", "earliest", *options],
                                 bs, inp, out, lat_lines, args)
                lat.append([f"{tag}{label}", f"{f['measured']:,}", f"{f['median_ms']:.1f}",
                            f"{f['p99_ms']:.1f}", f"{f['max_ms']:.1f}"])
                rows.append({"part": "flink-kafka-latency", "run": f"{tag}{label}", **f})
        table(f"end-to-end latency at {args.rate:,.0f} tuples/s for {args.latency_seconds} s "
              "(produce call -> output message received; published tuples after the first "
              "2 s)", ["run", "measured", "median ms", "p99 ms", "max ms"], lat)
        print(load(), flush=True)
    return rows


def _flink_kafka_castle(args: argparse.Namespace, work: Path, bs: str) -> list[dict]:
    """``streamanon flink castle -p 1`` kafka -> kafka vs ``streamanon castle`` kafka -> kafka
    on one topic of ASHRAE-shaped rows (the header as its first message, a plain producer):
    whole commands (wall and CPU seconds) and the job's own time (first record read to last
    output, the summary's ``stream_seconds``); releases and suppressed rows equal per record
    (tag and text), each once, and ``verify castle`` passes on the Flink job's releases.
    With ``--kafka-castle-before REF`` the Flink job of REF's ``src`` runs too, alternating
    with this checkout's, each ``--kafka-castle-repeat`` times; medians are compared.
    Targets: the job's tuples/s >= 0.7x pure's, the whole command within 3x."""
    from streamanon.harness.kafka_broker import create_topics

    n = args.kafka_castle_n
    print(f"\n== flink+kafka: castle, {n:,} ASHRAE-shaped rows, one partition; {load()}",
          flush=True)
    data, rules = castle_data(work, n)
    header, *lines = data.read_bytes().splitlines()
    create_topics(bs, {"castle-in": 1})
    _produce(bs, "castle-in", [header, *lines])
    url = f"kafka://{bs}"
    flags = ["--rules", str(rules), *castle_flags(), "--until-end", "--json"]
    variants: list[tuple[str, Path | None]] = [("after", None)]
    if args.kafka_castle_before:
        (work / "before").mkdir(exist_ok=True)
        before = baseline_src(args.kafka_castle_before, work / "before")
        if before is not None:
            variants.insert(0, (f"before ({args.kafka_castle_before})", before))
    runs: dict[str, list[dict]] = {"pure": []}
    for i in range(args.kafka_castle_repeat):
        pure, pure_s, _, pure_cpu = timed_cpu([
            *cli(), "castle", f"{url}/castle-in", "-o", f"{url}/castle-pure{i}", "--suppressed",
            f"{url}/castle-psup{i}", "--from", "earliest", *flags])
        assert pure["read"] == n, pure["read"]
        runs["pure"].append({"seconds": pure_s, "cpu": pure_cpu, "out": f"castle-pure{i}",
                             "sup": f"castle-psup{i}", "summary": pure})
        order = variants if i % 2 == 0 else variants[::-1]
        for label, src in order:
            tag = f"{'b' if src is not None else 'a'}{i}"
            fl, fl_s, peak, fl_cpu = timed_cpu([
                *cli(src), "flink", "castle", f"{url}/castle-in", "-o", f"{url}/castle-f{tag}",
                "--suppressed", f"{url}/castle-fsup{tag}", "-p", "1", *flags])
            assert fl["read"] == n, (label, fl["read"])
            runs.setdefault(label, []).append({
                "seconds": fl_s, "cpu": fl_cpu, "peak": peak, "job": fl["job_seconds"],
                "stream": fl.get("stream_seconds") or float("nan"), "out": f"castle-f{tag}",
                "sup": f"castle-fsup{tag}", "summary": fl})
            print(f"  run {i + 1}: {label}: whole {fl_s:.2f} s, job {fl.get('stream_seconds')} s,"
                  f" {fl_cpu:.1f} CPU s; pure {pure_s:.2f} s; {load()}", flush=True)
    # outputs: every Flink run equal per record to the pure run beside it, each message once
    repeats = {}
    for label, _ in variants:
        repeats[label] = 0
        for mine, ref in zip(runs[label], runs["pure"], strict=True):
            for topic, theirs, count in (("out", "out", "released"),
                                         ("sup", "sup", "suppressed")):
                got, _ = _tagged(bs, mine[topic], mine["summary"][count])
                want, _ = _tagged(bs, ref[theirs], ref["summary"][count])
                assert set(got) == set(want), f"flink castle {label} {count} differ from pure's"
                repeats[label] += sum(got.values()) - len(got)
    last = runs[variants[-1][0]][-1]
    released, _ = _tagged(bs, last["out"], last["summary"]["released"])
    out = work / "castle-kafka-released.csv"
    out.write_bytes(header + b"\n" + b"".join(v + b"\n" for (_, v) in released))
    subprocess.run([*cli(), "verify", "castle", str(out), "--rules", str(rules),
                    "--k", str(CASTLE["k"]), "--l", str(CASTLE["l"]), "--input", str(data)],
                   check=True, capture_output=True, timeout=600)

    def med(label: str, key: str) -> float:
        return float(np.median([r[key] for r in runs[label]]))

    pure_s, pure_cpu = med("pure", "seconds"), med("pure", "cpu")
    body = [["streamanon castle (exactly once), whole command", f"{pure_s:.2f}",
             f"{pure_cpu:.1f}", f"{n / pure_s:,.0f}", "1.00", "", ""]]
    out_rows = []
    for label, _ in variants:
        fl_s, fl_cpu, job, stream = (med(label, k) for k in ("seconds", "cpu", "job", "stream"))
        peak = max(r["peak"] for r in runs[label])
        name = f"flink castle -p 1 {label}"
        body += [[f"{name}, whole command", f"{fl_s:.2f}", f"{fl_cpu:.1f}", f"{n / fl_s:,.0f}",
                  f"{pure_s / fl_s:.3f}", f"{repeats[label]}", mb(peak)],
                 [f"{name}, Flink net runtime", f"{job:.2f}", "", f"{n / job:,.0f}",
                  f"{pure_s / job:.3f}", "", ""],
                 [f"{name}, job: first read -> last output", f"{stream:.2f}", "",
                  f"{n / stream:,.0f}", f"{pure_s / stream:.3f}", "", ""]]
        out_rows.append({"part": "flink-kafka-castle", "run": label, "tuples": n,
                         "parallelism": 1, "pure_s": pure_s, "pure_cpu_s": pure_cpu,
                         "flink_s": fl_s, "flink_cpu_s": fl_cpu, "flink_job_s": job,
                         "flink_stream_s": stream, "repeats": repeats[label]})
    table(f"CASTLE kafka -> kafka, {n:,} rows, one partition, medians of "
          f"{args.kafka_castle_repeat} (releases and suppressed rows equal per record to pure "
          f"castle's, verify castle passes; targets: job >= 0.7x, whole command within 3x the "
          f"time; {load()})",
          ["run", "seconds", "CPU s", "tuples/s", "vs pure castle", "repeats", "JVM peak MB"],
          body)
    for r in out_rows:
        print(f"  {r['run']}: job / pure tuples/s {r['pure_s'] / r['flink_stream_s']:.2f}x "
              f"(target >= 0.7); whole command {r['flink_s'] / r['pure_s']:.2f}x pure's time "
              f"(target <= 3)", flush=True)
    if len(out_rows) == 2:
        b, a = out_rows
        print(f"  after / before: job {b['flink_stream_s'] / a['flink_stream_s']:.2f}x faster, "
              f"whole command {b['flink_s'] / a['flink_s']:.2f}x, CPU "
              f"{b['flink_cpu_s'] / a['flink_cpu_s']:.2f}x less", flush=True)
    return out_rows


# -- plots -----------------------------------------------------------------------------------
def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    from streamanon.plots import _save

    paths = []
    scale = [r for r in rows if r["part"] == "scale" and r["read_ahead"]]
    if scale:
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.bar([f"p={r['parallelism']}" for r in scale], [r["tuples_per_s"] for r in scale])
        pure = next((r for r in rows if r["run"] == "streamanon castle (pure)"), None)
        if pure:
            ax.axhline(pure["tuples_per_s"], linestyle="--", color="grey",
                       label="streamanon castle (one process)")
            ax.legend()
        ax.set_ylabel("tuples per second (job time)")
        ax.set_title(f"CASTLE scale-out, standalone cluster\n({scale[0]['tuples']:,} tuples, "
                     f"k={CASTLE['k']}, l={CASTLE['l']}, δ={CASTLE['delta']}; partitions = p)")
        paths.append(_save(fig, out_dir / "flink_castle_scaleout.png"))
    lat = [r for r in rows if r["part"] == "latency" and r["batch_ms"] is not None]
    if lat:
        fig, ax = plt.subplots(figsize=(6, 4))
        ms = [r["batch_ms"] for r in lat]
        ax.plot(ms, [r["latency_median_ms"] for r in lat], "o-", label="median")
        ax.plot(ms, [r["latency_p99_ms"] for r in lat], "s--", label="p99")
        old = next((r for r in rows if r["part"] == "latency" and r["batch_ms"] is None), None)
        if old:
            ax.axhline(old["latency_median_ms"], color="grey", linestyle=":",
                       label="per-record job, median")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(ms, [f"{x:g}" for x in ms])
        ax.minorticks_off()
        ax.set_xlabel("--batch-ms")
        ax.set_ylabel("end-to-end latency per tuple (ms)")
        ax.set_title(f"z over TCP at {lat[0]['rate']:,.0f} tuples/s, p=1\n"
                     f"(z={Z}, Δt={DELTA_T:g} s, {lat[0]['tuples']:,} tuples)")
        ax.legend()
        paths.append(_save(fig, out_dir / "flink_z_latency_vs_batch_ms.png"))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, for development")
    parser.add_argument("--parts", nargs="+", default=["z", "castle", "scale", "latency",
                                                       "flink-kafka"],
                        choices=["z", "castle", "scale", "latency", "flink-kafka"])
    parser.add_argument("--baseline-ref", default=BASELINE_REF,
                        help="git ref with the per-record jobs ('' = no baseline)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "out" / "flink")
    parser.add_argument("--z-n", type=int, help="z tuples (1,000,000; --quick 100,000)")
    parser.add_argument("--castle-n", type=int, help="CASTLE tuples (100,000; --quick 20,000)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of pure and Flink CASTLE, alternating; the medians are "
                        "compared (default 3; --quick 1)")
    parser.add_argument("--kafka-n", type=int, help="z tuples through Kafka (1,000,000; "
                        "--quick 30,000; 0: no z run, the CASTLE part only)")
    parser.add_argument("--kafka-castle-n", type=int, help="CASTLE rows through Kafka "
                        "(100,000; --quick 10,000; 0: no CASTLE run)")
    parser.add_argument("--kafka-castle-before", default="", metavar="REF",
                        help="also run the Flink CASTLE job of this git ref's src (before / "
                        "after, alternating)")
    parser.add_argument("--kafka-castle-repeat", type=int, default=1,
                        help="runs of each CASTLE kafka command (medians compared; default 1)")
    parser.add_argument("--kafka-p", type=int, nargs="+", default=[1, 2],
                        help="parallelisms of the Flink Kafka runs (default 1 2)")
    parser.add_argument("--kafka-before", default="", metavar="REF",
                        help="flink-kafka: run every command also with REF's src, one after "
                        "the other (before/after in one run)")
    parser.add_argument("--no-kafka-latency", dest="kafka_latency", action="store_false",
                        help="skip the live latency runs of the flink-kafka part")
    parser.add_argument("--scale-n", type=int, help="CASTLE tuples of the scale-out "
                        "(300,000, enough for the cluster's fixed costs not to dominate; "
                        "--quick 30,000)")
    args = parser.parse_args()
    quick = args.quick
    args.z_n = args.z_n or (100_000 if quick else 1_000_000)
    args.old_z_n = 5_000 if quick else 20_000
    args.castle_n = args.castle_n or (20_000 if quick else 100_000)
    args.repeat = 1 if quick else max(1, args.repeat)
    if args.kafka_n is None:
        args.kafka_n = 30_000 if quick else 1_000_000
    args.kafka_castle_repeat = max(1, args.kafka_castle_repeat)
    if args.kafka_castle_n is None:
        args.kafka_castle_n = 10_000 if quick else 100_000
    args.scale_n = args.scale_n or (30_000 if quick else 300_000)
    args.old_castle_n = 3_000 if quick else 10_000
    args.rate = 1000.0
    args.latency_seconds = 8 if quick else 20
    args.batch_ms = [1, 5, 50] if quick else [1, 5, 20, 100]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    print(f"bench_flink {'--quick ' if quick else ''}on {os.cpu_count()} cores; {load()}",
          flush=True)
    rows: list[dict] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-flink-") as tmp:
        work = Path(tmp)
        old_src = None
        if args.baseline_ref:
            (work / "baseline").mkdir()
            old_src = baseline_src(args.baseline_ref, work / "baseline")
        if "z" in args.parts:
            rows += part_z(args, work, old_src)
        if "castle" in args.parts:
            rows += part_castle(args, work, old_src)
        if "scale" in args.parts:
            rows += part_scale(args, work)
        if "latency" in args.parts:
            rows += part_latency(args, work, old_src)
        if "flink-kafka" in args.parts:
            rows += part_flink_kafka(args, work)
        shutil.rmtree(work / "cluster", ignore_errors=True)
    out_csv = args.out_dir / "flink_bench.csv"
    with out_csv.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)
    pngs = plot(rows, args.out_dir)
    print(f"\nwrote {out_csv}" + "".join(f", {p}" for p in pngs))
    print(f"bench_flink took {time.perf_counter() - started:,.0f} s; {load()}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

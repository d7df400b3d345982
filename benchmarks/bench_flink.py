"""End-to-end latency and throughput through a TCP socket: Flink job vs pure-Python operator.

    .venv/bin/python benchmarks/bench_flink.py            # z (pure, Flink p=1, 2) + CASTLE grid
    .venv/bin/python benchmarks/bench_flink.py --operators z --n 50000 --modes thread process
    .venv/bin/python benchmarks/bench_flink.py --operators castle --castle-n 10000

Like Prink's evaluation: a load client serves the tuples on one TCP socket as fast as the
operator takes them (``--rate`` for a fixed rate instead) and receives the released outcome
lines on another; the per-tuple latency is receive time minus send time (both on the client's
clock), throughput is tuples over first send to last receive. The operator is either the Flink
job (``streamanon flink z tcp://... --release-to ...``, a local mini-cluster; its start-up is
not timed: the clock starts when both its sockets are connected) or the pure-Python operator
behind the same sockets (one process: the same line validation and the same ZAnonymizer,
record at a time, no Flink). Every run's published tuples are checked against
``streamanon z`` on the same trace before a figure is reported.

CASTLE runs on the ASHRAE-shaped stream over k in {5, 20, 80} and δ in {1250, 5000, 20000}
(l = 2, β = 50, μ = 100, ζ = 10): the pure operator (one partition, as ``streamanon castle``)
and the Flink job (``--castle-partitions`` partitions over ``--castle-parallelism``, fewer
when a partition would hold fewer than k individuals: k holds per partition, so with 89
buildings k = 80 runs as one partition); every run's released rows must pass the CASTLE
checker (k, l) and every tuple must come back.

Writes ``flink_bench.csv`` and PNG plots (z: latency median/p99 and throughput per path and
parallelism; CASTLE: median and p99 latency vs δ per k, throughput per path) into
``--out-dir`` and prints the figures and the Flink/pure ratios.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

try:
    import streamanon.castle  # noqa: F401
except ImportError:  # the CASTLE operator is not in this checkout
    HAVE_CASTLE = False
else:
    HAVE_CASTLE = True

HOST = "127.0.0.1"
CHUNK = 64  # lines per send() call; every line of a chunk gets the chunk's send time


# -- the pure-Python operators behind the same sockets (a child process) ----------------------
def z_handler(z: int, delta_t: float):
    from streamanon.flink.lines import LineValidator, z_outcome
    from streamanon.zanon import ZAnonymizer

    op = ZAnonymizer(z=z, delta_t=delta_t)
    validator = LineValidator("csv")

    def handle(line: str | None) -> list[str]:
        if line is None:
            return []
        meta, record = validator.feed(line)
        if record is not None:
            meta.append(z_outcome(op, record))
        return meta

    return handle


def castle_handler(rules_path: str, params: dict):
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.castle.cluster import Row
    from streamanon.flink.castle_rows import RowLineParser, outcome_lines

    rules = RuleSet.load(rules_path)
    numeric = [r.name for r in rules.qi_rules
               if type(r.generalizer).__name__ == "RangeGeneralizer"]
    parser = RowLineParser("csv", rules.id_field, numeric, 1)
    op = CastleAnonymizer(rules, **params)

    def handle(line: str | None) -> list[str]:
        if line is None:
            return outcome_lines(op.flush())
        meta, row = parser.feed(line)
        if row is not None:
            meta += outcome_lines(op.process(Row(row[2], row[1])))
        return meta

    return handle


def pure_operator(source: int, release: int, spec: dict) -> None:
    handle = z_handler(spec["z"], spec["delta_t"]) if spec["operator"] == "z" else \
        castle_handler(spec["rules"], spec["params"])
    src = socket.create_connection((HOST, source))
    rel = socket.create_connection((HOST, release))
    with src.makefile("r", encoding="utf-8", newline="\n") as lines:
        for line in lines:
            out = handle(line.rstrip("\n"))
            if out:
                rel.sendall(("\n".join(out) + "\n").encode())
    out = handle(None)
    if out:
        rel.sendall(("\n".join(out) + "\n").encode())
    rel.close()
    src.close()


# -- the load client ----------------------------------------------------------------------------
class LoadClient:
    """Serves ``lines`` on one socket, collects outcome lines on another, times each tuple."""

    def __init__(self, lines: list[str], rate: float = 0.0) -> None:
        self.lines = lines
        self.rate = rate
        self.src_srv = socket.create_server((HOST, 0))
        self.rel_srv = socket.create_server((HOST, 0))
        self.src_port = self.src_srv.getsockname()[1]
        self.rel_port = self.rel_srv.getsockname()[1]
        n = len(lines)
        self.sent = np.zeros(n + 1, dtype=np.int64)
        self.received = np.zeros(n + 1, dtype=np.int64)
        self.outcomes: list[str] = []

    def run(self, timeout: float = 600.0) -> None:
        self.src_srv.settimeout(timeout)
        self.rel_srv.settimeout(timeout)
        conns: dict[str, socket.socket] = {}

        def accept(name: str, srv: socket.socket) -> None:
            conns[name] = srv.accept()[0]

        acceptors = [threading.Thread(target=accept, args=a) for a in
                     (("src", self.src_srv), ("rel", self.rel_srv))]
        for th in acceptors:
            th.start()
        for th in acceptors:
            th.join()
        if set(conns) != {"src", "rel"}:
            raise RuntimeError("the operator did not connect to both sockets in time")
        receiver = threading.Thread(target=self._receive, args=(conns["rel"],))
        receiver.start()
        self._send(conns["src"])
        conns["src"].shutdown(socket.SHUT_WR)
        receiver.join(timeout)
        conns["src"].close()
        conns["rel"].close()

    def _send(self, conn: socket.socket) -> None:
        lines, sent = self.lines, self.sent
        start = time.perf_counter_ns()
        for i in range(0, len(lines), CHUNK):
            if self.rate:
                due = start + int(i / self.rate * 1e9)
                while time.perf_counter_ns() < due:
                    time.sleep(0.0005)
            block = lines[i:i + CHUNK]
            sent[i + 1:i + 1 + len(block)] = time.perf_counter_ns()
            conn.sendall(("\n".join(block) + "\n").encode())

    def _receive(self, conn: socket.socket) -> None:
        received, n = self.received, len(self.lines)
        got = 0
        with conn.makefile("r", encoding="utf-8", newline="\n") as fh:
            for line in fh:
                now = time.perf_counter_ns()
                line = line.rstrip("\n")
                if not line or line.startswith("#\t"):  # empty, or a note (rule sets)
                    continue
                seq = int(line[: line.index("\t")])
                received[seq] = now
                self.outcomes.append(line)
                got += 1
                if got == n:
                    break

    def figures(self, first: int = 1) -> dict[str, float]:
        """Latency and throughput over the tuples from line ``first`` on (2: skip a header)."""
        sent, received = self.sent[first:], self.received[first:]
        ok = received > 0
        if not ok.all():
            raise RuntimeError(f"{int((~ok).sum())} of {len(ok)} tuples never came back")
        lat_ms = (received - sent) / 1e6
        span = (received.max() - sent.min()) / 1e9
        return {"tuples": len(sent), "seconds": round(span, 3),
                "throughput": round(len(sent) / span, 1),
                "latency_median_ms": round(float(np.median(lat_ms)), 3),
                "latency_p99_ms": round(float(np.percentile(lat_ms, 99)), 3),
                "latency_mean_ms": round(float(lat_ms.mean()), 3)}


def published_rows(outcomes: list[str]) -> list[tuple[str, str, str]]:
    rows = sorted((int(x.split("\t", 1)[0]), x) for x in outcomes if x.split("\t")[1] == "P")
    return [tuple(json.loads(x.split("\t", 4)[4])) for _, x in rows]


def expected_rows(trace: Path, z: int, delta_t: float) -> list[tuple[str, str, str]]:
    from streamanon.io import read_records
    from streamanon.records import Suppressed
    from streamanon.zanon import ZAnonymizer

    op = ZAnonymizer(z=z, delta_t=delta_t)
    return [(r.time_text(), r.u, r.a) for r in map(op.process, read_records(trace))
            if not isinstance(r, Suppressed)]


def run_one(path: str, lines: list[str], spec: dict, args: argparse.Namespace,
            parallelism: int, mode: str, work: Path, extra: list[str] = ()
            ) -> tuple[dict[str, float], list[str]]:
    """One run behind the sockets; ``spec`` names the operator and its parameters."""
    client = LoadClient(lines, args.rate)
    if path == "pure":
        cmd = [sys.executable, __file__, "--pure-operator", str(client.src_port),
               str(client.rel_port), json.dumps(spec)]
    else:
        cmd = [sys.executable, "-c", "from streamanon.cli import main; main()", "flink",
               spec["operator"], f"tcp://{HOST}:{client.src_port}", "--release-to",
               f"{HOST}:{client.rel_port}", "-p", str(parallelism), "--mode", mode,
               "-o", str(work / f"flink-{spec['operator']}-p{parallelism}-{mode}.csv"),
               "--checkpoint-interval", str(args.checkpoint_interval), "--json", *extra]
        if args.buffer_timeout is not None:
            cmd += ["--buffer-timeout", str(args.buffer_timeout)]
        if spec["operator"] == "z":
            cmd += ["--z", str(spec["z"]), "--delta-t", str(spec["delta_t"])]
        else:
            cmd += ["--rules", spec["rules"], *(x for k, v in spec["params"].items()
                                                 for x in (f"--{k}", str(v)))]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client.run()
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{path} operator failed: {err[-2000:]}")
    figures = client.figures(1 if spec["operator"] == "z" else 2)
    if path == "flink":  # the job's own -o file went through the exactly-once sink and merge
        summary = json.loads(out.strip().splitlines()[-1])
        figures["job_seconds_with_startup"] = summary["job_seconds"]
    return figures, client.outcomes


def released_rows(outcomes: list[str]) -> list[dict]:
    return [json.loads(x.split("\t", 3)[3]) for x in outcomes if x.split("\t")[1] == "P"]


def castle_grid(args: argparse.Namespace, work: Path) -> list[dict]:
    from streamanon.castle import RuleSet
    from streamanon.castle.verify import check_castle
    from streamanon.data import ashrae

    data = ashrae.write_csv(work / "ashrae.csv", ashrae.generate(args.castle_n, seed=1))
    rules_path = work / "rules.toml"
    rules_path.write_text(ashrae.rules_toml())
    rules = RuleSet.load(rules_path)
    lines = data.read_text().splitlines()
    id_col = lines[0].split(",").index(rules.id_field)
    individuals = len({line.split(",")[id_col] for line in lines[1:]})
    rows = []
    for k in args.castle_k:
        for delta in args.castle_delta:
            params = {"k": k, "l": 2, "delta": delta, "beta": 50, "mu": 100, "zeta": 10}
            spec = {"operator": "castle", "rules": str(rules_path), "params": params}
            for path, p in (("pure", 1), ("flink", args.castle_parallelism)):
                # k holds per partition: a partition needs >= k individuals to release any
                parts = 1 if path == "pure" else max(1, min(args.castle_partitions,
                                                            individuals // k))
                figures, outcomes = run_one(path, lines, spec, args, p, "thread", work,
                                            ["--partitions", str(parts)])
                released = released_rows(outcomes)
                report = check_castle(released, rules.id_field, rules.quasi_identifiers,
                                      rules.sensitive, k=k, l=2)
                if not report.ok:
                    raise RuntimeError(f"CASTLE {path} k={k} δ={delta}: {report.first_problem}")
                row = {"operator": "castle", "path": path, "parallelism": p,
                       "partitions": parts, "mode": "thread" if path == "flink" else "-",
                       "k": k, "l": 2, "delta": delta, "released": len(released),
                       **figures}
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def plot_castle(rows: list[dict], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    ks = sorted({r["k"] for r in rows})
    fig, axes = plt.subplots(1, len(ks), figsize=(4.2 * len(ks), 4), sharey=True,
                             squeeze=False)
    for ax, k in zip(axes[0], ks, strict=True):
        for path, style in (("pure", "o-"), ("flink", "s--")):
            sel = sorted((r for r in rows if r["k"] == k and r["path"] == path),
                         key=lambda r: r["delta"])
            d = [r["delta"] for r in sel]
            ax.plot(d, [r["latency_median_ms"] for r in sel], style, label=f"{path} median")
            ax.plot(d, [r["latency_p99_ms"] for r in sel], style, alpha=0.5,
                    label=f"{path} p99")
        ax.set_xscale("log")
        ax.set_yscale("log")
        deltas = sorted({r["delta"] for r in rows})
        ax.set_xticks(deltas, [f"{x:,}" for x in deltas])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("δ (tuples)")
        ax.set_title(f"k = {k}")
    axes[0][0].set_ylabel("end-to-end latency per tuple (ms)")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(f"CASTLE through a TCP socket ({rows[0]['tuples']:,} ASHRAE-shaped tuples, "
                 f"l = 2; Flink: up to {max(r['partitions'] for r in rows)} partitions)")
    fig.tight_layout()
    lat = out_dir / "flink_castle_latency.png"
    fig.savefig(lat, dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [f"k={r['k']}\nδ={r['delta']}" for r in rows if r["path"] == "pure"]
    x = np.arange(len(labels))
    for off, path in ((-0.2, "pure"), (0.2, "flink")):
        ax.bar(x + off, [r["throughput"] for r in rows if r["path"] == path], 0.4,
               label=path)
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("tuples per second")
    ax.set_title("CASTLE throughput per path")
    ax.legend()
    fig.tight_layout()
    thr = out_dir / "flink_castle_throughput.png"
    fig.savefig(thr, dpi=120)
    plt.close(fig)
    return [lat, thr]


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = ["pure Python" if r["path"] == "pure" else
              f"Flink\np={r['parallelism']} {r['mode']}" for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 4))
    ax.bar(x - 0.2, [r["latency_median_ms"] for r in rows], 0.4, label="median")
    ax.bar(x + 0.2, [r["latency_p99_ms"] for r in rows], 0.4, label="p99")
    ax.set_xticks(x, labels)
    ax.set_yscale("log")
    ax.set_ylabel("end-to-end latency per tuple (ms)")
    ax.set_title(f"z-anonymity through a TCP socket\n({rows[0]['tuples']:,} tuples, "
                 "sent as fast as taken)")
    ax.legend()
    fig.tight_layout()
    lat = out_dir / "flink_z_latency.png"
    fig.savefig(lat, dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 4))
    ax.bar(x, [r["throughput"] for r in rows], 0.5)
    ax.set_xticks(x, labels)
    ax.set_ylabel("tuples per second")
    ax.set_title("z-anonymity throughput per path and parallelism")
    fig.tight_layout()
    thr = out_dir / "flink_z_throughput.png"
    fig.savefig(thr, dpi=120)
    plt.close(fig)
    return [lat, thr]


def z_runs(args: argparse.Namespace, work: Path) -> list[dict]:
    from streamanon.data.traces import write_trace, zipf_trace

    rows_in = zipf_trace(args.n, n_users=2000, n_values=10_000, levels=3,
                         duration=args.n / 20_000 * 86_400, seed=5)
    trace = write_trace(work / "trace.csv", rows_in)
    lines = [f"{t},{u},{a}" for t, u, a in rows_in]
    expected = expected_rows(trace, args.z, args.delta_t)
    spec = {"operator": "z", "z": args.z, "delta_t": args.delta_t}
    configs = [("pure", 1, "-")] + [("flink", p, m) for m in args.modes
                                    for p in args.parallelism]
    rows = []
    for path, p, mode in configs:
        figures, outcomes = run_one(path, lines, spec, args, p, mode, work)
        if published_rows(outcomes) != expected:
            raise RuntimeError(f"{path} p={p} {mode}: published tuples differ from "
                               "streamanon z")
        row = {"operator": "z", "path": path, "parallelism": p, "mode": mode,
               "z": args.z, "delta_t": args.delta_t, **figures}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def report(rows: list[dict]) -> None:
    for op in ("z", "castle"):
        sel = [r for r in rows if r["operator"] == op]
        pure = {(r.get("k"), r.get("delta")): r for r in sel if r["path"] == "pure"}
        for r in sel:
            base = pure[(r.get("k"), r.get("delta"))]
            what = f"{op} {r['path']}" + (f" p={r['parallelism']} {r['mode']}"
                                          if r["path"] == "flink" else "")
            if op == "castle":
                what += f" k={r['k']} δ={r['delta']}"
            ratio = "" if r is base else f" (Flink/pure {r['throughput'] / base['throughput']:.3f})"
            print(f"{what}: {r['throughput']:,.0f} tuples/s{ratio}, latency median "
                  f"{r['latency_median_ms']:,.1f} ms, p99 {r['latency_p99_ms']:,.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pure-operator", nargs=3, metavar=("SRC", "REL", "SPEC"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--operators", nargs="+", default=["z", "castle"] if HAVE_CASTLE
                        else ["z"], choices=["z", "castle"])
    parser.add_argument("--n", type=int, default=20_000, help="z tuples (default 20,000)")
    parser.add_argument("--z", type=int, default=3)
    parser.add_argument("--delta-t", type=float, default=600.0)
    parser.add_argument("--parallelism", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--modes", nargs="+", default=["thread"])
    parser.add_argument("--castle-n", type=int, default=6_000,
                        help="ASHRAE-shaped tuples for CASTLE (default 6,000)")
    parser.add_argument("--castle-k", type=int, nargs="+", default=[5, 20, 80])
    parser.add_argument("--castle-delta", type=int, nargs="+", default=[1250, 5000, 20000])
    parser.add_argument("--castle-parallelism", type=int, default=2)
    parser.add_argument("--castle-partitions", type=int, default=2)
    parser.add_argument("--rate", type=float, default=0.0,
                        help="tuples per second to send (default 0: as fast as taken)")
    parser.add_argument("--checkpoint-interval", type=int, default=2000, help="ms")
    parser.add_argument("--buffer-timeout", type=int, default=None,
                        help="Flink network buffer timeout in ms (default: Flink's 100)")
    parser.add_argument("--out-dir", type=Path, default=Path("benchmarks/out/flink"))
    args = parser.parse_args()
    if args.pure_operator:
        src, rel, spec = args.pure_operator
        pure_operator(int(src), int(rel), json.loads(spec))
        return

    args.out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    pngs: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="bench-flink-") as tmp:
        work = Path(tmp)
        if "z" in args.operators:
            z_rows = z_runs(args, work)
            rows += z_rows
            pngs += plot(z_rows, args.out_dir)
        if "castle" in args.operators:
            castle_rows = castle_grid(args, work)
            rows += castle_rows
            pngs += plot_castle(castle_rows, args.out_dir)
    out_csv = args.out_dir / "flink_bench.csv"
    with out_csv.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)
    print(f"\nwrote {out_csv} and {', '.join(map(str, pngs))}")
    report(rows)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

"""End-to-end latency and throughput through a TCP socket: Flink job vs pure-Python operator.

    .venv/bin/python benchmarks/bench_flink.py                 # z: pure, Flink p=1 and p=2
    .venv/bin/python benchmarks/bench_flink.py --n 50000 --parallelism 1 2 --modes thread process

Like Prink's evaluation: a load client serves the tuples on one TCP socket as fast as the
operator takes them (``--rate`` for a fixed rate instead) and receives the released outcome
lines on another; the per-tuple latency is receive time minus send time (both on the client's
clock), throughput is tuples over first send to last receive. The operator is either the Flink
job (``streamanon flink z tcp://... --release-to ...``, a local mini-cluster; its start-up is
not timed: the clock starts when both its sockets are connected) or the pure-Python operator
behind the same sockets (one process: the same line validation and the same ZAnonymizer,
record at a time, no Flink). Every run's published tuples are checked against
``streamanon z`` on the same trace before a figure is reported.

Writes ``flink_bench.csv`` and PNG plots (latency median/p99 and throughput per path and
parallelism) into ``--out-dir`` and prints the figures and the Flink/pure ratios.
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

HOST = "127.0.0.1"
CHUNK = 64  # lines per send() call; every line of a chunk gets the chunk's send time


# -- the pure-Python operator behind the same sockets (a child process) -----------------------
def pure_operator(source: int, release: int, z: int, delta_t: float) -> None:
    from streamanon.flink.lines import LineValidator, z_outcome
    from streamanon.zanon import ZAnonymizer

    op = ZAnonymizer(z, delta_t)
    validator = LineValidator("csv")
    src = socket.create_connection((HOST, source))
    rel = socket.create_connection((HOST, release))
    with src.makefile("r", encoding="utf-8", newline="\n") as lines:
        for line in lines:
            meta, record = validator.feed(line.rstrip("\n"))
            if record is not None:
                meta.append(z_outcome(op, record))
            rel.sendall(("\n".join(meta) + "\n").encode())
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
                if not line:
                    continue
                seq = int(line[: line.index("\t")])
                received[seq] = now
                self.outcomes.append(line)
                got += 1
                if got == n:
                    break

    def figures(self) -> dict[str, float]:
        sent, received = self.sent[1:], self.received[1:]
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

    op = ZAnonymizer(z, delta_t)
    return [(r.time_text(), r.u, r.a) for r in map(op.process, read_records(trace))
            if not isinstance(r, Suppressed)]


def run_one(path: str, lines: list[str], args: argparse.Namespace, parallelism: int,
            mode: str, work: Path) -> tuple[dict[str, float], list[str]]:
    client = LoadClient(lines, args.rate)
    if path == "pure":
        cmd = [sys.executable, __file__, "--pure-operator", str(client.src_port),
               str(client.rel_port), "--z", str(args.z), "--delta-t", str(args.delta_t)]
    else:
        cmd = [sys.executable, "-c", "from streamanon.cli import main; main()", "flink", "z",
               f"tcp://{HOST}:{client.src_port}", "--release-to", f"{HOST}:{client.rel_port}",
               "--z", str(args.z), "--delta-t", str(args.delta_t), "-p", str(parallelism),
               "--mode", mode, "-o", str(work / f"flink-p{parallelism}-{mode}.csv"),
               "--checkpoint-interval", str(args.checkpoint_interval), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client.run()
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{path} operator failed: {err[-2000:]}")
    figures = client.figures()
    if path == "flink":  # the job's own -o file went through the exactly-once sink and merge
        summary = json.loads(out.strip().splitlines()[-1])
        figures["job_seconds_with_startup"] = summary["job_seconds"]
    return figures, client.outcomes


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['path']}\np={r['parallelism']} {r['mode']}" for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 4))
    ax.bar(x - 0.2, [r["latency_median_ms"] for r in rows], 0.4, label="median")
    ax.bar(x + 0.2, [r["latency_p99_ms"] for r in rows], 0.4, label="p99")
    ax.set_xticks(x, labels)
    ax.set_yscale("log")
    ax.set_ylabel("end-to-end latency per tuple (ms)")
    ax.set_title(f"z-anonymity through a TCP socket ({rows[0]['tuples']:,} tuples, "
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pure-operator", nargs=2, type=int, metavar=("SRC", "REL"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=20_000, help="tuples (default 20,000)")
    parser.add_argument("--z", type=int, default=3)
    parser.add_argument("--delta-t", type=float, default=600.0)
    parser.add_argument("--parallelism", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--modes", nargs="+", default=["thread"])
    parser.add_argument("--rate", type=float, default=0.0,
                        help="tuples per second to send (default 0: as fast as taken)")
    parser.add_argument("--checkpoint-interval", type=int, default=2000, help="ms")
    parser.add_argument("--out-dir", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    if args.pure_operator:
        pure_operator(*args.pure_operator, args.z, args.delta_t)
        return

    from streamanon.data.traces import write_trace, zipf_trace

    args.out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-flink-") as tmp:
        work = Path(tmp)
        rows_in = zipf_trace(args.n, n_users=2000, n_values=10_000, levels=3,
                             duration=args.n / 20_000 * 86_400, seed=5)
        trace = write_trace(work / "trace.csv", rows_in)
        lines = [f"{t},{u},{a}" for t, u, a in rows_in]
        expected = expected_rows(trace, args.z, args.delta_t)
        configs = [("pure", 1, "-")] + [("flink", p, m) for m in args.modes
                                        for p in args.parallelism]
        rows = []
        for path, p, mode in configs:
            figures, outcomes = run_one(path, lines, args, p, mode, work)
            if published_rows(outcomes) != expected:
                raise RuntimeError(f"{path} p={p} {mode}: published tuples differ from "
                                   "streamanon z")
            row = {"operator": "z", "path": path, "parallelism": p, "mode": mode,
                   "z": args.z, "delta_t": args.delta_t, **figures}
            rows.append(row)
            print(json.dumps(row), flush=True)
    out_csv = args.out_dir / "flink_bench.csv"
    with out_csv.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)
    pngs = plot(rows, args.out_dir)
    pure = rows[0]
    print(f"\nwrote {out_csv} and {', '.join(map(str, pngs))}")
    print(f"pure-Python operator: {pure['throughput']:,.0f} tuples/s, median latency "
          f"{pure['latency_median_ms']:.2f} ms, p99 {pure['latency_p99_ms']:.2f} ms")
    for r in rows[1:]:
        print(f"Flink p={r['parallelism']} {r['mode']}: {r['throughput']:,.0f} tuples/s "
              f"(ratio to pure {r['throughput'] / pure['throughput']:.3f}), median latency "
              f"{r['latency_median_ms']:.1f} ms, p99 {r['latency_p99_ms']:.1f} ms")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

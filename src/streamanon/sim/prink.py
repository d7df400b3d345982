"""Prink's evaluation (ARES'25, Sect. 4) on streamanon's CASTLE: the grid k x δ x l with
Prink's β (= the number of tuples), μ = 100 and ζ = 0, each configuration repeated.

Each run sends the stream through a loopback socket to the operator in a server process at a
paced rate, so the end-to-end latency (Fig. 4) includes the socket; the server times
bestSelection, delayConstraint and waitTime with Prink's definitions (Fig. 5). Information
loss is reported per released cluster (the paper) and per released tuple (``streamanon
castle``).

Design: docs/design/simulation.md
"""

from __future__ import annotations

import csv
import hmac
import json
import math
import multiprocessing
import secrets
import socket
import statistics
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.castle.defaults import delta_below_k
from streamanon.castle.records import CastleRow, Released

__all__ = ["PAPER_DELTAS", "PAPER_KS", "PAPER_LS", "PrinkRun", "aggregate", "run_grid",
           "run_one", "write_csv"]

PAPER_KS = (5, 10, 20, 40, 80)
PAPER_DELTAS = (1250, 5000, 20000)
PAPER_LS = (0, 2, 4, 8)
#: μ and ζ of Prink's evaluation (its defaults; β is the number of tuples).
PAPER_MU, PAPER_ZETA = 100, 0


@dataclass(frozen=True, slots=True)
class PrinkRun:
    """One configuration of the grid."""

    k: int
    delta: int
    l: int  # noqa: E741
    beta: int
    mu: int = PAPER_MU
    zeta: int = PAPER_ZETA


class _Instrumented(CastleAnonymizer):
    """CASTLE that also records each released cluster's losses per attribute and, per
    delay-constraint call, its start and duration (the clock of Prink's Fig. 5)."""

    def __init__(self, rules: RuleSet, **kw: Any) -> None:
        super().__init__(rules, **{"split": "prink", **kw})  # the paper's clustering
        self.cluster_losses: list[dict[str, float]] = []
        self.dc_durations: list[float] = []
        self.dc_start: dict[int, float] = {}

    def _delay_constraint(self, item: Any, out: list[Any]) -> None:
        first = len(out)
        t0 = time.perf_counter()
        super()._delay_constraint(item, out)
        released = [o.line for o in out[first:] if isinstance(o, Released)]
        if released:
            self.dc_durations.append(time.perf_counter() - t0)
            for line in released:
                self.dc_start[line] = t0

    def _emit(self, cset: Any, items: list[Any], values: dict[str, Any], loss: float,
              attr: dict[str, float], cid: int, out: list[Any]) -> None:
        super()._emit(cset, items, values, loss, attr, cid, out)
        self.cluster_losses.append(dict(attr))


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _accept_client(srv: socket.socket, token: bytes) -> tuple[socket.socket, Any]:
    """The first connection that opens with the run's secret ``token`` line; any other peer
    (another local process that found the port) is closed unread, and never reaches the
    operator."""
    while True:
        conn, _ = srv.accept()
        conn.settimeout(5.0)
        rf = conn.makefile("rb")
        try:
            first = rf.readline(len(token) + 2).rstrip(b"\n")
        except OSError:
            first = b""
        if hmac.compare_digest(first, token):
            conn.settimeout(None)
            return conn, rf
        rf.close()
        conn.close()


def _serve(rules_text: str, run: dict[str, int], pipe: Any, token: bytes) -> None:
    """The server process: one authenticated connection, one operator; the stats go back
    through ``pipe``."""
    srv = socket.create_server(("127.0.0.1", 0))
    pipe.send(srv.getsockname()[1])
    conn, rf = _accept_client(srv, token)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    op = _Instrumented(RuleSet.from_toml(rules_text), **run)
    placed: dict[int, float] = {}
    best: list[float] = []
    timing = op.timing

    def reply(out: list[Any]) -> None:
        if out:
            conn.sendall(b"".join(
                b"%d\n" % o.line if isinstance(o, Released) else b"-%d\n" % o.record.line
                for o in out))

    for raw in rf:
        i, _, body = raw.partition(b" ")
        line = int(i)
        t_in = time.perf_counter()
        b0 = timing["best_selection"]
        out = op.process(CastleRow(json.loads(body), line=line))
        spent = timing["best_selection"] - b0
        best.append(spent)
        placed[line] = t_in + spent
        reply(out)
    reply(op.flush())
    conn.sendall(b"end\n")
    waits = [op.dc_start[i] - placed[i] for i in op.dc_start]
    summary = op.summary()
    attrs = list(summary["info_loss"])
    per_cluster = {a: _mean([c.get(a, 0.0) for c in op.cluster_losses]) for a in attrs}
    pipe.send({
        "read": summary["read"], "released": summary["released"],
        "suppressed": summary["suppressed"], "clusters": summary["clusters_released"],
        "best_selection_ms": 1000 * _mean(best),
        "delay_constraint_ms": 1000 * _mean(op.dc_durations),
        "wait_time_ms": 1000 * _mean(waits),
        "loss_tuple": summary["info_loss"], "loss_cluster": per_cluster,
    })
    conn.close()
    srv.close()


def run_one(rows: Sequence[Mapping[str, Any]], rules_text: str, run: PrinkRun, *,
            rate: float | None) -> dict[str, Any]:
    """Send ``rows`` through a socket to CASTLE in a server process at ``rate`` tuples per
    second (``None``: as fast as possible, as Prink's client) and measure it."""
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                      else "spawn")
    parent, child = ctx.Pipe()
    token = secrets.token_hex(16).encode()  # the server serves only who sends it first
    proc = ctx.Process(target=_serve, args=(rules_text, asdict(run), child, token),
                       daemon=True)
    proc.start()
    port = parent.recv()
    lines = [b"%d %s\n" % (i, json.dumps(dict(r), separators=(",", ":")).encode())
             for i, r in enumerate(rows)]
    sent = [0.0] * len(lines)
    back: dict[int, float] = {}
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(token + b"\n")

    def send() -> None:
        t0 = time.perf_counter()
        gap = 1.0 / rate if rate else 0.0
        for i, payload in enumerate(lines):
            if gap:
                wait = t0 + i * gap - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            sent[i] = time.perf_counter()
            sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)

    start = time.perf_counter()
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    with sock.makefile("rb") as rf:
        for raw in rf:
            if raw == b"end\n":
                break
            if raw[:1] != b"-":
                back[int(raw)] = time.perf_counter()
    sender.join()
    seconds = time.perf_counter() - start
    stats = parent.recv()
    proc.join(timeout=30)
    sock.close()
    lat = sorted(1000 * (t - sent[i]) for i, t in back.items())
    sending = (sent[-1] - sent[0]) if len(sent) > 1 else 0.0
    row: dict[str, Any] = {
        **asdict(run), "n": len(rows), "rate": rate or 0,
        "achieved_rate": round((len(sent) - 1) / sending, 1) if sending > 0 else 0.0,
        "read": stats["read"], "released": stats["released"],
        "suppressed": stats["suppressed"], "clusters": stats["clusters"],
        "seconds": round(seconds, 3),
        "latency_ms_mean": round(_mean(lat), 3),
        "latency_ms_p50": round(lat[len(lat) // 2], 3) if lat else 0.0,
        "latency_ms_p95": round(lat[int(0.95 * (len(lat) - 1))], 3) if lat else 0.0,
        "best_selection_ms": round(stats["best_selection_ms"], 5),
        "delay_constraint_ms": round(stats["delay_constraint_ms"], 5),
        "wait_time_ms": round(stats["wait_time_ms"], 3),
        "loss_cluster_mean": round(_mean(list(stats["loss_cluster"].values())), 6),
        "loss_tuple_mean": round(_mean(list(stats["loss_tuple"].values())), 6),
    }
    row.update({f"loss_cluster_{a}": round(v, 6) for a, v in stats["loss_cluster"].items()})
    row.update({f"loss_tuple_{a}": round(v, 6) for a, v in stats["loss_tuple"].items()})
    return row


def run_grid(rows: Sequence[Mapping[str, Any]], rules_text: str, *, ks: Iterable[int],
             deltas: Iterable[int], ls: Iterable[int], repeat: int = 3,
             beta: int | None = None, mu: int = PAPER_MU, zeta: int = PAPER_ZETA,
             rate: float | None = 2000.0,
             on_run: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Every configuration ``repeat`` times, one socket run each; returns one row per run.

    Args:
        rows: the input stream, in arrival order.
        rules_text: the CASTLE rules (TOML) every run uses.
        ks: the values of k of the grid.
        deltas: the values of δ of the grid (a δ below k is warned about).
        ls: the values of l of the grid.
        repeat: runs per configuration.
        beta: CASTLE's β; default the number of tuples, as Prink's evaluation.
        mu: CASTLE's μ (Prink: 100).
        zeta: CASTLE's ζ (Prink: 0).
        rate: tuples per second the client sends; ``None`` or 0 as fast as possible.
        on_run: called with each run's row as soon as it is measured (progress displays).
    """
    out = []
    for d in deltas:
        for k in ks:
            msg = delta_below_k(k, d)
            if msg:
                warnings.warn(msg, stacklevel=2)
            for l in ls:  # noqa: E741
                run = PrinkRun(k=k, delta=d, l=l, beta=beta or len(rows), mu=mu, zeta=zeta)
                for r in range(repeat):
                    row = {**run_one(rows, rules_text, run, rate=rate), "repeat": r + 1}
                    out.append(row)
                    if on_run:
                        on_run(row)
    return out


#: The columns that identify a configuration (the rest are measurements).
KEYS = ("k", "delta", "l", "beta", "mu", "zeta", "n", "rate")


def aggregate(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per configuration: the mean of each measurement over the repeats and its
    sample standard deviation (``<name>_sd``; 0 with one repeat)."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in KEYS), []).append(r)
    out = []
    for key, rs in groups.items():
        agg: dict[str, Any] = dict(zip(KEYS, key, strict=True))
        agg["repeats"] = len(rs)
        for name, v in rs[0].items():
            if name in KEYS or name == "repeat" or not isinstance(v, int | float):
                continue
            vals = [float(r[name]) for r in rs]
            agg[name] = _mean(vals)
            agg[f"{name}_sd"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
        out.append(agg)
    return out


def write_csv(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Every run, one row each (columns of the first row)."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 6) if isinstance(v, float) and math.isfinite(v) else v)
                        for k, v in r.items()})
    return path

"""The central entity: receives published tuples over mutual TLS and stores them durably.

Only clients with a certificate of the deployment's CA whose name is a gateway (``gw<N>``)
are served. Each ``B`` (batch) frame is written in one SQLite transaction
(``INSERT OR IGNORE`` keyed by ``(gateway, seq)``: a retried batch changes nothing), and the
``A`` (ack) frame carrying the batch's highest sequence number is sent only after the commit
returned (``synchronous=FULL`` in WAL mode: durable across a crash of the CE or of the
machine). The gateway deletes a tuple from its outbox only on that ack, so no acknowledged
tuple is lost by a CE restart and no unacknowledged one by a gateway restart.

A malformed or oversized frame, or one of the wrong kind, closes that connection with an
``E`` frame and a logged reason; the daemon goes on serving the others.

Only SQLite is implemented (no PostgreSQL option).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from streamanon.net import framing
from streamanon.net.config import CEConfig
from streamanon.net.outbox import connect_durable
from streamanon.net.pki import parse_gateway_name
from streamanon.net.tls import peer_name, server_context, split_address

log = logging.getLogger("streamanon.ce")


class Store:
    """The CE's table of published tuples (SQLite)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.db = connect_durable(self.path)
        self.db.execute("CREATE TABLE IF NOT EXISTS published (gateway TEXT NOT NULL, "
                        "seq INTEGER NOT NULL, cycle INTEGER NOT NULL, t REAL NOT NULL, "
                        "u TEXT NOT NULL, a TEXT NOT NULL, received REAL NOT NULL, "
                        "PRIMARY KEY (gateway, seq))")

    def store(self, gateway: str, tuples: tuple[framing.WireTuple, ...]) -> int:
        """Commit a batch; returns how many tuples were new."""
        now = time.time()
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            before = self.db.total_changes
            self.db.executemany("INSERT OR IGNORE INTO published VALUES (?, ?, ?, ?, ?, ?, ?)",
                                [(gateway, tp.seq, tp.cycle, tp.t, tp.id, str(tp.value), now)
                                 for tp in tuples])
            return self.db.total_changes - before

    def count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM published").fetchone()[0])

    def close(self) -> None:
        self.db.close()


def iter_rows(db_path: str | Path) -> Iterator[tuple[str, int, int, float, str, str, float]]:
    """``(gateway, seq, cycle, t, u, a, received)`` in time order (read-only)."""
    if not Path(db_path).exists():
        raise FileNotFoundError(f"no CE database at {db_path}")
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        yield from db.execute("SELECT gateway, seq, cycle, t, u, a, received FROM published "
                              "ORDER BY t, gateway, seq")
    finally:
        db.close()


def format_time(t: float) -> str:
    """``900.0 -> '900'``; fractional times keep their digits."""
    return str(int(t)) if float(t).is_integer() else repr(float(t))


def export_csv(db_path: str | Path, out: str | Path) -> int:
    """Write the CE's tuples as ``t,u,a`` CSV (time order); returns the row count."""
    from streamanon.io import RecordWriter

    n = 0
    with RecordWriter(out, "csv") as w:
        for _g, _s, _c, t, u, a, _r in iter_rows(db_path):
            w.write_columns([format_time(t)], [u], [a])
            n += 1
    return n


class CentralEntity:
    def __init__(self, cfg: CEConfig) -> None:
        self.cfg = cfg
        self.store = Store(cfg.db)
        self.stopping = asyncio.Event()
        self.connections = 0
        self.refused = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        name = peer_name(writer.get_extra_info("ssl_object"))
        peer = writer.get_extra_info("peername")
        try:
            if name is None or parse_gateway_name(name) is None:
                self.refused += 1
                log.warning("refusing %s: certificate name %r is not a gateway", peer, name)
                writer.write(framing.encode_error(f"{name!r} is not a gateway"))
                return
            self.connections += 1
            while not self.stopping.is_set():
                frame = await framing.read_frame(reader, self.cfg.max_frame)
                if frame is None:
                    return
                if not isinstance(frame, framing.Batch):
                    raise framing.FrameError(f"unexpected {type(frame).__name__} frame "
                                             "(the CE takes batches)")
                if not frame.tuples:
                    raise framing.FrameError("empty batch")
                new = self.store.store(name, frame.tuples)
                top = max(tp.seq for tp in frame.tuples)
                writer.write(framing.encode_ack(top))  # only after the commit returned
                await writer.drain()
                log.info("%s: batch of %d (%d new) committed, ack %d", name, len(frame.tuples),
                         new, top)
        except framing.FrameError as exc:
            log.warning("closing connection from %s (%s): %s", name, peer, exc)
            with contextlib.suppress(OSError, RuntimeError):
                writer.write(framing.encode_error(str(exc)))
        except (OSError, asyncio.IncompleteReadError) as exc:
            log.info("connection from %s (%s) ended: %s", name, peer, exc)
        except asyncio.CancelledError:
            pass  # stopping
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()

    async def run(self) -> None:
        host, port = split_address(self.cfg.listen)
        ctx = server_context(self.cfg.ca, self.cfg.cert, self.cfg.key)
        server = await asyncio.start_server(self.handle, host, port, ssl=ctx,
                                            ssl_handshake_timeout=10)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        log.info("central entity listening on %s (db %s, %d tuples held)", self.cfg.listen,
                 self.cfg.db, self.store.count())
        async with server:
            await self.stopping.wait()
        self.store.close()
        log.info("central entity stopped")


def run_ce(cfg: CEConfig) -> None:
    asyncio.run(CentralEntity(cfg).run())

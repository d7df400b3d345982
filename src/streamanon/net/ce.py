"""The central entity: receives published tuples over mutual TLS, checks them, stores them.

The store's calls (a durable commit each) run on one thread of their own, off the event loop:
while a commit waits for the disk or the database server, the loop goes on serving the other
gateways' connections (handshakes, validation, refusals). One thread, so the commits keep the
order in which they were asked for; a batch is acknowledged only after its commit returned,
and the store's idempotence (gateway, incarnation, sequence number) makes a batch sent again
after a lost ack count once.

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from streamanon.dezent.mix import MixKeys, decode_plaintext, item_bytes, open_sealed
from streamanon.errors import MixError, StoreUnavailable
from streamanon.net import framing
from streamanon.net.config import CEConfig
from streamanon.net.metrics import CEMetrics, serve
from streamanon.net.pki import ROLE_GATEWAY
from streamanon.net.store import export_csv, iter_rows, open_store
from streamanon.net.tls import Revocations, check_peer, server_context, split_address

__all__ = ["CentralEntity", "export_csv", "invalid_tuples", "iter_rows", "run_ce"]

log = logging.getLogger("streamanon.ce")

_T = TypeVar("_T")


def invalid_tuples(tuples: tuple[framing.WireTuple, ...], cfg: CEConfig
                   ) -> list[tuple[int, str]]:
    """``(seq, reason)`` for every tuple of a batch the CE must not store.

    >>> from pathlib import Path
    >>> cfg = CEConfig("x:1", "ce.sqlite", Path("."), Path("."), Path("."),
    ...                domain=frozenset({10, 20}), data_period=900.0)
    >>> T = framing.WireTuple
    >>> invalid_tuples((T(1, 1, 900.0, "m", 10), T(2, 1, float("nan"), "m", 10),
    ...                 T(3, 1, 900.0, "m", 15), T(4, 2, 900.0, "m", 20)), cfg)
    ... # doctest: +NORMALIZE_WHITESPACE
    [(2, 'time nan is not finite'), (3, "value 15 is outside the CE's domain"),
     (4, 'time 900.0 is not the time of cycle 2 (1800.0)')]
    """
    out = []
    seen: set[int] = set()
    for tp in tuples:
        why = None
        if tp.seq < 1 or tp.seq in seen:
            why = f"sequence number {tp.seq} is not >= 1 or repeats in the batch"
        elif not math.isfinite(tp.t):
            why = f"time {tp.t} is not finite"
        elif tp.cycle < 0:
            why = f"cycle {tp.cycle} is negative"
        elif cfg.data_period is not None and tp.t != cfg.data_t0 + tp.cycle * cfg.data_period:
            why = (f"time {tp.t} is not the time of cycle {tp.cycle} "
                   f"({cfg.data_t0 + tp.cycle * cfg.data_period})")
        elif not tp.id or len(tp.id.encode("utf-8")) > cfg.max_id_length:
            why = f"ID of {len(tp.id.encode('utf-8'))} bytes (want 1..{cfg.max_id_length})"
        elif any(ch in tp.id for ch in ",\n\r\"") or not tp.id.isprintable():
            why = f"ID {tp.id[:40]!r} holds a separator or an unprintable character"
        elif cfg.domain is not None and tp.value not in cfg.domain:
            why = f"value {tp.value!r} is outside the CE's domain"
        elif isinstance(tp.value, str) and (len(tp.value) > 256 or not tp.value.isprintable()
                                            or any(ch in tp.value for ch in ",\"")):
            why = f"text value {tp.value[:40]!r} is too long or holds a separator"
        seen.add(tp.seq)
        if why is not None:
            out.append((tp.seq, why))
    return out


class CentralEntity:
    def __init__(self, cfg: CEConfig) -> None:
        self.cfg = cfg
        # the store lives on its own thread (SQLite's connection stays on the thread that
        # opened it); every call goes through :meth:`_in_store`
        self._store_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ce-store")
        try:
            self.store = self._store_thread.submit(open_store, cfg.store).result()
        except BaseException:
            self._store_thread.shutdown(wait=False)
            raise
        self.revocations = Revocations(cfg.crl, cfg.ca)
        self.metrics = CEMetrics()
        self.mix = MixKeys.load(cfg.mix_key) if cfg.mix_key is not None else None
        self.stopping = asyncio.Event()
        self.connections = 0
        self.refused = 0

    async def _in_store(self, call: Callable[..., _T], *args: object) -> _T:
        """``call(*args)`` on the store's thread, in the order asked; the loop runs meanwhile.

        Cancelled while it runs (the CE stopping), the call still completes on its thread: a
        commit is whole or absent, and unacknowledged it is sent again and counted once."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._store_thread, call, *args)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ident, why = check_peer(writer.get_extra_info("ssl_object"), self.revocations,
                                (ROLE_GATEWAY,))
        name = ident.name if ident is not None else None
        peer = writer.get_extra_info("peername")
        try:
            if why is not None:
                self.refused += 1
                self.metrics.connections_refused.inc()
                log.warning("refusing %s: %s", peer, why)
                writer.write(framing.encode_error(f"refused: {why}"))
                return
            assert name is not None
            self.connections += 1
            while not self.stopping.is_set():
                frame = await framing.read_frame(reader, self.cfg.max_frame)
                if frame is None:
                    return
                if ident is not None and self.revocations.is_revoked(ident.serial):
                    raise framing.FrameError(f"certificate of {name!r} revoked")
                if isinstance(frame, framing.MixFrame):
                    await self.mix_batch(frame, name, writer)
                    continue
                if not isinstance(frame, framing.Batch):
                    raise framing.FrameError(f"unexpected {type(frame).__name__} frame "
                                             "(the CE takes batches)")
                if not frame.tuples:
                    raise framing.FrameError("empty batch")
                if len(frame.tuples) > self.cfg.max_batch:
                    raise framing.FrameError(f"batch of {len(frame.tuples):,} tuples > max "
                                             f"{self.cfg.max_batch:,}")
                bad = invalid_tuples(frame.tuples, self.cfg)
                if bad:
                    self.metrics.batches.labels("refused").inc()
                    self.metrics.refused.inc(len(bad))
                    for seq, reason in bad[:5]:
                        log.warning("%s: refused tuple %d of a batch of %d: %s", name, seq,
                                    len(frame.tuples), reason)
                    writer.write(framing.encode_refused(bad))
                    await writer.drain()
                    continue
                began = time.perf_counter()
                new = await self._in_store(self.store.store, name, frame.incarnation,
                                           frame.tuples)
                self.metrics.commit.observe(time.perf_counter() - began)
                self.metrics.batches.labels("stored").inc()
                self.metrics.stored.inc(new)
                self.metrics.rows.inc(new)
                top = max(tp.seq for tp in frame.tuples)
                writer.write(framing.encode_ack(top))  # only after the commit returned
                await writer.drain()
                log.debug("%s: batch of %d (%d new) committed, ack %d", name,
                          len(frame.tuples), new, top)
        except framing.FrameError as exc:
            self.metrics.batches.labels("error").inc()
            log.warning("closing connection from %s (%s): %s", name, peer, exc)
            with contextlib.suppress(OSError, RuntimeError):
                writer.write(framing.encode_error(str(exc)))
        except StoreUnavailable as exc:
            self.metrics.batches.labels("store_unavailable").inc()
            log.error("store unavailable, closing the connection from %s without an ack: %s",
                      name, exc)
        except (OSError, asyncio.IncompleteReadError) as exc:
            log.info("connection from %s (%s) ended: %s", name, peer, exc)
        except asyncio.CancelledError:
            pass  # stopping
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()

    async def mix_batch(self, frame: framing.MixFrame, name: str,
                        writer: asyncio.StreamWriter) -> None:
        """Open, check and store one mix batch, then acknowledge its cycle."""
        if self.mix is None:
            raise framing.FrameError("a mix batch, but this CE has no mix_key")
        size = item_bytes(self.cfg.mix_padding)
        if frame.cycle < 0:
            raise framing.FrameError(f"mix batch of cycle {frame.cycle}")
        if any(len(x) != size for x in frame.items):
            raise framing.FrameError(f"mix batch of cycle {frame.cycle} with items that are not "
                                     f"{size} bytes (mix_padding {self.cfg.mix_padding})")
        # (its size is bounded by max_frame; max_batch bounds one gateway's direct batches)
        opened: list[tuple[bytes, framing.WireTuple]] = []
        refused: list[tuple[int, str]] = []
        dummies = 0
        for i, item in enumerate(frame.items):
            try:
                t = decode_plaintext(open_sealed(self.mix.private_key, item))
            except MixError as exc:
                refused.append((i, str(exc)))
                continue
            if t.dummy:
                dummies += 1
                continue
            assert t.value is not None
            opened.append((t.uid, framing.WireTuple(i + 1, t.cycle, t.t, t.id, t.value)))
        invalid = dict(invalid_tuples(tuple(w for _uid, w in opened), self.cfg))
        good = []
        for uid, w in opened:
            if w.seq in invalid:
                refused.append((w.seq - 1, f"{invalid[w.seq]}: ({w.cycle}, {w.t}, {w.id!r}, "
                                           f"{w.value!r})"))
            else:
                good.append((uid, framing.WireTuple(1, w.cycle, w.t, w.id, w.value)))
        for i, why in refused[:5]:
            log.warning("%s: mix batch of cycle %d: item %d of %d refused: %s", name,
                        frame.cycle, i, len(frame.items), why)
        if len(refused) > 5:
            log.warning("%s: mix batch of cycle %d: %d items refused in all", name,
                        frame.cycle, len(refused))
        began = time.perf_counter()
        new = await self._in_store(self.store.store_mix, good)
        self.metrics.commit.observe(time.perf_counter() - began)
        self.metrics.batches.labels("mix").inc()
        self.metrics.stored.inc(new)
        self.metrics.rows.inc(new)
        self.metrics.refused.inc(len(refused))
        self.metrics.mix_dummies.inc(dummies)
        writer.write(framing.encode_ack(frame.cycle))  # only after the commit returned
        await writer.drain()
        log.debug("%s: mix batch of cycle %d: %d items, %d new, %d dummies, %d refused",
                  name, frame.cycle, len(frame.items), new, dummies, len(refused))

    async def run(self) -> None:
        host, port = split_address(self.cfg.listen)
        ctx = server_context(self.cfg.ca, self.cfg.cert, self.cfg.key)
        server = await asyncio.start_server(self.handle, host, port, ssl=ctx,
                                            ssl_handshake_timeout=10)
        metrics = None
        if self.cfg.metrics:
            metrics = serve(self.metrics.registry, self.cfg.metrics, ca=self.cfg.ca,
                            cert=self.cfg.cert, key=self.cfg.key,
                            revocations=self.revocations)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        held = await self._in_store(self.store.count)
        self.metrics.rows.set(held)
        log.info("central entity listening on %s (store %s, %d tuples held)", self.cfg.listen,
                 _redact(self.cfg.store), held)
        async with server:
            await self.stopping.wait()
        if metrics is not None:
            metrics.shutdown()
            metrics.server_close()
        await self._in_store(self.store.close)
        self._store_thread.shutdown(wait=True)
        log.info("central entity stopped")


def _redact(store: str) -> str:
    """A DSN without its password, for the logs.

    >>> _redact("postgresql://ce:s3cret@127.0.0.1:5432/dezent")
    'postgresql://ce:***@127.0.0.1:5432/dezent'
    """
    head, sep, tail = store.partition("://")
    if sep and "@" in tail:
        cred, _, host = tail.rpartition("@")
        if ":" in cred:
            cred = cred.split(":", 1)[0] + ":***"
        return f"{head}://{cred}@{host}"
    return store


def run_ce(cfg: CEConfig) -> None:
    asyncio.run(CentralEntity(cfg).run())

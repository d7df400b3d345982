"""Delivery of a gateway's outbox to the central entity (mutual TLS, batches, acks).

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable

from streamanon.net import framing
from streamanon.net.outbox import Outbox
from streamanon.net.pki import ROLE_CE
from streamanon.net.tls import Revocations, check_peer, split_address

log = logging.getLogger("streamanon.gateway")

BATCH_MAX = 1000
CONNECT_TIMEOUT = 3.0
ACK_TIMEOUT = 10.0


class CEClient:
    """A gateway's connection to the CE: delivers the outbox's batches and reports what the CE
    did with them.

    Args:
        outbox: the queue of batches waiting for the CE.
        address: the CE's address (``host:port``).
        ctx: the TLS client context (this gateway's certificate).
        max_frame: the largest frame accepted, in bytes.
        revocations: the revoked certificates (the CE's is checked at every connection).
        on_commit: called with the number of tuples of each batch the CE acknowledged and the
            seconds it took.
        on_refused: called with the number of tuples the CE refused (set aside in the outbox).
        on_mix_committed: called with the cycle of each mix batch the CE took and the seconds it
            took.
    """

    def __init__(self, outbox: Outbox, address: str, *, ctx: ssl.SSLContext, max_frame: int,
                 revocations: Revocations,
                 on_commit: Callable[[int, float], None] | None = None,
                 on_refused: Callable[[int], None] | None = None,
                 on_mix_committed: Callable[[int, float], None] | None = None) -> None:
        self.outbox, self.address, self.ctx = outbox, address, ctx
        self.max_frame, self.revocations = max_frame, revocations
        self.on_commit, self.on_refused = on_commit, on_refused
        self.on_mix_committed = on_mix_committed
        self.wakeup = asyncio.Event()
        self.batch_size = BATCH_MAX
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _open(self) -> None:
        host, port = split_address(self.address)
        self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(
            host, port, ssl=self.ctx, server_hostname="ce"), CONNECT_TIMEOUT)
        _ident, why = check_peer(self.writer.get_extra_info("ssl_object"), self.revocations,
                                 (ROLE_CE,))
        if why is not None:
            raise framing.FrameError(f"the CE's {why}")

    def _close(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
        self.reader = self.writer = None

    async def run(self, stopping: asyncio.Event) -> None:
        """Deliver until ``stopping`` is set and the outbox is empty."""
        backoff = 0.1
        while True:
            mixes = self.outbox.mix_out_pending()
            batch = [] if mixes else self.outbox.pending(self.batch_size)
            if not batch and not mixes:
                if stopping.is_set():
                    break
                self.wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), 1.0)
                continue
            try:
                if self.writer is None:
                    await self._open()
                assert self.reader is not None and self.writer is not None
                began = time.perf_counter()
                if mixes:
                    await self._deliver_mix(*mixes[0], began)
                    backoff = 0.1
                    continue
                self.writer.write(framing.encode_batch(self.outbox.incarnation, batch))
                await self.writer.drain()
                frame = await asyncio.wait_for(framing.read_frame(self.reader, self.max_frame),
                                               ACK_TIMEOUT)
                if isinstance(frame, framing.Ack):
                    self.outbox.ack(frame.seq)
                    if self.on_commit is not None:
                        self.on_commit(len(batch), time.perf_counter() - began)
                    self.batch_size = min(BATCH_MAX, self.batch_size * 2)
                    backoff = 0.1
                elif isinstance(frame, framing.Refused):
                    mine = {tp.seq for tp in batch}
                    items = [(seq, why) for seq, why in frame.items if seq in mine]
                    if not items:
                        raise framing.FrameError("CE refused tuples that are not in the batch")
                    self._set_aside(items)
                elif isinstance(frame, framing.Error):
                    self._close()
                    if len(batch) == 1:
                        self._set_aside([(batch[0].seq, f"CE error: {frame.reason}")])
                    else:
                        self.batch_size = max(1, len(batch) // 2)
                        log.warning("CE refused a batch of %d tuples (%s); sending batches of "
                                    "%d", len(batch), frame.reason, self.batch_size)
                else:
                    raise framing.FrameError(f"CE answered {frame!r}")
            except (OSError, TimeoutError, ssl.SSLError, framing.FrameError,
                    asyncio.IncompleteReadError) as exc:
                log.warning("CE: %d tuples waiting, %s; retry in %.1f s", self.outbox.count(),
                            exc or type(exc).__name__, backoff)
                self._close()
                await asyncio.sleep(backoff)
                backoff = min(2.0, backoff * 2)
        self._close()

    async def _deliver_mix(self, cycle: int, items: tuple[bytes, ...], began: float) -> None:
        assert self.reader is not None and self.writer is not None
        self.writer.write(framing.encode_mix(cycle, items))
        await self.writer.drain()
        frame = await asyncio.wait_for(framing.read_frame(self.reader, self.max_frame),
                                       ACK_TIMEOUT)
        if isinstance(frame, framing.Ack) and frame.seq == cycle:
            self.outbox.mix_out_done(cycle)
            if self.on_mix_committed is not None:
                self.on_mix_committed(cycle, time.perf_counter() - began)
            return
        reason = frame.reason if isinstance(frame, framing.Error) else repr(frame)
        raise framing.FrameError(f"the CE did not take the mix batch of cycle {cycle} "
                                 f"({len(items)} items): {reason}")

    def _set_aside(self, items: list[tuple[int, str]]) -> None:
        moved = self.outbox.refuse(items)
        for seq, reason in items[:5]:
            log.error("CE refused tuple %d: %s (kept in the outbox's refused table)", seq,
                      reason)
        if len(items) > 5:
            log.error("CE refused %d more tuples of that batch", len(items) - 5)
        if self.on_refused is not None:
            self.on_refused(moved)

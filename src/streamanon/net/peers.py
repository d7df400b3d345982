"""Ring links between gateways: our outgoing mutual-TLS connection to each peer
(:class:`PeerLink`) and the server that takes the peers' ring frames (:class:`PeerServer`).

A link starts with a hello exchange (the SHA-256 fingerprint of the shared protocol settings:
both ends must agree) and then carries ring frames one way only, so any end of stream on an
outgoing link means the peer is gone (``up`` is our view of its liveness, which is what the
coordinator's session is made of). The server identifies the sender from its certificate
(role ``gateway``, a peer of this ring, not revoked) before it reads a frame, and hands every
ring frame to the daemon's callback; a frame that cannot be parsed closes that connection only,
with an error frame and a logged reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import Callable
from typing import Any

from streamanon.net import framing
from streamanon.net.pki import ROLE_GATEWAY, gateway_name
from streamanon.net.tls import Revocations, check_peer, split_address

log = logging.getLogger("streamanon.gateway")

CONNECT_TIMEOUT = 3.0


class PeerLink:
    """Our outgoing mutual-TLS connection to one peer; ``up`` is our view of its liveness.

    Args:
        peer: the peer gateway's index.
        address: the peer's ring port (``host:port``).
        ctx: the TLS client context (this gateway's certificate).
        fingerprint: the fingerprint of the protocol parameters (both sides must agree).
        max_frame: the largest frame accepted, in bytes.
        revocations: the revoked certificates (the peer's is checked at every connection).
        spawn: starts a task of the gateway (so it is tracked and cancelled with it).
    """

    def __init__(self, peer: int, address: str, *, ctx: ssl.SSLContext, fingerprint: bytes,
                 max_frame: int, revocations: Revocations,
                 spawn: Callable[[Any], asyncio.Task[Any]]) -> None:
        self.peer, self.address = peer, address
        self.ctx, self.fingerprint, self.max_frame = ctx, fingerprint, max_frame
        self.revocations, self.spawn = revocations, spawn
        self.writer: asyncio.StreamWriter | None = None
        self.serial: int | None = None  # of the peer's certificate on the live link
        self.up = False
        self.ever_up = False
        self.tried = asyncio.Event()  # set after the first connection attempt ended
        self.lock = asyncio.Lock()
        self.send_lock = asyncio.Lock()
        self.down = asyncio.Event()
        self.down.set()

    async def connect(self) -> bool:
        async with self.lock:
            if self.up:
                return True
            host, port = split_address(self.address)
            writer = None
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    host, port, ssl=self.ctx, server_hostname=gateway_name(self.peer)),
                    CONNECT_TIMEOUT)
                ident, why = check_peer(writer.get_extra_info("ssl_object"), self.revocations,
                                        (ROLE_GATEWAY,))
                if why is not None or ident is None:
                    raise framing.FrameError(str(why))
                self.serial = ident.serial
                writer.write(framing.encode_hello(self.fingerprint))
                await writer.drain()
                frame = await asyncio.wait_for(framing.read_frame(reader, self.max_frame),
                                               CONNECT_TIMEOUT)
                if not isinstance(frame, framing.Hello):
                    reason = frame.reason if isinstance(frame, framing.Error) else repr(frame)
                    raise framing.FrameError(f"no hello from gw{self.peer}: {reason}")
                if frame.fingerprint != self.fingerprint:
                    raise framing.FrameError(f"gw{self.peer} runs other protocol parameters")
            except (OSError, TimeoutError, ssl.SSLError, framing.FrameError) as exc:
                if writer is not None:
                    writer.close()
                if self.ever_up or not isinstance(exc, ConnectionRefusedError):
                    log.debug("gw%d unreachable: %s", self.peer, exc)
                if isinstance(exc, framing.FrameError | ssl.SSLError):
                    log.warning("connection to gw%d refused: %s", self.peer, exc)
                return False
            self.writer, self.up, self.ever_up = writer, True, True
            self.down.clear()
            log.info("link to gw%d up", self.peer)
            self.spawn(self._watch(reader))
            return True

    async def _watch(self, reader: asyncio.StreamReader) -> None:
        """The peer never writes on our link: any end of stream means it is gone."""
        with contextlib.suppress(Exception):
            while await reader.read(4096):
                pass
        self.mark_down("connection closed")

    def mark_down(self, reason: str, level: int = logging.WARNING) -> None:
        if self.up:
            log.log(level, "link to gw%d down: %s", self.peer, reason)
        self.up = False
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
        self.writer = None
        self.down.set()

    async def maintain(self, retry: float) -> None:
        while True:
            await self.down.wait()
            ok = await self.connect()
            self.tried.set()
            if not ok:
                await asyncio.sleep(retry)

    async def send(self, data: bytes) -> int | None:
        """Send one frame; the bytes TCP took for it (TLS records included: measured from the
        socket's ``TCP_INFO``; 0 where the kernel does not say), or None when it failed."""
        if not self.up and not await self.connect():
            return None
        async with self.send_lock:  # one frame at a time: the byte count is this frame's
            writer = self.writer
            if writer is None:
                return None
            sock = writer.get_extra_info("socket")
            before = tcp_bytes_written(sock)
            try:
                writer.write(data)
                await asyncio.wait_for(writer.drain(), CONNECT_TIMEOUT)
            except (OSError, TimeoutError, RuntimeError) as exc:
                self.mark_down(f"send failed: {exc}")
                return None
            after = tcp_bytes_written(sock)
            return after - before if before is not None and after is not None else 0


class PeerServer:
    """Serves the ring port: hello, then ring frames handed to ``on_ring(sender, frame)``.

    Args:
        me: this gateway's index.
        peers: the indices of the ring's other gateways (the only ones accepted).
        fingerprint: the fingerprint of the protocol parameters (both sides must agree).
        max_frame: the largest frame accepted, in bytes.
        revocations: the revoked certificates (checked at every connection).
        on_ring: called with ``(sender, frame)`` for every ring frame.
    """

    def __init__(self, me: int, peers: set[int] | frozenset[int], *, fingerprint: bytes,
                 max_frame: int, revocations: Revocations,
                 on_ring: Callable[[int, framing.RingFrame], None]) -> None:
        self.me, self.peers = me, frozenset(peers)
        self.fingerprint, self.max_frame = fingerprint, max_frame
        self.revocations, self.on_ring = revocations, on_ring

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ident, why = check_peer(writer.get_extra_info("ssl_object"), self.revocations,
                                (ROLE_GATEWAY,))
        name = ident.name if ident is not None else None
        try:
            sender = ident.gateway if ident is not None else None
            if why is None and (sender is None or sender not in self.peers
                                or sender == self.me):
                why = f"certificate name {name!r} is not a peer of this ring"
            if why is not None or sender is None:
                raise framing.FrameError(str(why))
            hello = await asyncio.wait_for(framing.read_frame(reader, self.max_frame),
                                           CONNECT_TIMEOUT)
            if not isinstance(hello, framing.Hello):
                raise framing.FrameError(f"expected a hello, got {type(hello).__name__}")
            if hello.fingerprint != self.fingerprint:
                raise framing.FrameError("other protocol parameters (fingerprint differs)")
            writer.write(framing.encode_hello(self.fingerprint))
            await writer.drain()
            while True:
                frame = await framing.read_frame(reader, self.max_frame)
                if frame is None:
                    return
                if not isinstance(frame, framing.RingFrame):
                    raise framing.FrameError(f"unexpected {type(frame).__name__} frame on a ring "
                                             "link")
                if ident is not None and self.revocations.is_revoked(ident.serial):
                    raise framing.FrameError(f"certificate of {name!r} revoked")
                self.on_ring(sender, frame)
        except framing.FrameError as exc:
            log.warning("closing connection from %s: %s", name, exc)
            with contextlib.suppress(Exception):
                writer.write(framing.encode_error(str(exc)))
        except (OSError, TimeoutError) as exc:
            log.info("connection from %s ended: %s", name, exc)
        except asyncio.CancelledError:
            pass  # the daemon is stopping
        finally:
            with contextlib.suppress(Exception):
                writer.close()


_TCP_INFO = getattr(socket, "TCP_INFO", None)


def tcp_bytes_written(sock: Any) -> int | None:
    """Bytes the kernel took on this TCP socket so far (``tcpi_bytes_sent`` +
    ``tcpi_notsent_bytes`` of Linux's ``struct tcp_info``), or None where unavailable."""
    if sock is None or _TCP_INFO is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 512)
    except OSError:
        return None
    if len(info) < 208:
        return None
    return struct.unpack_from("<Q", info, 200)[0] + struct.unpack_from("<I", info, 144)[0]

"""The gateway daemon: the sans-I/O protocol core (:class:`streamanon.dezent.protocol.Gateway`)
between sensor nodes, ring peers (mutual TLS) and the central entity.

Clock: cycle ``c`` runs from ``t0 + c x period`` (wall clock, semi-synchronized); at
``close`` of the period the gateway closes the cycle's readings (gives them to the core, in
sensor-ID order) and the cycle's coordinator starts the collection round. A gateway that
receives a ring message for a cycle it has not closed yet closes it then (its clock is late).

Membership. The ring order of an epoch comes from the shared seed (:class:`Ring`); a cycle's
ring is that order restricted to its *members*. The coordinator of cycle ``c`` is the ring's
``ccc(c)``, or, if that gateway is down in the view of the others, the next gateway in ring
order that is up. It puts into the cycle's session (carried by every ring frame of the cycle)
itself and every peer it holds a live mutual-TLS connection to. So a dead gateway is skipped
from the next cycle on and rejoins as soon as the coordinators can reach it again.

Why no failure leaks (proof sketch): a gateway processes a ring message only if it is in the
cycle's session, the message comes from its predecessor in that session (identity from the
peer's certificate), it has not processed the same (cycle, kind, pass) before, and the session
is the first it saw for that cycle. So every member adds its counts at most once, and a count
is at most the true number of distinct sensor nodes of the members (<= the district's). The
coordinator subtracts ``z - 1`` only from a structure that came back around the whole ring.
Hence a value is published only if at least ``z`` distinct sensor nodes reported it within
Δt. When a member dies or is too slow, the round stalls: what was published before is proven,
nothing after it is published, and messages of a cycle older than the previous one are dropped.

Published tuples go to the outbox (on disk) first, then to the CE in batches with retries;
they leave the outbox only when the CE's ack (sent after its commit) covers them.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import dataclasses
import json
import logging
import math
import os
import re
import secrets
import signal
import socket
import ssl
import struct
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from streamanon.dezent.cbf import EncodingError, Key
from streamanon.dezent.protocol import (
    Collect,
    Gateway,
    Publish,
    PublishedTuple,
    Send,
    decode_message,
    encode_message,
)
from streamanon.dezent.pseudonyms import Pseudonymizer
from streamanon.dezent.ring import Ring
from streamanon.net import framing
from streamanon.net.config import ClockSection, GatewayConfig
from streamanon.net.outbox import Outbox
from streamanon.net.pki import gateway_name, parse_gateway_name
from streamanon.net.tls import client_context, peer_name, server_context, split_address

log = logging.getLogger("streamanon.gateway")

CONNECT_TIMEOUT = 3.0
MAX_LINE = 4096
MAX_READINGS_PER_CYCLE = 200_000
BATCH_MAX = 1000
_INT = re.compile(r"-?\d+\Z")


class SessionRing(Ring):
    """The ring of each cycle: the shared order restricted to the cycle's members.

    The core asks ``ccc(c)``, ``successor(g, c)`` and ``n``; ``n`` is the size of the session
    selected with :meth:`use` just before the core handles a message of that cycle (the
    daemon is single-threaded, so the selection cannot change under the core).
    """

    def __init__(self, base: Ring) -> None:
        super().__init__(base.n, base.seed, base.epoch_cycles)
        self.base = base
        self.sessions: dict[int, tuple[int, tuple[int, ...]]] = {}

    def set(self, cycle: int, ccc: int, members: tuple[int, ...]) -> None:
        self.sessions[cycle] = (ccc, members)

    def use(self, cycle: int) -> None:
        self.n = len(self.sessions[cycle][1])

    def members_in_order(self, cycle: int) -> list[int]:
        ccc, members = self.sessions[cycle]
        order = [g for g in self.base.order(cycle).tolist() if g in members]
        i = order.index(ccc)
        return order[i:] + order[:i]

    def ccc(self, cycle: int) -> int:
        return self.sessions[cycle][0]

    def successor(self, gateway: int, cycle: int) -> int:
        order = self.members_in_order(cycle)
        return order[(order.index(gateway) + 1) % len(order)]

    def predecessor(self, gateway: int, cycle: int) -> int:
        order = self.members_in_order(cycle)
        return order[(order.index(gateway) - 1) % len(order)]

    def prune(self, before: int) -> None:
        for c in [c for c in self.sessions if c < before]:
            del self.sessions[c]


class PeerLink:
    """Our outgoing mutual-TLS connection to one peer; ``up`` is our view of its liveness."""

    def __init__(self, daemon: GatewayDaemon, peer: int, address: str) -> None:
        self.daemon, self.peer, self.address = daemon, peer, address
        self.writer: asyncio.StreamWriter | None = None
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
                    host, port, ssl=self.daemon.client_ctx,
                    server_hostname=gateway_name(self.peer)), CONNECT_TIMEOUT)
                writer.write(framing.encode_hello(self.daemon.fingerprint))
                await writer.drain()
                frame = await asyncio.wait_for(
                    framing.read_frame(reader, self.daemon.cfg.max_frame), CONNECT_TIMEOUT)
                if not isinstance(frame, framing.Hello):
                    reason = frame.reason if isinstance(frame, framing.Error) else repr(frame)
                    raise framing.FrameError(f"no hello from gw{self.peer}: {reason}")
                if frame.fingerprint != self.daemon.fingerprint:
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
            self.daemon.spawn(self._watch(reader))
            return True

    async def _watch(self, reader: asyncio.StreamReader) -> None:
        """The peer never writes on our link: any end of stream means it is gone."""
        with contextlib.suppress(Exception):
            while await reader.read(4096):
                pass
        self.mark_down("connection closed")

    def mark_down(self, reason: str) -> None:
        if self.up:
            log.warning("link to gw%d down: %s", self.peer, reason)
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


class GatewayDaemon:
    def __init__(self, cfg: GatewayConfig) -> None:
        self.cfg = cfg
        self.clock_cfg = cfg.clock
        self.pcfg = cfg.protocol.protocol_config()
        self.ring = SessionRing(cfg.protocol.ring(len(cfg.peers)))
        state = Path(cfg.state_dir)
        state.mkdir(parents=True, exist_ok=True)
        rng = (np.random.default_rng([int(cfg.coin_seed), cfg.id]) if cfg.coin_seed is not None
               else np.random.default_rng())
        pseudonymizer = (Pseudonymizer(_secret(state / "pseudonym.key"))
                         if self.pcfg.id_mode == "pseudonym" else None)
        self.core = Gateway(cfg.id, self.pcfg, self.ring, rng=rng, pseudonymizer=pseudonymizer)
        self.domain = (frozenset(self.pcfg.structure.domain)
                       if self.pcfg.structure.kind == "exact" else None)
        self.outbox = Outbox(state / "outbox.sqlite")
        self.stats_path = state / "stats.jsonl"
        self.fingerprint = cfg.fingerprint()
        self.client_ctx = client_context(cfg.ca, cfg.cert, cfg.key)
        self.server_ctx = server_context(cfg.ca, cfg.cert, cfg.key)
        self.links = {p: PeerLink(self, p, addr) for p, addr in cfg.peers.items() if p != cfg.id}
        self.buffer: dict[int, dict[str, Key]] = defaultdict(dict)
        self.closed_upto: int | None = None
        self.coordinated: set[int] = set()
        self.seen: set[tuple[int, str, int]] = set()
        self.stats: dict[int, dict[str, Any]] = {}
        self.stopping = asyncio.Event()
        self.ce_wakeup = asyncio.Event()
        self.tasks: set[asyncio.Task[Any]] = set()  # keeps fire-and-forget sends alive
        self.failed = False
        self.ready_path = state / "ready"
        with contextlib.suppress(FileNotFoundError):
            self.ready_path.unlink()

    # -- clock ------------------------------------------------------------------------------
    @property
    def clock(self) -> ClockSection:
        return self.clock_cfg

    async def wait_t0(self) -> bool:
        """With ``clock.t0_file``: wait until the file holds t0 (False if stopped first)."""
        name = self.clock_cfg.t0_file
        if name is None:
            return True
        path = Path(name)
        while not self.stopping.is_set():
            with contextlib.suppress(OSError, ValueError):
                t0 = float(path.read_text().strip())
                self.clock_cfg = dataclasses.replace(self.clock_cfg, t0=t0)
                log.info("clock: t0 = %.3f from %s", t0, path)
                return True
            await asyncio.sleep(0.05)
        return False

    def wall_cycle(self) -> int:
        return self.clock.cycle_at(time.time())

    def _stat(self, cycle: int) -> dict[str, Any]:
        st = self.stats.get(cycle)
        if st is None:
            st = self.stats[cycle] = {"gateway": self.cfg.id, "cycle": cycle, "readings": 0,
                                      "ring_frames": 0, "ring_bytes": 0, "payload_bytes": 0,
                                      "published": 0, "members": None, "ccc": None}
        return st

    def close_cycle(self, cycle: int) -> bool:
        """Give the core the readings of ``cycle`` (once, in cycle order)."""
        if self.closed_upto is not None and cycle <= self.closed_upto:
            return False
        readings = sorted(self.buffer.pop(cycle, {}).items())
        for late in [c for c in self.buffer if c < cycle]:
            log.warning("cycle %d: %d readings arrived after it closed, dropped", late,
                        len(self.buffer.pop(late)))
        self.core.measure(cycle, readings)
        self.closed_upto = cycle
        st = self._stat(cycle)
        st["readings"] = len(readings)
        st["closed_at"] = time.time()
        return True

    def acting_ccc(self, cycle: int) -> int:
        base = self.ring.base
        order = base.order(cycle).tolist()
        start = cycle % base.n
        for i in range(base.n):
            g = order[(start + i) % base.n]
            if g == self.cfg.id or self.links[g].up:
                return g
        return self.cfg.id  # unreachable: we are in the order

    async def run_clock(self) -> None:
        if not await self.wait_t0():
            return
        # know who is up before coordinating anything (a restarted gateway would otherwise
        # see everyone down, coordinate alone and refuse the ring's session of the cycle)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(link.tried.wait()
                                                    for link in self.links.values())),
                                   2 * CONNECT_TIMEOUT)
        clock = self.clock
        now = time.time()
        k = clock.cycle_at(now)
        if clock.close_of(k) < now:
            k += 1
        k = max(k, clock.first_cycle)
        while not self.stopping.is_set():
            if 0 <= clock.last_cycle < k:
                break
            delay = clock.close_of(k) - time.time()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), delay)
                if self.stopping.is_set():
                    break
            self.close_cycle(k)
            if self.acting_ccc(k) == self.cfg.id:
                self.start_cycle(k)
            self.prune(k)
            k += 1
        if clock.last_cycle >= 0 and not self.stopping.is_set():
            # let the last rounds finish (they are cut off one cycle later anyway)
            end = clock.start_of(clock.last_cycle + 2)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), max(0.0, end - time.time()))
            self.stopping.set()

    def prune(self, cycle: int) -> None:
        keep = cycle - 3
        self.ring.prune(keep)
        self.seen = {s for s in self.seen if s[0] >= keep}
        self.coordinated = {c for c in self.coordinated if c >= keep}
        self.flush_stats(before=keep)

    def flush_stats(self, before: int | None = None) -> None:
        done = sorted(c for c in self.stats if before is None or c < before)
        if not done:
            return
        with open(self.stats_path, "a", encoding="utf-8") as fh:
            for c in done:
                fh.write(json.dumps(self.stats.pop(c)) + "\n")

    # -- the ring ---------------------------------------------------------------------------
    def start_cycle(self, cycle: int) -> None:
        if cycle in self.ring.sessions:
            ccc, members = self.ring.sessions[cycle]
            log.warning("cycle %d: gw%d already coordinates it (ring %s); not starting another",
                        cycle, ccc, members)
            return
        members = tuple(sorted([self.cfg.id] + [p for p, link in self.links.items() if link.up]))
        self.ring.set(cycle, self.cfg.id, members)
        self.ring.use(cycle)
        self.coordinated.add(cycle)
        st = self._stat(cycle)
        st.update(members=list(members), ccc=self.cfg.id, started_at=time.time(),
                  complete=False)
        try:
            sends, pubs = self.core.start_cycle(cycle)
        except ValueError as exc:
            log.error("cycle %d: cannot start: %s", cycle, exc)
            return
        self.dispatch(cycle, sends, pubs, final=not sends)
        log.info("cycle %d: coordinator, ring of %d: %s", cycle, len(members), members)

    def on_ring(self, sender: int, frame: framing.Ring) -> None:
        try:
            msg = decode_message(frame.message)
        except ValueError as exc:
            raise framing.FrameError(f"bad ring message: {exc}") from None
        c = msg.cycle
        kind = "C" if isinstance(msg, Collect) else "P"
        pass_no = msg.pass_no if isinstance(msg, Publish) else 0
        wall = self.wall_cycle()
        session = (frame.ccc, tuple(sorted(frame.members)))
        why = None
        if not wall - 1 <= c <= wall + 1:
            why = f"cycle {c} is outside the live window around {wall}"
        elif self.cfg.id not in frame.members or any(m not in self.cfg.peers
                                                      for m in frame.members):
            why = f"session {session} does not hold this gateway or names unknown gateways"
        elif frame.ccc == self.cfg.id and c not in self.coordinated:
            why = f"names this gateway coordinator of cycle {c}, which it did not start"
        elif self.ring.sessions.get(c, session) != session:
            why = f"session {session} conflicts with {self.ring.sessions[c]}"
        elif (c, kind, pass_no) in self.seen:
            why = f"duplicate {kind}{pass_no} message"
        if why is None:
            fresh = c not in self.ring.sessions
            self.ring.set(c, *session)
            if self.ring.predecessor(self.cfg.id, c) != sender:
                why = f"from gw{sender}, not the predecessor in the ring {session}"
                if fresh:
                    del self.ring.sessions[c]
        if why is not None:
            log.warning("cycle %d: dropped a ring message from gw%d: %s", c, sender, why)
            return
        self.seen.add((c, kind, pass_no))
        if self.closed_upto is None or c > self.closed_upto:
            self.close_cycle(c)
        st = self._stat(c)
        st["members"], st["ccc"] = list(session[1]), session[0]
        self.ring.use(c)
        began, began_cpu = time.perf_counter(), time.process_time()
        try:
            sends, pubs = self.core.handle(msg)
        except (ValueError, EncodingError, AssertionError) as exc:
            log.warning("cycle %d: dropped a %s message from gw%d: %s", c, kind, sender, exc)
            return
        final = frame.ccc == self.cfg.id and isinstance(msg, Publish) and not sends
        self.dispatch(c, sends, pubs, final=final)
        log.debug("cycle %d: %s%d from gw%d handled in %.1f ms (%.1f ms CPU)", c, kind, pass_no,
                  sender, (time.perf_counter() - began) * 1e3,
                  (time.process_time() - began_cpu) * 1e3)

    def dispatch(self, cycle: int, sends: list[Send], pubs: list[PublishedTuple],
                 final: bool = False) -> None:
        st = self._stat(cycle)
        if pubs:
            self.outbox.append([(p.cycle, p.t, p.id, p.value) for p in pubs])
            st["published"] += len(pubs)
            self.ce_wakeup.set()
        if final:
            st["complete"] = True
            st["completed_at"] = time.time()
        ccc, members = self.ring.sessions[cycle]
        for s in sends:
            data = framing.encode_ring(ccc, members, encode_message(s.msg))
            st["ring_frames"] += 1
            st["ring_bytes"] += len(data)
            st["payload_bytes"] += len(s.msg.payload)
            self.spawn(self._send(cycle, s.to, data))

    async def _send(self, cycle: int, to: int, data: bytes) -> None:
        sent = await self.links[to].send(data)
        if sent is None:
            log.warning("cycle %d: successor gw%d unreachable; the round stops here", cycle, to)
        elif cycle in self.stats:
            st = self.stats[cycle]
            st["tcp_bytes"] = st.get("tcp_bytes", 0) + sent

    async def serve_peer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                         ) -> None:
        name = peer_name(writer.get_extra_info("ssl_object"))
        sender = parse_gateway_name(name or "")
        try:
            if sender is None or sender not in self.cfg.peers or sender == self.cfg.id:
                raise framing.FrameError(f"certificate name {name!r} is not a peer of this ring")
            hello = await asyncio.wait_for(framing.read_frame(reader, self.cfg.max_frame),
                                           CONNECT_TIMEOUT)
            if not isinstance(hello, framing.Hello):
                raise framing.FrameError(f"expected a hello, got {type(hello).__name__}")
            if hello.fingerprint != self.fingerprint:
                raise framing.FrameError("other protocol parameters (fingerprint differs)")
            writer.write(framing.encode_hello(self.fingerprint))
            await writer.drain()
            while True:
                frame = await framing.read_frame(reader, self.cfg.max_frame)
                if frame is None:
                    return
                if not isinstance(frame, framing.Ring):
                    raise framing.FrameError(f"unexpected {type(frame).__name__} frame on a ring "
                                             "link")
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

    # -- sensors ----------------------------------------------------------------------------
    def take_reading(self, line: str) -> str:
        """One line of the sensor protocol -> the reply (``ok <cycle>`` or ``err <reason>``)."""
        try:
            if line.startswith("{"):
                obj = json.loads(line)
                t_raw, u, a_raw = obj["t"], str(obj["u"]), obj["a"]
            else:
                t_raw, u, a_raw = next(csv.reader([line]))
            t = float(t_raw)
        except (ValueError, KeyError, TypeError, StopIteration, json.JSONDecodeError):
            return "err malformed line (want t,u,a or {\"t\":..,\"u\":..,\"a\":..})"
        if not math.isfinite(t) or not u:
            return "err time must be finite and the sensor id non-empty"
        value: Key = int(a_raw) if isinstance(a_raw, int) or _INT.match(str(a_raw)) else str(a_raw)
        if self.domain is not None and value not in self.domain:
            return f"err value {value!r} is outside the exact counter's domain"
        p = self.cfg.protocol
        cycle = math.floor((t - p.data_t0) / p.data_period)
        if self.closed_upto is not None and cycle <= self.closed_upto:
            return f"err late: cycle {cycle} is closed"
        if cycle > self.wall_cycle() + self.clock.ahead:
            return f"err early: cycle {cycle} is more than {self.clock.ahead} ahead"
        buf = self.buffer[cycle]
        if u in buf:
            return f"err duplicate: {u} already reported cycle {cycle}"
        if len(buf) >= MAX_READINGS_PER_CYCLE:
            return "err buffer full"
        buf[u] = value
        return f"ok {cycle}"

    async def serve_sensors(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                            ) -> None:
        try:
            while True:
                try:
                    raw = await reader.readline()
                except ValueError:
                    writer.write(b"err line too long\n")
                    return
                if not raw:
                    return
                line = raw.decode("utf-8", errors="replace").strip()
                if line:
                    writer.write((self.take_reading(line) + "\n").encode())
                    await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    # -- the central entity -----------------------------------------------------------------
    async def ce_sender(self) -> None:
        backoff = 0.1
        reader = writer = None
        host, port = split_address(self.cfg.ce)
        while True:
            batch = self.outbox.pending(BATCH_MAX)
            if not batch:
                if self.stopping.is_set():
                    break
                self.ce_wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.ce_wakeup.wait(), 1.0)
                continue
            try:
                if writer is None:
                    reader, writer = await asyncio.wait_for(asyncio.open_connection(
                        host, port, ssl=self.client_ctx, server_hostname="ce"), CONNECT_TIMEOUT)
                assert reader is not None
                writer.write(framing.encode_batch(batch))
                await writer.drain()
                frame = await asyncio.wait_for(framing.read_frame(reader, self.cfg.max_frame),
                                               10.0)
                if not isinstance(frame, framing.Ack):
                    raise framing.FrameError(f"CE answered {frame!r}")
                self.outbox.ack(frame.seq)
                backoff = 0.1
            except (OSError, TimeoutError, ssl.SSLError, framing.FrameError) as exc:
                log.warning("CE: %d tuples waiting, %s; retry in %.1f s", len(batch),
                            exc or type(exc).__name__, backoff)
                if writer is not None:
                    with contextlib.suppress(Exception):
                        writer.close()
                reader = writer = None
                await asyncio.sleep(backoff)
                backoff = min(2.0, backoff * 2)
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()

    # -- main -------------------------------------------------------------------------------
    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def _essential_done(self, task: asyncio.Task[Any]) -> None:
        """The clock or the CE sender ended by a bug: say so and stop (exit code 1) instead
        of running on without cycles or deliveries."""
        if task.cancelled() or task.exception() is None:
            return
        log.error("%s failed; stopping", task.get_name(), exc_info=task.exception())
        self.failed = True
        self.stopping.set()

    async def watch_ready(self) -> None:
        while not all(link.ever_up for link in self.links.values()):
            await asyncio.sleep(0.05)
        self.ready_path.write_text(f"{time.time()}\n")
        log.info("all %d peers reachable", len(self.links))

    async def run(self, flush_timeout: float = 10.0) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        host, port = split_address(self.cfg.listen)
        peers = await asyncio.start_server(self.serve_peer, host, port, ssl=self.server_ctx,
                                           ssl_handshake_timeout=CONNECT_TIMEOUT)
        shost, sport = split_address(self.cfg.sensors)
        sensors = await asyncio.start_server(self.serve_sensors, shost, sport, limit=MAX_LINE)
        retry = min(1.0, self.clock.period / 4)
        background = [loop.create_task(link.maintain(retry)) for link in self.links.values()]
        background.append(loop.create_task(self.watch_ready()))
        clock = loop.create_task(self.run_clock(), name="clock")
        sender = loop.create_task(self.ce_sender(), name="CE sender")
        clock.add_done_callback(self._essential_done)
        sender.add_done_callback(self._essential_done)
        log.info("gateway %s listening on %s (ring) and %s (sensors); %d tuples in the "
                 "outbox", self.cfg.name, self.cfg.listen, self.cfg.sensors, self.outbox.count())
        await self.stopping.wait()
        clock.cancel()
        sensors.close()
        self.ce_wakeup.set()
        try:
            await asyncio.wait_for(sender, flush_timeout)
        except TimeoutError:
            log.warning("stopping with %d unacknowledged tuples kept in the outbox",
                        self.outbox.count())
        except Exception:
            pass
        peers.close()
        for task in background:
            task.cancel()
        for link in self.links.values():
            link.mark_down("stopping")
        self.flush_stats()
        self.outbox.close()
        log.info("gateway %s stopped", self.cfg.name)


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


def _secret(path: Path) -> bytes:
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
    return path.read_bytes()


def run_gateway(cfg: GatewayConfig) -> int:
    """Run until stopped; the exit code (1 when an essential task failed)."""
    daemon = GatewayDaemon(cfg)
    asyncio.run(daemon.run())
    return 1 if daemon.failed else 0

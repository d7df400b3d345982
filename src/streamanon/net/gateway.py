"""The gateway daemon: the clock and the wiring around the sans-I/O protocol core
(:class:`streamanon.dezent.protocol.Gateway`).

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import resource
import secrets
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from streamanon.dezent.protocol import (
    CE,
    MIX,
    Gateway,
    MixBatch,
    Publish,
    PublishedTuple,
    Send,
    decode_message,
    encode_message,
)
from streamanon.dezent.pseudonyms import Pseudonymizer
from streamanon.errors import StreamanonError
from streamanon.net import framing
from streamanon.net.ce_client import CEClient
from streamanon.net.config import ClockSection, GatewayConfig
from streamanon.net.intake import SensorIntake, SensorServer
from streamanon.net.metrics import GatewayMetrics, serve
from streamanon.net.mqtt_broker import MosquittoBroker
from streamanon.net.mqtt_intake import MqttIntake
from streamanon.net.outbox import MIX_CARRY_MAX, Outbox
from streamanon.net.peers import CONNECT_TIMEOUT, PeerLink, PeerServer
from streamanon.net.session import CORE_ERRORS, RingMessage, SessionRing, Sessions, admit
from streamanon.net.tls import Revocations, client_context, server_context, split_address

log = logging.getLogger("streamanon.gateway")

T = TypeVar("T")


class GatewayDaemon:
    def __init__(self, cfg: GatewayConfig) -> None:
        self.cfg = cfg
        self.clock_cfg = cfg.clock
        self.pcfg = cfg.protocol_config()
        self.mix = self.pcfg.publication == MIX
        self.failpoint = _failpoint()
        self.ring = SessionRing(cfg.protocol.ring(len(cfg.peers)))
        self.sessions = Sessions(cfg.id, frozenset(cfg.peers), self.pcfg, self.ring)
        state = Path(cfg.state_dir)
        state.mkdir(parents=True, exist_ok=True)
        rng = (np.random.default_rng([int(cfg.coin_seed), cfg.id]) if cfg.coin_seed is not None
               else np.random.default_rng())
        pseudonymizer = (Pseudonymizer(_secret(state / "pseudonym.key"))
                         if self.pcfg.id_mode == "pseudonym" else None)
        self.core = Gateway(cfg.id, self.pcfg, self.ring, rng=rng, pseudonymizer=pseudonymizer)
        self.metrics = GatewayMetrics()
        p = cfg.protocol
        insecure = cfg.intake.insecure_plaintext_sensors
        registry = cfg.intake.registered() if cfg.intake.registry is not None else None
        self.intake = SensorIntake(
            registry=registry,
            domain=(frozenset(self.pcfg.structure.domain)
                    if self.pcfg.structure.kind == "exact" else None),
            data_t0=p.data_t0, data_period=p.data_period, ahead=cfg.clock.ahead)
        self.outbox = Outbox(state / "outbox.sqlite")
        self.stats_path = state / "stats.jsonl"
        self.fingerprint = cfg.fingerprint()
        self.revocations = Revocations(cfg.crl, cfg.ca)
        self.client_ctx = client_context(cfg.ca, cfg.cert, cfg.key)
        self.server_ctx = server_context(cfg.ca, cfg.cert, cfg.key)
        self.links = {peer: PeerLink(peer, addr, ctx=self.client_ctx,
                                     fingerprint=self.fingerprint, max_frame=cfg.max_frame,
                                     revocations=self.revocations, spawn=self.spawn)
                      for peer, addr in cfg.peers.items() if peer != cfg.id}
        self.peer_server = PeerServer(cfg.id, set(cfg.peers), fingerprint=self.fingerprint,
                                      max_frame=cfg.max_frame, revocations=self.revocations,
                                      on_ring=self.on_ring)
        self.sensor_server = SensorServer(
            self.intake, cfg.id, tls=None if insecure else self.server_ctx,
            revocations=self.revocations, wall_cycle=self.wall_cycle,
            count=self._count_reading,
            idle_timeout=cfg.intake.idle_timeout, max_connections=cfg.intake.max_connections,
            max_line=cfg.intake.max_line)
        self.seen: list[float] = []  # first and last reading offered since the last close
        self.mqtt: MqttIntake | None = None
        self.broker: MosquittoBroker | None = None
        if cfg.intake.transport == "mqtt":
            count = self.sensor_server.count
            self.broker = MosquittoBroker(
                cfg.id, state / "mqtt", listen=cfg.sensors, ca=cfg.ca, cert=cfg.cert,
                key=cfg.key, crl=cfg.crl, sensors=registry or (),
                device_topics=[d.topic for d in cfg.intake.devices],
                binary=cfg.intake.mosquitto, on_refusal=count)
            self.mqtt = MqttIntake(self.intake, cfg.id, address=cfg.sensors, ca=cfg.ca,
                                   cert=cfg.cert, key=cfg.key, devices=cfg.intake.devices,
                                   wall_cycle=self.wall_cycle, count=count, clock=time.time)
        self.ce = CEClient(self.outbox, cfg.ce, ctx=self.client_ctx, max_frame=cfg.max_frame,
                           revocations=self.revocations, on_commit=self._committed,
                           on_refused=self.metrics.refused.inc,
                           on_mix_committed=self.mix_committed)
        self.stats: dict[int, dict[str, Any]] = {}
        self.stopping = asyncio.Event()
        self.hangup = asyncio.Event()  # SIGHUP: re-read the registry and the CRL now
        self.tasks: set[asyncio.Task[Any]] = set()  # keeps fire-and-forget sends alive
        self.failed = False
        self.ready_path = state / "ready"
        with contextlib.suppress(FileNotFoundError):
            self.ready_path.unlink()

    def _count_reading(self, outcome: str) -> None:
        self.metrics.readings.labels(outcome).inc()
        now = time.time()
        if self.seen:
            self.seen[1:] = [now]
        else:
            self.seen = [now, now]

    # -- the one place where errors of the protocol core are caught -------------------------
    def call_core(self, cycle: int, what: str, fn: Callable[..., T], *args: Any) -> T | None:
        """Run a core call; on a core error log why and return None (the message, or the
        cycle's start, is dropped: a stalled round publishes nothing more)."""
        try:
            return fn(*args)
        except CORE_ERRORS as exc:
            log.warning("cycle %d: %s dropped: %s", cycle, what, exc)
            return None

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

    def up(self) -> set[int]:
        """Peers with a live link (a link to a peer revoked since it connected is closed)."""
        for link in self.links.values():
            if link.up and link.serial is not None and self.revocations.is_revoked(link.serial):
                link.mark_down("its certificate was revoked")
        return {p for p, link in self.links.items() if link.up}

    def _stat(self, cycle: int) -> dict[str, Any]:
        st = self.stats.get(cycle)
        if st is None:
            st = self.stats[cycle] = {"gateway": self.cfg.id, "cycle": cycle, "readings": 0,
                                      "ring_frames": 0, "ring_bytes": 0, "payload_bytes": 0,
                                      "published": 0, "members": None, "ccc": None}
        return st

    def close_cycle(self, cycle: int) -> bool:
        """Give the core the readings of ``cycle`` (once, in cycle order)."""
        readings, dropped = self.intake.close(cycle)
        if readings is None:
            return False
        if dropped:
            log.warning("cycle %d: %d readings of earlier cycles arrived after they closed, "
                        "dropped", cycle, dropped)
        self.call_core(cycle, "the readings", self.core.measure, cycle, readings)
        st = self._stat(cycle)
        st["readings"] = len(readings)
        # when the sensors' messages of the cycle after this one came in (before its round?)
        st["intake_span"], self.seen = self.seen, []
        st["closed_at"] = time.time()
        self.metrics.last_cycle.set(cycle)
        return True

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
            self.tick(k)
            k += 1
        if clock.last_cycle >= 0 and not self.stopping.is_set():
            # let the last rounds finish (they are cut off one cycle later anyway)
            end = clock.start_of(clock.last_cycle + 2)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), max(0.0, end - time.time()))
            self.stopping.set()

    def tick(self, cycle: int) -> None:
        """The close of ``cycle``: close its readings, start it if we coordinate it."""
        self.close_cycle(cycle)
        up = self.up()
        self.metrics.peers_up.set(len(up))
        why = self.sessions.view_too_small(up)
        if why is not None:  # every gateway says so, not only the coordinator
            self.metrics.cycles_skipped.labels("below_min_members").inc()
            log.warning("cycle %d: skipped, publishes nothing: %s reachable; %s", cycle,
                        len(up) + 1, why)
            self._stat(cycle).update(skipped=why)
        elif self.sessions.acting_ccc(cycle, up) == self.cfg.id:
            self.start_cycle(cycle, up)
        self.sessions.prune(cycle)
        for c in [c for c in self.stats if c < cycle - 3]:
            self._flush_stat(self.stats.pop(c))

    def _flush_stat(self, st: dict[str, Any]) -> None:
        with open(self.stats_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(st) + "\n")

    def flush_stats(self) -> None:
        for c in sorted(self.stats):
            self._flush_stat(self.stats.pop(c))

    def start_cycle(self, cycle: int, up: set[int]) -> None:
        members, why = self.sessions.start(cycle, up)
        if members is None:
            log.warning("cycle %d: not starting a round: %s", cycle, why)
            self.metrics.cycles_skipped.labels("not_started").inc()
            return
        self.ring.use(cycle)
        self.metrics.ring_size.set(len(members))
        st = self._stat(cycle)
        st.update(members=list(members), ccc=self.cfg.id, started_at=time.time(),
                  complete=False)
        out = self.call_core(cycle, "the start of the round", self.core.start_cycle, cycle)
        if out is None:
            self.metrics.cycles_skipped.labels("core_refused").inc()
            return
        sends, pubs = out
        self.dispatch(cycle, sends, pubs, final=all(x.to == CE for x in sends))
        log.info("cycle %d: coordinator, ring of %d: %s", cycle, len(members), members)

    def on_ring(self, sender: int, frame: framing.RingFrame) -> None:
        try:
            msg = decode_message(frame.message)
        except CORE_ERRORS as exc:  # undecodable: the sender is broken, close its link
            raise framing.FrameError(f"bad ring message: {exc}") from None
        m = RingMessage.of(sender, frame.ccc, frame.members, msg)
        why = admit(m, self.sessions, self.wall_cycle())
        if why is not None:
            log.warning("cycle %d: dropped a ring message from gw%d: %s", m.cycle, sender, why)
            return
        self.sessions.accept(m)
        c = m.cycle
        if self.intake.closed_upto is None or c > self.intake.closed_upto:
            self.close_cycle(c)
        st = self._stat(c)
        st["members"], st["ccc"] = list(m.members), m.ccc
        self.metrics.ring_size.set(len(m.members))
        self.ring.use(c)
        if m.kind == "M" and self.failpoint == ("mix_hold", c):
            log.warning("cycle %d: failpoint mix_hold: holding the mix batch (never passed on)",
                        c)
            return
        if m.kind == "K":
            forgotten = self.outbox.mix_acked(c)
            self.metrics.mix_pending.set(self.outbox.mix_pending_count())
            log.debug("cycle %d: mix batch stored by the CE; %d own tuples forgotten", c,
                      forgotten)
        # tuples of earlier batches that were never acknowledged, for the batch this call may
        # add this gateway's tuples to (as the CCC ending the round, or as a mix hop)
        carry = (self.outbox.mix_due(c) if self.mix and (
            m.kind == "M" or (m.kind == "P" and m.ccc == self.cfg.id)) else [])
        began, began_cpu = time.perf_counter(), time.process_time()
        began_thread, faults = time.thread_time(), _minor_faults()
        out = self.call_core(c, f"a {m.kind}{m.pass_no} message from gw{sender}",
                             self.core.handle, msg, carry)
        if out is None:
            return
        sends, pubs = out
        final = (m.ccc == self.cfg.id and m.kind == "P"
                 and not any(isinstance(x.msg, Publish) for x in sends))
        self.dispatch(c, sends, pubs, final=final)
        if any(isinstance(x.msg, MixBatch) for x in sends):
            # after the batch went on: a crash before this line only makes the tuples due
            # again two cycles later (sent twice, stored once)
            self.outbox.mix_mark(c, [p.uid for p in carry])
        st = self._stat(c)  # the cost of the ring messages on this gateway (the benchmark's)
        st["handled"] = st.get("handled", 0) + 1
        st["handle_ms"] = st.get("handle_ms", 0.0) + (time.perf_counter() - began) * 1e3
        st["thread_cpu_ms"] = (st.get("thread_cpu_ms", 0.0)
                               + (time.thread_time() - began_thread) * 1e3)
        st["page_faults"] = st.get("page_faults", 0) + _minor_faults() - faults
        if m.kind == "K":  # the cycle is over: draw the next one's sealing keys now
            asyncio.get_running_loop().call_soon(self.core.prepare_mix, MIX_CARRY_MAX)
        log.debug("cycle %d: %s%d from gw%d handled in %.1f ms (%.1f ms CPU)", c, m.kind,
                  m.pass_no, sender, (time.perf_counter() - began) * 1e3,
                  (time.process_time() - began_cpu) * 1e3)

    def dispatch(self, cycle: int, sends: list[Send], pubs: list[PublishedTuple],
                 final: bool = False) -> None:
        st = self._stat(cycle)
        if pubs and self.mix:
            self.outbox.mix_add(pubs)  # durable before they are sealed into a batch
            st["published"] += len(pubs)
            self.metrics.published.inc(len(pubs))
            self.metrics.mix_pending.set(self.outbox.mix_pending_count())
        elif pubs:
            self.outbox.append([(p.cycle, p.t, p.id, p.value) for p in pubs])
            st["published"] += len(pubs)
            self.metrics.published.inc(len(pubs))
            self.metrics.outbox_depth.inc(len(pubs))
            self.ce.wakeup.set()
        if final:
            st["complete"] = True
            st["completed_at"] = time.time()
            self.metrics.cycles_completed.inc()
        ccc, members = self.ring.sessions[cycle]
        for s in sends:
            if s.to == CE:  # the cycle's mix batch, delivered by this (the last) gateway
                assert isinstance(s.msg, MixBatch)
                self.outbox.mix_out_add(cycle, s.msg.items)
                st["mix_items"] = len(s.msg.items)
                st["mix_bytes"] = len(s.msg.payload)
                self.ce.wakeup.set()
                continue
            data = framing.encode_ring(ccc, members, encode_message(s.msg))
            st["ring_frames"] += 1
            st["ring_bytes"] += len(data)
            st["payload_bytes"] += len(s.msg.payload)
            self.spawn(self._send(cycle, s.to, data))

    def mix_committed(self, cycle: int, seconds: float) -> None:
        """The CE stored the batch this gateway delivered: forget the own tuples it carried
        and send the acknowledgement around the ring."""
        self.metrics.ce_commit.observe(seconds)
        self.outbox.mix_acked(cycle)
        self.metrics.mix_pending.set(self.outbox.mix_pending_count())
        if cycle in self.stats:
            self.stats[cycle]["mix_committed_at"] = time.time()
        if cycle not in self.ring.sessions:
            log.info("cycle %d: mix batch stored by the CE after its session ended; the "
                     "others send their tuples again (the CE keeps one copy)", cycle)
            return
        self.ring.use(cycle)
        sends = self.call_core(cycle, "the mix acknowledgement", self.core.mix_committed, cycle)
        if sends:
            self.dispatch(cycle, sends, [])
        asyncio.get_running_loop().call_soon(self.core.prepare_mix, MIX_CARRY_MAX)

    async def _send(self, cycle: int, to: int, data: bytes) -> None:
        sent = await self.links[to].send(data)
        if sent is None:
            log.warning("cycle %d: successor gw%d unreachable; the round stops here", cycle, to)
        elif cycle in self.stats:
            st = self.stats[cycle]
            st["tcp_bytes"] = st.get("tcp_bytes", 0) + sent

    def _committed(self, n: int, seconds: float) -> None:
        self.metrics.ce_commit.observe(seconds)
        self.metrics.outbox_depth.set(self.outbox.count())

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

    async def watch_files(self, every: float) -> None:
        """Registry and CRL changes, live: a changed registry replaces the intake's (and the
        broker's ACL, re-read on SIGHUP); a changed CRL restarts the broker (its clients
        reconnect and the revoked ones are refused; persistence keeps the queued readings).
        Checked every ``every`` seconds, and at once on SIGHUP, which re-reads both files
        whether or not they look changed."""
        reg, crl = self.cfg.intake.registry, self.cfg.crl

        def stamp(p: Path | None) -> tuple[int, int] | None:
            try:
                st = os.stat(p) if p is not None else None
            except OSError:
                return None
            return None if st is None else (st.st_mtime_ns, st.st_size)

        seen = (stamp(reg), stamp(crl))
        while not self.stopping.is_set():
            waits = [asyncio.ensure_future(e.wait()) for e in (self.stopping, self.hangup)]
            await asyncio.wait(waits, timeout=every, return_when=asyncio.FIRST_COMPLETED)
            for w in waits:
                w.cancel()
            if self.hangup.is_set():
                self.hangup.clear()
                log.info("SIGHUP: re-reading the sensor registry and the revocation list")
                seen = (None, None)
            if self.broker is not None and self.broker.proc is not None \
                    and not self.broker.alive() and not self.stopping.is_set():
                log.error("the MQTT broker exited (%s); starting it again on its database",
                          self.broker.proc.returncode)
                try:
                    await asyncio.to_thread(self.broker.restart)
                except StreamanonError as exc:
                    log.error("%s", exc)
            now = (stamp(reg), stamp(crl))
            if now == seen:
                continue
            if now[0] != seen[0] and reg is not None and now[0] is not None:
                try:
                    ids = self.cfg.intake.registered()
                except StreamanonError as exc:
                    log.error("sensor registry unusable, keeping the previous one: %s", exc)
                else:
                    log.info("sensor registry reloaded: %d sensors (was %d)", len(ids),
                             len(self.intake.registry or ()))
                    self.intake.registry = ids
                    if self.broker is not None:
                        self.broker.write_acl(ids)
                        self.broker.reload()
            if now[1] != seen[1] and self.broker is not None and self.broker.alive():
                log.info("revocation list changed: restarting the MQTT broker")
                await asyncio.to_thread(self.broker.restart)
            seen = now

    async def watch_ready(self) -> None:
        while not all(link.ever_up for link in self.links.values()):
            await asyncio.sleep(0.05)
        self.ready_path.write_text(f"{time.time()}\n")
        log.info("all %d peers reachable", len(self.links))

    async def _stop_intake(self, sensors: asyncio.Server | None) -> None:
        """Stop taking readings: the sensor port, or the MQTT intake and its broker."""
        if sensors is not None:
            sensors.close()
        if self.mqtt is not None:
            self.mqtt.stop()
        if self.broker is not None:
            await asyncio.to_thread(self.broker.stop)

    async def run(self, flush_timeout: float = 10.0) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        loop.add_signal_handler(signal.SIGHUP, self.hangup.set)
        host, port = split_address(self.cfg.listen)
        peers = await asyncio.start_server(self.peer_server.serve, host, port,
                                           ssl=self.server_ctx,
                                           ssl_handshake_timeout=CONNECT_TIMEOUT)
        sensors: asyncio.Server | None = None
        metrics = None
        try:
            if self.broker is not None and self.mqtt is not None:
                await asyncio.to_thread(self.broker.start)
                self.mqtt.start()
            else:
                shost, sport = split_address(self.cfg.sensors)
                sensors = await self.sensor_server.start(shost, sport)
            if self.cfg.metrics:
                metrics = serve(self.metrics.registry, self.cfg.metrics, ca=self.cfg.ca,
                                cert=self.cfg.cert, key=self.cfg.key,
                                revocations=self.revocations)
        except BaseException:
            # a start that fails (a port taken, the broker not starting) leaves no broker
            # process of this gateway behind (seen: a mosquitto outliving its gateway)
            await self._stop_intake(sensors)
            raise
        retry = min(1.0, self.clock.period / 4)
        background = [loop.create_task(link.maintain(retry)) for link in self.links.values()]
        background.append(loop.create_task(self.watch_ready()))
        background.append(loop.create_task(self.watch_files(retry)))
        clock = loop.create_task(self.run_clock(), name="clock")
        sender = loop.create_task(self.ce.run(self.stopping), name="CE sender")
        clock.add_done_callback(self._essential_done)
        sender.add_done_callback(self._essential_done)
        self.metrics.outbox_depth.set(self.outbox.count())
        if self.mix:
            self.metrics.mix_pending.set(self.outbox.mix_pending_count())
            if self.core.ephemerals is not None:  # the first cycle's sealing keys, now
                self.core.ephemerals.refill(2 * len(self.intake.registry or ()) + MIX_CARRY_MAX)
            if self.pcfg.id_mode == "sensor":
                log.warning("publication = 'mix' with id_mode = 'sensor': every tuple names "
                            "its sensor, which links it to this gateway for anyone who knows "
                            "the sensors; use id_mode = 'pseudonym'")
        if self.failpoint is not None:
            log.warning("failpoint %s:%d set (tests only)", *self.failpoint)
        if self.cfg.intake.insecure_plaintext_sensors:
            log.warning("INSECURE: the sensor port %s is plain TCP and takes the sensor ID "
                        "from the line: anyone who reaches it can inject readings under "
                        "invented IDs (insecure_plaintext_sensors = true)", self.cfg.sensors)
        log.info("gateway %s listening on %s (ring) and %s (sensors, %s, %d registered); %d "
                 "tuples in the outbox", self.cfg.name, self.cfg.listen, self.cfg.sensors,
                 ("MQTT/TLS, its own broker" if self.mqtt is not None else
                  "plain TCP" if self.cfg.intake.insecure_plaintext_sensors else "TLS"),
                 len(self.intake.registry or ()), self.outbox.count())
        await self.stopping.wait()
        log.info("gateway %s stopping", self.cfg.name)
        clock.cancel()
        await self._stop_intake(sensors)
        self.ce.wakeup.set()
        # asyncio.wait never raises the sender's own exception: a sender that ended by a bug
        # was reported (and the exit code set) by _essential_done
        done, _ = await asyncio.wait({sender}, timeout=flush_timeout)
        if not done:
            sender.cancel()
            await asyncio.wait({sender})
            log.warning("stopping with %d unacknowledged tuples kept in the outbox",
                        self.outbox.count())
        peers.close()
        for task in background:
            task.cancel()
        for link in self.links.values():
            link.mark_down("stopping", level=logging.INFO)
        if metrics is not None:
            metrics.shutdown()
            metrics.server_close()
        self.flush_stats()
        self.outbox.close()
        log.info("gateway %s stopped", self.cfg.name)


def _failpoint() -> tuple[str, int] | None:
    """``STREAMANON_FAILPOINT=mix_hold:<cycle>`` (tests only), or None."""
    raw = os.environ.get("STREAMANON_FAILPOINT", "")
    name, _, arg = raw.partition(":")
    if name == "mix_hold" and arg.lstrip("-").isdigit():
        return (name, int(arg))
    return None


def _minor_faults() -> int:
    """The minor page faults of this thread so far (Linux; the process's elsewhere)."""
    return resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)).ru_minflt


def _secret(path: Path) -> bytes:
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
    return path.read_bytes()


# glibc's malloc options (mallopt): above this size a block is mapped on its own, and freed
# memory at the heap's top is handed back to the system past the trim threshold
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 16 << 20
TRIM_THRESHOLD = 64 << 20


def keep_freed_memory() -> bool:
    """Keep freed heap memory in the process (glibc; elsewhere nothing is changed).

    Each ring message makes and drops arrays of a few hundred kB. glibc's defaults give
    them back to the system (a mapping of their own, or a trim of the heap's top) and take
    them again at the next message: 300-600 page faults per message, 1.5-2 ms of the
    gateway's CPU on the ring's critical path. Held, the pages are reused (retained: the
    peak of a message, a few MB). ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_``
    in the environment (glibc's own tunables) win. True when the options were set.
    """
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc" or any(
            v in os.environ for v in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def run_gateway(cfg: GatewayConfig) -> int:
    """Run until stopped; the exit code (1 when an essential task failed)."""
    if keep_freed_memory():
        log.debug("malloc: freed memory kept up to %d MB, blocks mapped from %d MB",
                  TRIM_THRESHOLD >> 20, MMAP_THRESHOLD >> 20)
    daemon = GatewayDaemon(cfg)
    asyncio.run(daemon.run())
    return 1 if daemon.failed else 0

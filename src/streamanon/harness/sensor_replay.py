"""The replay of a simulated district against running gateways, as its sensor nodes.

Each sensor node speaks its gateway's sensor protocol with its own certificate: one ``t,u,a``
line per cycle over TLS, answered ``ok <cycle>`` or ``err <reason>`` (:mod:`streamanon.net.intake`),
or, with ``transport="mqtt"``, a QoS 1 message to its gateway's broker. Every acknowledged
reading is written to ``measurements.csv``, against which the z checker holds the site.

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamanon.errors import ConfigError
from streamanon.net.pki import sensor_paths
from streamanon.net.tls import client_context, split_address
from streamanon.sim.district import District


@dataclass
class ReplayStats:
    cycles: int = 0
    sent: int = 0
    accepted: int = 0
    refused: int = 0
    undelivered: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    stopped: bool = False  # by SIGTERM/SIGINT before the last cycle


class _Conn:
    """One sensor node's TLS connection (``ctx``), or a gateway's plain TCP one."""

    def __init__(self, address: str, ctx: ssl.SSLContext | None = None,
                 server_name: str | None = None) -> None:
        self.address, self.ctx, self.server_name = address, ctx, server_name
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def send(self, lines: list[str], timeout: float) -> list[str]:
        """Send lines, return one reply per line; raises OSError/TimeoutError on failure."""
        if self.reader is not None and self.reader.at_eof():
            self.close()  # the gateway closed it (idle timeout): dial again
        if self.writer is None:
            host, port = split_address(self.address)
            self.reader, self.writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=self.ctx,
                                        server_hostname=self.server_name), timeout)
        assert self.reader is not None
        try:
            self.writer.write("".join(line + "\n" for line in lines).encode())
            await self.writer.drain()
            replies = []
            for _ in lines:
                raw = await asyncio.wait_for(self.reader.readline(), timeout)
                if not raw:
                    raise ConnectionError("gateway closed the connection")
                replies.append(raw.decode().strip())
            return replies
        except (OSError, TimeoutError, ssl.SSLError):
            self.close()
            raise

    def close(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
        self.reader = self.writer = None


async def replay_async(district: District, addresses: list[str], *, start: int, cycles: int,
                       t0: float, period: float, lead: float = 0.0,
                       measurements: str | Path | None = None, data_period: float = 900.0,
                       data_t0: float = 0.0, timeout: float = 5.0,
                       t0_file: str | Path | None = None, ready_file: str | Path | None = None,
                       pki: str | Path | None = None, append: bool = False,
                       transport: str = "line") -> ReplayStats:
    """With ``pki`` (the deployment folder): every sensor node connects with its own
    certificate; without it, plain TCP (gateways in insecure plaintext mode only).
    ``append``: add to an existing ``measurements`` file.
    With ``t0_file``: first connect to every gateway, touch ``ready_file``, then wait for
    ``t0_file`` to hold the clock's t0 (how ``cluster up`` starts everyone together).

    Args:
        district: the district whose sensors' readings are sent.
        addresses: each gateway's sensor port (``host:port``), by gateway index.
        start: the first cycle sent.
        cycles: the number of cycles sent.
        t0: the gateways' clock: the wall time (Unix seconds) at which cycle 0 begins.
        period: wall-clock seconds per cycle.
        lead: seconds before its cycle begins that each cycle is sent.
        measurements: the file of the accepted readings (``t,u,a``; ``None``: not written).
        data_period: seconds of data time per cycle (the readings' ``t``).
        data_t0: the data time of cycle 0.
        timeout: seconds to wait for a gateway's connection and answers.
        t0_file: the file to wait for that holds t0 (``None``: use ``t0``).
        ready_file: the file touched once every gateway is connected (with ``t0_file``).
        pki: the deployment folder with the sensors' certificates (``None``: plain TCP).
        append: add to an existing ``measurements`` file.
        transport: ``line`` (the gateways' TLS line ports) or ``mqtt`` (each gateway's
            broker, one MQTT client per sensor node).
    """
    if len(addresses) != district.gateways:
        raise ConfigError(f"{district.gateways} gateways in the district, {len(addresses)} "
                          "addresses given")
    values = district.readings(start, start + cycles)
    members = [[i for i in range(district.sensors) if district.sn_gateway[i] == g]
               for g in range(district.gateways)]
    if transport == "mqtt":
        if pki is None:
            raise ConfigError("sensors over MQTT need the deployment folder (pki): the "
                              "brokers take certificates only")
        from streamanon.harness.mqtt_sensors import MqttSensor

        groups = [[[i] for i in ix] for ix in members]
        conns = [[MqttSensor(Path(pki), addresses[g], g, district.sensor_ids[i])
                  for i in ix] for g, ix in enumerate(members)]
    elif transport != "line":
        raise ConfigError(f"transport must be 'line' or 'mqtt', got {transport!r}")
    elif pki is not None:
        # one connection per sensor node, each with its own certificate
        groups = [[[i] for i in ix] for ix in members]
        conns = [[_sensor_conn(Path(pki), addresses[g], g, district.sensor_ids[i])
                  for i in ix] for g, ix in enumerate(members)]
    else:
        groups = [[ix] if ix else [] for ix in members]
        conns = [[_Conn(addresses[g])] if ix else [] for g, ix in enumerate(members)]
    flat = [(conn, ix) for g in range(district.gateways)
            for conn, ix in zip(conns[g], groups[g], strict=True)]
    stats = ReplayStats()
    out = None
    if measurements is not None:
        fresh = not append or not Path(measurements).exists()
        out = open(measurements, "w" if fresh else "a", encoding="utf-8",  # noqa: SIM115
                   newline="")
        if fresh:
            out.write("t,u,a\n")
    try:
        if t0_file is not None:
            t0 = await _wait_start([c for c, _ in flat], Path(t0_file), ready_file, timeout)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)  # main thread only
        for r in range(cycles):
            c = start + r
            due = t0 + c * period - lead
            delay = due - time.time()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                stats.stopped = True
                break
            t_text = _fmt(data_t0 + c * data_period)
            batches = [[f"{t_text},{district.sensor_ids[i]},{int(values[r, i])}" for i in ix]
                       for _conn, ix in flat]
            results = await asyncio.gather(*(conn.send(b, timeout) for (conn, _ix), b in
                                             zip(flat, batches, strict=True)),
                                           return_exceptions=True)
            stats.cycles += 1
            for lines, res in zip(batches, results, strict=True):
                stats.sent += len(lines)
                if isinstance(res, BaseException):
                    stats.undelivered += len(lines)
                    key = f"unreachable: {type(res).__name__}"
                    stats.reasons[key] = stats.reasons.get(key, 0) + len(lines)
                    continue
                for line, reply in zip(lines, res, strict=True):
                    if reply.startswith("ok"):
                        stats.accepted += 1
                        if out is not None:
                            out.write(line + "\n")
                    else:
                        stats.refused += 1
                        key = reply.split(":")[0]
                        stats.reasons[key] = stats.reasons.get(key, 0) + 1
            if out is not None:
                out.flush()
    finally:
        for conn, _ix in flat:
            conn.close()
        if out is not None:
            out.close()
    return stats


def _sensor_conn(pki: Path, address: str, gateway: int, sensor_id: str) -> _Conn:
    crt, key = sensor_paths(pki, gateway, sensor_id)
    ctx = client_context(pki / "ca.crt", crt, key)
    return _Conn(address, ctx, f"gw{gateway}")


async def _wait_start(conns: list[Any], t0_file: Path, ready_file: str | Path | None,
                      timeout: float) -> float:
    end = time.time() + 60

    async def dial(conn: _Conn) -> None:
        while True:
            try:
                await conn.send([], timeout)
                return
            except (OSError, TimeoutError, ssl.SSLError):
                if time.time() > end:
                    raise
                await asyncio.sleep(0.1)

    sem = asyncio.Semaphore(64)  # TLS handshakes at once

    async def limited(conn: _Conn) -> None:
        async with sem:
            await dial(conn)

    await asyncio.gather(*(limited(c) for c in conns))
    if ready_file is not None:
        Path(ready_file).write_text(f"{time.time()}\n")
    while True:
        with contextlib.suppress(OSError, ValueError):
            return float(t0_file.read_text().strip())
        if time.time() > end:
            raise TimeoutError(f"no start time in {t0_file}")
        await asyncio.sleep(0.05)


def _fmt(t: float) -> str:
    return str(int(t)) if float(t).is_integer() else repr(float(t))


def replay(district: District, addresses: list[str], **kwargs: Any) -> ReplayStats:
    """:func:`replay_async` in its own event loop."""
    return asyncio.run(replay_async(district, addresses, **kwargs))

"""Sensor input of the gateways, and the replay of a simulated district against them.

The sensor protocol (plain TCP on the gateway's ``sensors`` address, meant for the local
network of a gateway and its sensor nodes): one reading per line, UTF-8, either CSV
``t,u,a`` (the streamanon record format: data time in seconds, sensor ID, value) or a JSON
object ``{"t": 900, "u": "meter-17", "a": 230}``. The gateway answers every line with one line:
``ok <cycle>`` when the reading is taken, or ``err <reason>`` (malformed, value outside the
exact counter's domain, late: its cycle is already closed, early: more than ``ahead`` cycles in
the future, duplicate: the sensor already reported that cycle). Lines longer than 4 KiB close
the connection. Try it with ``printf '900,meter-17,230\\n' | nc 127.0.0.1 7200``.

``replay`` sends a :class:`~streamanon.sim.district.District`'s bucketed readings, cycle by
cycle, each sensor to its gateway, on the gateways' clock (``t0``, ``period``), ``lead``
seconds before each cycle begins, and writes every reading a gateway acknowledged with ``ok``
to ``measurements.csv`` as ``t,u,a`` (``t = data_t0 + cycle x data_period``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamanon.net.tls import split_address
from streamanon.sim.district import District


@dataclass
class ReplayStats:
    cycles: int = 0
    sent: int = 0
    accepted: int = 0
    refused: int = 0
    undelivered: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


class _Conn:
    def __init__(self, address: str) -> None:
        self.address = address
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def send(self, lines: list[str], timeout: float) -> list[str]:
        """Send lines, return one reply per line; raises OSError/TimeoutError on failure."""
        if self.writer is None:
            host, port = split_address(self.address)
            self.reader, self.writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), timeout)
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
        except (OSError, TimeoutError):
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
                       t0_file: str | Path | None = None, ready_file: str | Path | None = None
                       ) -> ReplayStats:
    """With ``t0_file``: first connect to every gateway, touch ``ready_file``, then wait for
    ``t0_file`` to hold the clock's t0 (how ``cluster up`` starts everyone together)."""
    if len(addresses) != district.gateways:
        raise ValueError(f"{district.gateways} gateways in the district, {len(addresses)} "
                         "addresses given")
    values = district.readings(start, start + cycles)
    members = [[i for i in range(district.sensors) if district.sn_gateway[i] == g]
               for g in range(district.gateways)]
    conns = [_Conn(a) for a in addresses]
    stats = ReplayStats()
    out = None
    if measurements is not None:
        out = open(measurements, "w", encoding="utf-8", newline="")  # noqa: SIM115
        out.write("t,u,a\n")
    try:
        if t0_file is not None:
            t0 = await _wait_start(conns, Path(t0_file), ready_file, timeout)
        for r in range(cycles):
            c = start + r
            due = t0 + c * period - lead
            delay = due - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            t_text = _fmt(data_t0 + c * data_period)
            batches = [[f"{t_text},{district.sensor_ids[i]},{int(values[r, i])}" for i in ix]
                       for ix in members]
            results = await asyncio.gather(*(conn.send(b, timeout) for conn, b in
                                             zip(conns, batches, strict=True) if b),
                                           return_exceptions=True)
            stats.cycles += 1
            for lines, res in zip([b for b in batches if b], results, strict=True):
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
        for conn in conns:
            conn.close()
        if out is not None:
            out.close()
    return stats


async def _wait_start(conns: list[_Conn], t0_file: Path, ready_file: str | Path | None,
                      timeout: float) -> float:
    end = time.time() + 60
    for conn in conns:
        while True:
            try:
                await conn.send([], timeout)
                break
            except (OSError, TimeoutError):
                if time.time() > end:
                    raise
                await asyncio.sleep(0.1)
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

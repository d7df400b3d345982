"""Authenticated sensor intake: who may report what to a gateway, and the sensor port.

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import logging
import math
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamanon.dezent.cbf import Key
from streamanon.net.pki import same_sensor, sensor_role
from streamanon.net.tls import Revocations, check_peer

log = logging.getLogger("streamanon.gateway")

MAX_READINGS_PER_CYCLE = 200_000
LOGGED_REFUSALS = 3  # per connection; the rest are counted (a flood must not flood the log)
_INT = re.compile(r"-?\d+\Z")
MALFORMED = ("err malformed line (want t,a or t,u,a or {\"t\":..,\"a\":..}, u naming this "
             "sensor)")


@dataclass
class SensorIntake:
    """A gateway's buffer of its sensors' readings per cycle, and the rules to take one.

    ``registry``: the sensor IDs registered to this gateway (None: any, plaintext mode only).
    ``domain``: the exact counter's values (None: any). Time ``t`` belongs to cycle
    ``floor((t - data_t0) / data_period)``.
    """

    registry: frozenset[str] | None
    domain: frozenset[Key] | None
    data_t0: float
    data_period: float
    ahead: int
    buffer: dict[int, dict[str, Key]] = field(default_factory=dict)
    closed_upto: int | None = None

    def offer(self, sensor: str | None, line: str, wall_cycle: int) -> tuple[str, str]:
        """One line from ``sensor`` (the certificate's ID; None in plaintext mode, where the
        line's ID is used) -> ``(reply, outcome)``; outcome is ``ok`` or the refusal's kind
        (for the metrics)."""
        try:
            if line.startswith("{"):
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    return MALFORMED, "malformed"
                t_raw, a_raw = obj["t"], obj["a"]
                u = str(obj["u"]) if "u" in obj else None
            else:
                fields = next(csv.reader([line]))
                if len(fields) == 2:
                    (t_raw, a_raw), u = fields, None
                elif len(fields) == 3:
                    t_raw, u, a_raw = fields
                else:
                    return MALFORMED, "malformed"
            t = float(t_raw)
        except (ValueError, KeyError, TypeError, StopIteration):
            return MALFORMED, "malformed"
        if sensor is None:  # plaintext: the line names the sensor
            if not u:
                return "err the sensor id is missing (t,u,a)", "malformed"
            if self.registry is not None and u not in self.registry:
                # the other spelling of a registered sensor (gw0-sn5 / gw000-sn005) is it
                known = next((r for r in self.registry if same_sensor(r, u)), None)
                if known is None:
                    return f"err sensor {u} is not registered at this gateway", "not_registered"
                u = known
            sensor = u
        elif u is not None and not same_sensor(u, sensor):
            return (f"err the line names sensor {u!r} but the certificate is {sensor!r}",
                    "foreign_id")
        if not math.isfinite(t):
            return "err time must be finite", "malformed"
        if isinstance(a_raw, bool | dict | list | float):
            return f"err value {a_raw!r} is not an integer or a text", "malformed"
        value: Key = int(a_raw) if isinstance(a_raw, int) or _INT.match(str(a_raw)) else str(a_raw)
        if self.domain is not None and value not in self.domain:
            return f"err value {value!r} is outside the exact counter's domain", "domain"
        if t < self.data_t0:  # cycle -1 and before never open: the clock starts at t0
            return (f"err late: time {t:g} is before the data clock's start "
                    f"({self.data_t0:g})", "late")
        position = (t - self.data_t0) / self.data_period
        if position >= wall_cycle + self.ahead + 1:  # also what is too large to be a cycle
            return (f"err early: time {t:g} is more than {self.ahead} cycle(s) ahead of "
                    f"cycle {wall_cycle}", "early")
        cycle = math.floor(position)
        if self.closed_upto is not None and cycle <= self.closed_upto:
            return f"err late: cycle {cycle} is closed", "late"
        buf = self.buffer.setdefault(cycle, {})
        if sensor in buf:
            return f"err duplicate: {sensor} already reported cycle {cycle}", "duplicate"
        if len(buf) >= MAX_READINGS_PER_CYCLE:
            return "err buffer full", "full"
        buf[sensor] = value
        return f"ok {cycle}", "ok"

    def close(self, cycle: int) -> tuple[list[tuple[str, Key]] | None, int]:
        """Close ``cycle``: its readings in sensor-ID order (None if it was closed already) and
        how many readings of earlier, never closed cycles were dropped."""
        if self.closed_upto is not None and cycle <= self.closed_upto:
            return None, 0
        readings = sorted(self.buffer.pop(cycle, {}).items())
        dropped = sum(len(self.buffer.pop(c)) for c in [c for c in self.buffer if c < cycle])
        self.closed_upto = cycle
        return readings, dropped


class SensorServer:
    """The sensor port: TLS (or, explicitly insecure, plain TCP) around a :class:`SensorIntake`.

    ``wall_cycle`` tells the current cycle; ``count(outcome)`` is called once per line and
    per refused connection (for the metrics).

    Args:
        intake: the gateway's sensor intake (it judges each line).
        gateway: the gateway's index.
        tls: the TLS server context (``None``: plain TCP, explicitly insecure).
        revocations: the revoked certificates (checked at every connection).
        wall_cycle: tells the current cycle.
        count: called with each line's and each refused connection's outcome.
        idle_timeout: seconds a connection may stay silent before it is closed.
        max_connections: the most connections open at once (more are refused).
        max_line: the longest line accepted, in bytes.
    """

    def __init__(self, intake: SensorIntake, gateway: int, *, tls: ssl.SSLContext | None,
                 revocations: Revocations, wall_cycle: Callable[[], int],
                 count: Callable[[str], None], idle_timeout: float, max_connections: int,
                 max_line: int) -> None:
        self.intake, self.gateway, self.tls = intake, gateway, tls
        self.revocations, self.wall_cycle, self.count = revocations, wall_cycle, count
        self.idle_timeout, self.max_connections = idle_timeout, max_connections
        self.max_line = max_line
        self.connections = 0
        self.role = sensor_role(gateway)

    async def start(self, host: str, port: int) -> asyncio.Server:
        return await asyncio.start_server(self.serve, host, port, ssl=self.tls,
                                          ssl_handshake_timeout=10.0 if self.tls else None,
                                          limit=self.max_line)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer: Any = writer.get_extra_info("peername")
        sensor: str | None = None
        ident = None
        refused = 0
        self.connections += 1
        try:
            if self.connections > self.max_connections:
                self.count("busy")
                log.warning("sensor connection from %s refused: %d connections open (max %d)",
                            peer, self.connections - 1, self.max_connections)
                writer.write(b"err busy: too many sensor connections\n")
                return
            if self.tls is not None:
                ident, why = check_peer(writer.get_extra_info("ssl_object"), self.revocations,
                                        (self.role,))
                if why is None and ident is not None and (
                        self.intake.registry is None or ident.name not in self.intake.registry):
                    why = f"sensor {ident.name!r} is not in this gateway's registry"
                if why is not None or ident is None:
                    self.count("refused_certificate")
                    log.warning("sensor connection from %s refused: %s", peer, why)
                    writer.write(f"err refused: {why}\n".encode())
                    return
                sensor = ident.name
            while True:
                try:
                    raw = await asyncio.wait_for(reader.readline(), self.idle_timeout)
                except TimeoutError:
                    log.debug("sensor %s (%s) idle for %g s: closed", sensor, peer,
                              self.idle_timeout)
                    return
                except ValueError:  # longer than the stream's limit
                    self.count("line_too_long")
                    writer.write(f"err line too long (max {self.max_line} bytes)\n".encode())
                    return
                if not raw:
                    return
                if not raw.endswith(b"\n") and len(raw) >= self.max_line:
                    self.count("line_too_long")
                    writer.write(f"err line too long (max {self.max_line} bytes)\n".encode())
                    return
                line = raw.decode("utf-8", errors="replace").strip()
                if ident is not None and self.revocations.is_revoked(ident.serial):
                    self.count("refused_certificate")
                    writer.write(b"err refused: certificate revoked\n")
                    return
                if line:
                    reply, outcome = self.intake.offer(sensor, line, self.wall_cycle())
                    self.count(outcome)
                    if outcome != "ok":
                        refused += 1
                        if refused <= LOGGED_REFUSALS:
                            log.info("sensor %s (%s): %s", sensor or "?", peer, reply)
                    writer.write((reply + "\n").encode())
                    await writer.drain()
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # stopping
        finally:
            if refused > LOGGED_REFUSALS:
                log.warning("sensor %s (%s): %d lines refused on this connection (the first "
                            "%d logged)", sensor or "?", peer, refused, LOGGED_REFUSALS)
            self.connections -= 1
            with contextlib.suppress(Exception):
                writer.close()

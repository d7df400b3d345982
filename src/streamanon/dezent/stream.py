"""deZent as one stream operator: an in-process ring of gateways over a stream of readings.

Design: docs/design/dezent.md
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from streamanon.base import OperatorBase
from streamanon.dezent.protocol import (
    DEFAULT_P_PUB,
    Gateway,
    ProtocolConfig,
    StructureSpec,
    run_cycle,
)
from streamanon.dezent.ring import Ring
from streamanon.dezent.rules import PAPER
from streamanon.errors import (
    BadValueError,
    ConfigError,
    DuplicateReadingError,
    MissingFieldError,
    ProtocolError,
    TimeOrderError,
    UnknownCategoryError,
)
from streamanon.records import Record, Suppressed


class DezentRing(OperatorBase):
    """deZent's gateways in one process, as a stream operator (see the module docstring).

    >>> ring = DezentRing(z=2, delta_t=0, period=60, gateways=3, domain=["x", "y"])
    >>> ring.process(Record(0, "s1", "x")) + ring.process(Record(1, "s2", "x"))
    []
    >>> out = ring.process(Record(60, "s1", "y"))   # a new cycle: cycle 0 leaves the ring
    >>> sorted(type(o).__name__ for o in out)      # paper rule: D - (z - 1) = 1 published
    ['Record', 'Suppressed']
    >>> ring.summary()["held"], [type(o).__name__ for o in ring.flush()]
    (1, ['Suppressed'])

    Args:
        z: distinct sensors that must have reported a value within Δt before it is released.
        delta_t: the window Δt, seconds of data time.
        period: seconds of data time per cycle.
        gateways: gateways in the ring.
        domain: every possible value, each once (the exact counter's buckets).
        rule: the publication rule (``paper`` or ``window``, :mod:`streamanon.dezent.rules`).
        p_pub: the probability that a gateway publishes in a pass.
        t0: the data time at which cycle 0 begins.
        seed: seed of the ring order and of each gateway's random choices.
        bits: width of each counter.
        max_sensors: the most distinct sensors the counters must hold.
    """

    @classmethod
    def _conformance_params(cls) -> dict[str, Any]:
        """This operator's case of the contract checks, as data (keys: see
        :mod:`streamanon.conformance`): 12 cycles of readings of 20 sensors (not every sensor
        every cycle), readings it must refuse, and the extra check that exact counting
        publishes what the centralized rule allows."""
        import random

        domain = ["low", "mid", "high", "peak"]
        rnd = random.Random(11)
        records: list[Record] = []
        for cycle in range(12):
            for s in rnd.sample(range(20), 14):
                t = cycle * 900.0 + rnd.uniform(0, 899)
                records.append(Record(t, f"sn{s}", rnd.choice(domain), None, len(records) + 2))
        records.sort(key=lambda r: r.t)
        records = [Record(r.t, r.u, r.a, None, i + 2) for i, r in enumerate(records)]
        last = records[len(records) // 2 - 1]  # the bad ones are fed after it
        bad = [(Record(last.t, last.u, "off-scale"), UnknownCategoryError, "a"),
               (Record(last.t, last.u, "low"), DuplicateReadingError, "u"),
               (Record(last.t - 2000, "sn99", "low"), TimeOrderError, "t")]
        return {"name": "dezent-ring", "seeded": True,
                "params": {"z": 3, "delta_t": 1800, "period": 900, "gateways": 4,
                           "domain": domain, "p_pub": DEFAULT_P_PUB},
                "records": records, "bad": bad, "time_of": _time_of,
                "checks": ("ring_equals_centralized_rule",)}

    def __init__(
        self,
        *,
        z: int,
        delta_t: float,
        period: float,
        gateways: int,
        domain: Sequence[str],
        rule: str = PAPER,
        p_pub: float = DEFAULT_P_PUB,
        t0: float = 0.0,
        seed: int = 0,
        bits: int = 20,
        max_sensors: int = 10_000,
    ) -> None:
        if not (period > 0 and math.isfinite(period)):
            raise ConfigError(f"period must be a finite number of seconds > 0, got {period!r}")
        if not domain or len(set(domain)) != len(domain):
            raise ConfigError("domain must list the possible values, each once")
        try:
            structure = StructureSpec("exact", len(domain), 1, bits, tuple(domain))
            self.config = ProtocolConfig(z, delta_t, structure, max_sensors, period, t0, rule,
                                         p_pub)
            ring = Ring(gateways, seed)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        #: the ring's gateways, by position
        self.nodes = [Gateway(g, self.config, ring, rng=np.random.default_rng([seed, g]))
                      for g in range(gateways)]
        self._seed = seed
        self._domain = tuple(domain)
        self._values = frozenset(domain)
        self.max_sensors = max_sensors
        self.sensors: set[str] = set()
        self.cycle: int | None = None
        self.open: dict[str, Record] = {}  # sensor -> its reading of the open cycle
        self.read = 0
        self.released = 0
        self.suppressed = 0
        self.published_per_cycle: dict[int, dict[str, int]] = {}

    # -- the parameters, read back -------------------------------------------------------
    @property
    def z(self) -> int:
        return self.config.z

    @property
    def delta_t(self) -> float:
        return self.config.delta_t

    @property
    def period(self) -> float:
        return self.config.period

    @property
    def gateways(self) -> int:
        """How many gateways the ring has."""
        return len(self.nodes)

    @property
    def domain(self) -> tuple[str, ...]:
        """The possible values, in the order given."""
        return self._domain

    @property
    def rule(self) -> str:
        return self.config.rule

    @property
    def p_pub(self) -> float:
        return self.config.p_pub

    @property
    def t0(self) -> float:
        return self.config.t0

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def bits(self) -> int:
        return self.config.structure.bits

    # -- the contract --------------------------------------------------------------------
    def _cycle_of(self, t: float) -> int:
        return math.floor((t - self.config.t0) / self.config.period)

    def process(self, record: Record) -> list[Record | Suppressed]:
        """Take one reading; returns the readings of a cycle this arrival closed (if any)."""
        t, sensor, value = record.t, record.u, record.a
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise BadValueError("t", f"time must be a finite number, got {t!r}", record=record)
        if not isinstance(sensor, str) or not sensor.strip():
            raise MissingFieldError("u", "missing field u (the sensor)", record=record)
        if value not in self._values:
            raise UnknownCategoryError("a", f"value {value!r} is not in the ring's domain",
                                       record=record)
        cycle = self._cycle_of(t)
        if self.cycle is not None and cycle < self.cycle:
            raise TimeOrderError("t", f"time goes backwards: cycle {cycle} after {self.cycle}",
                                 record=record)
        if cycle == self.cycle and sensor in self.open:
            raise DuplicateReadingError("u", f"sensor {sensor!r} already reported in cycle "
                                        f"{cycle}", record=record)
        if sensor not in self.sensors and len(self.sensors) >= self.max_sensors:
            raise BadValueError("u", f"more than {self.max_sensors} sensors", record=record)
        out = self._close() if self.cycle is not None and cycle > self.cycle else []
        self.cycle = cycle
        self.sensors.add(sensor)
        self.open[sensor] = record
        self.read += 1
        return out

    def advance(self, now: float) -> list[Record | Suppressed]:
        """Run the open cycle through the ring once ``now`` is past its end."""
        if self.cycle is not None and self.open and self._cycle_of(now) > self.cycle:
            return self._close()
        return []

    def flush(self) -> list[Record | Suppressed]:
        return self._close() if self.open else []

    def summary(self) -> dict[str, Any]:
        return {"read": self.read, "released": self.released, "suppressed": self.suppressed,
                "held": len(self.open), "cycles": len(self.published_per_cycle)}

    # -- one cycle -----------------------------------------------------------------------
    def _close(self) -> list[Record | Suppressed]:
        cycle, readings = self.cycle, self.open
        if cycle is None:
            raise ProtocolError("no open cycle to close")
        n = len(self.nodes)
        per_gateway: list[list[tuple[str, str]]] = [[] for _ in range(n)]
        for sensor, rec in readings.items():
            per_gateway[zlib.crc32(sensor.encode()) % n].append((sensor, rec.a))
        for g, gw in enumerate(self.nodes):
            gw.measure(cycle, per_gateway[g])
        result = run_cycle(self.nodes, cycle)
        out: list[Record | Suppressed] = []
        counts: dict[str, int] = {}
        for pt in result.published:
            rec = readings.pop(pt.sensor)
            out.append(Record(pt.t, pt.id, str(pt.value), None, rec.line))
            counts[str(pt.value)] = counts.get(str(pt.value), 0) + 1
        self.published_per_cycle[cycle] = counts
        out.extend(Suppressed(rec, "fewer than z sensors in Δt (deZent ring)")
                   for rec in readings.values())
        self.released += len(result.published)
        self.suppressed += len(readings)
        self.open = {}
        return out


def _time_of(record: Record) -> float:
    return record.t

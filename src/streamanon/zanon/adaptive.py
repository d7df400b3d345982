"""Adaptive z, as in the authors' ``zanon`` 0.3.4 release: re-tune z towards a target share pk.

>>> op = AdaptiveZAnonymizer(delta_t=60, k=2, pk=0.8, rate=30)
>>> op.z
10

Design: docs/design/zanon.md
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from typing import Any

from streamanon.base import OperatorBase, legacy_positional
from streamanon.errors import ConfigError
from streamanon.records import Record, Suppressed
from streamanon.zanon.operator import SEPARATOR, ZAnonymizer


class AdaptiveZAnonymizer(OperatorBase):
    """z-anonymity whose z follows a target probability ``pk`` of k-anonymous output.

    Same contract and value semantics as :class:`~streamanon.zanon.ZAnonymizer` (its
    ``core``); the summary adds the current ``z`` and the number of updates. Its parameters
    read back (:meth:`~streamanon.base.OperatorBase.params`) as built: ``z0`` stays the
    starting z while :attr:`z` follows the re-tuning.

    >>> op = AdaptiveZAnonymizer(delta_t=60, k=2, pk=0.8, z0=2)
    >>> [type(x).__name__ for t, u in [(0, "a"), (1, "b")] for x in op.process(Record(t, u, "x"))]
    ['Suppressed', 'Record']
    >>> op.summary()["z"], op.summary()["released"]
    (2, 1)

    Args:
        delta_t: the window Δt in seconds.
        k: the k of the target: output that is k-anonymous with probability ``pk``.
        pk: the target probability of k-anonymous output.
        rate: seconds of data time between two re-tunings of z.
        z0: the starting z.
        z_max: the largest z the re-tuning may choose.
        separator: the separator of hierarchical values (``EU*FR*Paris``).
    """

    @classmethod
    def _conformance_params(cls) -> dict[str, Any]:
        """This operator's case of the contract checks, as data (keys: see
        :mod:`streamanon.conformance`): the stream and bad records of the fixed-z operator."""
        return {**ZAnonymizer._conformance_params(), "name": "z-adaptive",
                "params": {"delta_t": 300, "k": 2, "pk": 0.6, "rate": 200, "z0": 3}}

    @legacy_positional("delta_t", "k", "pk")
    def __init__(
        self,
        *,
        delta_t: float,
        k: int,
        pk: float,
        rate: float = 1800.0,
        z0: int = 10,
        z_max: int = 1800,
        separator: str = SEPARATOR,
    ) -> None:
        if not 0 <= pk <= 1:
            raise ConfigError(f"pk must be a probability, got {pk!r}")
        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k!r}")
        if not (rate >= 0 and math.isfinite(rate)):
            raise ConfigError(f"rate must be a finite number of seconds >= 0, got {rate!r}")
        if int(z0) != z0 or z0 < 0 or int(z_max) != z_max or z_max < 0:
            raise ConfigError(f"z0 and z_max must be integers >= 0, got {z0!r}, {z_max!r}")
        self.core = ZAnonymizer(z=max(1, z0), delta_t=delta_t, separator=separator)
        self.core.z = int(z0)
        self.k = k
        self.pk = pk
        self.rate = rate
        self.z0 = int(z0)
        self.z_max = z_max
        self.t_start: float | None = None
        self.last_update = 0.0
        self.history: list[tuple[float, int]] = []  # (time of update, z after it)
        self._recent: deque[tuple[float, str, list[str], list[int]]] = deque()

    @property
    def z(self) -> int:
        """The current z (``z0`` until the first re-tuning)."""
        return self.core.z

    @property
    def delta_t(self) -> float:
        return self.core.delta_t

    @property
    def separator(self) -> str:
        return self.core.separator

    def share_k_anonymous(self, z: int) -> float:
        """Share of users in groups of >= k users with identical kept-value sets (2 if none)."""
        kept: dict[str, set[str]] = defaultdict(set)
        for _, u, levels, counts in self._recent:
            best = None
            for level, c in enumerate(counts):
                if c >= z:
                    best = levels[level]
            if best is not None:
                kept[u].add(best)
        if not kept:
            return 2.0
        sizes = Counter(frozenset(s) for s in kept.values()).values()
        return sum(s for s in sizes if s >= self.k) / sum(sizes)

    def _search(self) -> int:
        lo, hi = 0, self.z_max
        while lo <= hi:
            mid = (lo + hi) // 2
            share = self.share_k_anonymous(mid)
            if self.pk <= share <= self.pk + 0.01:
                return mid
            if share > self.pk:
                hi = mid - 1
            else:
                lo = mid + 1
        return -1

    def process(self, record: Record) -> list[Record | Suppressed]:
        """The outcome of ``record`` as a one-item list (the operator contract)."""
        return [self.process_one(record)]

    def process_one(self, record: Record) -> Record | Suppressed:
        """Re-tune z when due, then publish ``record`` or suppress it with the current z.

        A record the operator cannot take raises :class:`~streamanon.errors.BadRecordError`
        before anything changes (not even the z search runs).
        """
        record = self.core.clean(record)
        self.core.read += 1
        t = record.t
        if self.t_start is None:
            self.t_start = t
        dt = self.core.delta_t
        recent = self._recent
        while recent and t - recent[0][0] > dt:
            recent.popleft()
        if t - self.t_start >= dt and t - self.last_update >= self.rate:
            self.last_update = t
            found = self._search()
            if found != -1:
                self.core.z = found
            self.history.append((t, self.core.z))
        levels, counts = self.core.observe(t, record.u, record.a)
        recent.append((t, record.u, levels, counts))
        return self.core.outcome(record, levels, counts)

    def advance(self, now: float) -> list[Record | Suppressed]:
        """Nothing is held (zero delay); z is re-tuned only when a record arrives, as in zanon."""
        return []

    def flush(self) -> list[Record | Suppressed]:
        return []

    @property
    def read(self) -> int:
        return self.core.read

    @property
    def released(self) -> int:
        return self.core.released

    @property
    def suppressed(self) -> int:
        return self.core.suppressed

    @property
    def published_per_level(self) -> list[int]:
        return self.core.published_per_level

    def summary(self) -> dict[str, Any]:
        """The core's accounting, plus the current z and how often it was re-tuned."""
        return {**self.core.summary(), "z": self.z, "z_updates": len(self.history)}

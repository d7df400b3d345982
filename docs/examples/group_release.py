"""An example operator that honours streamanon's operator contract (docs: Operator contract).

tests/docs/test_operator_contract_example.py runs every conformance check on it.
"""

from __future__ import annotations

import math
from typing import Any

from streamanon.errors import BadValueError, MissingFieldError, TimeOrderError
from streamanon.records import Record, Suppressed


class GroupRelease:
    """Release the records of a value together once ``k`` distinct users hold it.

    A record waits until ``k`` distinct users have a held record of its value; then all of
    them are released at once. A record held longer than ``max_wait`` seconds, or still held
    at the end of the stream, is suppressed.

    >>> op = GroupRelease(k=2, max_wait=60)
    >>> op.process(Record(0, "alice", "Paris"))
    []
    >>> [r.u for r in op.process(Record(5, "bob", "Paris"))]
    ['alice', 'bob']
    >>> op.process(Record(6, "carol", "Lyon"))
    []
    >>> [s.record.u for s in op.advance(100)]
    ['carol']
    >>> op.summary()
    {'read': 3, 'released': 2, 'suppressed': 1, 'held': 0}
    """

    def __init__(self, *, k: int, max_wait: float) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self.max_wait = max_wait
        self.now = -math.inf
        self.held: dict[str, list[Record]] = {}
        self.read = self.released = self.suppressed = 0

    def process(self, record: Record) -> list[Any]:
        self._check(record)  # refuse before changing anything
        out = self.advance(record.t)
        self.read += 1
        group = self.held.setdefault(record.a, [])
        group.append(record)
        if len({r.u for r in group}) >= self.k:
            del self.held[record.a]
            self.released += len(group)
            out += group
        return out

    def advance(self, now: float) -> list[Any]:
        self.now = max(self.now, now)
        out: list[Any] = []
        for value in list(self.held):
            group = self.held[value]
            expired = [r for r in group if self.now - r.t > self.max_wait]
            if expired:
                self.held[value] = [r for r in group if self.now - r.t <= self.max_wait]
                if not self.held[value]:
                    del self.held[value]
                out += [Suppressed(r, "waited too long") for r in expired]
        self.suppressed += len(out)
        return out

    def flush(self) -> list[Any]:
        out = [Suppressed(r, "group too small") for g in self.held.values() for r in g]
        self.held.clear()
        self.suppressed += len(out)
        return out

    def summary(self) -> dict[str, Any]:
        held = sum(len(g) for g in self.held.values())
        return {"read": self.read, "released": self.released, "suppressed": self.suppressed,
                "held": held}

    def _check(self, record: Record) -> None:
        if not isinstance(record.t, (int, float)) or not math.isfinite(record.t):
            raise BadValueError("t", f"time {record.t!r} is not a finite number", record=record)
        if record.t < self.now:
            raise TimeOrderError("t", f"time {record.t} is behind the clock {self.now}",
                                 record=record)
        if not str(record.u).strip():
            raise MissingFieldError("u", record=record)
        if not isinstance(record.a, str) or not record.a:
            raise MissingFieldError("a", record=record)

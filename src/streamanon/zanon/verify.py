"""Independent checker for z-anonymity: recomputes the guarantee from the input alone.

It shares no code with :mod:`streamanon.zanon.operator` (only record parsing): counts come from
a sliding window of raw events per value (a multiset of users), not from per-user latest
times, so one bug cannot hide in both.

Two modes:

* ``exact`` (default): the output must be exactly what the rule publishes: same tuples, same
  order, each at its most specific level reaching z, and nothing the rule suppresses. Counts
  follow stream order (the current tuple included, later tuples excluded).
* privacy only (``exact=False``): every published ``(t, u, a')`` must match an input tuple of
  ``u`` at ``t`` whose value is ``a'`` or below it, and at least ``z`` distinct users exposed
  ``a'`` (or a value below it) at times in ``[t - Δt, t]`` of the input. This is the check for
  outputs of other publishers of the same guarantee (deZent, the Flink job).

>>> from streamanon.records import Record
>>> inp = [Record(0, "a", "x"), Record(1, "b", "x"), Record(2, "c", "y")]
>>> check_z(inp, [Record(1, "b", "x")], z=2, delta_t=10).ok
True
>>> report = check_z(inp, [Record(2, "c", "y")], z=2, delta_t=10)
>>> report.ok, report.privacy_violations
(False, 1)
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from streamanon.records import Record


def _prefixes(a: str, sep: str) -> list[str]:
    parts = a.split(sep)
    return [sep.join(parts[: i + 1]) for i in range(len(parts))]


class _Window:
    """Distinct users per value among events whose time is within Δt of the newest event."""

    def __init__(self, delta_t: float) -> None:
        self.delta_t = delta_t
        self.events: dict[str, deque[tuple[float, str]]] = defaultdict(deque)
        self.users: dict[str, Counter[str]] = defaultdict(Counter)

    def add(self, v: str, t: float, u: str) -> None:
        self.events[v].append((t, u))
        self.users[v][u] += 1

    def distinct(self, v: str, now: float) -> int:
        ev = self.events.get(v)
        if not ev:
            return 0
        users = self.users[v]
        while ev and now - ev[0][0] > self.delta_t:
            _, old = ev.popleft()
            users[old] -= 1
            if not users[old]:
                del users[old]
        return len(users)


@dataclass
class ZCheckReport:
    """What the checker found; ``ok`` when there is no violation and no mismatch."""

    z: int
    delta_t: float
    exact: bool
    input_tuples: int = 0
    output_tuples: int = 0
    expected_published: int | None = None
    privacy_violations: int = 0
    mismatches: int = 0
    unmatched: int = 0
    first_problem: str | None = None
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.privacy_violations or self.mismatches or self.unmatched)

    def _problem(self, text: str) -> None:
        if self.first_problem is None:
            self.first_problem = text
        if len(self.details) < 20:
            self.details.append(text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": {"z": self.z, "delta_t": self.delta_t, "exact": self.exact},
            "ok": self.ok,
            "input_tuples": self.input_tuples,
            "output_tuples": self.output_tuples,
            "expected_published": self.expected_published,
            "privacy_violations": self.privacy_violations,
            "mismatches": self.mismatches,
            "unmatched": self.unmatched,
            "first_problem": self.first_problem,
        }


def _where(r: Record) -> str:
    return f"line {r.line}" if r.line is not None else "tuple"


def check_z(
    inputs: Iterable[Record],
    outputs: Iterable[Record],
    z: int,
    delta_t: float,
    *,
    exact: bool = True,
    separator: str = "*",
) -> ZCheckReport:
    """Check ``outputs`` against the z rule recomputed on ``inputs`` (see module docstring)."""
    report = ZCheckReport(z=z, delta_t=delta_t, exact=exact)
    inputs = list(inputs)
    outputs = list(outputs)
    report.input_tuples = len(inputs)
    report.output_tuples = len(outputs)
    if exact:
        _check_exact(inputs, outputs, z, delta_t, separator, report)
    else:
        _check_privacy(inputs, outputs, z, delta_t, separator, report)
    return report


def _check_exact(
    inputs: list[Record], outputs: list[Record], z: int, dt: float, sep: str,
    report: ZCheckReport,
) -> None:
    window = _Window(dt)
    expected: list[tuple[Record, str]] = []
    # counts[(input index, level value)] for privacy classification of wrong outputs
    by_key: dict[tuple[float, str], list[int]] = defaultdict(list)
    level_counts: list[dict[str, int]] = []
    for i, r in enumerate(inputs):
        levels = _prefixes(r.a, sep)
        counts = {}
        for v in levels:
            window.add(v, r.t, r.u)
            counts[v] = window.distinct(v, r.t)
        level_counts.append(counts)
        by_key[(r.t, r.u)].append(i)
        reached = [v for v in levels if counts[v] >= z]
        if reached:
            expected.append((r, reached[-1]))
    report.expected_published = len(expected)
    for out in outputs:
        cands = [i for i in by_key.get((out.t, out.u), []) if out.a in level_counts[i]]
        if not cands:
            report.unmatched += 1
            report._problem(
                f"output {_where(out)}: ({out.time_text()}, {out.u}, {out.a}) matches no input "
                f"tuple of user {out.u} at that time with a value at or below {out.a!r}"
            )
            continue
        best = max(level_counts[i][out.a] for i in cands)
        if best < z:
            report.privacy_violations += 1
            report._problem(
                f"output {_where(out)}: ({out.time_text()}, {out.u}, {out.a}) published with "
                f"only {best} distinct user(s) exposing {out.a!r} within Δt={dt:g} (z={z})"
            )
    for j in range(max(len(expected), len(outputs))):
        exp = expected[j] if j < len(expected) else None
        out = outputs[j] if j < len(outputs) else None
        if exp is not None and out is not None:
            rec, val = exp
            if (rec.t, rec.u, val) == (out.t, out.u, out.a):
                continue
        report.mismatches += 1
        if exp is None:
            assert out is not None
            report._problem(
                f"output {_where(out)}: ({out.time_text()}, {out.u}, {out.a}) is extra: the "
                f"rule publishes only {len(expected)} tuple(s)"
            )
        elif out is None:
            rec, val = exp
            report._problem(
                f"input {_where(rec)}: ({rec.time_text()}, {rec.u}, {rec.a}) should be "
                f"published as {val!r} but the output ends after {len(outputs)} tuple(s)"
            )
        else:
            rec, val = exp
            report._problem(
                f"output row {j + 1} is ({out.time_text()}, {out.u}, {out.a}) but the rule "
                f"publishes input {_where(rec)} ({rec.time_text()}, {rec.u}, {rec.a}) as "
                f"{val!r} at that position"
            )


def _check_privacy(
    inputs: list[Record], outputs: list[Record], z: int, dt: float, sep: str,
    report: ZCheckReport,
) -> None:
    # which input tuples can each output row stand for (each input used at most once)
    unused: dict[tuple[float, str], list[Record]] = defaultdict(list)
    for r in inputs:
        unused[(r.t, r.u)].append(r)
    events = sorted(
        ((r.t, v, r.u) for r in inputs for v in _prefixes(r.a, sep)), key=lambda e: e[0]
    )
    window = _Window(dt)
    k = 0
    for out in sorted(outputs, key=lambda r: r.t):
        while k < len(events) and events[k][0] <= out.t:
            t, v, u = events[k]
            window.add(v, t, u)
            k += 1
        pool = unused.get((out.t, out.u), [])
        match = next((i for i, r in enumerate(pool) if out.a in _prefixes(r.a, sep)), None)
        if match is None:
            report.unmatched += 1
            report._problem(
                f"output {_where(out)}: ({out.time_text()}, {out.u}, {out.a}) matches no unused "
                f"input tuple of user {out.u} at that time with a value at or below {out.a!r}"
            )
            continue
        pool.pop(match)
        n = window.distinct(out.a, out.t)
        if n < z:
            report.privacy_violations += 1
            report._problem(
                f"output {_where(out)}: ({out.time_text()}, {out.u}, {out.a}) published with "
                f"only {n} distinct user(s) exposing {out.a!r} in [t-{dt:g}, t] (z={z})"
            )

"""The record model shared by every operator and adapter.

A z-anonymity stream is a sequence of :class:`Record` ``(t, u, a)``: at time ``t`` (seconds)
user ``u`` exposes attribute value ``a``. Each input record ends as exactly one of: published
(a :class:`Record`, possibly generalized), :class:`Suppressed` (counted), or :class:`Rejected`
(bad input, with its line number). :class:`RunStats` keeps that accounting honest.

>>> stats = RunStats()
>>> stats.count_read(3); stats.count_published(); stats.count_suppressed(); stats.count_rejected()
>>> stats.balanced
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Record:
    """One exposure: user ``u`` shows value ``a`` at time ``t`` (seconds).

    ``t_text`` keeps the timestamp as it was written in the input (e.g. ISO 8601), so that
    outputs repeat it verbatim; it does not take part in equality.
    """

    t: float
    u: str
    a: str
    t_text: str | None = field(default=None, compare=False, repr=False)
    line: int | None = field(default=None, compare=False, repr=False)

    def time_text(self) -> str:
        """The timestamp as the input wrote it, else the float's shortest repr."""
        return self.t_text if self.t_text is not None else repr(self.t)


@dataclass(frozen=True, slots=True)
class Suppressed:
    """An input record that the operator did not publish (and never will)."""

    record: Any
    reason: str = "below threshold"


@dataclass(frozen=True, slots=True)
class Rejected:
    """An input line that could not become a record; ``line`` is 1-based in its source."""

    line: int
    text: str
    reason: str

    def message(self, source: str = "input") -> str:
        snippet = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return f"{source}:{self.line}: {self.reason}: {snippet!r}"


@dataclass
class RunStats:
    """Accounting of one run: ``read == published + suppressed + rejected + held`` always
    holds.

    ``held`` counts records an operator still holds when a run stops before the end of its
    stream (a Kafka run stopped by a signal: CASTLE's open clusters; the next run releases or
    suppresses them); it is 0 at the end of a stream. ``details`` holds operator-specific
    breakdowns (e.g. publications per hierarchy level); ``params`` names the parameters of
    the run so every summary says what produced it.
    """

    read: int = 0
    published: int = 0
    suppressed: int = 0
    rejected: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    held: int = 0

    def count_read(self, n: int = 1) -> None:
        self.read += n

    def count_published(self, n: int = 1) -> None:
        self.published += n

    def count_suppressed(self, n: int = 1) -> None:
        self.suppressed += n

    def count_rejected(self, n: int = 1) -> None:
        self.rejected += n

    @property
    def balanced(self) -> bool:
        return self.read == self.published + self.suppressed + self.rejected + self.held

    def to_dict(self) -> dict[str, Any]:
        held = {"held": self.held} if self.held else {}
        return {
            "params": dict(self.params),
            "read": self.read,
            "published": self.published,
            "suppressed": self.suppressed,
            "rejected": self.rejected,
            **held,
            "balanced": self.balanced,
            **self.details,
        }

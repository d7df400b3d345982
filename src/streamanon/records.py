"""The record model shared by every operator and adapter.

A z-anonymity stream is a sequence of :class:`Record` ``(t, u, a)``: at time ``t`` (seconds)
user ``u`` exposes attribute value ``a``. Each input record ends as exactly one of: released
(a :class:`Record`, possibly generalized), :class:`Suppressed` (counted), or :class:`Rejected`
(bad input, with its line number). :class:`RunStats` keeps that accounting honest.

>>> stats = RunStats()
>>> stats.count_read(3); stats.count_released(); stats.count_suppressed(); stats.count_rejected()
>>> stats.balanced
True
"""

from __future__ import annotations

import warnings
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
    """An input record that the operator did not release (and never will)."""

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


#: Keys of the JSON summaries that were renamed, old name -> new name. The summaries
#: (``--json``, ``--summary FILE``) carry each old key next to its new one, with the same
#: value, for one release (deprecated; see CHANGELOG.md); the tables show only the new one.
DEPRECATED_KEYS: dict[str, str] = {
    "published": "released",
    "published_per_level": "released_per_level",
    "file_path_published": "file_path_released",
}
_OLD_KEY = {new: old for old, new in DEPRECATED_KEYS.items()}


def with_deprecated_keys(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with each deprecated key (:data:`DEPRECATED_KEYS`) right after its new
    one, same value (top level only).

    >>> with_deprecated_keys({"read": 3, "released": 2})
    {'read': 3, 'released': 2, 'published': 2}
    """
    out: dict[str, Any] = {}
    for key, value in summary.items():
        out[key] = value
        old = _OLD_KEY.get(key)
        if old is not None and old not in summary:
            out[old] = value
    return out


@dataclass
class RunStats:
    """Accounting of one run: ``read == released + suppressed + rejected + held`` always
    holds.

    ``held`` counts records an operator still holds when a run stops before the end of its
    stream (a Kafka run stopped by a signal: CASTLE's open clusters; the next run releases or
    suppresses them); it is 0 at the end of a stream. ``details`` holds operator-specific
    breakdowns (e.g. releases per hierarchy level); ``params`` names the parameters of
    the run so every summary says what produced it.

    :meth:`to_dict` (the JSON summaries) also carries the deprecated keys of
    :data:`DEPRECATED_KEYS` (``published``: the same number as ``released``) for one
    release; :attr:`published` and :meth:`count_published` are deprecated aliases of
    :attr:`released` and :meth:`count_released` (see CHANGELOG.md).

    >>> d = RunStats(read=2, released=1, suppressed=1).to_dict()
    >>> d["released"], d["published"]
    (1, 1)
    """

    read: int = 0
    released: int = 0
    suppressed: int = 0
    rejected: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    held: int = 0

    def count_read(self, n: int = 1) -> None:
        self.read += n

    def count_released(self, n: int = 1) -> None:
        self.released += n

    def count_published(self, n: int = 1) -> None:
        """Deprecated alias of :meth:`count_released` (kept for one release)."""
        warnings.warn("RunStats.count_published is deprecated: use count_released",
                      DeprecationWarning, stacklevel=2)
        self.count_released(n)

    @property
    def published(self) -> int:
        """Deprecated, read-only alias of :attr:`released` (kept for one release)."""
        warnings.warn("RunStats.published is deprecated: use released", DeprecationWarning,
                      stacklevel=2)
        return self.released

    def count_suppressed(self, n: int = 1) -> None:
        self.suppressed += n

    def count_rejected(self, n: int = 1) -> None:
        self.rejected += n

    @property
    def balanced(self) -> bool:
        return self.read == self.released + self.suppressed + self.rejected + self.held

    def to_dict(self) -> dict[str, Any]:
        held = {"held": self.held} if self.held else {}
        return with_deprecated_keys({
            "params": dict(self.params),
            "read": self.read,
            "released": self.released,
            "suppressed": self.suppressed,
            "rejected": self.rejected,
            **held,
            "balanced": self.balanced,
            **self.details,
        })

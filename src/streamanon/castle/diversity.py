"""The diversity rule a released CASTLE class must meet, one per sensitive attribute.

>>> Diversity("entropy", l=2).holds([3, 1]), Diversity("entropy", l=2).holds([2, 2])
(False, True)
>>> Diversity("recursive", l=2, c=2).holds([3, 2]), Diversity("recursive", l=2, c=1).holds([3, 2])
(True, False)

The definitions, next to the proof sketch of what CASTLE relies on: :class:`Diversity`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from streamanon.errors import ConfigError

DIVERSITIES = ("distinct", "entropy", "recursive")

#: Slack of the entropy test: a class of exactly l equally frequent values has entropy ln l,
#: which floating point may compute a hair below it.
ENTROPY_SLACK = 1e-9


class Diversity:
    """One rule, applied to the value counts of each sensitive attribute of a class.

    Let a class hold ``n`` tuples whose sensitive attribute takes ``m`` distinct values with
    counts ``r1 >= r2 >= ... >= rm`` (an absent value is no value).

    * ``distinct``: ``m >= l``.
    * ``entropy``: ``-sum (ri/n) ln (ri/n) >= ln l`` (Machanavajjhala et al., Def. 4.1).
    * ``recursive`` (c,l): ``r1 < c (r_l + r_{l+1} + ... + r_m)`` (Def. 4.2; false when
      ``m < l``: the sum is empty).

    ``l <= 1`` turns the rule off (every class holds). Each rule implies ``m >= l``.

    Proof sketch of what CASTLE relies on, *closure under union*: if classes X and Y each
    hold, X + Y holds (so the pool meeting the rule means merging every open cluster does,
    and two released clusters that generalize to the same values form a class that holds).
    Distinct: the value sets only grow. Entropy: entropy is concave, so
    H(aP + (1-a)Q) >= a H(P) + (1-a) H(Q) >= ln l. Recursive: write the rule as
    ``r1 + c S < c n`` with ``S`` the sum of the ``l-1`` largest counts; ``r1`` and ``S`` are
    maxima of sums over value subsets, hence subadditive, and ``n`` is additive, so the
    inequalities of X and Y add up to that of X + Y. None of the rules is closed under adding
    *single* tuples (a tuple of the most frequent value lowers the entropy), which is why the
    operator checks a class again whenever it grows by anything other than a class that holds.

    Args:
        measure: ``"distinct"``, ``"entropy"`` or ``"recursive"``.
        l: the l of the rule (``<= 1``: off).
        c: the c of the recursive rule (a number > 0; only for ``recursive``).
    """

    __slots__ = ("c", "l", "measure")

    def __init__(self, measure: str = "distinct", *, l: int, c: float | None = None  # noqa: E741
                 ) -> None:
        if measure not in DIVERSITIES:
            raise ConfigError(f"diversity must be one of {', '.join(DIVERSITIES)}, "
                              f"got {measure!r}")
        if measure == "recursive":
            if c is None or not (isinstance(c, int | float) and math.isfinite(c) and c > 0):
                raise ConfigError(f"recursive (c,l)-diversity needs c > 0, got {c!r}")
        elif c is not None:
            raise ConfigError(f"c is the recursive rule's; diversity = {measure!r} takes none")
        self.measure, self.l, self.c = measure, int(l), c

    @property
    def off(self) -> bool:
        """``l <= 1``: every class holds."""
        return self.l <= 1

    @property
    def distinct(self) -> bool:
        """The plain rule (``m >= l``): adding any tuple keeps it."""
        return self.measure == "distinct" or self.off

    def holds(self, counts: Collection[int]) -> bool:
        """Does one attribute whose values occur ``counts`` times (each > 0) meet the rule?"""
        if self.l <= 1:
            return True
        m = len(counts)
        if m < self.l:
            return False
        if self.measure == "distinct":
            return True
        n = sum(counts)
        if self.measure == "entropy":
            if n >= self.l * max(counts):  # min-entropy ln(n/r1) <= entropy: holds
                return True
            h = math.log(n) - sum(r * math.log(r) for r in counts) / n
            return h >= math.log(self.l) - ENTROPY_SLACK
        top = heapq.nlargest(self.l - 1, counts)  # r1 .. r_{l-1}
        return top[0] < self.c * (n - sum(top))  # type: ignore[operator]

    def shortfall(self, counts: Collection[int]) -> float:
        """How far one attribute is from the rule, to rank candidates (larger = further;
        not a test: use :meth:`holds`)."""
        if self.l <= 1:
            return 0.0
        m = len(counts)
        if self.measure == "distinct" or m < self.l:
            return float(self.l - m) + (1.0 if self.measure != "distinct" else 0.0)
        if self.measure == "entropy":
            n = sum(counts)
            h = math.log(n) - sum(r * math.log(r) for r in counts) / n
            return math.log(self.l) - ENTROPY_SLACK - h
        r = sorted(counts, reverse=True)
        n = sum(counts)
        return (r[0] - self.c * sum(r[self.l - 1:])) / n  # type: ignore[operator]

    def all_hold(self, per_attribute: Iterable[Mapping[Any, int]]) -> bool:
        """Does every attribute (value -> count) meet the rule?"""
        if self.l <= 1:
            return True
        return all(self.holds([v for v in cnt.values() if v > 0]) for cnt in per_attribute)

    def describe(self) -> dict[str, Any]:
        """The rule as data (summaries)."""
        out: dict[str, Any] = {"diversity": self.measure, "l": self.l}
        if self.c is not None:
            out["c"] = self.c
        return out


def value_counts(values: Sequence[Any]) -> list[int]:
    """The count of each distinct value of ``values`` (in first-seen order)."""
    seen: dict[Any, int] = {}
    for v in values:
        seen[v] = seen.get(v, 0) + 1
    return list(seen.values())


__all__ = ["DIVERSITIES", "ENTROPY_SLACK", "Diversity", "value_counts"]

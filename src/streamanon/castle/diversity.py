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

import numpy as np

from streamanon.errors import ConfigError

DIVERSITIES = ("distinct", "entropy", "recursive")
#: The ground distances of t-closeness: ``auto`` (ordered for numbers, else equal), ``equal``,
#: ``ordered`` and ``hierarchical`` (over a hierarchy of the sensitive values).
CLOSENESS_DISTANCES = ("auto", "equal", "ordered", "hierarchical")

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

    __slots__ = ("c", "closeness", "l", "measure")

    def __init__(self, measure: str = "distinct", *, l: int, c: float | None = None,  # noqa: E741
                 closeness: Closeness | None = None) -> None:
        if measure not in DIVERSITIES:
            raise ConfigError(f"diversity must be one of {', '.join(DIVERSITIES)}, "
                              f"got {measure!r}")
        if measure == "recursive":
            if c is None or not (isinstance(c, int | float) and math.isfinite(c) and c > 0):
                raise ConfigError(f"recursive (c,l)-diversity needs c > 0, got {c!r}")
        elif c is not None:
            raise ConfigError(f"c is the recursive rule's; diversity = {measure!r} takes none")
        self.measure, self.l, self.c = measure, int(l), c
        self.closeness = closeness

    @property
    def off(self) -> bool:
        """``l <= 1`` and no t-closeness: every class holds."""
        return self.l <= 1 and self.closeness is None

    @property
    def distinct(self) -> bool:
        """The plain rule (``m >= l``, no t-closeness): adding any tuple keeps it."""
        return (self.measure == "distinct" or self.l <= 1) and self.closeness is None

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

    def gap(self, per_attribute: Sequence[Mapping[Any, int]], names: Sequence[str] = ()
            ) -> float:
        """How far the attributes are from the rule, to rank candidates (the largest of
        :meth:`shortfall` and, with t-closeness, distance minus t)."""
        out = -math.inf
        for j, cnt in enumerate(per_attribute):
            if self.l > 1:
                out = max(out, self.shortfall([v for v in cnt.values() if v > 0]))
            if self.closeness is not None:
                out = max(out, self.closeness.distance(names[j], cnt) - self.closeness.t)
        return out

    def all_hold(self, per_attribute: Iterable[Mapping[Any, int]],
                 names: Sequence[str] = ()) -> bool:
        """Does every attribute (value -> count; ``names`` in the same order, for
        t-closeness) meet the rule?"""
        if self.off:
            return True
        close = self.closeness
        for j, cnt in enumerate(per_attribute):
            if self.l > 1 and not self.holds([v for v in cnt.values() if v > 0]):
                return False
            if close is not None and not close.holds(names[j], cnt):
                return False
        return True

    def describe(self) -> dict[str, Any]:
        """The rule as data (summaries)."""
        out: dict[str, Any] = {"diversity": self.measure, "l": self.l}
        if self.c is not None:
            out["c"] = self.c
        if self.closeness is not None:
            out["t"] = self.closeness.t
        return out


def _number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


class Closeness:
    """t-closeness: each class's distribution of a sensitive attribute lies within earth
    mover's distance ``t`` of a fixed reference distribution (Li et al., ICDE 2007).

    The distance over values (the ground distance) is, per attribute: *ordered* when every
    reference value is a number (values ``v1 < ... < vm`` of the reference, ``EMD = 1/(m-1)
    sum_{i<m} |F_P(v_i) - F_Q(v_i)|`` with F the cumulative shares; a class value between
    two reference values counts from the next one up, one above all of them counts beyond
    ``vm``), else *equal* (``EMD = 1/2 sum_v |p_v - q_v|``, total variation). The reference
    is fixed for the run (configured: the stream's distribution cannot be known before it
    ends). Closed under union (what CASTLE relies on, see :class:`Diversity`): for a fixed
    reference both distances are convex in the class's distribution (sums of absolute
    values of linear maps), so a mixture of two classes within t is within t.

    Args:
        t: the largest distance allowed (0 <= t <= 1).
        reference: per sensitive attribute, its values' weights (counts or shares).
    """

    __slots__ = ("_cdf", "_known", "_ordered", "_share", "_trees", "_values", "distance_kind",
                 "t")

    def __init__(self, t: float, reference: Mapping[str, Mapping[str, float]], *,
                 distance: str = "auto",
                 hierarchies: Mapping[str, Sequence[Sequence[str]]] | None = None) -> None:
        if not (isinstance(t, int | float) and 0 <= t <= 1):
            raise ConfigError(f"t must be a number in [0, 1], got {t!r}")
        if distance not in CLOSENESS_DISTANCES:
            raise ConfigError(f"closeness must be one of {', '.join(CLOSENESS_DISTANCES)}, "
                              f"got {distance!r}")
        self.t = float(t)
        self.distance_kind = distance
        self._share: dict[str, dict[str, float]] = {}
        self._ordered: dict[str, bool] = {}
        self._values: dict[str, np.ndarray] = {}
        self._cdf: dict[str, np.ndarray] = {}
        self._known: dict[str, float] = {}  # a class value's number, parsed once
        self._trees: dict[str, _Tree] = {}
        if distance != "hierarchical" and hierarchies:
            raise ConfigError("a sensitive attribute's hierarchy is for closeness = "
                              "'hierarchical'")
        for name, weights in reference.items():
            total = float(sum(weights.values()))
            if not weights or total <= 0 or min(weights.values()) < 0:
                raise ConfigError(f"t-closeness: the reference of {name!r} needs positive "
                                  "weights")
            share = {str(v): w / total for v, w in weights.items() if w > 0}
            self._share[name] = share
            if distance == "hierarchical":
                paths = (hierarchies or {}).get(name)
                if not paths:
                    raise ConfigError(f"hierarchical t-closeness needs a hierarchy of {name!r}")
                self._trees[name] = _Tree(name, paths, share)
                self._ordered[name] = False
                continue
            nums = {v: _number(v) for v in share}
            ordered = distance != "equal" and all(x is not None for x in nums.values())
            if distance == "ordered" and not ordered:
                raise ConfigError(f"ordered t-closeness needs numbers: the reference of "
                                  f"{name!r} has other values")
            self._ordered[name] = ordered
            if ordered:
                pairs = sorted((x, share[v]) for v, x in nums.items())  # type: ignore[misc]
                acc, cdf = 0.0, []
                for _, w in pairs:
                    acc += w
                    cdf.append(acc)
                self._values[name] = np.array([x for x, _ in pairs], dtype=np.float64)
                self._cdf[name] = np.array(cdf, dtype=np.float64)

    def attributes(self) -> list[str]:
        """The attributes that have a reference."""
        return list(self._share)

    def distance(self, name: str, counts: Mapping[str, int]) -> float:
        """The earth mover's distance of one attribute's class distribution (value -> count)
        to its reference."""
        n = sum(counts.values())
        if not n:
            return 1.0
        tree = self._trees.get(name)
        if tree is not None:
            return tree.distance(counts, n)
        if not self._ordered[name]:
            share = self._share[name]
            out = sum(abs(r - counts.get(v, 0) / n) for v, r in share.items())
            out += sum(q for v, q in counts.items() if v not in share) / n
            return out / 2
        values, cdf = self._values[name], self._cdf[name]
        m = len(values)
        known = self._known
        xs = np.array([known[v] if v in known else self._learn(v) for v in counts],
                      dtype=np.float64)
        if m == 1:
            return float(np.dot(xs != values[0], list(counts.values()))) / n
        qs = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
        order = np.argsort(xs, kind="stable")
        cum = np.concatenate(([0.0], np.cumsum(qs[order])))
        below = np.searchsorted(xs[order], values[:-1], side="right")  # class values <= v_i
        return float(np.abs(cdf[:-1] - cum[below] / n).sum()) / (m - 1)

    def _learn(self, v: str) -> float:
        x = _number(v)
        self._known[v] = out = math.inf if x is None else x
        return out

    def holds(self, name: str, counts: Mapping[str, int]) -> bool:
        """Is one attribute's class distribution within ``t`` of its reference?"""
        return self.distance(name, counts) <= self.t + 1e-12


class _Tree:
    """A sensitive attribute's hierarchy for the hierarchical ground distance of Li et al.:
    ``d(u, v) = (H - depth(lca(u, v))) / H`` (H: the deepest leaf's depth, the root at 0), and
    the EMD by their formula, bottom-up: at each inner node N, ``min(pos, neg) (H -
    depth N) / H`` with pos/neg the children's positive/negative surplus (class share minus
    reference share), the rest passed up. A value outside the hierarchy hangs under the root.
    """

    __slots__ = ("_depth_weight", "_index", "_levels", "_parent", "_ref")

    def __init__(self, name: str, paths: Sequence[Sequence[str]],
                 share: Mapping[str, float]) -> None:
        index: dict[tuple[str, ...], int] = {(): 0}
        parent, depth = [-1], [0]
        leaf: dict[str, int] = {}
        for path in paths:
            if isinstance(path, str) or not path:
                raise ConfigError(f"the hierarchy of {name!r}: each path is a list of names, "
                                  "root side first")
            for i in range(1, len(path) + 1):
                key = tuple(str(x) for x in path[:i])
                if key not in index:
                    index[key] = len(parent)
                    parent.append(index[key[:-1]])
                    depth.append(i)
            full = tuple(str(x) for x in path)
            if leaf.setdefault(full[-1], index[full]) != index[full]:
                raise ConfigError(f"the hierarchy of {name!r}: {full[-1]!r} is in two places")
        for key, i in index.items():  # an inner node's name stands for itself too
            if key and key[-1] not in leaf:
                leaf[key[-1]] = i
        h = max(depth) or 1
        self._index = leaf
        self._parent = parent
        self._depth_weight = [(h - d) / h for d in depth]
        self._levels = sorted(range(1, len(parent)), key=lambda i: -depth[i])
        self._ref = [0.0] * len(parent)
        outside = sum(w for v, w in share.items() if v not in leaf)
        for v, w in share.items():
            if v in leaf:
                self._ref[leaf[v]] += w
        self._ref[0] += outside  # reference values outside the hierarchy: at the root

    def distance(self, counts: Mapping[str, int], n: int) -> float:
        x = [-r for r in self._ref]
        for v, c in counts.items():
            x[self._index.get(v, 0)] += c / n
        m = len(x)
        pos, neg = [0.0] * m, [0.0] * m
        parent, weight = self._parent, self._depth_weight
        cost = 0.0
        for i in self._levels:  # deepest first: a node's children are done before it
            own = x[i]
            p, q = pos[i] + (own if own > 0 else 0.0), neg[i] + (-own if own < 0 else 0.0)
            cost += weight[i] * (p if p < q else q)
            e = p - q
            if e > 0:
                pos[parent[i]] += e
            else:
                neg[parent[i]] -= e
        own = x[0]
        p, q = pos[0] + (own if own > 0 else 0.0), neg[0] + (-own if own < 0 else 0.0)
        return cost + (p if p < q else q)


def reference_of(rows: Iterable[Mapping[str, Any]], names: Sequence[str]
                 ) -> dict[str, dict[str, int]]:
    """The reference distribution of each attribute of ``names`` in ``rows`` (value ->
    count, values as the operator identifies them; a missing value is no value)."""
    from streamanon.castle.records import canonical

    out: dict[str, dict[str, int]] = {n: {} for n in names}
    for row in rows:
        for n in names:
            v = row.get(n)
            if isinstance(v, str):
                v = v.strip()
            if v is None or v == "":
                continue
            key = canonical(v)
            out[n][key] = out[n].get(key, 0) + 1
    return out


def value_counts(values: Sequence[Any]) -> list[int]:
    """The count of each distinct value of ``values`` (in first-seen order)."""
    seen: dict[Any, int] = {}
    for v in values:
        seen[v] = seen.get(v, 0) + 1
    return list(seen.values())


__all__ = ["CLOSENESS_DISTANCES", "DIVERSITIES", "ENTROPY_SLACK", "Closeness", "Diversity",
           "reference_of", "value_counts"]

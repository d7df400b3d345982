"""Independent check of entropy and recursive (c,l)-diversity of a released table.

>>> rows = [{"age": "[30,34]", "dx": v} for v in ("flu", "flu", "cold", "cold")]
>>> check_diversity(rows, qi=["age"], sensitive=["dx"], measure="entropy", l=2).ok
True
>>> r = check_diversity(rows[1:], qi=["age"], sensitive=["dx"], measure="recursive", l=2, c=1)
>>> r.ok, r.first_problem
(False, "class {'age': '[30,34]'} fails recursive (1,2)-diversity of dx: counts [2, 1]")

Classes are the released rows equal on the quasi-identifiers (cells as text); a missing
sensitive value is no value. Written apart from the operator's rule
(:mod:`streamanon.castle.diversity`), from the definitions alone.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from streamanon.errors import ConfigError

MEASURES = ("distinct", "entropy", "recursive")
_SLACK = 1e-9  # l equally frequent values have entropy ln l, computed a hair below it


def _cell(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        x = float(value)
        return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)
    text = str(value).strip()
    return text or None


def _value(value: Any) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(float(value))
    return _cell(value)


def _class_counts(rows: Iterable[Mapping[str, Any]], qi: Sequence[str],
                  sensitive: Sequence[str]) -> dict[tuple[str | None, ...], list[Counter[str]]]:
    """Per class (its quasi-identifier cells), the counts of each sensitive column's values."""
    counts: dict[tuple[str | None, ...], list[Counter[str]]] = defaultdict(
        lambda: [Counter() for _ in sensitive])
    for row in rows:
        cls = counts[tuple(_cell(row.get(q)) for q in qi)]
        for i, s in enumerate(sensitive):
            v = _value(row.get(s))
            if v is not None:
                cls[i][v] += 1
    return counts


@dataclass(kw_only=True)
class _Tally:
    """The counts every check of classes reports: classes seen, violating classes, the worst
    figure per attribute and the first problem found."""

    classes: int = 0
    violations: int = 0
    worst: dict[str, float] = field(default_factory=dict)
    first_problem: str | None = None

    @property
    def ok(self) -> bool:
        return not self.violations

    def _tally(self) -> dict[str, Any]:
        return {"ok": self.ok, "classes": self.classes, "violations": self.violations,
                "worst": dict(self.worst), "first_problem": self.first_problem}


@dataclass
class DiversityReport(_Tally):
    """What the check found: ``ok`` when every class meets the rule on every attribute.

    ``worst`` per attribute: for ``entropy`` the smallest ``exp(H)`` of a class (its
    "effective l"), for ``recursive`` the largest ``r1 / (r_l + ... + r_m)`` (the rule holds
    when c exceeds it), for ``distinct`` the fewest values.
    """

    measure: str
    l: int  # noqa: E741
    c: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"measure": self.measure, "l": self.l, "c": self.c, **self._tally()}


def _entropy(counts: Sequence[int]) -> float:
    n = sum(counts)
    return -sum((r / n) * math.log(r / n) for r in counts)


def _tail_ratio(counts: Sequence[int], l: int) -> float:  # noqa: E741
    r = sorted(counts, reverse=True)
    tail = sum(r[l - 1:])
    return r[0] / tail if tail else math.inf


def check_diversity(rows: Iterable[Mapping[str, Any]], *, qi: Sequence[str],
                    sensitive: Sequence[str], measure: str, l: int,  # noqa: E741
                    c: float | None = None) -> DiversityReport:
    """Check every class of ``rows`` against the diversity rule, from the rows alone.

    Args:
        rows: the released rows (column -> cell).
        qi: the quasi-identifier columns (they define the classes).
        sensitive: the sensitive columns (each checked on its own).
        measure: ``distinct``, ``entropy`` (entropy >= ln l) or ``recursive``
            (r1 < c (r_l + ... + r_m), counts in decreasing order).
        l: the l of the rule (``<= 1``: every class holds).
        c: the c of the recursive rule.
    """
    if measure not in MEASURES:
        raise ConfigError(f"diversity must be one of {', '.join(MEASURES)}, got {measure!r}")
    if measure == "recursive" and (c is None or not c > 0):
        raise ConfigError("recursive (c,l)-diversity needs c > 0")
    report = DiversityReport(measure, int(l), c)
    counts = _class_counts(rows, qi, sensitive)
    report.classes = len(counts)
    for key, per in counts.items():
        for s, cnt in zip(sensitive, per, strict=True):
            rs = sorted(cnt.values(), reverse=True)
            if measure == "distinct":
                score, fails = float(len(rs)), len(rs) < l
            elif measure == "entropy":
                h = _entropy(rs) if rs else 0.0
                score, fails = math.exp(h), h < math.log(max(l, 1)) - _SLACK
            else:
                score = _tail_ratio(rs, l) if rs and l > 1 else 0.0
                fails = not rs or not rs[0] < c * sum(rs[l - 1:])  # type: ignore[operator]
            fails = fails and l > 1
            better = max if measure == "recursive" else min
            report.worst[s] = round(better(report.worst.get(s, score), score), 6)
            if fails:
                report.violations += 1
                if report.first_problem is None:
                    name = (f"recursive ({c:g},{l})-diversity" if measure == "recursive"
                            else f"{measure} {l}-diversity")
                    report.first_problem = (f"class {dict(zip(qi, key, strict=True))} fails "
                                            f"{name} of {s}: counts {rs}")
    return report


def check_diversity_file(output: str | Path | TextIO, *, qi: Sequence[str],
                         sensitive: Sequence[str], measure: str, l: int,  # noqa: E741
                         c: float | None = None, fmt: str | None = None) -> DiversityReport:
    """:func:`check_diversity` on a released file read by the checkers' own reader.

    Args:
        output: the released rows' file (CSV with a header, or JSON Lines).
        qi: the quasi-identifier columns.
        sensitive: the sensitive columns.
        measure: ``distinct``, ``entropy`` or ``recursive``.
        l: the l of the rule.
        c: the c of the recursive rule.
        fmt: ``csv`` or ``jsonl`` (``None``: from the name).
    """
    from streamanon.verify.castle import read_released

    rows, _ = read_released(output, fmt)
    return check_diversity((r for _, r in rows), qi=qi, sensitive=sensitive, measure=measure,
                           l=l, c=c)


@dataclass
class ClosenessReport(_Tally):
    """t-closeness of every class: ``worst`` per attribute is the largest earth mover's
    distance of a class to the reference; ``ok`` when none exceeds t."""

    t: float
    ground: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t, "ground_distance": dict(self.ground), **self._tally()}


def _as_number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


#: The ground distances the closeness check knows (``auto``: ordered for numbers, else equal).
GROUNDS = ("auto", "equal", "ordered", "hierarchical")


class _Hierarchy:
    """The hierarchical ground distance ``d(u, v) = (H - depth(lca)) / H`` (Li et al.) as a
    tree metric: an edge from node N down to child C weighs ``(h(N) - h(C)) / 2`` with ``h``
    = ``(H - depth) / H`` and ``h = 0`` at a leaf, so two leaves are ``h(lca)`` apart; the
    EMD on a tree is then ``sum over edges of weight x |class share - reference share below
    the edge|``. A value that is no node of the hierarchy hangs under the root as a leaf; an
    inner node's name stands for a leaf under that node."""

    def __init__(self, paths: Sequence[Sequence[Any]]) -> None:
        nodes: set[tuple[str, ...]] = set()
        for path in paths:
            names = tuple(str(x) for x in path)
            nodes.update(names[:i] for i in range(1, len(names) + 1))
        inner = {n[:-1] for n in nodes if len(n) > 1}
        height = max((len(n) for n in nodes), default=1)
        self.h = height
        self.where: dict[str, tuple[str, ...]] = {}
        for n in sorted(nodes, key=len):
            self.where.setdefault(n[-1], n)
        # the edges above each leaf-like point: (node tuple) -> weight of the edge into it
        self.inner = inner

    def _point(self, value: str) -> tuple[tuple[str, ...], bool]:
        """Where ``value`` sits: its node and whether it is a leaf (a value at an inner node
        or outside the hierarchy is a leaf child of that node, or of the root)."""
        node = self.where.get(value)
        if node is None:
            return (), False
        return node, node not in self.inner

    def emd(self, p: Mapping[str, float], q: Mapping[str, float]) -> float:
        below: dict[tuple[str, ...], float] = defaultdict(float)  # node -> (p - q) under it
        extra: dict[tuple[str, ...], float] = defaultdict(float)  # leaf child of an inner
        for share, sign in ((p, 1.0), (q, -1.0)):
            for v, w in share.items():
                node, is_leaf = self._point(v)
                if not is_leaf:
                    extra[node] += sign * w
                for i in range(1, len(node) + 1):
                    below[node[:i]] += sign * w
        h = self.h

        def height(node: tuple[str, ...], leaf: bool) -> float:
            return 0.0 if leaf else (h - len(node)) / h

        out = 0.0
        for node, diff in below.items():  # the edge from node's parent down to node
            up = height(node[:-1], False)
            out += (up - height(node, node not in self.inner)) / 2 * abs(diff)
        for node, diff in extra.items():  # the edge from an inner node to its own value
            out += height(node, False) / 2 * abs(diff)
        return out


class _Reference:
    """One attribute's reference, prepared once: ordered (sorted numbers and their shares)
    when every value is a number, else equal distance over its values' shares, or the
    hierarchical distance over ``paths``."""

    def __init__(self, ref: Mapping[str, float], ground: str = "auto",
                 paths: Sequence[Sequence[Any]] | None = None) -> None:
        total = sum(ref.values())
        self.share = {v: w / total for v, w in ref.items()}
        self.tree = _Hierarchy(paths) if ground == "hierarchical" and paths else None
        numbers = {v: _as_number(v) for v in ref}
        self.ordered = self.tree is None and ground != "equal" and all(
            x is not None for x in numbers.values())
        if ground == "ordered" and not self.ordered:
            raise ConfigError("ordered t-closeness needs a reference of numbers")
        if self.ordered:
            order = sorted(ref, key=lambda v: numbers[v])  # type: ignore[arg-type, return-value]
            self.points = np.array([numbers[v] for v in order], dtype=np.float64)
            self.p = np.array([self.share[v] for v in order], dtype=np.float64)

    def emd(self, counts: Counter[str]) -> float:
        """Earth mover's distance of a class (value -> count): Li et al.'s formulas, ordered
        (``1/(m-1) sum_{i<m} |sum_{j<=i} p_j - q_j|``, a class value counting at the first
        reference value >= it) or equal (``1/2 sum |p_v - q_v|``)."""
        n = sum(counts.values())
        if not n:
            return 1.0
        if self.tree is not None:
            return self.tree.emd({v: c / n for v, c in counts.items()}, self.share)
        if not self.ordered:
            keys = set(self.share) | set(counts)
            return 0.5 * sum(abs(self.share.get(v, 0.0) - counts.get(v, 0) / n) for v in keys)
        m = len(self.points)
        xs = np.array([math.inf if (x := _as_number(v)) is None else x for v in counts])
        w = np.array(list(counts.values()), dtype=np.float64) / n
        if m == 1:
            return float(w[xs != self.points[0]].sum())
        q = np.bincount(np.searchsorted(self.points, xs, side="left"), weights=w,
                        minlength=m + 1)
        return float(np.abs(np.cumsum(self.p[:-1] - q[:m - 1])).sum()) / (m - 1)


def check_closeness(rows: Iterable[Mapping[str, Any]], *, qi: Sequence[str],
                    sensitive: Sequence[str], t: float,
                    reference: Mapping[str, Mapping[str, float]], ground: str = "auto",
                    hierarchies: Mapping[str, Sequence[Sequence[Any]]] | None = None
                    ) -> ClosenessReport:
    """Check that every class of ``rows`` is within earth mover's distance ``t`` of the
    reference, per sensitive attribute.

    Args:
        rows: the released rows (column -> cell).
        qi: the quasi-identifier columns (they define the classes).
        sensitive: the sensitive columns.
        t: the largest distance allowed.
        reference: per sensitive column, its values' counts (:func:`reference_from_rows`).
        ground: the ground distance (:data:`GROUNDS`).
        hierarchies: with ``ground="hierarchical"``: per sensitive column, its hierarchy's
            paths (root side first; :func:`read_hierarchies`).
    """
    missing = [s for s in sensitive if s not in reference]
    if missing:
        raise ConfigError(f"t-closeness: no reference for {', '.join(missing)}")
    if ground not in GROUNDS:
        raise ConfigError(f"t-closeness: the ground distance is one of {', '.join(GROUNDS)}")
    if ground == "hierarchical":
        missing = [s for s in sensitive if not (hierarchies or {}).get(s)]
        if missing:
            raise ConfigError(f"hierarchical t-closeness: no hierarchy of {', '.join(missing)}")
    report = ClosenessReport(float(t))
    counts = _class_counts(rows, qi, sensitive)
    report.classes = len(counts)
    refs = {s: _Reference(reference[s], ground, (hierarchies or {}).get(s)) for s in sensitive}
    for s in sensitive:
        report.ground[s] = ("hierarchical" if refs[s].tree is not None else
                            "ordered" if refs[s].ordered else "equal")
    for key, per in counts.items():
        for s, cnt in zip(sensitive, per, strict=True):
            d = refs[s].emd(cnt)
            report.worst[s] = round(max(report.worst.get(s, 0.0), d), 9)
            if d > t + 1e-9:
                report.violations += 1
                if report.first_problem is None:
                    report.first_problem = (f"class {dict(zip(qi, key, strict=True))}: "
                                            f"{s} at distance {d:.4f} of the reference, "
                                            f"t = {t:g}")
    return report


def reference_from_rows(rows: Iterable[Mapping[str, Any]], sensitive: Sequence[str]
                        ) -> dict[str, dict[str, int]]:
    """Per sensitive column, the count of each of its values in ``rows`` (the reference)."""
    out: dict[str, dict[str, int]] = {s: {} for s in sensitive}
    for row in rows:
        for s in sensitive:
            v = _value(row.get(s))
            if v is not None:
                out[s][v] = out[s].get(v, 0) + 1
    return out


def read_hierarchies(path: str | Path) -> dict[str, list[list[str]]]:
    """The hierarchies of a TOML file: a table per sensitive column with its ``paths``."""
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    out: dict[str, list[list[str]]] = {}
    for name, table in data.items():
        paths = table.get("paths") if isinstance(table, dict) else None
        if not isinstance(paths, list) or not all(isinstance(p, list) and p for p in paths):
            raise ConfigError(f"{path}: [{name}] needs paths = [[...], ...]")
        out[name] = [[str(x) for x in p] for p in paths]
    return out


def read_rows(source: str | Path | TextIO, fmt: str | None = None) -> list[dict[str, Any]]:
    """The rows of a file as the checkers read them (CSV with a header, or JSON Lines)."""
    from streamanon.verify.castle import read_released

    return [r for _, r in read_released(source, fmt)[0]]


__all__ = ["GROUNDS", "MEASURES", "ClosenessReport", "DiversityReport", "check_closeness",
           "check_diversity", "check_diversity_file", "read_hierarchies", "read_rows",
           "reference_from_rows"]

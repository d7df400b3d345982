"""Independent checker of CASTLE's guarantee, recomputed from the released rows alone.

It shares nothing with the operator beyond row parsing: an equivalence class is the set of
released rows with equal quasi-identifier values (as written); each class must hold ``>= k``
distinct individuals and, for every sensitive attribute, ``>= l`` distinct values. Given the
input rows too, every released row must also stand for its own input row: same individual,
same sensitive and pass-through values, each numeric ``[lo,hi]`` containing the input value
and each ``*``-masked value matching its input's prefix (hierarchy nodes are not checked
against a tree, the checker does not know it).

>>> out = [{"u": "a", "age": "[30,34]", "dx": "flu"}, {"u": "b", "age": "[30,34]", "dx": "cold"}]
>>> check_castle(out, "u", ["age"], ["dx"], k=2, l=2).ok
True
>>> r = check_castle(out, "u", ["age"], ["dx"], k=3)
>>> r.ok, r.k_violations
(False, 1)
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_RANGE = re.compile(r"^\[\s*([^,\]]+)\s*,\s*([^,\]]+)\s*\]$")


def _key(value: Any) -> str:
    """Identity of a written value: numbers by value, booleans as JSON, the rest as text."""
    if value is True or value is False:
        return str(value).lower()
    if isinstance(value, int | float):
        return repr(float(value))
    return "" if value is None else str(value)


@dataclass
class CastleCheckReport:
    """What the checker found; ``ok`` when every class meets k and l (and rows match)."""

    k: int
    l: int  # noqa: E741
    rows: int = 0
    classes: int = 0
    min_individuals: int | None = None
    min_diversity: dict[str, int] = field(default_factory=dict)
    k_violations: int = 0
    l_violations: int = 0
    unmatched: int = 0
    first_problem: str | None = None

    @property
    def ok(self) -> bool:
        return not (self.k_violations or self.l_violations or self.unmatched)

    def problem(self, text: str) -> None:
        if self.first_problem is None:
            self.first_problem = text

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": {"k": self.k, "l": self.l},
            "ok": self.ok,
            "rows": self.rows,
            "classes": self.classes,
            "min_individuals": self.min_individuals,
            "min_diversity": dict(self.min_diversity),
            "k_violations": self.k_violations,
            "l_violations": self.l_violations,
            "unmatched": self.unmatched,
            "first_problem": self.first_problem,
        }


def check_castle(
    rows: Iterable[Mapping[str, Any]],
    id_field: str,
    qi: Sequence[str],
    sa: Sequence[str] = (),
    *,
    k: int,
    l: int = 0,  # noqa: E741
    inputs: Iterable[Mapping[str, Any]] | None = None,
) -> CastleCheckReport:
    """Check k_s-anonymity and l-diversity of released ``rows`` (see module docstring)."""
    report = CastleCheckReport(k=k, l=l)
    rows = list(rows)
    report.rows = len(rows)
    people: dict[tuple[str, ...], set[str]] = defaultdict(set)
    values: dict[tuple[str, ...], list[set[str]]] = defaultdict(lambda: [set() for _ in sa])
    for row in rows:
        cls = tuple(_key(row.get(q)) for q in qi)
        people[cls].add(_key(row.get(id_field)))
        for i, s in enumerate(sa):
            values[cls][i].add(_key(row.get(s)))
    report.classes = len(people)
    for cls, ids in people.items():
        shown = dict(zip(qi, cls, strict=True))
        n = len(ids)
        report.min_individuals = n if report.min_individuals is None else min(
            report.min_individuals, n)
        if n < k:
            report.k_violations += 1
            report.problem(f"class {shown} has {n} distinct individual(s), k = {k}")
        for i, s in enumerate(sa):
            d = len(values[cls][i])
            report.min_diversity[s] = min(report.min_diversity.get(s, d), d)
            if l > 1 and d < l:
                report.l_violations += 1
                report.problem(f"class {shown} has {d} distinct value(s) of {s}, l = {l}")
    if inputs is not None:
        _match(rows, list(inputs), id_field, qi, report)
    return report


def _covers(shown: Any, original: Any) -> bool:
    if _key(shown) == _key(original):
        return True
    text = "" if shown is None else str(shown)
    m = _RANGE.match(text)
    if m:
        try:
            lo, hi, x = float(m.group(1)), float(m.group(2)), float(original)
        except (TypeError, ValueError):
            return False
        return lo <= x <= hi
    if text and not text.strip("*"):
        return True  # fully masked, or the root of a hierarchy named "*"
    if text.endswith("*"):
        prefix = text.rstrip("*")
        orig = _key(original)
        return orig.startswith(prefix) and len(orig) <= len(text)
    return True  # a hierarchy node: needs the tree, not checked here


def _match(rows: list[Mapping[str, Any]], inputs: list[Mapping[str, Any]], id_field: str,
           qi: Sequence[str], report: CastleCheckReport) -> None:
    qset = set(qi)
    if not rows:
        return
    cols = [c for c in rows[0] if c not in qset and any(c in r for r in inputs[:1])]
    if id_field not in cols:
        cols.insert(0, id_field)
    pool: dict[tuple[str, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for r in inputs:
        pool[tuple(_key(r.get(c)) for c in cols)].append(r)
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for n, row in enumerate(rows):
        groups[tuple(_key(row.get(c)) for c in cols)].append(n)
    for key, outs in groups.items():
        cands = pool.get(key, [])
        edges = [[i for i, r in enumerate(cands)
                  if all(_covers(rows[n].get(q), r.get(q)) for q in qi)] for n in outs]
        owner = _matching(edges, len(cands))
        matched = set(owner.values())
        for j, n in enumerate(outs):
            if j not in matched:
                report.unmatched += 1
                report.problem(f"released row {n + 1} stands for no unused input row: "
                               f"{dict(rows[n])}")


def _matching(edges: list[list[int]], n_right: int) -> dict[int, int]:
    """Maximum bipartite matching (Kuhn): output row j -> input index; returns input -> j."""
    owner: dict[int, int] = {}
    for j in range(len(edges)):
        seen: set[int] = set()
        stack = [(j, iter(edges[j]))]
        path: list[tuple[int, int]] = []
        while stack:
            left, it = stack[-1]
            nxt = next((i for i in it if i not in seen), None)
            if nxt is None:
                stack.pop()
                if path:
                    path.pop()
                continue
            seen.add(nxt)
            path.append((left, nxt))
            if nxt not in owner:
                for a, b in path:
                    owner[b] = a
                break
            stack.append((owner[nxt], iter(edges[owner[nxt]])))
    return owner

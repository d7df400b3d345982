"""The intersection attack on a released stream, as an outside observer with the files only.

An individual released many times (CASTLE: in a new cluster each time) shows each release's
generalization of its quasi-identifiers; an attribute that does not change (a building's floor
area) must lie in every one, so their intersection narrows it below any single release.
:func:`intersect` measures that per attribute (the intersected width relative to the widest
single release; numeric ranges ``[lo,hi]``, hierarchy nodes as their sets of leaves given the
rules' tree) and per individual (how many individuals of the class it was first released in
stay compatible with its intersection). Nothing of the operator is used: values and rules are
parsed here (design: docs/privacy-models.md).

>>> rows = [{"u": "a", "x": "[0,10]"}, {"u": "a", "x": "[5,20]"}, {"u": "b", "x": "[0,10]"}]
>>> r = intersect(rows, id_field="u", attributes=[Attribute("x")])
>>> round(r.attributes["x"].median, 3), r.attributes["x"].narrowed, r.repeated
(0.333, 1.0, 1)
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamanon.errors import ConfigError

__all__ = ["Attribute", "AttributeExposure", "Exposure", "attributes_from_rules", "intersect",
           "parse_interval"]

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf"
_INTERVAL = re.compile(rf"^\[\s*({_NUMBER})\s*[,-]\s*({_NUMBER})\s*\]$")  # [lo,hi], [lo-hi]
_PLAIN = re.compile(rf"^({_NUMBER})$")


def parse_interval(text: Any) -> tuple[float, float] | None:
    """A released numeric value as ``(lo, hi)``: a range ``[lo,hi]`` (as CASTLE writes it) or
    ``[lo-hi]`` (as other tools do), or a plain number as ``(x, x)``; None for anything else
    (``[*]``, empty, a category).

    >>> parse_interval("[1.5,3]"), parse_interval("7"), parse_interval("[*]")
    ((1.5, 3.0), (7.0, 7.0), None)
    >>> parse_interval("[-9.4--3.7]"), parse_interval("[30-34]")
    ((-9.4, -3.7), (30.0, 34.0))
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        x = float(text)
        return (x, x) if math.isfinite(x) else None
    if not isinstance(text, str):
        return None
    text = text.strip()
    m = _INTERVAL.match(text)
    if m:
        lo, hi = float(m.group(1)), float(m.group(2))
        return (lo, hi) if lo <= hi and math.isfinite(hi - lo) else None
    m = _PLAIN.match(text)
    if m:
        x = float(m.group(1))
        return (x, x) if math.isfinite(x) else None
    return None


@dataclass
class Attribute:
    """One attacked quasi-identifier: numeric (ranges) unless ``leaves`` maps its hierarchy's
    nodes to their sets of leaves."""

    name: str
    leaves: Mapping[str, frozenset[str]] | None = None
    #: declared constant per individual (the rules' ``static = true``, ``--static``): the
    #: release claims each later generalization covers the first one
    static: bool = False

    @property
    def kind(self) -> str:
        return "numeric" if self.leaves is None else "hierarchy"


def _leaf_sets(parent: Mapping[str, str | None]) -> dict[str, frozenset[str]]:
    children: dict[str, list[str]] = {}
    for node, up in parent.items():
        if up is not None:
            children.setdefault(up, []).append(node)
    out: dict[str, frozenset[str]] = {}

    def leaves(node: str) -> frozenset[str]:
        if node not in out:
            kids = children.get(node)
            out[node] = (frozenset().union(*map(leaves, kids)) if kids
                         else frozenset((node,)))
        return out[node]

    for node in parent:
        leaves(node)
    return out


def _outline(text: str, root: str | None) -> dict[str, str | None]:
    entries = [(len(raw) - len(raw.lstrip(" ")), raw.strip()) for raw in text.splitlines()
               if raw.strip() and not raw.lstrip().startswith("#")]
    top = [name for depth, name in entries if entries and depth == entries[0][0]]
    base = root or (top[0] if len(top) == 1 else "*")
    parent: dict[str, str | None] = {base: None}
    stack: list[tuple[int, str]] = []
    for depth, name in entries:
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if name != base:
            parent.setdefault(name, stack[-1][1] if stack else base)
        stack.append((depth, name))
    return parent


def attributes_from_rules(path: str | Path) -> tuple[str, list[Attribute]]:
    """The id column and the quasi-identifiers of a CASTLE rules file, read here: range (and
    plug-in) attributes as numeric, hierarchies with their trees (``paths`` or a ``tree``
    outline file beside the rules); reduction masks are not attacked."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    id_field = data.get("id")
    if not isinstance(id_field, str):
        raise ConfigError(f'{path}: the rules need id = "<column>"')
    attrs = []
    for spec in data.get("attribute", []):
        kind = spec.get("generalizer")
        if spec.get("sensitive") is True or kind in (None, "none", "reduction"):
            continue
        static = spec.get("static") is True
        if kind != "hierarchy":
            attrs.append(Attribute(spec["name"], static=static))
            continue
        root = spec.get("root")
        if spec.get("tree") is not None:
            file = Path(spec["tree"])
            parent = _outline((file if file.is_absolute() else path.parent / file)
                              .read_text(encoding="utf-8"), root)
        else:
            parent = {root or "*": None}
            for p in spec.get("paths") or []:
                names = [str(x) for x in p]
                if names and names[0] == (root or "*"):
                    names = names[1:]
                up = root or "*"
                for name in names:
                    parent.setdefault(name, up)
                    up = name
        attrs.append(Attribute(spec["name"], _leaf_sets(parent), static=static))
    return id_field, attrs


def _quantiles(values: np.ndarray) -> dict[str, float | None]:
    if not len(values):
        return {"median": None, "p10": None, "p90": None}
    q = np.quantile(values, [0.5, 0.1, 0.9])
    return {"median": float(q[0]), "p10": float(q[1]), "p90": float(q[2])}


@dataclass
class AttributeExposure:
    """One attribute over the individuals released at least twice with a non-empty
    intersection: ``ratio`` quantiles (intersected width / widest single release; 1 = the
    intersection shows nothing more, 0 = pinned to a point or a leaf), ``narrowed`` (share
    whose intersection is narrower than their first release), ``varying`` (share of
    individuals released twice or more whose releases do not intersect: the attribute
    changes over time for them, and the attack does not apply). ``static``: declared
    constant (the release claims to bound it); ``first``: quantiles of the intersected width
    over the first release's (1 = nothing learned beyond the first release, which is what
    the static bound promises)."""

    kind: str
    individuals: int
    median: float | None
    p10: float | None
    p90: float | None
    narrowed: float
    pinned: float
    varying: float
    constant: float | None = None
    contains_input: float | None = None
    static: bool = False
    first: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Exposure:
    """The attack's result: per attribute, and per individual the share whose candidates
    (individuals of the class it was first released in whose intersections stay compatible
    with its own, on the attributes that intersect) are fewer than that class held."""

    rows: int
    individuals: int
    repeated: int
    attributes: dict[str, AttributeExposure]
    below_first_class: float
    candidates: dict[str, float | None] = field(default_factory=dict)
    below_k: float | None = None
    k: int | None = None
    #: with static attributes: the narrowing below the first release, on the static
    #: attributes and on the others side by side (:func:`intersect`)
    static: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "individuals": self.individuals,
                "released_twice_or_more": self.repeated,
                "below_first_class": self.below_first_class, "candidates": self.candidates,
                **({"k": self.k, "below_k": self.below_k} if self.k is not None else {}),
                **({"static": self.static} if self.static is not None else {}),
                "attributes": {n: a.to_dict() for n, a in self.attributes.items()}}


def _numeric(values: list[Any], ind: np.ndarray, n_ind: int, first: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per individual: intersected (lo, hi), widest single width, first width, releases."""
    lo = np.full(len(values), np.nan)
    hi = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        p = parse_interval(v)
        if p is not None:
            lo[i], hi[i] = p
    ok = ~np.isnan(lo)
    i_lo = np.full(n_ind, -np.inf)
    i_hi = np.full(n_ind, np.inf)
    widest = np.zeros(n_ind)
    np.maximum.at(i_lo, ind[ok], lo[ok])
    np.minimum.at(i_hi, ind[ok], hi[ok])
    np.maximum.at(widest, ind[ok], (hi - lo)[ok])
    count = np.bincount(ind[ok], minlength=n_ind)
    first_width = np.where(ok[first], (hi - lo)[first], np.nan)
    return i_lo, i_hi, widest, first_width, count


def intersect(rows: Iterable[Mapping[str, Any]], *, id_field: str,
              attributes: Sequence[Attribute], k: int | None = None,
              inputs: Iterable[Mapping[str, Any]] | None = None) -> Exposure:
    """Intersect each individual's released generalizations and measure how far they narrow.

    Args:
        rows: the released rows, in release order (values as released: text or numbers).
        id_field: the column naming the individual.
        attributes: the quasi-identifiers to attack (:func:`attributes_from_rules`).
        k: also count the individuals left with fewer than ``k`` compatible candidates.
        inputs: the rows the release was made from, for what the attacker cannot see: which
            attributes are constant per individual, and whether each intersection holds the
            true value.

    Returns:
        The :class:`Exposure`: per attribute and per individual.
    """
    ids: list[str] = []
    cols: dict[str, list[Any]] = {a.name: [] for a in attributes}
    for number, row in enumerate(rows, start=1):
        if id_field not in row:
            raise ConfigError(f"released row {number}: no column {id_field!r}")
        ids.append(str(row[id_field]))
        for a in attributes:
            if a.name not in row:
                raise ConfigError(f"released row {number}: no column {a.name!r}")
            cols[a.name].append(row[a.name])
    codes: dict[str, int] = {}
    ind = np.array([codes.setdefault(u, len(codes)) for u in ids], dtype=np.int64)
    n_ind = len(codes)
    first = np.full(n_ind, len(ind), dtype=np.int64)
    np.minimum.at(first, ind, np.arange(len(ind)))
    boxes: dict[str, Any] = {}
    result: dict[str, AttributeExposure] = {}
    # per individual: narrowed below its first release on a static / another attribute
    below_first = {True: np.zeros(n_ind, dtype=bool), False: np.zeros(n_ind, dtype=bool)}
    for a in attributes:
        values = cols[a.name]
        if a.leaves is None:
            i_lo, i_hi, widest, first_width, count = _numeric(values, ind, n_ind, first)
            consistent = i_lo <= i_hi
            width = np.where(consistent, i_hi - i_lo, np.nan)
            boxes[a.name] = (consistent, i_lo, i_hi)
        else:
            sets: list[frozenset[str] | None] = [None] * n_ind
            widest = np.zeros(n_ind)
            count = np.zeros(n_ind, dtype=np.int64)
            first_width = np.full(n_ind, np.nan)
            for row, (u, v) in enumerate(zip(ind.tolist(), values, strict=True)):
                text = "" if v is None else str(v).strip()
                if not text:
                    continue
                leaves = a.leaves.get(text, frozenset((text,)))  # a grown value: a leaf
                s = sets[u]
                sets[u] = leaves if s is None else s & leaves
                widest[u] = max(widest[u], len(leaves))
                count[u] += 1
                if row == first[u]:
                    first_width[u] = len(leaves)
            consistent = np.array([bool(s) for s in sets], dtype=bool)
            width = np.array([len(s) if s else np.nan for s in sets], dtype=float)
            boxes[a.name] = (consistent, sets)
        # the width of a hierarchy node is its number of leaves, one leaf the narrowest
        floor = 1.0 if a.leaves is not None else 0.0
        repeated = count >= 2
        use = repeated & consistent
        span = widest - floor
        ratio = np.where(span[use] > 0, (width[use] - floor) / np.where(
            span[use] > 0, span[use], 1), 1.0)
        narrowed = width[use] < first_width[use] - 1e-12 * np.maximum(1, np.abs(first_width[
            use]))
        pinned = (width[use] <= floor) & (span[use] > 0)
        first_span = first_width[use] - floor
        of_first = np.where(first_span > 0, (width[use] - floor) / np.where(
            first_span > 0, first_span, 1), 1.0)
        below_first[a.static][np.flatnonzero(use)[narrowed]] = True
        n_use = int(use.sum())
        result[a.name] = AttributeExposure(
            kind=a.kind, individuals=n_use, **_quantiles(ratio),
            narrowed=float(narrowed.mean()) if n_use else 0.0,
            pinned=float(pinned.mean()) if n_use else 0.0,
            varying=float((repeated & ~consistent).sum() / max(int(repeated.sum()), 1)),
            static=a.static, first=_quantiles(of_first))
    if inputs is not None:
        _truth(inputs, id_field, attributes, codes, boxes, result)
    below, cands = _candidates(ind, first, cols, attributes, boxes)
    repeated_any = np.bincount(ind, minlength=n_ind) >= 2
    out = Exposure(rows=len(ind), individuals=n_ind, repeated=int(repeated_any.sum()),
                   attributes=result,
                   below_first_class=float(below[repeated_any].mean()) if repeated_any.any()
                   else 0.0,
                   candidates=_quantiles(cands[repeated_any].astype(float)))
    if k is not None:
        out.k = k
        out.below_k = float((cands[repeated_any] < k).mean()) if repeated_any.any() else 0.0
    if any(a.static for a in attributes):
        def share(flags: np.ndarray) -> float:
            return float(flags[repeated_any].mean()) if repeated_any.any() else 0.0
        out.static = {
            "attributes": [a.name for a in attributes if a.static],
            "narrowed_static": share(below_first[True]),
            "narrowed_other": share(below_first[False]),
            "bound_holds": not below_first[True].any()}
    return out


def _truth(inputs: Iterable[Mapping[str, Any]], id_field: str,
           attributes: Sequence[Attribute], codes: Mapping[str, int], boxes: Mapping[str, Any],
           result: dict[str, AttributeExposure]) -> None:
    seen: dict[str, dict[int, set[str]]] = {a.name: {} for a in attributes}
    firsts: dict[str, dict[int, Any]] = {a.name: {} for a in attributes}
    for row in inputs:
        u = codes.get(str(row.get(id_field)))
        if u is None:  # never released
            continue
        for a in attributes:
            v = row.get(a.name)
            seen[a.name].setdefault(u, set()).add(str(v).strip())
            firsts[a.name].setdefault(u, v)
    for a in attributes:
        values = seen[a.name]
        box = boxes[a.name]
        result[a.name].constant = (sum(len(v) == 1 for v in values.values()) / len(values)
                                   if values else None)
        held = []
        for u, v in firsts[a.name].items():
            if not box[0][u]:
                continue
            if a.leaves is None:
                p = parse_interval(v)
                held.append(p is not None and box[1][u] <= p[0] <= box[2][u])
            else:
                held.append(str(v).strip() in box[1][u])
        result[a.name].contains_input = sum(held) / len(held) if held else None


def _compatible(a: Attribute, box: Any, i: int, j: int) -> bool:
    consistent = box[0]
    if not (consistent[i] and consistent[j]):
        return True  # varying for one of them: this attribute says nothing
    if a.leaves is None:
        return bool(box[1][i] <= box[2][j] and box[1][j] <= box[2][i])
    return bool(box[1][i] & box[1][j])


def _candidates(ind: np.ndarray, first: np.ndarray, cols: Mapping[str, list[Any]],
                attributes: Sequence[Attribute], boxes: Mapping[str, Any]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per individual: whether fewer individuals of its first class stay compatible with its
    intersection than the class held, and how many do (itself included)."""
    n_ind = len(first)
    members: dict[tuple[str, ...], set[int]] = {}
    keys = [tuple(str(cols[a.name][r]) for a in attributes) for r in range(len(ind))]
    for r, u in enumerate(ind.tolist()):
        members.setdefault(keys[r], set()).add(u)
    below = np.zeros(n_ind, dtype=bool)
    cands = np.zeros(n_ind, dtype=np.int64)
    for u in range(n_ind):
        group = members[keys[int(first[u])]]
        c = sum(1 for j in group if j == u or all(
            _compatible(a, boxes[a.name], u, j) for a in attributes))
        cands[u] = c
        below[u] = c < len(group)
    return below, cands

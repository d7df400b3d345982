"""The window release (``split="window"``): Mondrian's median cuts over every tuple held.

When a tuple reaches its deadline, the tuples held (all younger than δ) are cut by
:func:`~streamanon.castle.split.median_split` into classes of >= k individuals meeting the
diversity rule (a class of fewer than 2k individuals too, by its tuples), and every class is
released at once, the expiring tuple's first, then by each class's oldest tuple
(:func:`window_parts`; the same classes in the same order as releasing each when its oldest
tuple is due, earlier). So the cuts run about once per δ arrivals. Every released class's
generalization is remembered (:class:`History`, the last ``HISTORY`` classes): a tuple of
the class released that fits in one that loses less than its own class joins it (CASTLE's Ω
rule: the class already holds >= k individuals and its sensitive values), and so does the
whole rest when that loses less (:func:`reuse_rest`). When the held tuples cannot form a
class, the operator falls back to CASTLE's rules. Design and figures: docs/design/castle.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from streamanon.castle._native import window_kernels
from streamanon.castle.cluster import State
from streamanon.castle.split import SHARES, SINGLE_SHARES, flat_tables, median_split

if TYPE_CHECKING:
    from streamanon.castle.cluster import ClusterSet, Item
    from streamanon.castle.diversity import Diversity

_NO_TABLE = np.zeros((1, 1), dtype=np.int32)  # part_states: a tuple of one table when none

#: released generalizations remembered for reuse
HISTORY = 4096


class History:
    """The generalizations of the last ``size`` released classes of one cluster set, as
    arrays (a ring), each with what its release said (``payload``)."""

    def __init__(self, cset: ClusterSet, size: int = HISTORY) -> None:
        self.cset = cset
        d, h = len(cset.num), len(cset.hier)
        # one row per attribute (a fit is tested attribute by attribute), a column per class
        self.lo = np.full((d, size), np.inf)
        self.hi = np.full((d, size), -np.inf)
        self.nodes = np.zeros((size, h), dtype=np.int64)
        self.loss = np.full(size, np.inf)
        self.payload: list[Any] = [None] * size
        self.next = 0
        # a fit needs the numbers and hierarchy nodes only: no plug-ins, no missing values
        self.usable = not cset.other
        self._flat: tuple[tuple[int, ...], np.ndarray, np.ndarray] | None = None
        # the slots in use by (loss, slot), and their losses (the first ``_n_ranked``): the
        # fit test's order
        self._by_loss: np.ndarray | None = np.zeros(size, dtype=np.int64)
        self._by_loss_val = np.zeros(size)
        self._n_ranked = 0

    def add(self, st: State, loss: float, payload: Any) -> None:
        rank_replace = window_kernels().rank_replace

        i = self.next % len(self.loss)
        self._ranked()
        full = self.next >= len(self.loss)  # the ring's oldest class leaves the order
        self._n_ranked = rank_replace(self._by_loss, self._by_loss_val, self._n_ranked, full,
                                      float(self.loss[i]), i, float(loss))
        self.next += 1
        self.lo[:, i], self.hi[:, i] = st.lo, st.hi
        self.nodes[i] = st.nodes
        self.loss[i] = loss
        self.payload[i] = payload

    def _ranked(self) -> tuple[np.ndarray, np.ndarray]:
        """The classes in use by (loss, slot), and their losses (built from the ring when a
        History pickled before them has none)."""
        if getattr(self, "_by_loss", None) is None:
            size = len(self.loss)
            n = min(self.next, size)
            order = np.lexsort((np.arange(n), self.loss[:n])).astype(np.int64)
            self._by_loss = np.zeros(size, dtype=np.int64)
            self._by_loss_val = np.zeros(size)
            self._by_loss[:n], self._by_loss_val[:n] = order, self.loss[order]
            self._n_ranked = n
        n = self._n_ranked
        return self._by_loss[:n], self._by_loss_val[:n]  # type: ignore[index]

    def _tables(self) -> tuple[np.ndarray, np.ndarray]:
        """The hierarchies' LCA tables flattened and their offsets (:func:`best_fits`),
        built again only when a tree grew."""
        key = tuple(g.tree.version for g in self.cset.hier)
        flat_ = getattr(self, "_flat", None)  # absent in a History pickled before it
        if flat_ is None or flat_[0] != key:
            tables, offsets = flat_tables([g.tree.lca_table() for g in self.cset.hier],
                                          np.int32)
            self._flat = (key, tables, offsets)
        return self._flat[1], self._flat[2]

    def best(self, item: Item) -> tuple[float, Any] | None:
        """The least-loss remembered generalization ``item`` fits in, with its payload."""
        return self.best_of([item])[0]

    def best_of(self, items: list[Item], *, below: float = np.inf,
                rows: tuple[np.ndarray, np.ndarray] | None = None
                ) -> list[tuple[float, Any] | None]:
        """:meth:`best` for each of ``items``, in one pass over the remembered classes;
        with ``below``, only among the classes that lose less than it (the same answer
        where :meth:`best`'s loses less, else ``None``); ``rows``: the items' numbers and
        hierarchy nodes as matrices, when the caller has them."""
        n = min(self.next, len(self.loss))
        if not self.usable or not n or not items:
            return [None] * len(items)
        best_fits = window_kernels().best_fits

        if rows is None:
            x, at = _rows_of(items, self.lo.shape[0], self.nodes.shape[1])
        else:
            x, at = rows
        tables, offsets = self._tables()
        found = np.empty(len(items), dtype=np.int64)
        order, ranked = self._ranked()
        best_fits(self.lo, self.hi, order, ranked, float(below), x, self.nodes, at, tables,
                  offsets, found)
        out: list[tuple[float, Any] | None] = []
        for it, c in zip(items, found.tolist(), strict=True):
            ok = c >= 0 and not it.missing
            out.append((float(self.loss[c]), self.payload[c]) if ok else None)
        return out


def _rows_of(items: Sequence[Item], d: int, h: int) -> tuple[np.ndarray, np.ndarray]:
    """The numbers and hierarchy nodes of ``items`` as matrices, a row per tuple."""
    x = np.array([it.numbers for it in items], dtype=np.float64).reshape(len(items), d)
    at = np.array([it.nodes for it in items], dtype=np.int64).reshape(len(items), h)
    return x, at


@dataclass
class Part:
    """One class of a cut, known before its release: its generalization, losses per
    attribute, weighted loss per tuple and rows (:meth:`History.best_of`'s)."""

    state: State
    attr: dict[str, float]
    loss: float
    rows: tuple[np.ndarray, np.ndarray]


def part_states(cset: ClusterSet, parts: Sequence[Sequence[Item]]) -> list[Part] | None:
    """Every class of a cut as :class:`Part`, in one compiled pass over their rows
    (``part_states`` of :func:`~streamanon.castle._native.window_kernels`) and one numpy
    expression per attribute: the same states as ``cset.state_of`` (exact minima, maxima
    and lowest common nodes; of 0.0 and -0.0, which print alike and compare equal, the
    first in the rows stays, where numpy may keep the other), the same losses as
    ``cset.attr_losses`` and ``cset.weighted`` (the same operations, element by element, in
    the same order). ``None`` where those
    need the tuples themselves: plug-ins, missing values, a hierarchy's loss in the
    cluster's own tree."""
    if cset.other or cset._star or cset.hierarchy_scope != "shared" or not parts:
        return None
    d, h = len(cset.num), len(cset.hier)
    flat = [it for part in parts for it in part]
    x, at = _rows_of(flat, d, h)
    starts = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(part) for part in parts], out=starts[1:])
    lo = np.empty((len(parts), d))
    hi = np.empty((len(parts), d))
    nodes = np.empty((len(parts), h), dtype=np.int64)
    tables = tuple(g.tree.lca_table() for g in cset.hier) or (_NO_TABLE,)
    window_kernels().part_states(x, at, starts, tables, h, lo, hi, nodes)
    # the losses, attribute by attribute in the rules' order (ClusterSet.attr_losses)
    columns: list[np.ndarray] = []
    weights: list[float] = []
    for rule, (kind, j) in zip(cset.rules.qi_rules, cset.kind, strict=True):
        if kind == "num":
            g = cset.num[j]
            span = g.hi - g.lo  # loss.range_loss, for every class at once
            col = (np.minimum(1.0, (hi[:, j] - lo[:, j]) / span) if span > 0
                   else np.zeros(len(parts)))
        else:
            gh = cset.hier[j]
            memo: dict[int, float] = {}
            col = np.array([memo[v] if v in memo else memo.setdefault(
                v, gh.loss(gh.tree.names[v])) for v in nodes[:, j].tolist()])
        columns.append(col)
        weights.append(rule.weight)
    total = sum(weights)
    if total > 0:  # ClusterSet.weighted: the sum in the rules' order, then the division
        acc = np.zeros(len(parts))
        for col, w in zip(columns, weights, strict=True):
            acc = acc + col * w
        losses = (acc / total).tolist()
    else:
        losses = [0.0] * len(parts)
    names = [rule.name for rule in cset.rules.qi_rules]
    # each class's losses (none without quasi-identifiers)
    by_part = (list(zip(*(col.tolist() for col in columns), strict=True)) if columns
               else [()] * len(parts))
    out = []
    for p, (part_loss, attr) in enumerate(zip(losses, by_part, strict=True)):
        a, b = int(starts[p]), int(starts[p + 1])
        out.append(Part(State(lo[p], hi[p], nodes[p], []), dict(zip(names, attr, strict=True)),
                        part_loss, (x[a:b], at[a:b])))
    return out


@dataclass
class WindowCache:
    """What the window release keeps between cuts: the released generalizations
    (:class:`History`) of the current cluster set. (A checkpoint written before the cuts'
    classes were released at once also holds the last partition, ``leaves``: unused, since
    none of its classes is left unreleased after a cut.)"""

    history: History | None = None

    def history_of(self, cset: ClusterSet) -> History:
        if self.history is None or self.history.cset is not cset:
            self.history = History(cset)
        return self.history


def reuse_rest(history: History, rest: list[Item], st: State,
               fits: Callable[[State, Item, bool], bool],
               known: tuple[float, list[tuple[float, Any] | None]] | None = None
               ) -> list[tuple[Item, Any]]:
    """The tuples of ``rest`` (what is left of a released part after the moves of
    ``CastleAnonymizer._reuse_history``, generalized to ``st``), each with the remembered
    class it joins: all of them when each fits in a remembered class and those classes lose
    less together than the tuples would as their own class; else none. A class released
    with >= k individuals meeting the rule still does with tuples added, so the tuples need
    not form a class of their own.

    Args:
        history: the remembered classes.
        rest: the tuples left.
        st: their generalization.
        fits: ``fits(state, item, record)``: whether ``item`` may leave in a class of
            ``state`` (its anchors; with ``record``, noted).
        known: what the caller already has for ``rest`` and ``st``: a tuple's loss in
            ``st`` and :meth:`History.best_of` of ``rest`` with a ``below`` of at least the
            rest's total loss (an answer there that loses less than this one's bound is this
            one's answer, and there is none else), so that the fit test does not run twice.
    """
    if not rest:
        return []
    cset = history.cset
    if known is None:
        own = cset.weighted(cset.attr_losses(st, rest)) * len(rest)
        hits = history.best_of(rest, below=own)  # a class losing more alone cannot do
    else:
        own = known[0] * len(rest)
        hits = [hit if hit is not None and hit[0] < own else None for hit in known[1]]
    total = 0.0
    for it, hit in zip(rest, hits, strict=True):
        if hit is None or not fits(hit[1][4], it, False):
            return []
        total += hit[0]
    if not total < own:
        return []
    for it, hit in zip(rest, hits, strict=True):
        fits(hit[1][4], it, True)
    return [(it, hit[1]) for it, hit in zip(rest, hits, strict=True)]  # type: ignore[index]


def window_held(cset: ClusterSet, held: Iterable[Item], item: Item) -> list[Item]:
    """The tuples ``cset`` holds: ``item`` (the expiring one, already out of ``held``) and
    those of ``held`` (the operator's held tuples, in stream order) still waiting under
    ``cset``'s rules."""
    return [item, *(it for it in held if it is not item and not it.done
                    and it.cluster is not None and it.cluster.owner is cset)]


def window_parts(cache: WindowCache, cset: ClusterSet, pending: list[Item], *, k: int,
                 rule: Diversity) -> list[list[Item]]:
    """The median cuts of every tuple ``cset`` holds (``pending``, the expiring one first:
    :func:`window_held`), in the order they are released: the expiring tuple's class
    first, then by each class's oldest tuple.

    Every class meets k and the rule unless there is one class (all held tuples together
    fail: the caller checks). With the distinct rule and one held tuple per individual, the
    cuts weigh each tuple at most its loss in the remembered class it fits in
    (``cache.history``, :func:`median_split`'s ``reuse``): the tuples that will join such a
    class when theirs is released do not widen the classes left.

    Why all classes at once: a class is released unchanged when its oldest tuple reaches
    its deadline, and every class of one cut has a tuple older than the next arrival, so
    each cut's classes all leave before the next cut, in this order, whatever the arrivals
    between. Releasing them at the cut gives the same classes in the same order (the
    remembered classes grow the same way), earlier, with none of the held clusters'
    bookkeeping per class.

    Args:
        cache: holds the remembered classes (:attr:`WindowCache.history`).
        cset: the cluster set whose held tuples are cut.
        pending: its held tuples, the expiring one first.
        k: distinct individuals each class holds.
        rule: the diversity rule each class meets.
    """
    item = pending[0]
    reuse = None
    history = cache.history
    # one held tuple per individual: nothing to intersect (see the condition's measurements
    # in docs/design/castle.md), so the cuts may leave k tuples on one side and weigh the
    # remembered classes
    single = len({it.individual for it in pending}) == len(pending)
    if rule.distinct and history is not None and history.cset is cset and single:
        # a tuple that fits a remembered class will join it when its class is released and
        # that loses less: the cuts need not place it. Only while every held tuple is its
        # individual's only one: an individual's tuples scattered over remembered classes
        # narrow it under intersection (ASHRAE by building, k = 5: 0.30 of the width left
        # without the weighing, 0.02 with it, at the same loss)
        reuse = np.array([np.inf if hit is None else hit[0]
                          for hit in history.best_of(pending)], dtype=np.float64)
    parts = median_split(cset, pending, k=k, rule=rule, small=True,
                         shares=SINGLE_SHARES if single else SHARES, ends=single, reuse=reuse)
    first = next(i for i, part in enumerate(parts) if any(it is item for it in part))
    rest = parts[:first] + parts[first + 1:]
    rest.sort(key=lambda part: min(it.pos for it in part))
    return [parts[first], *rest]


__all__ = ["HISTORY", "History", "Part", "WindowCache", "part_states", "reuse_rest",
           "window_held", "window_parts"]

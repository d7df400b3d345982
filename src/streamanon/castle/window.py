"""The window release (``split="window"``): Mondrian's median cuts over every tuple held.

When a tuple reaches its deadline, the tuples held (all younger than δ) are cut by
:func:`~streamanon.castle.split.median_split` into classes of >= k individuals meeting the
diversity rule (a class of fewer than 2k individuals too, by its tuples), and only the
class holding the expiring tuple is released; the others stay held. The partition is kept
(:class:`WindowCache`) and reused while the expiring tuple's class still meets the rule, so
the cuts run about once per δ arrivals. Every released class's generalization is remembered
(:class:`History`, the last ``HISTORY`` classes): a tuple of the class released that fits in
one that loses less than its own class joins it (CASTLE's Ω rule: the class already holds >= k
individuals and its sensitive values), and so does the whole rest when that loses less
(:func:`reuse_rest`). When the held tuples cannot form a class, the
operator falls back to CASTLE's rules. Design and figures: docs/design/castle.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from streamanon.castle.split import SHARES, SINGLE_SHARES, flat_tables, median_split

if TYPE_CHECKING:
    from streamanon.castle.cluster import Cluster, ClusterSet, Item, State
    from streamanon.castle.diversity import Diversity

#: released generalizations remembered for reuse
HISTORY = 4096

_NO_TABLE = np.zeros((1, 1), dtype=np.int32)  # drop_rows: a tuple of one table when none


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
        from streamanon.castle._native import window_kernels

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

    def best_of(self, items: list[Item], *, below: float = np.inf
                ) -> list[tuple[float, Any] | None]:
        """:meth:`best` for each of ``items``, in one pass over the remembered classes;
        with ``below``, only among the classes that lose less than it (the same answer
        where :meth:`best`'s loses less, else ``None``)."""
        n = min(self.next, len(self.loss))
        if not self.usable or not n or not items:
            return [None] * len(items)
        from streamanon.castle._native import window_kernels

        best_fits = window_kernels().best_fits

        d, h = self.lo.shape[0], self.nodes.shape[1]
        x = np.array([it.numbers for it in items], dtype=np.float64).reshape(len(items), d)
        at = np.array([it.nodes for it in items], dtype=np.int64).reshape(len(items), h)
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


@dataclass
class WindowCache:
    """The last partition of the held tuples (each tuple's class, by stream position) and
    the released generalizations (:class:`History`) of the current cluster set."""

    leaves: dict[int, list[Item]] = field(default_factory=dict)
    history: History | None = None

    def history_of(self, cset: ClusterSet) -> History:
        if self.history is None or self.history.cset is not cset:
            self.history = History(cset)
        return self.history

    def forget(self, items: Iterable[Item]) -> None:
        for it in items:
            self.leaves.pop(it.pos, None)


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


def remove_held(cset: ClusterSet, items: Sequence[Item]) -> None:
    """``cset.remove_items(items)``, the same state, for the clusters the window release
    leaves open: each cluster's kept rows of numbers and hierarchy nodes
    (``ClusterSet._held_arrays``, the same cache) lose the tuples that leave and give the
    state in one compiled pass (``drop_rows`` of
    :func:`~streamanon.castle._native.window_kernels`: a column's bounds are scanned again
    only when a leaving tuple holds one), not in a concatenation, two selections and a fold.
    A cluster left empty, one without kept rows, missing values or plug-ins go through
    ``remove_items``."""
    if cset._star or cset.other:
        cset.remove_items(items)
        return
    from streamanon.castle._native import window_kernels

    drop_rows = window_kernels().drop_rows

    by_cluster: dict[int, tuple[Cluster, list[Item]]] = {}
    for item in items:
        c = item.cluster
        if c is None:
            cset.remove_items(items)  # its error
            return
        by_cluster.setdefault(id(c), (c, []))[1].append(item)
    rest: list[Item] = []
    d, h = len(cset.num), len(cset.hier)
    tables: tuple[np.ndarray, ...] | None = None
    for key, (c, gone) in by_cluster.items():
        old = c.items
        entry = cset._held_arrays.get(key)
        m = len(entry[1]) if entry is not None and entry[0] is c else -1
        if len(gone) >= len(old) or not 0 < m <= len(old) or entry[1] != old[:m]:
            rest += gone
            continue
        cset._other_key = None
        for it in gone:
            cset._uncount(c, it)
        drop = np.array(sorted(old.index(it) for it in gone), dtype=np.int64)
        new = old[m:]
        xn = np.array([it.numbers for it in new], dtype=np.float64).reshape(len(new), d)
        atn = np.array([it.nodes for it in new], dtype=np.int64).reshape(len(new), h)
        if tables is None:
            tables = tuple(g.tree.lca_table() for g in cset.hier) or (_NO_TABLE,)
        i = cset.index(c)
        x, at = drop_rows(entry[2], xn, entry[3], atn, drop, tables, h, cset._bounds[i],
                          cset._nodes[i])
        kept = old.copy()
        for j in reversed(drop.tolist()):
            del kept[j]
        c.items = kept
        cset._held_arrays[key] = (c, list(kept), x, at)
    if rest:
        cset.remove_items(rest)


def window_leaf(cache: WindowCache, cset: ClusterSet, held: Iterable[Item], item: Item, *,
                k: int, rule: Diversity, meets: Callable[[list[Item]], bool]) -> list[Item]:
    """The class of ``item`` among the median cuts of the ``held`` tuples of ``cset``.

    Reuses ``cache``'s partition while ``item``'s class (its tuples still held) ``meets``
    the rule; else cuts again the tuples of ``held`` still waiting in ``cset``'s clusters.
    The class may fail the rule (when all held tuples together do): the caller checks.
    With the distinct rule and one held tuple per individual, the cuts weigh each tuple at
    most its loss in the remembered class it fits in (``cache.history``,
    :func:`median_split`'s ``reuse``): the tuples that will join such a class when theirs is
    released do not widen the classes left.

    Args:
        cache: the last partition, replaced when it is cut again.
        cset: the cluster set whose held tuples are cut.
        held: the operator's held tuples, in stream order (released ones are skipped).
        item: the expiring tuple.
        k: distinct individuals each class holds.
        rule: the diversity rule each class meets.
        meets: whether a list of tuples meets k and the rule.
    """
    leaf = cache.leaves.get(item.pos)
    if leaf is not None:
        leaf = [it for it in leaf if not it.done]
        if meets(leaf):
            return leaf
    pending = [item, *(it for it in held if it is not item and not it.done
                       and it.cluster is not None and it.cluster.owner is cset)]
    cache.leaves = {}
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
    for part in median_split(cset, pending, k=k, rule=rule, small=True,
                             shares=SINGLE_SHARES if single else SHARES, ends=single,
                             reuse=reuse):
        for it in part:
            cache.leaves[it.pos] = part
    return cache.leaves[item.pos]


__all__ = ["HISTORY", "History", "WindowCache", "remove_held", "reuse_rest", "window_leaf"]

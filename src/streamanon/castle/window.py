"""The window release (``split="window"``): Mondrian's median cuts over every tuple held.

When a tuple reaches its deadline, the tuples held (all younger than δ) are cut by
:func:`~streamanon.castle.split.median_split` into classes of >= k individuals meeting the
diversity rule, and only the class holding the expiring tuple is released; the others stay
held. The partition is kept (:class:`WindowCache`) and reused while the expiring tuple's class
still meets the rule, so the cuts run about once per δ arrivals. Every released class's
generalization is remembered (:class:`History`, the last ``HISTORY`` classes): an expiring
tuple that fits in one that loses less than its own class joins it (CASTLE's Ω rule: the class
already holds >= k individuals and its sensitive values). When the held tuples cannot form a
class, the operator falls back to CASTLE's rules. Design and figures: docs/design/castle.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from streamanon.castle.split import median_split

if TYPE_CHECKING:
    from streamanon.castle.cluster import ClusterSet, Item, State
    from streamanon.castle.diversity import Diversity

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

    def add(self, st: State, loss: float, payload: Any) -> None:
        i = self.next % len(self.loss)
        self.next += 1
        self.lo[:, i], self.hi[:, i] = st.lo, st.hi
        self.nodes[i] = st.nodes
        self.loss[i] = loss
        self.payload[i] = payload

    def best(self, item: Item) -> tuple[float, Any] | None:
        """The least-loss remembered generalization ``item`` fits in, with its payload."""
        return self.best_of([item])[0]

    def best_of(self, items: list[Item], *, below: float = np.inf
                ) -> list[tuple[float, Any] | None]:
        """:meth:`best` for each of ``items``, in one pass over the remembered classes;
        with ``below``, only among the classes that lose less than it (the same answer
        where :meth:`best`'s loses less, else ``None``)."""
        n = min(self.next, len(self.loss))
        if not self.usable or not n:
            return [None] * len(items)
        loss = self.loss
        start_cols = (np.flatnonzero(loss[:n] < below) if below < np.inf
                      else np.arange(n))  # in slot order: ties break alike
        if not len(start_cols):
            return [None] * len(items)
        lo, hi, nodes = self.lo[:, :n], self.hi[:, :n], self.nodes
        # the attributes in the order of the classes' mean width (relative to all of them
        # together): the narrowest first drops the most classes soonest
        width = (hi - lo).mean(axis=1) / np.maximum(hi.max(axis=1) - lo.min(axis=1), 1e-300)
        order = np.argsort(width, kind="stable").tolist()
        tables = [g.tree.lca_table() for g in self.cset.hier]
        out: list[tuple[float, Any] | None] = []
        for first in range(0, len(items), 32):
            chunk = items[first:first + 32]
            x = np.array([it.numbers for it in chunk]).reshape(len(chunk), len(lo))
            at = np.array([it.nodes for it in chunk], dtype=np.int64).reshape(len(chunk), -1)
            cols, fit = _fits(lo, hi, x, start_cols, order)
            for j, table in enumerate(tables):
                if not len(cols):
                    break
                node = nodes[cols, j][None]
                fit &= table[node, at[:, j, None]] == node
            if not len(cols):
                out += [None] * len(chunk)
                continue
            scored = np.where(fit, loss[cols][None], np.inf)
            best = scored.argmin(axis=1)
            for it, row, i in zip(chunk, scored, best.tolist(), strict=True):
                ok = not it.missing and row[i] < np.inf
                c = int(cols[i])
                out.append((float(loss[c]), self.payload[c]) if ok else None)
        return out


def _fits(lo: np.ndarray, hi: np.ndarray, x: np.ndarray, cols: np.ndarray,
          order: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Which remembered classes (columns of ``lo``/``hi``, one row per attribute; those of
    ``cols``) each row of ``x`` fits in on the numbers: the columns some row fits in (in
    their order) and, per row, a mask over them. Attribute by attribute (in ``order``), a
    column no row fits in is dropped."""
    fit = np.ones((len(x), len(cols)), dtype=bool)
    whole = len(cols) == lo.shape[1]
    for j in order:
        xj = x[:, j, None]
        if whole:
            fit &= (lo[j][None] <= xj) & (xj <= hi[j][None])
        else:
            fit &= (lo[j, cols][None] <= xj) & (xj <= hi[j, cols][None])
        keep = fit.any(axis=0)
        if not keep.all():
            cols, fit = cols[keep], fit[:, keep]
            whole = False
            if not len(cols):
                break
    return cols, fit


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


def window_leaf(cache: WindowCache, cset: ClusterSet, held: Iterable[Item], item: Item, *,
                k: int, rule: Diversity, meets: Callable[[list[Item]], bool]) -> list[Item]:
    """The class of ``item`` among the median cuts of the ``held`` tuples of ``cset``.

    Reuses ``cache``'s partition while ``item``'s class (its tuples still held) ``meets``
    the rule; else cuts again the tuples of ``held`` still waiting in ``cset``'s clusters.
    The class may fail the rule (when all held tuples together do): the caller checks.

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
    for part in median_split(cset, pending, k=k, rule=rule, small=True):
        for it in part:
            cache.leaves[it.pos] = part
    return cache.leaves[item.pos]


__all__ = ["HISTORY", "History", "WindowCache", "window_leaf"]

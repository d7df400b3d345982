"""Bounding the intersection: each individual's anchor on the attributes declared ``static``.

An individual's anchor is the generalization of the class it was first released in, on the
quasi-identifiers the rules mark ``static = true`` (constant per individual). Every later
release of a class is widened to cover the anchors of the individuals it holds, so that the
intersection of an individual's releases is its anchor, which the >= k individuals of its
first class share. Anchors are kept for good unless the user bounds them (``ttl`` in stream
time, ``max_count``, least recently used first); an individual seen again after its anchor
was forgotten gets a new one. Design, cost and figures: docs/privacy-models.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamanon.errors import ConfigError

if TYPE_CHECKING:
    from streamanon.castle.cluster import ClusterSet, State

#: a static attribute of a cluster set: its name, its kind ("num" or "hier") and its index
#: in that kind's arrays
Column = tuple[str, str, int]


def static_columns(cset: ClusterSet) -> list[Column]:
    """The static quasi-identifiers of ``cset``'s rules; only ranges and hierarchies can be
    (a plug-in's state has no merge with an anchor here)."""
    out = []
    for rule, (kind, j) in zip(cset.rules.qi_rules, cset.kind, strict=True):
        if getattr(rule, "static", False):
            if kind not in ("num", "hier"):
                raise ConfigError(f"attribute {rule.name!r}: static needs a range or "
                                  "hierarchy generalizer")
            out.append((rule.name, kind, j))
    return out


class Anchors:
    """The anchor of every individual released so far: per static attribute, a range
    ``(lo, hi)`` or a hierarchy node's name (names, so that an anchor outlives a change of
    rules). Part of the operator's pickled state."""

    #: forget an anchor not used (released, or a tuple of its individual held) for this
    #: long in stream time (``None``: never)
    ttl: float | None = None
    #: keep at most this many anchors, the least recently used forgotten first (``None``:
    #: no bound)
    max_count: int | None = None
    #: anchors forgotten so far (by ``ttl`` or ``max_count``)
    forgotten = 0

    def __init__(self, *, ttl: float | None = None, max_count: int | None = None) -> None:
        self.by_individual: dict[str, dict[str, Any]] = {}  # least recently used first
        #: per individual, the stream time its anchor was last used (with ``ttl``)
        self.used: dict[str, float] = {}
        self.ttl, self.max_count = ttl, max_count

    def __len__(self) -> int:
        return len(self.by_individual)

    @property
    def bounded(self) -> bool:
        return self.ttl is not None or self.max_count is not None

    def touch(self, individuals: Iterable[str], now: float) -> None:
        """Mark the anchors of ``individuals`` used at stream time ``now`` (most recently)."""
        by = self.by_individual
        for p in individuals:
            a = by.pop(p, None)
            if a is not None:
                by[p] = a
                if self.ttl is not None:
                    self.used[p] = now

    def forget(self, now: float, held: Callable[[str], bool]) -> int:
        """Forget the anchors past ``ttl`` at stream time ``now`` and those beyond
        ``max_count``, least recently used first; an anchor whose individual has a tuple
        held (``held``) is in use: it is kept and counts as used now. Returns how many."""
        by, used, ttl = self.by_individual, self.used, self.ttl
        gone = 0
        for _ in range(len(by)):
            p = next(iter(by), None)
            if p is None:
                break
            over = self.max_count is not None and len(by) > self.max_count
            old = ttl is not None and now - used.get(p, now) > ttl
            if not (over or old):
                break
            if held(p):
                self.touch((p,), now)
                continue
            del by[p]
            used.pop(p, None)
            gone += 1
        self.forgotten += gone
        return gone

    def figures(self) -> dict[str, Any]:
        """The summary's ``anchors``: kept now, forgotten so far, the bounds."""
        return {"kept": len(self.by_individual), "forgotten": self.forgotten,
                "ttl": self.ttl, "max_count": self.max_count}

    def widen(self, cset: ClusterSet, cols: list[Column], individuals: Iterable[str],
              st: State) -> State:
        """``st`` merged, attribute by attribute, with the anchors of ``individuals`` (the
        generalizer's own merge: min/max of ranges, lowest common ancestor of nodes); ``st``
        itself when none of them has an anchor."""
        from streamanon.castle.cluster import State

        found = [a for p in set(individuals) if (a := self.by_individual.get(p)) is not None]
        if not found:
            return st
        lo, hi, nodes = st.lo.copy(), st.hi.copy(), st.nodes.copy()
        for name, kind, j in cols:
            if kind == "num":
                for a in found:
                    if name in a:
                        lo[j] = min(lo[j], a[name][0])
                        hi[j] = max(hi[j], a[name][1])
            else:
                tree = cset.hier[j].tree
                table, index = tree.lca_table(), tree.node_indices()
                node = int(nodes[j])
                for a in found:
                    if name in a and a[name] in index:
                        node = int(table[node, index[a[name]]])
                nodes[j] = node
        return State(lo, hi, nodes, st.plugin_states)

    def record(self, cset: ClusterSet, cols: list[Column], individuals: Iterable[str],
               st: State, now: float = -math.inf) -> None:
        """Give the individuals without an anchor ``st`` (the class they are released in
        now) as theirs.

        Args:
            cset: the cluster set ``st`` belongs to (its hierarchies name the nodes).
            cols: its static attributes (:func:`static_columns`).
            individuals: the individuals of the class.
            st: the class's state.
            now: the stream time (the anchor's first use, with ``ttl``).
        """
        anchor: dict[str, Any] | None = None
        for p in individuals:
            if p in self.by_individual:
                continue
            if anchor is None:
                anchor = {}
                for name, kind, j in cols:
                    if kind == "num":
                        anchor[name] = (float(st.lo[j]), float(st.hi[j]))
                    else:
                        anchor[name] = cset.hier[j].tree.names[int(st.nodes[j])]
            self.by_individual[p] = anchor
            if self.ttl is not None:
                self.used[p] = now

    def covers(self, cset: ClusterSet, cols: list[Column], st: State, individual: str) -> bool:
        """Does ``st`` cover ``individual``'s anchor (always, when it has none)?"""
        a = self.by_individual.get(individual)
        if a is None:
            return True
        for name, kind, j in cols:
            if name not in a:
                continue
            if kind == "num":
                lo, hi = a[name]
                if not (st.lo[j] <= lo and hi <= st.hi[j]):
                    return False
            else:
                tree = cset.hier[j].tree
                index = tree.node_indices()
                if a[name] not in index:
                    return False
                node = int(st.nodes[j])
                if int(tree.lca_table()[node, index[a[name]]]) != node:
                    return False
        return True


__all__ = ["Anchors", "static_columns"]

"""Bounding the intersection: each individual's anchor on the attributes declared ``static``.

An individual's anchor is the generalization of the class it was first released in, on the
quasi-identifiers the rules mark ``static = true`` (constant per individual). Every later
release of a class is widened to cover the anchors of the individuals it holds, so that the
intersection of an individual's releases is its anchor, which the >= k individuals of its
first class share. Design, cost and figures: docs/privacy-models.md.
"""

from __future__ import annotations

from collections.abc import Iterable
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

    def __init__(self) -> None:
        self.by_individual: dict[str, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self.by_individual)

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
               st: State) -> None:
        """Give the individuals without an anchor ``st`` (the class they are released in
        now) as theirs."""
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

"""The window release (``split="window"``): Mondrian's median cuts over every tuple held.

When a tuple reaches its deadline, the tuples held (all younger than δ) are cut by
:func:`~streamanon.castle.split.median_split` into classes of >= k individuals meeting the
diversity rule, and only the class holding the expiring tuple is released; the others stay
held. The partition is kept (:class:`WindowCache`) and reused for the next expiring tuple
while its class is intact, so the cuts run about once per δ arrivals instead of once per
tuple. When the held tuples cannot form such a class, the operator falls back to CASTLE's own
rules (Ω reuse, outlier suppression, merging). Design and figures: docs/design/castle.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamanon.castle.split import median_split

if TYPE_CHECKING:
    from streamanon.castle.cluster import ClusterSet, Item
    from streamanon.castle.diversity import Diversity


@dataclass
class WindowCache:
    """The last partition of the held tuples: each tuple's class, by stream position."""

    leaves: dict[int, list[Item]] = field(default_factory=dict)

    def leaf(self, item: Item) -> list[Item] | None:
        """``item``'s class of the last partition, when none of its tuples has left."""
        leaf = self.leaves.get(item.pos)
        if leaf is None or any(it.done for it in leaf):
            return None
        return leaf

    def forget(self, items: Iterable[Item]) -> None:
        for it in items:
            self.leaves.pop(it.pos, None)


def window_leaf(cache: WindowCache, cset: ClusterSet, held: Iterable[Item], item: Item, *,
                k: int, rule: Diversity) -> list[Item]:
    """The class of ``item`` among the median cuts of the ``held`` tuples of ``cset``.

    Reuses ``cache``'s partition while ``item``'s class is intact; else cuts again the tuples
    of ``held`` (in stream order) that are still waiting in ``cset``'s clusters. The class may
    fail k or the rule (when all held tuples together do): the caller checks.
    """
    leaf = cache.leaf(item)
    if leaf is not None:
        return leaf
    pending = [item, *(it for it in held if it is not item and not it.done
                       and it.cluster is not None and it.cluster.owner is cset)]
    cache.leaves = {}
    for part in median_split(cset, pending, k=k, rule=rule):
        for it in part:
            cache.leaves[it.pos] = part
    return cache.leaves[item.pos]


__all__ = ["WindowCache", "window_leaf"]

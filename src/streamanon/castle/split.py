"""How a released cluster of >= 2k individuals is split into smaller classes.

* ``prink`` (the default, Prink's and CASTLE's published behaviour): groups of whole
  individuals grown from the oldest by nearest individuals
  (:meth:`~streamanon.castle.operator.CastleAnonymizer._split`);
* ``median``: Mondrian's strict median cut inside the cluster (:func:`median_split`): the
  attribute widest relative to its domain is cut at its median while both halves keep >= k
  distinct individuals and l distinct values of every sensitive attribute, recursively. An
  individual's tuples may land in different classes (k_s-anonymity still holds per class); the
  classes are narrower, and intersecting an individual's releases narrows it further (see
  ``streamanon attack intersect``).

>>> SPLITS
('prink', 'median')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from streamanon.castle.cluster import ClusterSet, Item

SPLITS = ("prink", "median")


def _dfs_rank(tree: object) -> np.ndarray:
    """Each node index's position in a depth-first walk (siblings stay next to each other)."""
    names: list[str] = tree.names  # type: ignore[attr-defined]
    children: dict[str, list[str]] = tree.children  # type: ignore[attr-defined]
    rank = {}
    stack = [tree.root]  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        rank[node] = len(rank)
        stack.extend(reversed(children.get(node, [])))
    return np.array([rank.get(n, len(rank)) for n in names], dtype=np.float64)


def median_split(cset: ClusterSet, items: Sequence[Item], *, k: int,
                 l: int) -> list[list[Item]]:  # noqa: E741
    """Split ``items`` by strict median cuts into classes of >= k individuals and l-diverse.

    Returns ``[list(items)]`` when no cut keeps both halves k_s-anonymous and l-diverse.
    """
    n = len(items)
    d = len(cset.num)
    columns: list[np.ndarray] = []
    spans: list[float] = []
    if d:
        x = np.array([it.numbers for it in items], dtype=np.float64).reshape(n, d)
        dom = cset.dhi - cset.dlo
        for j in range(d):
            columns.append(x[:, j])
            spans.append(float(dom[j]) if dom[j] > 0 else 0.0)
    for j, g in enumerate(cset.hier):
        rank = _dfs_rank(g.tree)
        columns.append(rank[np.array([it.nodes[j] for it in items], dtype=np.int64)])
        spans.append(float(max(1, len(rank) - 1)))
    if not columns:
        return [list(items)]
    data = np.column_stack(columns)
    width = np.array([1.0 / s if s > 0 else 0.0 for s in spans])
    _, ind = np.unique([it.individual for it in items], return_inverse=True)
    sens = [np.unique([it.sensitive[j] for it in items], return_inverse=True)[1]
            for j in range(cset.n_sensitive)] if l > 1 else []

    def allowed(part: np.ndarray) -> bool:
        if len(np.unique(ind[part])) < k:
            return False
        return all(len(np.unique(s[part])) >= l for s in sens)

    done: list[np.ndarray] = []
    stack = [np.arange(n)]
    while stack:
        part = stack.pop()
        if len(np.unique(ind[part])) < 2 * k:
            done.append(part)
            continue
        sub = data[part]
        norm = np.ptp(sub, axis=0) * width
        for j in np.argsort(-norm, kind="stable").tolist():
            if norm[j] <= 0:
                done.append(part)
                break
            col = sub[:, j]
            med = float(np.median(col))
            left = col <= med if med < col.max() else col < med
            a, b = part[left], part[~left]
            if len(a) and len(b) and allowed(a) and allowed(b):
                stack += [b, a]
                break
        else:
            done.append(part)
    if len(done) <= 1:
        return [list(items)]
    done.sort(key=lambda p: int(p.min()))  # classes in the order of their oldest tuple
    return [[items[i] for i in np.sort(p).tolist()] for p in done]


__all__ = ["SPLITS", "median_split"]

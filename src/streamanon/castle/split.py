"""How a released cluster of >= 2k individuals is split into smaller classes.

* ``prink`` (the default, Prink's and CASTLE's published behaviour): groups of whole
  individuals grown from the oldest by nearest individuals
  (:meth:`~streamanon.castle.operator.CastleAnonymizer._split`);
* ``median``: Mondrian's strict median cuts inside the cluster (:func:`median_split`): a cut
  at the median of one attribute (between subtrees for a hierarchy) while both halves keep
  >= k distinct individuals and meet the diversity rule on every sensitive attribute, the
  attribute whose cut loses least, recursively. An
  individual's tuples may land in different classes (k_s-anonymity still holds per class); the
  classes are narrower, and intersecting an individual's releases narrows it further (see
  ``streamanon attack intersect``).

>>> SPLITS
('prink', 'median', 'window')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from streamanon.castle.cluster import ClusterSet, Item
    from streamanon.castle.diversity import Diversity

SPLITS = ("prink", "median", "window")

#: the window release's cuts besides the median: at these shares of a class's sorted values
#: (each attribute's value at that rank)
SHARES = (0.25, 0.75)
#: the same while each held tuple is its individual's only one, with the ends (cuts that
#: leave k tuples on one side): measured in docs/design/castle.md
SINGLE_SHARES = (1 / 3, 2 / 3)


def _tree_arrays(tree: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each node index's position in a depth-first walk (a subtree is a run of positions) and
    its parent's index (-1 for the root)."""
    names: list[str] = tree.names
    children: dict[str, list[str]] = tree.children
    rank: dict[str, int] = {}
    stack = [tree.root]
    while stack:
        node = stack.pop()
        rank[node] = len(rank)
        stack.extend(reversed(children.get(node, [])))
    index = {n: i for i, n in enumerate(names)}
    parent = np.array([index.get(tree.parent.get(n) or "", -1) for n in names], dtype=np.int64)
    return np.array([rank.get(n, len(rank)) for n in names], dtype=np.float64), parent


def _median(col: np.ndarray) -> float:
    """``float(np.median(col))`` (the mean of the two middle values for an even count), from
    one partition."""
    n = len(col)
    half = n // 2
    if n % 2:
        return float(np.partition(col, half)[half])
    part = np.partition(col, (half - 1, half))
    return float(np.add.reduce(part[half - 1:half + 1]) / 2)


def median_split(cset: ClusterSet, items: Sequence[Item], *, k: int, l: int = 0,  # noqa: E741
                 rule: Diversity | None = None, small: bool = False,
                 shares: Sequence[float] = (), ends: bool = False, compiled: bool = True,
                 reuse: np.ndarray | None = None) -> list[list[Item]]:
    """Split ``items`` by strict median cuts into classes of >= k individuals meeting ``rule``.

    Each step tries one cut per attribute: a number at its median, a hierarchy attribute
    between the subtrees below the class's common node (at the subtree boundary nearest the
    median), and takes, among the cuts whose halves both hold >= k distinct individuals and
    meet the diversity rule on every sensitive attribute, the one whose halves lose least
    (tuples times the halves' weighted loss; the cuts at the values of the ``shares``
    ranks are candidates too, and with ``ends`` the two that leave k tuples on one side); a
    class of fewer than 2k individuals is not
    cut unless ``small`` (then it is, when both halves keep >= k individuals: an
    individual's several tuples). With ``reuse``, a tuple counts in a half's cost at most
    its loss in the remembered class it would join (the window release moves it there
    when its class is released and that loses less), so the cuts are placed by the tuples
    that will stay in the classes. Returns ``[list(items)]`` when no cut is allowed.

    Args:
        cset: the cluster set the items belong to (their generalizers and losses).
        items: the tuples of the cluster.
        k: distinct individuals each class holds.
        l: distinct l-diversity, when no ``rule`` is given.
        rule: the diversity rule each class meets (default: distinct ``l``).
        small: cut classes of fewer than 2k individuals too, while the halves allow it.
        shares: try, besides each attribute's median, a cut at its values at these shares
            of the sorted values (the window release's cuts: :data:`SHARES`).
        ends: try too the cuts at each attribute's values at ranks k - 1 and n - k - 1 of
            a class of n tuples (after the shares' cuts).
        compiled: with ``small``, the distinct rule and finite numbers, cut in one compiled
            loop (the same classes; ``False``: numpy, which the tests compare it with).
        reuse: each tuple's loss in the least-loss remembered class it fits in, ``inf``
            for none, in the order of ``items`` (the window release's cuts).
    """
    if rule is None:
        from streamanon.castle.diversity import Diversity

        rule = Diversity(l=l)
    n = len(items)
    d = len(cset.num)
    h = len(cset.hier)
    if n == 0 or d + h == 0:
        return [list(items)]
    x = (np.array([it.numbers for it in items], dtype=np.float64).reshape(n, d) if d
         else np.empty((n, 0)))
    nodes = np.array([it.nodes for it in items], dtype=np.int64).reshape(n, h)
    trees = [(_tree_arrays(g.tree), g.tree.lca_table()) for g in cset.hier]
    _, ind = np.unique([it.individual for it in items], return_inverse=True)
    uniq = [np.unique([it.sensitive[j] for it in items], return_inverse=True)
            for j in range(cset.n_sensitive)] if not rule.off else []
    sens = [u[1] for u in uniq]
    if compiled and small and rule.distinct and np.isfinite(x).all():
        return _compiled(cset, items, x, nodes, ind, sens, trees, k=k, l=rule.l,
                         shares=shares, ends=ends, reuse=reuse)
    names = cset.rules.sensitive

    def distinct(codes: np.ndarray) -> int:
        return int(np.count_nonzero(np.bincount(codes)))

    def allowed(part: np.ndarray) -> bool:
        if distinct(ind[part]) < k:
            return False
        if rule.distinct:
            return all(distinct(s[part]) >= rule.l for s in sens)
        counts = []
        for (values, _), s in zip(uniq, sens, strict=True):
            codes, n = np.unique(s[part], return_counts=True)
            counts.append(dict(zip(values[codes].tolist(), n.tolist(), strict=True)))
        return rule.all_hold(counts, names)

    def common(part: np.ndarray, j: int) -> int:
        table = trees[j][1]
        node = int(nodes[part[0], j])
        for v in set(nodes[part, j].tolist()):  # the lowest common node: any order
            node = int(table[node, v])
        return node

    inv = cset._inv.tolist() if d else []
    caps = None if reuse is None else np.asarray(reuse, dtype=np.float64).tolist()

    def cost(part: np.ndarray, sub: np.ndarray) -> float:
        """The loss of ``part`` (its rows of ``x``: ``sub``), times its tuples (each at most
        its ``reuse``): summed attribute by attribute in the order of the compiled loop
        (``median_cuts``, C or numba), each term rounded by itself, so that both compare
        cuts alike (a BLAS dot product sums in an order of its CPU's, and a tie could go
        either way)."""
        acc = 0.0
        if d:
            lows, highs = sub.min(axis=0).tolist(), sub.max(axis=0).tolist()
            for q in range(d):
                acc += -lows[q] * inv[q] + highs[q] * inv[d + q]
        for j in range(h):
            acc += cset.w_hier[j] * float(cset.hier[j].loss_vector()[common(part, j)])
        if caps is None:
            return len(part) * acc
        total, full = 0.0, 0
        for i in part.tolist():
            if caps[i] < acc:
                total += caps[i]
            else:
                full += 1
        return total + full * acc  # exactly len(part) * acc when none is capped

    def keys(part: np.ndarray, j: int) -> np.ndarray:
        """Hierarchy attribute j: each tuple's subtree below the class's common node, as the
        subtree's depth-first position (subtrees in depth-first order)."""
        (rank, parent), _ = trees[j]
        top = common(part, j)
        child: dict[int, float] = {}
        for v in np.unique(nodes[part, j]).tolist():
            node = v
            while node != top and parent[node] != top and parent[node] >= 0:
                node = int(parent[node])
            child[v] = rank[node]
        return np.array([child[v] for v in nodes[part, j].tolist()])

    done: list[np.ndarray] = []
    stack = [np.arange(n)]
    while stack:
        part = stack.pop()
        if len(part) < 2 * k or (not small and distinct(ind[part]) < 2 * k):
            done.append(part)
            continue
        best: tuple[float, np.ndarray, np.ndarray] | None = None
        tried: set[bytes] = set()
        rows = x[part]
        lows, highs = (rows.min(axis=0), rows.max(axis=0)) if d else (rows[0], rows[0])
        for j in range(d + h):
            if j < d:
                col, lo, hi = rows[:, j], lows[j], highs[j]
            else:
                col = keys(part, j - d)
                lo, hi = col.min(), col.max()
            if lo == hi:
                continue
            cuts = [_median(col)]
            srt = np.sort(col) if shares or ends else col
            cuts += [float(srt[int(f * (len(col) - 1))]) for f in shares]
            if ends:  # k tuples cut off either end (the compiled loop's order)
                cuts += [float(srt[r]) for r in (k - 1, len(col) - k - 1) if 0 <= r < len(col)]
            for med in cuts:
                left = col <= med if med < hi else col < med
                seen = left.tobytes()
                if seen in tried:  # the same halves as an earlier cut: no better
                    continue
                tried.add(seen)
                a, b = part[left], part[~left]
                if not (allowed(a) and allowed(b)):
                    continue
                c = cost(a, rows[left]) + cost(b, rows[~left])
                if best is None or c < best[0]:
                    best = (c, a, b)
        if best is None:
            done.append(part)
        else:
            stack += [best[2], best[1]]
    if len(done) <= 1:
        return [list(items)]
    done.sort(key=lambda p: int(p.min()))  # classes in the order of their oldest tuple
    return [[items[i] for i in np.sort(p).tolist()] for p in done]


def flat_tables(tables: Sequence[np.ndarray], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """The hierarchies' LCA tables as one flat array for a compiled loop, and their offsets:
    hierarchy j's table starts at ``offsets[j]``, its row length is ``offsets[h + j]``.

    >>> flat, offsets = flat_tables([np.array([[0, 0], [0, 1]]), np.array([[2]])], np.int64)
    >>> flat.tolist(), offsets.tolist()
    ([0, 0, 0, 1, 2], [0, 4, 2, 1])
    """
    h = len(tables)
    starts = np.cumsum([0, *(t.size for t in tables)])[:h].tolist()
    offsets = np.array(starts + [t.shape[1] for t in tables], dtype=np.int64)
    flat = (np.concatenate([t.ravel() for t in tables]).astype(dtype, copy=False)
            if h else np.zeros(1, dtype=dtype))
    return flat, offsets


def _compiled(cset: ClusterSet, items: Sequence[Item], x: np.ndarray, nodes: np.ndarray,
              ind: np.ndarray, sens: list[np.ndarray], trees: list[Any], *, k: int,
              l: int, shares: Sequence[float], ends: bool,  # noqa: E741
              reuse: np.ndarray | None) -> list[list[Item]]:
    """:func:`median_split` with ``small`` and the distinct rule, as one compiled loop
    (``median_cuts`` of :func:`streamanon.castle._native.window_kernels`: C, else numba).

    Args:
        cset: the cluster set the items belong to.
        items: the tuples to cut.
        x: their numbers, one row per tuple.
        nodes: their hierarchy nodes, one row per tuple.
        ind: each tuple's individual, as a code.
        sens: each sensitive attribute's codes.
        trees: each hierarchy's depth-first ranks and parents, and its LCA table.
        k: distinct individuals each class holds.
        l: distinct sensitive values each class holds per attribute.
        shares: the shares of the sorted values whose cuts are tried too.
        ends: try the cuts that leave k tuples on one side too.
        reuse: each tuple's loss in the remembered class it would join, or ``None``.
    """
    from streamanon.castle._native import window_kernels

    median_cuts = window_kernels().median_cuts

    n, h = len(items), len(cset.hier)
    tables, toff = flat_tables([t for _, t in trees], np.int64)
    sizes = [len(rank) for (rank, _), _ in trees]
    noff = np.array(np.cumsum([0, *sizes])[:h].tolist() or [0], dtype=np.int64)
    ranks = np.concatenate([r for (r, _), _ in trees] or [np.zeros(1)]).astype(np.float64)
    parents = np.concatenate([p for (_, p), _ in trees] or [np.zeros(1, dtype=np.int64)])
    losses = np.concatenate([g.loss_vector() for g in cset.hier] or [np.zeros(1)])
    w_hier = np.array(cset.w_hier if h else [0.0], dtype=np.float64)
    inv = np.asarray(cset._inv, dtype=np.float64) if len(cset.num) else np.zeros(1)
    sens_m = (np.array(sens, dtype=np.int64).reshape(len(sens), n) if sens
              else np.zeros((0, n), dtype=np.int64))
    out = np.empty(n, dtype=np.int64)
    count = median_cuts(x, nodes, np.asarray(ind, dtype=np.int64), sens_m, k, l, True, inv,
                        w_hier, tables, toff, ranks, parents.astype(np.int64), losses, noff,
                        np.array(shares, dtype=np.float64), ends, out,
                        np.zeros(0) if reuse is None else np.asarray(reuse, dtype=np.float64))
    if count <= 1:
        return [list(items)]
    parts: list[list[Item]] = [[] for _ in range(count)]
    for it, c in zip(items, out.tolist(), strict=True):
        parts[c].append(it)
    return parts


__all__ = ["SHARES", "SINGLE_SHARES", "SPLITS", "flat_tables", "median_split"]

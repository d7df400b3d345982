"""CASTLE's best selection as one compiled loop (numba), called once per arriving tuple.

The rule is the operator's (see :mod:`streamanon.castle.operator`): among the open clusters of
least enlargement (ties within ``eps``), one whose loss with the tuple stays ``<= tau + eps``,
else one anyway once ``beta`` clusters are open, else a new cluster; among several candidates
the one with the fewest individuals (the caller decides that case, it knows the individuals).

Done as numpy calls, this took about a dozen array operations per tuple on ~50 rows of ~20
values, so the fixed cost of each call (~1 µs) dominated; here it is one loop with no
temporary arrays. The losses are the same sums as :meth:`ClusterSet.loss_of` (numeric part
``sum((-lo, hi) * (w/span, w/span))``, then each hierarchy's ``w * loss(node)``, then the
plug-ins' part computed by the caller), added in the same order; the dot product is summed
left to right, which may differ from numpy's BLAS product in the last bit. Decisions compare
losses with a tolerance of ``eps`` (1e-12), far above such differences, so the choice is the
same (checked byte for byte against the numpy version: ``benchmarks/castle_cases.py``).

Compiled on first use and cached on disk (``cache=True``), so only the first run after an
install pays the compilation (about a second); later processes load it in milliseconds.
"""

from __future__ import annotations

import numpy as np
from numba import njit

OPEN, OUTSIDE, TIED = -1, -2, -3  # answers besides a cluster index (TIED - m: m tied)


@njit(cache=True, nogil=True)
def best_selection(lh: np.ndarray, nodes: np.ndarray, n: int, x: np.ndarray, cat: np.ndarray,
                   dom: np.ndarray, inv: np.ndarray, hloss: np.ndarray, hlca: np.ndarray,
                   hmeta: np.ndarray,
                   other_cur: np.ndarray, other_new: np.ndarray, tau: float, beta: int,
                   eps: float, work: np.ndarray, picks: np.ndarray
                   ) -> int:  # pragma: no cover - compiled (numba)
    """Choose the open cluster for the tuple with numeric values ``x`` and hierarchy nodes
    ``cat``; grow its row and nodes by the tuple and return its index.

    Rows ``0..n-1`` of ``lh`` (``(-lo, hi)``) and ``nodes`` are the open clusters (n >= 1);
    ``dom`` the range domains (rows lo, hi); ``inv`` the weights ``w/span`` of ``lh``'s
    columns. Hierarchy ``j`` (``hmeta[:, j]`` = offset, size) has ``w_j * loss(lca(a, b))``
    at ``hloss[offset + b * size + a]`` and ``lca(a, b)`` at ``hlca[offset + b * size + a]``.
    ``other_cur``/``other_new`` are the plug-ins' weighted losses without/with the tuple
    (empty when there are none). ``work`` (2 x n) and ``picks`` (n) are scratch space.

    Returns the index; ``OPEN`` when a new cluster must be opened; ``OUTSIDE`` (nothing done)
    when a value lies outside its range's domain, which must first be widened;
    ``TIED - m`` when ``m`` candidates tie (``picks[:m]``), for the caller to pick the one
    with the fewest individuals and insert.
    """
    d = x.shape[0]
    for c in range(d):
        if x[c] < dom[0, c] or x[c] > dom[1, c]:
            return OUTSIDE
    nh = cat.shape[0]
    plug = other_cur.shape[0] > 0
    cur = work[0]
    new = work[1]
    for i in range(n):
        s_cur = 0.0
        s_new = 0.0
        for c in range(d):  # the (-lo) half: max(-lo, -x) = -min(lo, x)
            a = lh[i, c]
            b = -x[c]
            s_cur += a * inv[c]
            s_new += (a if a >= b else b) * inv[c]
        for c in range(d):  # the hi half
            a = lh[i, d + c]
            b = x[c]
            s_cur += a * inv[d + c]
            s_new += (a if a >= b else b) * inv[d + c]
        for j in range(nh):
            node = nodes[i, j]
            base = hmeta[0, j]
            size = hmeta[1, j]
            s_cur += hloss[base + node * size + node]
            s_new += hloss[base + cat[j] * size + node]
        if plug:
            s_cur += other_cur[i]
            s_new += other_new[i]
        cur[i] = s_cur
        new[i] = s_new
    # argmin of the enlargement (first minimum; a NaN wins, as in numpy)
    best = 0
    emin = new[0] - cur[0]
    if emin == emin:
        for i in range(1, n):
            e = new[i] - cur[i]
            if e != e:
                best = i
                emin = e
                break
            if e < emin:
                best = i
                emin = e
    limit = emin + eps
    m = 0
    for i in range(n):
        if new[i] - cur[i] <= limit:
            picks[m] = i
            m += 1
    bound = tau + eps
    if m == 1:
        if new[best] <= bound or n >= beta:
            _grow(lh, nodes, best, x, cat, hlca, hmeta)
            return best
        return OPEN
    ok = 0
    for q in range(m):
        if new[picks[q]] <= bound:
            picks[ok] = picks[q]
            ok += 1
    if ok == 0:
        if n < beta:
            return OPEN
        ok = m  # every tied cluster is a candidate (picks[:m] untouched when none was ok)
    if ok == 1:
        _grow(lh, nodes, picks[0], x, cat, hlca, hmeta)
        return picks[0]
    return TIED - ok


@njit(cache=True, nogil=True)
def _grow(lh: np.ndarray, nodes: np.ndarray, i: int, x: np.ndarray, cat: np.ndarray,
          hlca: np.ndarray, hmeta: np.ndarray) -> None:  # pragma: no cover - compiled
    d = x.shape[0]
    for c in range(d):
        if -x[c] > lh[i, c]:
            lh[i, c] = -x[c]
        if x[c] > lh[i, d + c]:
            lh[i, d + c] = x[c]
    for j in range(cat.shape[0]):
        nodes[i, j] = hlca[hmeta[0, j] + cat[j] * hmeta[1, j] + nodes[i, j]]

"""CASTLE's best selection as one compiled loop (numba), called once per arriving tuple.

Design: docs/design/castle.md
"""

from __future__ import annotations

import numpy as np
from numba import njit

OPEN, OUTSIDE, TIED = -1, -2, -3  # answers besides a cluster index (TIED - m: m tied)
HEAD = 3  # fl starts with beta, eps, and 1.0 when plug-ins add to the losses


@njit(cache=True, nogil=True)
def best_selection(lh: np.ndarray, nodes: np.ndarray, n: int, x: np.ndarray, cat: np.ndarray,
                   tau: float, fl: np.ndarray, it: np.ndarray, work: np.ndarray,
                   picks: np.ndarray) -> int:  # pragma: no cover - compiled (numba)
    """Choose the open cluster for the tuple with numeric values ``x`` (``d`` of them) and
    hierarchy nodes ``cat`` (``h``); grow its row and nodes by the tuple; return its index.

    Rows ``0..n-1`` of ``lh`` (``(-lo, hi)``) and ``nodes`` are the open clusters (n >= 1).
    ``fl`` holds beta, eps, the plug-in flag, then the weights ``w/span`` of ``lh``'s
    ``2d`` columns, the range domains' ``d`` lows and ``d`` highs, then every hierarchy's
    ``w_j * loss(lca(a, b))``; ``it`` holds the ``h`` offsets and ``h`` sizes of the
    hierarchies' tables, then their ``lca(a, b)`` (entry ``offset + b * size + a`` in both).
    ``work`` (4 x n) is scratch for the losses without and with the tuple, then the
    plug-ins' part of each (rows 2 and 3, filled by the caller when the flag is set);
    ``picks`` (n) is scratch for tied candidates. Few arguments: each costs ~75 ns per call.

    Returns the index; ``OPEN`` when a new cluster must be opened; ``OUTSIDE`` (nothing done)
    when a value lies outside its range's domain, which must first be widened;
    ``TIED - m`` when ``m`` candidates tie (``picks[:m]``), for the caller to pick the one
    with the fewest individuals and insert.

    Args:
        lh: the open clusters' bounds, one row ``(-lo, hi)`` each (rows ``0..n-1`` used).
        nodes: the open clusters' hierarchy nodes, one row each.
        n: the number of open clusters (n >= 1).
        x: the tuple's numeric values (``d``).
        cat: the tuple's hierarchy nodes (``h``).
        tau: CASTLE's τ, the information loss a cluster may reach without a new one being opened.
        fl: the float parameters and tables described above.
        it: the hierarchy offsets, sizes and ``lca`` tables described above.
        work: scratch, 4 x n (the losses without and with the tuple, then the plug-ins' parts).
        picks: scratch, n (the tied candidates).
    """
    d = x.shape[0]
    nh = cat.shape[0]
    beta = fl[0]
    eps = fl[1]
    plug = fl[2] != 0.0
    inv = HEAD
    dlo = HEAD + 2 * d
    dhi = dlo + d
    hloss = dhi + d
    for c in range(d):
        if x[c] < fl[dlo + c] or x[c] > fl[dhi + c]:
            return OUTSIDE
    cur = work[0]
    new = work[1]
    # the sums run over the clusters in the inner loop: each cluster's sum is still added
    # term by term in the same order, but the clusters' sums no longer wait on each other
    for i in range(n):
        cur[i] = 0.0
        new[i] = 0.0
    for c in range(d):  # the (-lo) half: max(-lo, -x) = -min(lo, x)
        b = -x[c]
        w = fl[inv + c]
        for i in range(n):
            a = lh[i, c]
            cur[i] += a * w
            new[i] += (a if a >= b else b) * w
    for c in range(d):  # the hi half
        b = x[c]
        w = fl[inv + d + c]
        for i in range(n):
            a = lh[i, d + c]
            cur[i] += a * w
            new[i] += (a if a >= b else b) * w
    for j in range(nh):
        base = hloss + it[j]
        size = it[nh + j]
        row = base + cat[j] * size
        for i in range(n):
            node = nodes[i, j]
            cur[i] += fl[base + node * size + node]
            new[i] += fl[row + node]
    if plug:
        for i in range(n):
            cur[i] += work[2, i]
            new[i] += work[3, i]
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
            _grow(lh, nodes, best, x, cat, it)
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
        _grow(lh, nodes, picks[0], x, cat, it)
        return picks[0]
    return TIED - ok


@njit(cache=True, nogil=True)
def _grow(lh: np.ndarray, nodes: np.ndarray, i: int, x: np.ndarray, cat: np.ndarray,
          it: np.ndarray) -> None:  # pragma: no cover - compiled (numba)
    d = x.shape[0]
    nh = cat.shape[0]
    for c in range(d):
        if -x[c] > lh[i, c]:
            lh[i, c] = -x[c]
        if x[c] > lh[i, d + c]:
            lh[i, d + c] = x[c]
    for j in range(nh):
        nodes[i, j] = it[2 * nh + it[j] + cat[j] * it[nh + j] + nodes[i, j]]

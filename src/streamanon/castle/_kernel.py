"""CASTLE's best selection as one compiled loop (numba), called once per arriving tuple.

Design: docs/design/castle.md
"""

from __future__ import annotations

import numpy as np
from numba import njit

OPEN, OUTSIDE, TIED = -1, -2, -3  # answers besides a cluster index (TIED - m: m tied)
#: fl starts with beta, eps, 1.0 when plug-ins add to the losses, and the sum of the
#: hierarchies' largest loss terms (-1.0 when a weight or a loss is negative: no screening)
HEAD = 4
#: open clusters from which a tuple is first screened against a new cluster (below: no gain)
SCREEN_FROM = 32
#: 2**-52; the rounding error of a sum of N products is below N * EPS52 * sum(|term|) / 2
EPS52 = 2.220446049250313e-16


@njit(cache=True, nogil=True)
def best_selection(lh: np.ndarray, nodes: np.ndarray, n: int, x: np.ndarray, cat: np.ndarray,
                   tau: float, fl: np.ndarray, it: np.ndarray, work: np.ndarray,
                   picks: np.ndarray) -> int:  # pragma: no cover - compiled (numba)
    """Choose the open cluster for the tuple with numeric values ``x`` (``d`` of them) and
    hierarchy nodes ``cat`` (``h``); grow its row and nodes by the tuple; return its index.

    Rows ``0..n-1`` of ``lh`` (``(-lo, hi)``) and ``nodes`` are the open clusters (n >= 1).
    ``fl`` holds beta, eps, the plug-in flag, the hierarchies' largest terms, then the
    weights ``w/span`` of ``lh``'s ``2d`` columns, the range domains' ``d`` lows and ``d``
    highs, then every hierarchy's
    ``w_j * loss(lca(a, b))``; ``it`` holds the ``h`` offsets and ``h`` sizes of the
    hierarchies' tables, then their ``lca(a, b)`` (entry ``offset + b * size + a`` in both).
    ``work`` (4 x n) is scratch for the losses without and with the tuple, then the
    plug-ins' part of each (rows 2 and 3, filled by the caller when the flag is set);
    ``picks`` (n) is scratch for tied candidates. Few arguments: each costs ~75 ns per call.

    With many open clusters and room for more, :func:`_must_open` first screens them: when
    no cluster can take the tuple within τ, the answer is ``OPEN`` without the full pass.

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
    if n >= SCREEN_FROM and n < beta and not plug and _must_open(lh, nodes, n, x, cat, tau,
                                                                   fl, it):
        return OPEN
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


@njit(cache=True, nogil=True)
def _must_open(lh: np.ndarray, nodes: np.ndarray, n: int, x: np.ndarray, cat: np.ndarray,
               tau: float, fl: np.ndarray, it: np.ndarray) -> bool:  # pragma: no cover - numba
    """True when no open cluster's loss with the tuple is <= tau + eps, exactly as
    :func:`best_selection` computes it: its answer is then ``OPEN`` (with n < beta).

    A cluster whose weighted span ``w * (max(hi, x) - min(lo, x))`` on one attribute alone
    exceeds ``tau + eps`` plus a bound on the rounding error of the full sum cannot qualify
    (every other term is >= 0); most clusters are ruled out by one attribute. The few left
    are computed in full, term by term in the kernel's order. Needs weights >= 0 that are
    equal on both halves and hierarchy terms >= 0 (else False: the full pass decides).
    """
    d = x.shape[0]
    nh = cat.shape[0]
    hmax = fl[3]
    if hmax < 0.0:
        return False
    inv = HEAD
    dlo = HEAD + 2 * d
    dhi = dlo + d
    hloss = dhi + d
    total = hmax  # >= the sum of |terms| of any cluster (rows and x lie in the domains)
    for c in range(d):
        w = fl[inv + c]
        if not (w >= 0.0 and fl[inv + d + c] == w):
            return False
        total += 2.0 * w * max(abs(fl[dlo + c]), abs(fl[dhi + c]))
    bound = tau + fl[1]
    limit = (bound + 2.0 * (2 * d + nh + 2) * EPS52 * total) * (1.0 + 1e-6)
    if not (limit < np.inf):  # also NaN
        return False
    for i in range(n):
        ruled_out = False
        for c in range(d):
            w = fl[inv + c]
            if w > 0.0:
                a = lh[i, c]
                b = -x[c]
                lo_part = a if a >= b else b
                a = lh[i, d + c]
                b = x[c]
                hi_part = a if a >= b else b
                if (lo_part + hi_part) * w > limit:
                    ruled_out = True
                    break
        if ruled_out:
            continue
        new = 0.0  # the kernel's sum for this cluster, term by term in its order
        for c in range(d):
            a = lh[i, c]
            b = -x[c]
            new += (a if a >= b else b) * fl[inv + c]
        for c in range(d):
            a = lh[i, d + c]
            b = x[c]
            new += (a if a >= b else b) * fl[inv + d + c]
        for j in range(nh):
            base = hloss + it[j]
            size = it[nh + j]
            new += fl[base + cat[j] * size + nodes[i, j]]
        if new <= bound:
            return False
    return True


@njit(cache=True, nogil=True)
def merged_rows(lh: np.ndarray, n: int, i: int, out: np.ndarray) -> None:  # pragma: no cover
    """``out[:n] = np.maximum(lh[:n], lh[i])``, element by element as numpy's maximum (a NaN
    wins): each cluster's bounds merged with cluster ``i``'s, without numpy's per-row loop."""
    m = lh.shape[1]
    for r in range(n):
        for c in range(m):
            a = lh[r, c]
            b = lh[i, c]
            out[r, c] = a if (a >= b or a != a) else b

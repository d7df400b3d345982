"""The window release's fit test as one compiled loop (numba): which remembered class each
tuple fits in, the least loss first. Design: docs/design/castle.md (``castle.window``)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def best_fits(lo: np.ndarray, hi: np.ndarray, order: np.ndarray, ranked: np.ndarray,
              below: float, x: np.ndarray, nodes: np.ndarray, at: np.ndarray,
              tables: np.ndarray, offsets: np.ndarray,
              out: np.ndarray) -> None:  # pragma: no cover - numba
    """For each tuple, the remembered class with the least loss below ``below`` that holds
    it (its numbers in the class's ranges, the class's hierarchy nodes its ancestors), the
    lowest slot among equal losses: the first that holds it in ``order``; ``-1`` for none.

    With several tuples, the classes are first narrowed, in one pass, to those that can hold
    one of them: ranges meeting the tuples' bounds, nodes on a line with the tuples' lowest
    common node (both are ancestors of a tuple's node). The order is kept, so the answers are
    the same.

    Args:
        lo: the classes' lows, one row per numeric attribute, a column per class (slot).
        hi: the classes' highs, likewise.
        order: the slots in use by loss, then slot.
        ranked: their losses, in that order.
        below: only classes losing less than this.
        x: the tuples' numbers, one row per tuple.
        nodes: the classes' hierarchy nodes, one row per class.
        at: the tuples' hierarchy nodes, one row per tuple.
        tables: the hierarchies' LCA tables flattened: hierarchy ``j``'s entry ``(a, b)``
            at ``offsets[j] + a * offsets[h + j] + b``.
        offsets: each table's start, then each table's row length.
        out: written: each tuple's class, or ``-1``.
    """
    m, d = x.shape
    h = at.shape[1]
    n = 0
    while n < len(order) and ranked[n] < below:
        n += 1
    cand = order[:n]
    if m > 1 and n > 8:
        bmin = np.full(d, np.inf)
        bmax = np.full(d, -np.inf)
        for i in range(m):
            for j in range(d):
                v = x[i, j]
                if v < bmin[j]:
                    bmin[j] = v
                if v > bmax[j]:
                    bmax[j] = v
        top = np.empty(h, dtype=np.int64)
        for j in range(h):
            node = at[0, j]
            for i in range(1, m):
                node = tables[offsets[j] + node * offsets[h + j] + at[i, j]]
            top[j] = node
        keep = np.empty(n, dtype=np.int64)
        kept = 0
        for p in range(n):
            c = order[p]
            ok = True
            for j in range(d):
                if not (lo[j, c] <= bmax[j] and hi[j, c] >= bmin[j]):
                    ok = False
                    break
            if ok:
                for j in range(h):
                    node = nodes[c, j]
                    meet = tables[offsets[j] + node * offsets[h + j] + top[j]]
                    if meet != node and meet != top[j]:
                        ok = False
                        break
            if ok:
                keep[kept] = c
                kept += 1
        cand = keep[:kept]
    for i in range(m):
        best = -1
        for c in cand:
            ok = True
            for j in range(d):
                v = x[i, j]
                if not (lo[j, c] <= v and v <= hi[j, c]):
                    ok = False
                    break
            if ok:
                for j in range(h):
                    node = nodes[c, j]
                    if tables[offsets[j] + node * offsets[h + j] + at[i, j]] != node:
                        ok = False
                        break
            if ok:
                best = c
                break
        out[i] = best


@njit(cache=True, nogil=True)
def rank_replace(order: np.ndarray, ranked: np.ndarray, n: int, drop: bool,
                 old_loss: float, slot: int, loss: float) -> int:  # pragma: no cover - numba
    """Keep ``order`` sorted when slot ``slot`` is given loss ``loss``; returns the slots in
    use after.

    Args:
        order: the slots in use by loss, then slot (the first ``n``); changed in place.
        ranked: their losses, likewise.
        n: the slots in use.
        drop: the slot is in use: it first leaves its place.
        old_loss: its loss then.
        slot: the slot.
        loss: its new loss.
    """
    if drop:
        at = _rank_at(order, ranked, n, old_loss, slot)
        for p in range(at, n - 1):
            order[p] = order[p + 1]
            ranked[p] = ranked[p + 1]
        n -= 1
    at = _rank_at(order, ranked, n, loss, slot)
    for p in range(n, at, -1):
        order[p] = order[p - 1]
        ranked[p] = ranked[p - 1]
    order[at] = slot
    ranked[at] = loss
    return n + 1


@njit(cache=True, nogil=True)
def _rank_at(order: np.ndarray, ranked: np.ndarray, n: int, loss: float,
             slot: int) -> int:  # pragma: no cover - numba
    """The first place in ``order[:n]`` not before ``(loss, slot)``, by loss then slot.

    Args:
        order: the slots by loss, then slot.
        ranked: their losses.
        n: the slots in use.
        loss: the loss looked for.
        slot: the slot looked for.
    """
    a = 0
    b = n
    while a < b:
        mid = (a + b) // 2
        if ranked[mid] < loss or (ranked[mid] == loss and order[mid] < slot):
            a = mid + 1
        else:
            b = mid
    return a


@njit(cache=True, nogil=True)
def _distinct(codes: np.ndarray, part: np.ndarray, seen: np.ndarray, stamp: int,
              enough: int) -> bool:  # pragma: no cover - numba
    """Do ``codes[part]`` hold >= ``enough`` distinct values? (``seen``: a scratch array
    of stamps, one per code.)"""
    m = 0
    for i in part:
        c = codes[i]
        if seen[c] != stamp:
            seen[c] = stamp
            m += 1
            if m >= enough:
                return True
    return m >= enough


@njit(cache=True, nogil=True)
def _median(col: np.ndarray) -> float:  # pragma: no cover - numba
    """``np.median`` (the mean of the two middle values for an even count)."""
    s = np.sort(col)
    n = len(s)
    half = n // 2
    if n % 2:
        return s[half]
    return (s[half - 1] + s[half]) / 2


@njit(cache=True, nogil=True)
def median_cuts(x: np.ndarray, nodes: np.ndarray, ind: np.ndarray, sens: np.ndarray,
                k: int, l: int, small: bool,  # noqa: E741
                inv: np.ndarray, w_hier: np.ndarray,
                tables: np.ndarray, toff: np.ndarray, ranks: np.ndarray,
                parents: np.ndarray, losses: np.ndarray, noff: np.ndarray,
                fracs: np.ndarray, ends: bool, out: np.ndarray,
                reuse: np.ndarray) -> int:  # pragma: no cover - numba
    """:func:`streamanon.castle.split.median_split`'s cuts as one compiled loop, for the
    distinct diversity rule: writes each tuple's class (classes numbered in the order of
    their oldest tuple) and returns the number of classes.

    Args:
        x: the tuples' numbers, one row per tuple.
        nodes: the tuples' hierarchy nodes, one row per tuple.
        ind: each tuple's individual, as a code ``0..``.
        sens: each sensitive attribute's codes, one row per attribute.
        k: distinct individuals each class holds.
        l: distinct sensitive values each class holds per attribute.
        small: cut classes of fewer than 2k individuals too.
        inv: the numeric weights over the domains' spans (``ClusterSet._inv``: twice).
        w_hier: the hierarchies' weights.
        tables: the hierarchies' LCA tables flattened: hierarchy ``j``'s entry ``(a, b)``
            at ``toff[j] + a * toff[h + j] + b``.
        toff: each table's start, then each table's row length.
        ranks: each node's depth-first position, hierarchy ``j``'s at ``noff[j]``.
        parents: each node's parent (-1 for the root), likewise.
        losses: each node's loss, likewise.
        noff: each hierarchy's start in ``ranks``, ``parents`` and ``losses``.
        fracs: the cuts tried besides the median, as shares of the sorted values.
        ends: try too the cuts that leave k tuples on one side (the values at ranks k - 1
            and m - k - 1 of a class of m tuples), after the shares.
        out: written: each tuple's class.
        reuse: each tuple's loss in the remembered class it would join (``inf``: none); a
            tuple counts at most that in a half's cost. Empty: every tuple counts its half's
            loss.
    """
    n, d = x.shape
    h = nodes.shape[1]
    n_ind = 0
    for i in range(n):
        n_ind = max(n_ind, ind[i] + 1)
    seen = np.zeros(max(n_ind, 1), dtype=np.int64)
    n_sens = sens.shape[0]
    n_codes = 1
    for s in range(n_sens):
        for i in range(n):
            n_codes = max(n_codes, sens[s, i] + 1)
    seen_s = np.zeros(n_codes, dtype=np.int64)
    stamp = 0
    stack = [np.arange(n)]
    done = []
    col = np.empty(n)
    while len(stack):
        part = stack.pop()
        m = len(part)
        if m < 2 * k:
            done.append(part)
            continue
        if not small:
            stamp += 1
            if not _distinct(ind, part, seen, stamp, 2 * k):
                done.append(part)
                continue
        best_cost = np.inf
        best_left = np.zeros(0, dtype=np.bool_)
        found = False
        tried = []
        for j in range(d + h):
            c = col[:m]
            if j < d:
                for t in range(m):
                    c[t] = x[part[t], j]
            else:
                g = j - d
                top = nodes[part[0], g]
                for t in range(m):
                    top = tables[toff[g] + top * toff[h + g] + nodes[part[t], g]]
                base = noff[g]
                for t in range(m):
                    node = nodes[part[t], g]
                    while (node != top and parents[base + node] != top
                           and parents[base + node] >= 0):
                        node = parents[base + node]
                    c[t] = ranks[base + node]
            lo = c.min()
            hi = c.max()
            if lo == hi:
                continue
            srt = np.sort(c)
            for f in range(len(fracs) + 3):
                if f == 0:
                    med = _median(c)
                elif f <= len(fracs):
                    med = srt[int(fracs[f - 1] * (m - 1))]
                else:  # the ends: k tuples cut off either end of the sorted values
                    r = k - 1 if f == len(fracs) + 1 else m - k - 1
                    if not ends or r < 0 or r >= m:
                        continue
                    med = srt[r]
                left = c <= med if med < hi else c < med
                same = False
                for prev in tried:
                    if np.array_equal(prev, left):
                        same = True
                        break
                if same:
                    continue
                tried.append(left)
                a = part[left]
                b = part[~left]
                ok = True
                for half in (a, b):
                    stamp += 1
                    if not _distinct(ind, half, seen, stamp, k):
                        ok = False
                        break
                    for s in range(n_sens):
                        stamp += 1
                        if not _distinct(sens[s], half, seen_s, stamp, l):
                            ok = False
                            break
                    if not ok:
                        break
                if not ok:
                    continue
                cost = 0.0
                for half in (a, b):
                    acc = 0.0
                    for q in range(d):
                        mn = np.inf
                        mx = -np.inf
                        for i in half:
                            v = x[i, q]
                            mn = min(mn, v)
                            mx = max(mx, v)
                        acc += -mn * inv[q] + mx * inv[d + q]
                    for g in range(h):
                        top = nodes[half[0], g]
                        for i in half:
                            top = tables[toff[g] + top * toff[h + g] + nodes[i, g]]
                        acc += w_hier[g] * losses[noff[g] + top]
                    if len(reuse):
                        part_cost = 0.0
                        n_full = 0
                        for i in half:
                            if reuse[i] < acc:
                                part_cost += reuse[i]
                            else:
                                n_full += 1
                        cost += part_cost + n_full * acc
                    else:
                        cost += len(half) * acc
                if not found or cost < best_cost:
                    found = True
                    best_cost = cost
                    best_left = left
        if not found:
            done.append(part)
        else:
            stack.append(part[~best_left])
            stack.append(part[best_left])
    firsts = np.empty(len(done), dtype=np.int64)
    for p in range(len(done)):
        firsts[p] = done[p].min()
    order = np.argsort(firsts)
    for r in range(len(order)):
        for i in done[order[r]]:
            out[i] = r
    return len(done)

@njit(cache=True, nogil=True)
def part_states(x: np.ndarray, at: np.ndarray, starts: np.ndarray,
                tables: tuple[np.ndarray, ...], h: int, lo: np.ndarray, hi: np.ndarray,
                nodes: np.ndarray) -> None:  # pragma: no cover - numba
    """The states of the window's classes, all in one pass (the window release, one cut).

    Args:
        x: the tuples' numbers, one row per tuple, each class's rows together.
        at: the tuples' hierarchy nodes, one row per tuple, likewise.
        starts: class ``p`` is rows ``starts[p]`` to ``starts[p + 1] - 1`` (none empty).
        tables: each hierarchy's LCA table (one placeholder table when there is none).
        h: the hierarchies.
        lo: written: a row per class, the least value of each column (the first of equal
            values stays, as ``numpy.min``'s row-order scan).
        hi: written: likewise, the greatest.
        nodes: written: a row per class, each hierarchy's lowest common node (folded in row
            order over ``tables[j]``: the same node as any order).
    """
    d = x.shape[1]
    for p in range(len(starts) - 1):
        a = starts[p]
        b = starts[p + 1]
        for q in range(d):
            mn = x[a, q]
            mx = mn
            for i in range(a + 1, b):
                v = x[i, q]
                if v < mn:
                    mn = v
                if v > mx:
                    mx = v
            lo[p, q] = mn
            hi[p, q] = mx
        for j in range(h):
            table = tables[j]
            node = at[a, j]
            for i in range(a + 1, b):
                v = at[i, j]
                if v != node:  # lca(a, a) = a
                    node = table[node, v]
            nodes[p, j] = node


__all__ = ["best_fits", "median_cuts", "part_states", "rank_replace"]

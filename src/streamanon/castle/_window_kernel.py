"""The window release's fit test as one compiled loop (numba): which remembered class each
tuple fits in, the least loss first. Design: docs/design/castle.md (``castle.window``)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def best_fits(lo: np.ndarray, hi: np.ndarray, loss: np.ndarray, n: int, below: float,
              x: np.ndarray, nodes: np.ndarray, at: np.ndarray, tables: np.ndarray,
              offsets: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - numba
    """For each tuple, the first remembered class with the least loss below ``below`` that
    holds it (its numbers in the class's ranges, the class's hierarchy nodes its ancestors);
    ``-1`` for none.

    Args:
        lo: the classes' lows, one row per numeric attribute, a column per class.
        hi: the classes' highs, likewise.
        loss: each class's loss.
        n: the classes in use (columns ``0..n-1``).
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
    for i in range(m):
        best = -1
        least = below
        for c in range(n):
            lc = loss[c]
            if not lc < least:
                continue
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
                least = lc
        out[i] = best


__all__ = ["best_fits"]

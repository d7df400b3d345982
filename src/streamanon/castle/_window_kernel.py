"""The window release's fit test as one compiled loop (numba): which remembered class each
tuple fits in, the least loss first. Design: docs/design/castle.md (``castle.window``)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def best_fits(lo: np.ndarray, hi: np.ndarray, loss: np.ndarray, n: int, below: float,
              x: np.ndarray, nodes: np.ndarray, at: np.ndarray, tables: np.ndarray,
              offsets: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - numba
    """For each row ``i`` of ``x`` (its numbers) and ``at`` (its hierarchy nodes), the first
    of the columns ``0..n-1`` of ``lo``/``hi`` (one row per attribute) with the least
    ``loss`` below ``below`` whose ranges hold the numbers and whose ``nodes`` are
    ancestors of the tuple's (``tables``: the hierarchies' LCA tables flattened, hierarchy
    ``j``'s entry ``(a, b)`` at ``offsets[j] + a * offsets[h + j] + b``); ``-1`` for none,
    written to ``out[i]``."""
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

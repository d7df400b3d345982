"""z-anonymity's window counts as one compiled pass over the rows (numba).

For each row, in stream order, the number of distinct users that exposed the row's value
within Δt up to and including the row (a user counts once, by its latest exposure ``q``, while
``t_p - t_q <= Δt``). Done with numpy this took three stable sorts and two binary searches
over the rows of a batch; here each row costs a hash look-up of its (value, user) pair and
the expiry of its value's oldest rows, in one loop.

Compiled on first use and cached on disk (``cache=True``), as
:mod:`streamanon.castle._kernel`; imported only when a batch is counted, so that start-up
(``streamanon z --help``) does not load numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: 2**64 / golden ratio as a signed 64-bit number (a multiplicative hash that wraps around)
_GOLDEN = -7046029254386353131


@njit(cache=True, nogil=True)
def window_counts(vc: np.ndarray, uc: np.ndarray, t: np.ndarray, n_values: int,
                  n_users: int, delta_t: float, now: float
                  ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled (numba)
    """Counts per row, and per row whether it is its (value, user) pair's latest and still
    within Δt of ``now`` (the rows the window keeps). ``vc`` in ``[0, n_values)``, ``uc`` in
    ``[0, n_users)``, ``t`` non-decreasing."""
    r = vc.shape[0]
    counts = np.empty(r, dtype=np.int64)
    keep = np.zeros(r, dtype=np.bool_)
    # each value's rows still within Δt, oldest first: a list linked through ``nxt``
    head = np.full(n_values, -1, dtype=np.int64)
    tail = np.full(n_values, -1, dtype=np.int64)
    live = np.zeros(n_values, dtype=np.int64)
    nxt = np.full(r, -1, dtype=np.int64)
    latest = np.ones(r, dtype=np.bool_)  # no later row of the same pair (yet)
    gone = np.zeros(r, dtype=np.bool_)  # expired from its value's window
    # the latest row of each (value, user) pair: an open-addressing hash table
    size = 16
    while size < 2 * r:
        size *= 2
    mask = size - 1
    keys = np.full(size, -1, dtype=np.int64)
    rows = np.empty(size, dtype=np.int64)
    for p in range(r):
        v = vc[p]
        key = v * n_users + uc[p]
        h = key * _GOLDEN
        h = (h ^ (h >> 32)) & mask
        while keys[h] != -1 and keys[h] != key:
            h = (h + 1) & mask
        if keys[h] == key:
            q = rows[h]
            latest[q] = False
            if not gone[q]:
                live[v] -= 1
        else:
            keys[h] = key
        rows[h] = p
        if tail[v] >= 0:
            nxt[tail[v]] = p
        else:
            head[v] = p
        tail[v] = p
        live[v] += 1
        tp = t[p]
        f = head[v]
        while tp - t[f] > delta_t:
            gone[f] = True
            if latest[f]:
                live[v] -= 1
            f = nxt[f]
        head[v] = f
        counts[p] = live[v]
    for p in range(r):
        keep[p] = latest[p] and now - t[p] <= delta_t
    return counts, keep

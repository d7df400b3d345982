"""The batch engine's window counts against their definition, written out row by row."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.zanon.operator import _window_counts


def definition(vc: list[int], uc: list[int], t: list[float], delta_t: float, now: float
               ) -> tuple[list[int], list[int]]:
    counts = []
    for p in range(len(vc)):
        latest: dict[int, float] = {}  # user -> time of its latest exposure of the value
        for q in range(p + 1):
            if vc[q] == vc[p]:
                latest[uc[q]] = t[q]
        counts.append(sum(1 for tq in latest.values() if t[p] - tq <= delta_t))
    last = {(v, u): q for q, (v, u) in enumerate(zip(vc, uc, strict=True))}
    keep = sorted(q for q in last.values() if now - t[q] <= delta_t)
    return counts, keep


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 40)),
                min_size=1, max_size=60),
       st.sampled_from([0.0, 0.1, 1.0, 2.5, 7.0]), st.sampled_from([1.0, 0.1, 1e-3]),
       st.sampled_from([0.0, 1.0, 10.0]), st.sampled_from([0.0, 1e9]))
def test_window_counts_follow_the_definition(rows, delta_t, scale, later, offset) -> None:
    vc = [v for v, _, _ in rows]
    uc = [u for _, u, _ in rows]
    t = sorted(offset + s * scale for _, _, s in rows)
    counts, keep = _window_counts(np.array(vc), np.array(uc), np.array(t), delta_t,
                                  t[-1] + later)
    assert (counts.tolist(), keep.tolist()) == definition(vc, uc, t, delta_t, t[-1] + later)

"""The batch engine's window counts against their definition, written out row by row: the
numpy version and the compiled one (:mod:`streamanon.zanon._native`), which must also answer
as the numpy version on large traces (its pair table grown many times, in both its layouts)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.zanon import _native
from streamanon.zanon import operator as zop
from streamanon.zanon.operator import _window_counts, _window_counts_numpy

NATIVE = _native.load()
needs_native = pytest.mark.skipif(NATIVE is None, reason=f"no C build: {_native.unavailable}")
IMPLEMENTATIONS = {"numpy": _window_counts_numpy,
                   "C": None if NATIVE is None else NATIVE.window_counts}


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


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 40)),
                min_size=1, max_size=60),
       st.sampled_from([0.0, 0.1, 1.0, 2.5, 7.0]), st.sampled_from([1.0, 0.1, 1e-3]),
       st.sampled_from([0.0, 1.0, 10.0]), st.sampled_from([0.0, 1e9]))
def test_window_counts_follow_the_definition(impl, rows, delta_t, scale, later, offset) -> None:
    if IMPLEMENTATIONS[impl] is None:
        pytest.skip(f"no C build: {_native.unavailable}")
    vc = [v for v, _, _ in rows]
    uc = [u for _, u, _ in rows]
    t = sorted(offset + s * scale for _, _, s in rows)
    counts, keep = IMPLEMENTATIONS[impl](np.array(vc, dtype=np.int64),
                                         np.array(uc, dtype=np.int64),
                                         np.array(t, dtype=np.float64), delta_t, t[-1] + later)
    assert (counts.tolist(), keep.tolist()) == definition(vc, uc, t, delta_t, t[-1] + later)


@needs_native
@pytest.mark.parametrize(("n_values", "n_users"), [(300, 400), (1 << 20, 1 << 13)])
def test_the_compiled_counts_answer_as_numpys_on_large_traces(n_values, n_users) -> None:
    """200,000 rows with up to as many pairs: the pair table grows from 65,536 slots; with
    value x user codes past 2**32 it keeps 64-bit keys."""
    rng = np.random.default_rng(n_values)
    n = 200_000
    vc = np.minimum(rng.zipf(1.3, n), n_values) - 1
    uc = rng.integers(0, n_users, n)
    t = np.cumsum(rng.choice([0.0, 0.0, 0.5, 1.0, 3.0], n)) + 1e9
    for delta_t in (0.0, 60.0, 3600.0):
        want = _window_counts_numpy(vc, uc, t, delta_t, float(t[-1]) + 5.0)
        got = NATIVE.window_counts(vc, uc, t, delta_t, float(t[-1]) + 5.0)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@needs_native
def test_the_compiled_counts_refuse_what_they_cannot_take() -> None:
    vc, uc, t = np.zeros(3, np.int64), np.zeros(3, np.int64), np.arange(3.0)
    with pytest.raises(TypeError, match="uc"):
        NATIVE.window_counts(vc, uc.astype(np.int32), t, 1.0, 2.0)
    with pytest.raises(TypeError, match="t"):
        NATIVE.window_counts(vc, uc, t[:2], 1.0, 2.0)
    with pytest.raises(ValueError, match="codes"):
        NATIVE.window_counts(vc - 1, uc, t, 1.0, 2.0)
    with pytest.raises(TypeError, match="5 arguments"):
        NATIVE.window_counts(vc, uc, t)


def test_without_the_build_numpy_counts(monkeypatch) -> None:
    """STREAMANON_NATIVE=0: nothing is built and the numpy version answers."""
    monkeypatch.setenv("STREAMANON_NATIVE", "0")
    assert _native.load() is None and _native.unavailable == "STREAMANON_NATIVE=0"
    monkeypatch.setattr(zop, "_NATIVE", [None])
    vc, uc, t = np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([0.0, 1.0, 2.0])
    counts, keep = _window_counts(vc, uc, t, 1.5, 2.0)
    assert counts.tolist() == [1, 2, 1] and keep.tolist() == [1, 2]

"""The C build of the best selection and merged rows answers as numba's, bit for bit: the same
index, the same grown rows and nodes, the same tied candidates, on clusters near the rounding
boundary of τ + eps, with ties, plug-in parts, NaNs and values outside the domains."""

from __future__ import annotations

import numpy as np
import pytest

from streamanon.castle import _kernel, _native, cluster

NATIVE = _native.load()
needs_native = pytest.mark.skipif(NATIVE is None, reason=f"no C build: {_native.unavailable}")


def _case(rng: np.random.Generator, n: int, d: int, size: int, spread: float, rows: int
          ) -> tuple[np.ndarray, ...]:
    centre = rng.uniform(0, 1000, d)
    lo = centre + rng.choice([0.0, 1e-13, 1e-9, spread], (n, d)) * rng.uniform(-1, 0, (n, d))
    hi = np.maximum(lo, centre + rng.choice([0.0, 1e-13, spread], (n, d)) * rng.random((n, d)))
    lh = np.zeros((rows, 2 * d))
    lh[:n] = np.concatenate((-lo, hi), axis=1)
    lh[rng.integers(0, n)] = lh[rng.integers(0, n)]  # two equal clusters: a tie
    nodes = np.zeros((rows, 1), dtype=np.int64)
    nodes[:n] = rng.integers(0, size, (n, 1))
    lca = np.where(np.eye(size, dtype=bool), np.arange(size)[:, None], size - 1)
    loss = np.where(np.eye(size, dtype=bool), 0.0, rng.choice([0.25, 0.5]))
    inv = rng.choice([0.0, 1e-3, 2e-3], d)
    beta = float(rng.choice([n, n + 1, 4 * n]))
    plug = float(rng.choice([0.0, 0.0, 1.0]))
    hmax = float(rng.choice([float(loss.max()), -1.0]))
    fl = np.concatenate(([beta, 1e-12, plug, hmax], inv, inv, np.zeros(d), np.full(d, 1000.0),
                         loss.T.ravel()))
    it = np.concatenate(([0, size], lca.T.ravel())).astype(np.int64)
    x = np.clip(centre + rng.choice([0.0, 1e-13, spread], d) * rng.uniform(-1, 1, d), 0, 1000)
    if d and rng.random() < 0.05:
        x[0] = 1000.5  # outside its domain
    if d and rng.random() < 0.03:
        lh[0, 0] = np.nan
    cat = rng.integers(0, size, 1).astype(np.int64)
    return lh, nodes, x, cat, fl, it


@needs_native
@pytest.mark.parametrize("seed", range(30))
def test_best_selection_answers_as_numbas(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(1, 4 * _kernel.SCREEN_FROM))
        rows = n + int(rng.integers(0, 3))
        lh, nodes, x, cat, fl, it = _case(rng, n, int(rng.integers(0, 5)), 4,
                                          float(rng.choice([1e-6, 1.0, 50.0])), rows)
        tau = float(rng.choice([0.0, 0.0, 1e-13, 1e-3, 0.05]))
        plug = rng.random((2, n + 2))
        answers = []
        for f in (_kernel.best_selection, NATIVE.best_selection):
            a, b = lh.copy(), nodes.copy()
            work = np.zeros((4, n + 2))
            work[2:] = plug
            picks = np.full(n + 2, -7, dtype=np.int64)
            got = f(a, b, n, x, cat, tau, fl, it, work, picks)
            answers.append((got, a.tobytes(), b.tobytes(),
                            picks[:max(0, -3 - got)].tobytes(), work[:2, :n].tobytes()))
        assert answers[0] == answers[1]


@needs_native
def test_merged_rows_answers_as_numbas() -> None:
    rng = np.random.default_rng(3)
    lh = rng.normal(size=(50, 6))
    lh[4, 2] = np.nan
    lh[7] = lh[9]
    lh[11, 1] = -0.0
    for i in (0, 4, 9, 11):
        got, want = np.empty((64, 6)), np.empty((64, 6))
        _kernel.merged_rows(lh, 50, i, want)
        NATIVE.merged_rows(lh, 50, i, got)
        assert got[:50].tobytes() == want[:50].tobytes()


@needs_native
def test_arrays_of_other_types_or_shapes_are_refused() -> None:
    lh, nodes = np.zeros((2, 2)), np.zeros((2, 0), dtype=np.int64)
    args = [lh, nodes, 1, np.zeros(1), np.zeros(0, dtype=np.int64), 0.0, np.zeros(8),
            np.zeros(0, dtype=np.int64), np.zeros((4, 2)), np.zeros(2, dtype=np.int64)]
    assert NATIVE.best_selection(*args) == 0
    for at, bad in ((0, np.zeros((2, 2), dtype=np.float32)), (1, np.zeros((2, 0))),
                    (0, np.zeros((2, 4))[:, ::2])):
        with pytest.raises(TypeError):
            NATIVE.best_selection(*args[:at], bad, *args[at + 1:])
    with pytest.raises(ValueError, match="inconsistent"):
        NATIVE.best_selection(*args[:2], 3, *args[3:])


@needs_native
def test_the_constants_are_the_clusters() -> None:
    assert (NATIVE.OPEN, NATIVE.OUTSIDE, NATIVE.TIED, NATIVE.HEAD, NATIVE.SCREEN_FROM) == (
        cluster.OPEN, cluster.OUTSIDE, cluster.TIED, cluster.HEAD, _kernel.SCREEN_FROM)


def test_turned_off_it_is_not_built(monkeypatch) -> None:
    monkeypatch.setenv("STREAMANON_NATIVE", "0")
    assert _native.load() is None
    assert _native.unavailable == "STREAMANON_NATIVE=0"


def test_without_a_compiler_numba_serves(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    assert _native.load() is None
    assert _native.unavailable == "FileNotFoundError: no C compiler"
    assert not (tmp_path / "streamanon").exists()


@needs_native
def test_a_build_that_fails_says_why(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_native, "SOURCE", "this is not C;")
    assert _native.load() is None
    assert _native.unavailable is not None and "the build failed" in _native.unavailable
    assert list((tmp_path / "streamanon" / "kernels").iterdir()) == []  # no half-built file


@needs_native
def test_a_cache_others_may_write_is_not_loaded(monkeypatch, tmp_path) -> None:
    """A library in a folder another user may write could be anyone's code: the C build is
    refused there (numba serves) and says why; the folders it creates are the user's only."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _native.load() is not None
    kernels = tmp_path / "streamanon" / "kernels"
    assert kernels.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "streamanon").stat().st_mode & 0o777 == 0o700
    kernels.chmod(0o777)
    assert _native.load() is None
    assert "writable by others" in (_native.unavailable or "")
    kernels.chmod(0o700)
    (built,) = kernels.iterdir()
    built.chmod(0o666)
    assert _native.load() is None
    assert "writable by others" in (_native.unavailable or "")

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


# -- the window release's loops ---------------------------------------------------------------

#: a hierarchy of 7 nodes: 0 the root, 1 and 2 below it, 3 and 4 below 1, 5 and 6 below 2
_PARENTS = np.array([-1, 0, 0, 1, 1, 2, 2], dtype=np.int64)


def _lca_table() -> np.ndarray:
    def up(v: int) -> list[int]:
        path = [v]
        while _PARENTS[path[-1]] >= 0:
            path.append(int(_PARENTS[path[-1]]))
        return path

    size = len(_PARENTS)
    table = np.zeros((size, size), dtype=np.int32)
    for a in range(size):
        for b in range(size):
            table[a, b] = next(v for v in up(a) if v in up(b))
    return table


_TABLE = _lca_table()
_RANKS = np.array([0, 1, 4, 2, 3, 5, 6], dtype=np.float64)  # depth-first positions
_LOSSES = np.array([1.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0])


def _window() -> object:
    from streamanon.castle import _window_kernel

    return _window_kernel


@needs_native
@pytest.mark.parametrize("seed", range(12))
def test_median_cuts_answer_as_numbas(seed: int) -> None:
    """Ties, constant columns, hierarchies, reuse caps, k, l, shares and ends at random: the
    same classes and the same numbering."""
    from streamanon.castle.split import SHARES, SINGLE_SHARES, flat_tables

    rng = np.random.default_rng(seed)
    numba_ = _window()
    checked = 0
    for _ in range(25):
        n = int(rng.integers(1, 260))
        d, h, n_sens = int(rng.integers(0, 4)), int(rng.integers(0, 3)), int(rng.integers(0, 3))
        if d + h == 0:
            d = 1
        x = rng.integers(0, int(rng.choice([3, 50, 1000])), (n, d)).astype(np.float64)
        if d and rng.random() < 0.3:
            x[:, 0] = 7.0  # a constant column
        nodes = rng.choice([3, 4, 5, 6, 1, 2], (n, h)).astype(np.int64)
        ind = rng.integers(0, max(1, n // int(rng.choice([1, 2, 3]))), n).astype(np.int64)
        sens = rng.integers(0, int(rng.integers(1, 6)), (n_sens, n)).astype(np.int64)
        tables, toff = flat_tables([_TABLE.astype(np.int64)] * h, np.int64)
        noff = np.array([7 * j for j in range(h)] or [0], dtype=np.int64)
        ranks = np.concatenate([_RANKS] * h or [np.zeros(1)])
        parents = np.concatenate([_PARENTS] * h or [np.zeros(1, dtype=np.int64)])
        losses = np.concatenate([_LOSSES] * h or [np.zeros(1)])
        w_hier = rng.random(max(h, 1))
        inv = rng.choice([0.0, 1e-3, 0.1], max(2 * d, 1))
        fracs = np.array([(), SHARES, SINGLE_SHARES][int(rng.integers(0, 3))],
                         dtype=np.float64)
        reuse = (np.where(rng.random(n) < 0.5, np.inf, rng.random(n)) if rng.random() < 0.5
                 else np.zeros(0))
        k, l = int(rng.integers(1, 6)), int(rng.integers(0, 3))  # noqa: E741
        small, ends = bool(rng.random() < 0.7), bool(rng.random() < 0.5)
        answers = []
        for f in (numba_.median_cuts, NATIVE.median_cuts):
            out = np.full(n, -1, dtype=np.int64)
            count = f(x, nodes, ind, sens, k, l, small, inv, w_hier, tables, toff, ranks,
                      parents, losses, noff, fracs, ends, out, reuse)
            answers.append((count, out.tolist()))
        assert answers[0] == answers[1]
        checked += answers[0][0] > 1
    assert checked >= 5  # the cases cut, not only kept whole


@needs_native
@pytest.mark.parametrize("seed", range(8))
def test_best_fits_answer_as_numbas(seed: int) -> None:
    from streamanon.castle.split import flat_tables

    rng = np.random.default_rng(seed)
    numba_ = _window()
    for _ in range(30):
        d, h = int(rng.integers(0, 4)), int(rng.integers(0, 3))
        size, m = int(rng.integers(1, 40)), int(rng.integers(1, 12))
        lo = rng.integers(0, 50, (d, size)).astype(np.float64)
        hi = lo + rng.integers(0, 30, (d, size))
        loss = rng.choice([0.1, 0.2, 0.3, np.inf], size)
        used = int(rng.integers(0, size + 1))
        order = np.lexsort((np.arange(used), loss[:used])).astype(np.int64)
        ranked = loss[order]
        nodes = rng.choice(range(7), (size, h)).astype(np.int64)
        at = rng.choice([3, 4, 5, 6], (m, h)).astype(np.int64)
        x = rng.integers(0, 80, (m, d)).astype(np.float64)
        if d and m > 1:
            x[0] = lo[:, 0]  # on a class's bounds
        tables, offsets = flat_tables([_TABLE] * h, np.int32)
        below = float(rng.choice([np.inf, 0.25, 0.15]))
        answers = []
        for f in (numba_.best_fits, NATIVE.best_fits):
            out = np.full(m, -9, dtype=np.int64)
            f(lo, hi, order, ranked, below, x, nodes, at, tables, offsets, out)
            answers.append(out.tolist())
        assert answers[0] == answers[1]


@needs_native
def test_rank_replace_keeps_the_same_order_as_numbas() -> None:
    rng = np.random.default_rng(5)
    numba_ = _window()
    size = 16
    states = [(np.zeros(size, dtype=np.int64), np.zeros(size)) for _ in range(2)]
    counts = [0, 0]
    losses = np.full(size, np.inf)
    for step in range(200):
        slot, loss = step % size, float(rng.choice([0.1, 0.2, 0.3, 0.4]))
        full = step >= size
        for i, f in enumerate((numba_.rank_replace, NATIVE.rank_replace)):
            order, ranked = states[i]
            counts[i] = f(order, ranked, counts[i], full, float(losses[slot]), slot, loss)
        losses[slot] = loss
        assert counts[0] == counts[1]
        assert states[0][0].tolist() == states[1][0].tolist()
        assert states[0][1].tobytes() == states[1][1].tobytes()


@needs_native
@pytest.mark.parametrize("seed", range(6))
def test_part_states_answer_as_numbas_and_a_scan_of_each_class(seed: int) -> None:
    """Each class's least and greatest value per column (0.0 and -0.0 among them) and
    lowest common node per hierarchy: C and numba agree byte for byte, and with numpy's
    scan of the class's rows up to the sign of a zero (numpy may keep the other of 0.0 and
    -0.0; both print as 0 and compare equal)."""
    rng = np.random.default_rng(seed)
    numba_ = _window()
    for _ in range(30):
        d, h = int(rng.integers(0, 4)), int(rng.integers(0, 3))
        sizes = rng.integers(1, 9, size=int(rng.integers(1, 8)))
        n = int(sizes.sum())
        x = rng.normal(size=(n, d)).round(1)
        if d and rng.random() < 0.5:
            x[rng.integers(0, n), 0] = -0.0
            x[rng.integers(0, n), 0] = 0.0
        at = rng.choice(range(7), (n, h)).astype(np.int64)
        starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        tables = tuple([_TABLE] * h) or (np.zeros((1, 1), dtype=np.int32),)
        answers = []
        for f in (numba_, NATIVE):
            lo, hi = np.full((len(sizes), d), np.nan), np.full((len(sizes), d), np.nan)
            nodes = np.full((len(sizes), h), -1, dtype=np.int64)
            f.part_states(x, at, starts, tables, h, lo, hi, nodes)
            answers.append((lo.tobytes(), hi.tobytes(), nodes.tolist()))
        assert answers[0] == answers[1]
        lo, hi = (np.frombuffer(b).reshape(len(sizes), d) for b in answers[0][:2])
        for p in range(len(sizes)):
            rows = slice(starts[p], starts[p + 1])
            if d:
                assert lo[p].tolist() == x[rows].min(axis=0).tolist()
                assert hi[p].tolist() == x[rows].max(axis=0).tolist()
            for j in range(h):
                node = int(at[starts[p], j])
                for v in at[rows, j].tolist():
                    node = int(_TABLE[node, v])
                assert answers[0][2][p][j] == node


@needs_native
def test_part_states_refuses_classes_that_do_not_cover_the_rows() -> None:
    x, at = np.zeros((4, 1)), np.zeros((4, 0), dtype=np.int64)
    lo, hi, nodes = np.zeros((2, 1)), np.zeros((2, 1)), np.zeros((2, 0), dtype=np.int64)
    table = (np.zeros((1, 1), dtype=np.int32),)
    for starts in ([0, 2, 3], [0, 2, 2, 4], [1, 2, 4]):
        with pytest.raises(ValueError, match="part_states"):
            NATIVE.part_states(x, at, np.array(starts, dtype=np.int64), table, 0, lo, hi,
                               nodes)


def test_the_window_release_takes_the_c_loops_when_built(monkeypatch) -> None:
    """:func:`~streamanon.castle._native.window_kernels` is the C module when it builds,
    else numba's module; both have every loop the window release calls."""
    expected = NATIVE if NATIVE is not None else _window()
    monkeypatch.setattr(_native, "_WINDOW", [])
    got = _native.window_kernels()
    assert got is expected or got.__name__ == getattr(expected, "__name__", None)
    for name in ("best_fits", "rank_replace", "part_states", "median_cuts"):
        assert callable(getattr(got, name))
    monkeypatch.setenv("STREAMANON_NATIVE", "0")
    monkeypatch.setattr(_native, "_WINDOW", [])
    monkeypatch.setattr(_native, "_LOADED", [])
    assert _native.window_kernels() is _window()

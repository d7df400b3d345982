"""The compiled best selection: screening many open clusters against a new cluster gives the
answer of the full pass, also at the rounding boundary of τ + eps."""

from __future__ import annotations

import numpy as np
import pytest

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.castle._kernel import SCREEN_FROM, best_selection, merged_rows
from streamanon.castle.cluster import ClusterSet
from streamanon.castle.records import CastleRow
from streamanon.data import ashrae


def _case(rng: np.random.Generator, n: int, d: int, size: int, spread: float
          ) -> tuple[np.ndarray, ...]:
    """``n`` clusters around one point (spans from 0 to ``spread``), a hierarchy of ``size``
    nodes whose diagonal costs nothing, the domains [0, 1000]."""
    centre = rng.uniform(0, 1000, d)
    lo = centre + rng.choice([0.0, 1e-13, 1e-9, spread], (n, d)) * rng.uniform(-1, 0, (n, d))
    hi = np.maximum(lo, centre + rng.choice([0.0, 1e-13, spread], (n, d)) * rng.random((n, d)))
    lh = np.concatenate((-lo, hi), axis=1)
    nodes = rng.integers(0, size, (n, 1)).astype(np.int64)
    lca = np.where(np.eye(size, dtype=bool), np.arange(size)[:, None], size - 1)
    loss = np.where(np.eye(size, dtype=bool), 0.0, 0.25)
    inv = rng.choice([0.0, 1e-3, 2e-3], d)
    head = [float(n + 1), 1e-12, 0.0, float(loss.max())]
    fl = np.concatenate((head, inv, inv, np.zeros(d), np.full(d, 1000.0), loss.T.ravel()))
    it = np.concatenate(([0, size], lca.T.ravel())).astype(np.int64)
    x = np.clip(centre + rng.choice([0.0, 1e-13, spread], d) * rng.uniform(-1, 1, d), 0, 1000)
    cat = rng.integers(0, size, 1).astype(np.int64)
    return lh, nodes, x, cat, fl, it


@pytest.mark.parametrize("seed", range(40))
def test_screening_answers_as_the_full_pass(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(25):
        n = int(rng.integers(SCREEN_FROM, 4 * SCREEN_FROM))
        lh, nodes, x, cat, fl, it = _case(rng, n, int(rng.integers(1, 5)), 4,
                                          float(rng.choice([1e-6, 1.0, 50.0])))
        tau = float(rng.choice([0.0, 0.0, 1e-13, 1e-3, 0.05]))
        answers = []
        for screen in (fl[3], -1.0):  # -1: the screening is off
            f = fl.copy()
            f[3] = screen
            a, b = lh.copy(), nodes.copy()
            picks = np.zeros(n, dtype=np.int64)
            got = best_selection(a, b, n, x, cat, tau, f, it, np.zeros((4, n)), picks)
            answers.append((got, a.tobytes(), b.tobytes(),
                            picks[:max(0, -3 - got)].tobytes()))
        assert answers[0] == answers[1]


def test_merged_rows_is_numpys_maximum() -> None:
    rng = np.random.default_rng(3)
    lh = rng.normal(size=(50, 6))
    lh[4, 2] = np.nan
    lh[7] = lh[9]
    for i in (0, 4, 9):
        out = np.empty((64, 6))
        merged_rows(lh, 50, i, out)
        assert np.array_equal(out[:50], np.maximum(lh, lh[i]), equal_nan=True)


def test_screening_leaves_the_operators_output_unchanged(monkeypatch) -> None:
    """β = the number of tuples and δ = all of them (one cluster per tuple until the end), and
    δ = 200 (τ > 0 after the first releases): screened or not, the same output."""
    rows = list(ashrae.generate_paper(1200, seed=2))
    rows += [dict(r) for r in rows[:300:3]]  # equal tuples: a cluster takes them within τ = 0
    rules = RuleSet.from_toml(ashrae.paper_rules_toml())

    def run(delta: int) -> list[str]:
        op = CastleAnonymizer(rules, k=5, l=2, delta=delta, beta=len(rows), mu=100, zeta=0)
        out = [o for i, r in enumerate(rows) for o in op.process(CastleRow(dict(r), line=i))]
        return [repr(o) for o in out + op.flush()] + [repr(op.summary())]

    for delta in (len(rows), 200):
        screened = run(delta)
        pack = ClusterSet._pack

        def unscreened(self: ClusterSet, *a: object, _pack=pack) -> None:
            _pack(self, *a)
            self._kernel_floats[3] = -1.0

        monkeypatch.setattr(ClusterSet, "_pack", unscreened)
        assert run(delta) == screened
        monkeypatch.undo()

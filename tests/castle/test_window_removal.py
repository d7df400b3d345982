"""The window release's bookkeeping: a release's removal in one compiled pass
(``window.remove_held``) leaves the state ``ClusterSet.remove_items`` leaves, and the rest of
a released part joins remembered classes only when that loses less (``window.reuse_rest``)."""

from __future__ import annotations

import copy

import numpy as np

from streamanon.castle import CastleAnonymizer, CastleRow, RuleSet
from streamanon.castle import operator as operator_module
from streamanon.castle._native import window_kernels
from streamanon.castle.window import History, remove_held, reuse_rest
from tests.castle.test_window import RULES, _rows


def _state(cset):
    n = len(cset.clusters)
    return ([[it.pos for it in c.items] for c in cset.clusters],
            [dict(c.individuals) for c in cset.clusters],
            [[dict(s) for s in c.sensitive_counts] for c in cset.clusters],
            dict(cset._pool_ids), [dict(s) for s in cset._pool_sens],
            cset._bounds[:n].tolist(), cset._nodes[:n].tolist())


def test_remove_held_leaves_the_state_remove_items_leaves(monkeypatch) -> None:
    compiled = []
    kernel = window_kernels()  # the C build's loops, else numba's
    real_drop = kernel.drop_rows

    def drop_rows(*args):
        compiled.append(len(args[4]))
        return real_drop(*args)

    monkeypatch.setattr(kernel, "drop_rows", drop_rows)
    checked = []

    def both(cset, items):
        twin, twin_items = copy.deepcopy((cset, items))
        twin.remove_items(twin_items)
        remove_held(cset, items)
        assert _state(cset) == _state(twin)
        checked.append(len(items))

    monkeypatch.setattr(operator_module, "remove_held", both)
    rules = RuleSet.from_dict(RULES)
    op = CastleAnonymizer(rules, k=3, l=2, delta=150, split="window")
    for row in _rows(1500, 10_000, 7):
        op.process(row)
    op.flush()
    assert len(checked) > 100
    assert len(compiled) > 100  # the compiled pass ran, not only remove_items


def test_drop_rows_keeps_the_rows_not_dropped_and_their_state() -> None:
    rnd = np.random.default_rng(3)
    x = rnd.integers(0, 50, size=(30, 3)).astype(np.float64)
    at = rnd.integers(0, 4, size=(30, 1))
    table = np.array([[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 2, 0], [0, 0, 0, 3]], dtype=np.int32)
    drop = np.array([0, 5, 27, 29], dtype=np.int64)
    # in: the state of all 30 rows (the cluster's); out: of the rows kept
    bounds = np.concatenate((-x.min(axis=0), x.max(axis=0)))
    nodes = np.empty(1, dtype=np.int64)
    kept, kept_at = window_kernels().drop_rows(x[:25], x[25:], at[:25], at[25:], drop, (table,), 1,
                                     bounds, nodes)
    keep = np.setdiff1d(np.arange(30), drop)
    assert kept.tolist() == x[keep].tolist() and kept_at.tolist() == at[keep].tolist()
    assert bounds.tolist() == [*(-x[keep].min(axis=0)).tolist(), *x[keep].max(axis=0).tolist()]
    assert nodes.tolist() == [0 if len(set(at[keep, 0].tolist())) > 1 else at[keep[0], 0]]


def test_rest_joins_remembered_classes_only_when_they_lose_less() -> None:
    rules = RuleSet.from_dict(RULES)
    op = CastleAnonymizer(rules, k=2, l=0, delta=10, split="window")
    cset = op._current
    items = []
    for i, (age, hours) in enumerate([(30, 10), (31, 12), (70, 80)]):
        item, hier, other = cset.parse(CastleRow({"u": f"p{i}", "age": age, "hours": hours,
                                                  "city": "Paris", "dx": "a"}), i + 1)
        cset.observe(item, hier, other)
        items.append(item)
    history = History(cset, size=8)
    history.add(cset.state_of(items[:1]), 0.0, ("first", None, None, None, "st0"))
    history.add(cset.state_of(items[1:2]), 0.001, ("second", None, None, None, "st1"))
    fits = lambda st, it, record: True  # noqa: E731
    pair = items[:2]
    assert reuse_rest(history, pair, cset.state_of(pair), fits) == [
        (items[0], ("first", None, None, None, "st0")),
        (items[1], ("second", None, None, None, "st1"))]
    wide = [items[0], items[2]]  # the third tuple fits no remembered class
    assert reuse_rest(history, wide, cset.state_of(wide), fits) == []
    assert reuse_rest(history, pair, cset.state_of(pair), lambda st, it, r: st != "st1") == []
    cheap = History(cset, size=8)  # remembered classes that lose more than the pair's own
    own = cset.weighted(cset.attr_losses(cset.state_of(pair), pair))
    cheap.add(cset.state_of(pair), own * 1.5, ("wide", None, None, None, "st2"))
    assert reuse_rest(cheap, pair, cset.state_of(pair), fits) == []

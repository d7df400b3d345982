"""The median split (``split="median"``) beside the default Prink split."""

from __future__ import annotations

import random

import pytest

from streamanon.castle import CastleAnonymizer, CastleRow, Released, RuleSet
from streamanon.castle.cluster import ClusterSet
from streamanon.castle.split import SHARES, SINGLE_SHARES, median_split
from streamanon.data import ashrae
from streamanon.errors import ConfigError
from streamanon.verify.castle import check_castle, rules_from_toml

RULES = {"id": "u", "attribute": [
    {"name": "age", "generalizer": "range", "domain": [0, 100]},
    {"name": "city", "generalizer": "hierarchy",
     "paths": [["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE"], ["US"]]},
    {"name": "dx", "sensitive": True}]}


def _rows(n: int, people: int, seed: int) -> list[CastleRow]:
    rnd = random.Random(seed)
    return [CastleRow({"u": f"p{rnd.randrange(people)}", "age": rnd.randint(18, 90),
                       "city": rnd.choice(["Paris", "Lyon", "DE", "US"]),
                       "dx": rnd.choice("abcd")}, i + 2) for i in range(n)]


def _run(rows, rules, **params):
    op = CastleAnonymizer(rules, **params)
    return [r for row in rows for r in op.process(row)] + op.flush()


def _lines(out) -> list[tuple]:
    return [(r.line, r.cluster, sorted(r.values.items())) if isinstance(r, Released)
            else ("suppressed", r.record.line, r.reason) for r in out]


def test_unknown_split_is_refused() -> None:
    with pytest.raises(ConfigError, match="split must be one of prink, median"):
        CastleAnonymizer(RuleSet.from_dict(RULES), split="widest")


def test_default_is_the_window_release() -> None:
    rows = _rows(600, 60, seed=3)
    rules = RuleSet.from_dict(RULES)
    default = _run(rows, rules, k=3, l=2, delta=200)
    window = _run(rows, rules, k=3, l=2, delta=200, split="window")
    assert _lines(default) == _lines(window)
    prink = _run(rows, rules, k=3, l=2, delta=200, split="prink")
    assert _lines(prink) != _lines(window)
    median = _run(rows, rules, k=3, l=2, delta=200, split="median")
    assert _lines(median) != _lines(prink)  # the option reaches the release


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("k", "l"), [(2, 2), (4, 3), (6, 0)])
def test_median_split_classes_hold_k_individuals_and_l(seed: int, k: int, l: int) -> None:  # noqa: E741
    rules = RuleSet.from_dict(RULES)
    cset = ClusterSet(rules)
    items = []
    for i, row in enumerate(_rows(300, 40, seed)):
        item, hier_raw, other_raw = cset.parse(row, i + 1)
        if hier_raw or other_raw:
            cset.observe(item, hier_raw, other_raw)
        items.append(item)
    groups = median_split(cset, items, k=k, l=l)
    assert len(groups) > 1
    assert sorted(id(it) for g in groups for it in g) == sorted(id(it) for it in items)
    for g in groups:
        assert len({it.individual for it in g}) >= k
        if l > 1:
            assert len({it.sensitive[0] for it in g}) >= l
    # an individual's tuples may be in different classes
    homes: dict[str, set[int]] = {}
    for n, g in enumerate(groups):
        for it in g:
            homes.setdefault(it.individual, set()).add(n)
    assert any(len(h) > 1 for h in homes.values())


def test_median_split_on_ashrae_passes_the_checker_and_lowers_the_loss() -> None:
    text = ashrae.rules_toml()
    rules = RuleSet.from_toml(text)
    rows = [CastleRow(r, i + 2) for i, r in enumerate(ashrae.generate(3000, seed=4))]
    spec = rules_from_toml(text)
    losses = {}
    for split in ("prink", "median"):
        out = _run(rows, rules, k=5, l=2, delta=3000, split=split)
        released = [r.values for r in out if isinstance(r, Released)]
        report = check_castle(released, spec, k=5, l=2, inputs=[r.values for r in rows],
                              suppressed=[r.record.values for r in out
                                          if not isinstance(r, Released)])
        assert report.ok, report.to_dict()
        losses[split] = sum(r.loss for r in out if isinstance(r, Released)) / len(released)
    # with the whole stream in view, Prink's whole-building groups generalize time widely
    assert losses["median"] < losses["prink"]


def test_median_split_small_cuts_fewer_than_2k_individuals_with_many_tuples() -> None:
    rules = RuleSet.from_dict(RULES)
    cset = ClusterSet(rules)
    items = []
    for i, row in enumerate(_rows(400, 7, seed=5)):  # 7 individuals: fewer than 2k = 8
        item, hier_raw, other_raw = cset.parse(row, i + 1)
        if hier_raw or other_raw:
            cset.observe(item, hier_raw, other_raw)
        items.append(item)
    assert median_split(cset, items, k=4, l=2) == [items]
    groups = median_split(cset, items, k=4, l=2, small=True)
    assert len(groups) > 1
    assert sorted(id(it) for g in groups for it in g) == sorted(id(it) for it in items)
    for g in groups:
        assert len({it.individual for it in g}) >= 4
        assert len({it.sensitive[0] for it in g}) >= 2


def _items(rows, rules) -> tuple[ClusterSet, list]:
    cset = ClusterSet(rules)
    items = []
    for i, row in enumerate(rows):
        item, hier_raw, other_raw = cset.parse(row, i + 1)
        if hier_raw or other_raw:
            cset.observe(item, hier_raw, other_raw)
        items.append(item)
    return cset, items


def _ashrae_rows(n: int) -> list[CastleRow]:
    return [CastleRow(dict(r), i + 2) for i, r in enumerate(ashrae.generate(n))]


@pytest.mark.parametrize(("shares", "ends"), [((), False), (SHARES, False),
                                              (SINGLE_SHARES, True), ((), True)])
@pytest.mark.parametrize(("data", "k", "l"), [("toy", 2, 2), ("toy", 4, 3), ("toy", 3, 0),
                                              ("ashrae", 5, 2)])
def test_compiled_small_cuts_give_the_numpy_classes(data: str, k: int, l: int,  # noqa: E741
                                                    shares: tuple, ends: bool) -> None:
    if data == "toy":
        rules, rows = RuleSet.from_dict(RULES), _rows(500, 120, seed=k)
    else:
        rules, rows = RuleSet.from_toml(ashrae.rules_toml()), _ashrae_rows(800)
    cset, items = _items(rows, rules)
    ref = median_split(cset, items, k=k, l=l, small=True, shares=shares, ends=ends,
                       compiled=False)
    fast = median_split(cset, items, k=k, l=l, small=True, shares=shares, ends=ends)
    assert len(ref) > 10
    assert [[it.pos for it in g] for g in fast] == [[it.pos for it in g] for g in ref]


def test_share_cuts_keep_k_and_l_and_lose_no_more_than_median_cuts() -> None:
    rules = RuleSet.from_dict(RULES)
    cset, items = _items(_rows(800, 800, seed=9), rules)

    def loss(groups) -> float:
        return sum(len(g) * cset.weighted(cset.attr_losses(cset.state_of(g), g))
                   for g in groups)

    median = median_split(cset, items, k=4, l=2, small=True)
    quart = median_split(cset, items, k=4, l=2, small=True, shares=SHARES)
    ends = median_split(cset, items, k=4, l=2, small=True, shares=SINGLE_SHARES, ends=True)
    for cut in (quart, ends):
        assert sorted(it.pos for g in cut for it in g) == sorted(it.pos for it in items)
        for g in cut:
            assert len({it.individual for it in g}) >= 4
            assert len({it.sensitive[0] for it in g}) >= 2
    assert loss(quart) < loss(median)
    assert loss(ends) < loss(median)


def _reuse(items, seed: int, top: float = 0.3):
    """A remembered class's loss for about half of the tuples (``inf``: none fits)."""
    import numpy as np

    rnd = random.Random(seed)
    return np.array([rnd.uniform(0.0, top) if rnd.random() < 0.5 else np.inf
                     for _ in items])


@pytest.mark.parametrize(("data", "k", "l"), [("toy", 2, 2), ("toy", 4, 3), ("ashrae", 5, 2)])
def test_compiled_cuts_weighing_reuse_give_the_numpy_classes(data: str, k: int,
                                                             l: int) -> None:  # noqa: E741
    if data == "toy":
        rules, rows = RuleSet.from_dict(RULES), _rows(500, 120, seed=k)
    else:
        rules, rows = RuleSet.from_toml(ashrae.rules_toml()), _ashrae_rows(800)
    cset, items = _items(rows, rules)
    reuse = _reuse(items, seed=k)
    ref = median_split(cset, items, k=k, l=l, small=True, shares=SHARES, reuse=reuse,
                       compiled=False)
    fast = median_split(cset, items, k=k, l=l, small=True, shares=SHARES, reuse=reuse)
    assert len(ref) > 10
    assert [[it.pos for it in g] for g in fast] == [[it.pos for it in g] for g in ref]


@pytest.mark.parametrize("compiled", [True, False])
def test_cuts_weighing_reuse_lose_less_for_the_tuples_that_stay(compiled: bool) -> None:
    import numpy as np

    rules = RuleSet.from_dict(RULES)
    totals = {"weighed": 0.0, "plain": 0.0}
    for seed in range(1, 9):  # greedy cuts: less in sum, not on every stream
        cset, items = _items(_rows(800, 800, seed=seed), rules)
        reuse = _reuse(items, seed=seed)
        at = {it.pos: i for i, it in enumerate(items)}

        def cost(groups) -> float:
            """Each tuple's loss: its class's, or its remembered class's when less."""
            total = 0.0
            for g in groups:
                own = cset.weighted(cset.attr_losses(cset.state_of(g), g))  # noqa: B023
                total += sum(min(own, reuse[at[it.pos]]) for it in g)  # noqa: B023
            return total

        weighed = median_split(cset, items, k=4, l=2, small=True, shares=SHARES, reuse=reuse,
                               compiled=compiled)
        plain = median_split(cset, items, k=4, l=2, small=True, shares=SHARES,
                             compiled=compiled)
        assert sorted(it.pos for g in weighed for it in g) == sorted(it.pos for it in items)
        for g in weighed:
            assert len({it.individual for it in g}) >= 4
            assert len({it.sensitive[0] for it in g}) >= 2
        totals["weighed"] += cost(weighed)
        totals["plain"] += cost(plain)
        # no remembered class fits: the same cuts as without
        none = median_split(cset, items, k=4, l=2, small=True, shares=SHARES,
                            reuse=np.full(len(items), np.inf), compiled=compiled)
        assert [[it.pos for it in g] for g in none] == [[it.pos for it in g] for g in plain]
    assert totals["weighed"] < 0.995 * totals["plain"]

"""The window release (``split="window"``): median cuts over every held tuple, released
classes reused, checked by the independent checker and pycanon."""

from __future__ import annotations

import pickle
import random

import pandas as pd
import pytest
from pycanon import anonymity

from streamanon.castle import CastleAnonymizer, CastleRow, Released, RuleSet
from streamanon.castle.window import HISTORY, History
from streamanon.data import ashrae
from streamanon.records import Suppressed
from streamanon.verify.castle import check_castle, rules_from_dict, rules_from_toml

RULES = {"id": "u", "attribute": [
    {"name": "age", "generalizer": "range", "domain": [0, 100]},
    {"name": "hours", "generalizer": "range", "domain": [0, 99]},
    {"name": "city", "generalizer": "hierarchy",
     "paths": [["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE"], ["US"]]},
    {"name": "dx", "sensitive": True}]}


def _rows(n: int, people: int, seed: int) -> list[CastleRow]:
    rnd = random.Random(seed)
    return [CastleRow({"u": f"p{rnd.randrange(people)}", "age": rnd.randint(18, 90),
                       "hours": rnd.randint(0, 99),
                       "city": rnd.choice(["Paris", "Lyon", "DE", "US"]),
                       "dx": rnd.choice("abcd")}, i + 2) for i in range(n)]


def _run(rows, rules, **params):
    op = CastleAnonymizer(rules, **params)
    out = []
    waits = []
    for i, row in enumerate(rows):
        got = op.process(row)
        waits += [i - (r.line - 2) for r in got if isinstance(r, Released)]
        out += got
    return out + op.flush(), waits


def _checked(rows, out, spec, *, k, l):  # noqa: E741
    released = [r.values for r in out if isinstance(r, Released)]
    report = check_castle(released, spec, k=k, l=l, inputs=[r.values for r in rows],
                          suppressed=[r.record.values for r in out if isinstance(r, Suppressed)])
    assert report.ok, report.to_dict()
    return released


def _pycanon(released, qi, id_field, sensitive):
    df = pd.DataFrame(released).astype(str)
    k = anonymity.k_anonymity(df.drop_duplicates([id_field, *qi]), qi)
    return k, anonymity.l_diversity(df, qi, [sensitive])


@pytest.mark.parametrize(("people", "k", "l"), [(100_000, 3, 2), (60, 4, 3), (40, 5, 0)])
def test_window_releases_hold_k_individuals_and_l_within_delta(people, k, l) -> None:  # noqa: E741
    rows = _rows(1500, people, seed=k)
    out, waits = _run(rows, RuleSet.from_dict(RULES), k=k, l=l, delta=150, split="window")
    released = _checked(rows, out, rules_from_dict(RULES), k=k, l=l)
    assert len(released) > 1400
    assert max(waits) <= 150  # no tuple waits longer than delta arrivals
    pk, pl = _pycanon(released, ["age", "hours", "city"], "u", "dx")
    assert pk >= k and (l <= 1 or pl >= l)


def test_window_reuses_released_classes() -> None:
    rows = _rows(3000, 100_000, seed=9)
    out, _ = _run(rows, RuleSet.from_dict(RULES), k=3, l=2, delta=150, split="window")
    _checked(rows, out, rules_from_dict(RULES), k=3, l=2)
    lines: dict[int, list[int]] = {}
    for r in out:
        if isinstance(r, Released):
            lines.setdefault(r.cluster, []).append(r.line)
    # a class released once and joined later by a tuple that arrived after its release
    assert any(max(v) - min(v) > 150 for v in lines.values())


def test_window_loses_less_than_the_prink_split_at_a_bounded_delay() -> None:
    text = ashrae.rules_toml()
    rules = RuleSet.from_toml(text)
    rows = [CastleRow(r, i + 2) for i, r in enumerate(ashrae.generate(4000, seed=4))]
    spec = rules_from_toml(text)
    losses = {}
    for split in ("prink", "window"):
        out, waits = _run(rows, rules, k=5, l=2, delta=500, split=split)
        released = _checked(rows, out, spec, k=5, l=2)
        assert max(waits) <= 500
        losses[split] = sum(r.loss for r in out if isinstance(r, Released)) / len(released)
    assert losses["window"] < losses["prink"]


def test_window_resumes_from_a_pickled_operator() -> None:
    rows = _rows(1200, 80, seed=5)
    rules = RuleSet.from_dict(RULES)
    whole, _ = _run(rows, rules, k=3, l=2, delta=200, split="window")
    op = CastleAnonymizer(rules, k=3, l=2, delta=200, split="window")
    first = [r for row in rows[:700] for r in op.process(row)]
    clone = pickle.loads(pickle.dumps(op))
    rest = [r for row in rows[700:] for r in clone.process(row)] + clone.flush()

    def key(r):
        return (r.line, sorted(r.values.items())) if isinstance(r, Released) else r.reason

    assert [key(r) for r in first + rest] == [key(r) for r in whole]


def test_history_keeps_the_last_classes_and_finds_the_least_loss_fit() -> None:
    rules = RuleSet.from_dict(RULES)
    op = CastleAnonymizer(rules, k=2, l=0, delta=10, split="window")
    cset = op._current
    item, hier, other = cset.parse(CastleRow({"u": "a", "age": 30, "hours": 10, "city": "Paris",
                                              "dx": "a"}), 1)
    cset.observe(item, hier, other)
    history = History(cset, size=2)
    assert history.best(item) is None
    wide = cset.state_of([item])
    wide.lo, wide.hi = wide.lo - 10, wide.hi + 10
    history.add(wide, 0.5, "wide")
    narrow = cset.state_of([item])
    history.add(narrow, 0.1, "narrow")
    assert history.best(item) == (0.1, "narrow")
    history.add(cset.state_of([item]), 0.2, "third")  # the oldest ("wide") is forgotten
    assert history.best(item) == (0.1, "narrow")
    assert "wide" not in history.payload and HISTORY >= 1000


def test_history_fit_is_the_least_loss_lowest_slot_over_a_wrapped_ring() -> None:
    rules = RuleSet.from_dict(RULES)
    op = CastleAnonymizer(rules, k=2, l=0, delta=10, split="window")
    cset = op._current
    rnd = random.Random(4)
    items = []
    for i in range(40):
        item, hier, other = cset.parse(CastleRow({"u": f"p{i}", "age": rnd.randint(18, 90),
                                                  "hours": rnd.randint(1, 60),
                                                  "city": rnd.choice(["Paris", "Lyon", "US"]),
                                                  "dx": "a"}), i + 1)
        cset.observe(item, hier, other)
        items.append(item)
    history = History(cset, size=16)
    hits = 0
    for n in range(60):  # the ring wraps more than three times; losses tie often
        group = rnd.sample(items, 3)
        history.add(cset.state_of(group), rnd.choice([0.1, 0.2, 0.3, 0.4]), n)
        below = rnd.choice([0.25, 1.0])
        got = history.best_of(items, below=below)
        for it, hit in zip(items, got, strict=True):
            fits = [c for c in range(16) if history.payload[c] is not None
                    and history.loss[c] < below
                    and all(lo <= v <= hi for lo, v, hi in zip(history.lo[:, c], it.numbers,
                                                               history.hi[:, c], strict=True))
                    and all(cset.hier[j].tree.lca_table()[node, at] == node
                            for j, (node, at) in enumerate(zip(history.nodes[c], it.nodes,
                                                               strict=True)))]
            want = min(fits, key=lambda c: (history.loss[c], c)) if fits else None
            hits += want is not None
            assert hit == (None if want is None else (float(history.loss[want]),
                                                      history.payload[want]))
    assert hits > 200  # the fits were tested, not only the misses


def test_window_with_max_delay_releases_each_tuple_in_time() -> None:
    rules_dict = {**RULES, "time": "t"}
    rules = RuleSet.from_dict(rules_dict)
    rows = [CastleRow({**r.values, "t": float(i)}, r.line) for i, r in enumerate(_rows(900, 70, 3))]
    op = CastleAnonymizer(rules, k=3, l=2, delta=10_000, max_delay=60.0, split="window")
    out = []
    late = []
    for i, row in enumerate(rows):
        got = op.process(row)
        late += [i - (r.line - 2) for r in got if isinstance(r, Released) and i - (r.line - 2) > 60]
        out += got
    out += op.flush()
    _checked(rows, out, rules_from_dict(rules_dict), k=3, l=2)
    assert not late  # one tuple per second: none waits more than 60 s
    assert sum(isinstance(r, Released) for r in out) > 800


@pytest.mark.parametrize("repeated", [False, True])
def test_window_cuts_weigh_the_remembered_classes_the_held_tuples_fit(repeated: bool) -> None:
    """With one held tuple per individual, the cuts weigh the remembered classes the held
    tuples fit in; once an individual has two held tuples they do not (scattered over
    remembered classes, its tuples would narrow it under intersection)."""
    import numpy as np

    from streamanon.castle.split import SINGLE_SHARES, median_split
    from streamanon.castle.window import WindowCache, window_held, window_parts

    rules = RuleSet.from_dict(RULES)
    op = CastleAnonymizer(rules, k=3, l=2, delta=10_000, split="window")
    rows = _rows(400, 100_000, seed=6)
    assert len({r.values["u"] for r in rows}) == len(rows)
    if repeated:
        rows[7] = CastleRow({**rows[7].values, "u": rows[3].values["u"]}, rows[7].line)
    for row in rows:
        assert op.process(row) == []  # nothing expires: every tuple is held
    cset, held = op._current, list(op._held)
    rule = cset.params.rule

    def cut(cache: WindowCache) -> list[list[int]]:
        parts = window_parts(cache, cset, window_held(cset, held, held[0]), k=3, rule=rule)
        assert held[0] in parts[0]  # the expiring tuple's class first
        firsts = [min(it.pos for it in p) for p in parts[1:]]
        assert firsts == sorted(firsts)  # then by each class's oldest tuple
        return sorted(sorted(it.pos for it in p) for p in parts)

    plain = cut(WindowCache())
    remembered = WindowCache()
    history = remembered.history_of(cset)
    rnd = random.Random(2)
    for n in range(40):  # classes of three held tuples, losing little
        group = rnd.sample(held, 3)
        history.add(cset.state_of(group), 0.01 * rnd.random(), n)
    weighed = cut(remembered)
    if repeated:
        assert weighed == plain
        return
    reuse = np.array([np.inf if hit is None else hit[0] for hit in history.best_of(held)])
    assert np.isfinite(reuse).sum() >= 100  # many held tuples fit a remembered class
    want = median_split(cset, held, k=3, rule=rule, small=True, shares=SINGLE_SHARES,
                        ends=True, reuse=reuse)
    assert weighed == sorted(sorted(it.pos for it in p) for p in want)
    assert weighed != plain

"""The window release's cut: its classes' states and losses known at once
(``window.part_states``) are those of ``ClusterSet.state_of`` and ``attr_losses``; every
class leaves at the cut, in order; and the rest of a released class joins remembered classes
only when that loses less (``window.reuse_rest``)."""

from __future__ import annotations

import copy
import random

import pytest

from streamanon.castle import CastleAnonymizer, CastleRow, Released, RuleSet
from streamanon.castle.window import (
    History,
    WindowCache,
    part_states,
    reuse_rest,
    window_held,
    window_parts,
)
from tests.castle.test_window import RULES, _rows


@pytest.mark.parametrize(("missing", "plugin"), [(False, False), (True, False), (False, True)])
def test_a_cuts_classes_known_at_once_are_what_state_of_and_attr_losses_say(
        missing: bool, plugin: bool) -> None:
    """``part_states`` gives every class of a cut the state ``ClusterSet.state_of`` gives
    it (up to the sign of a zero) and the losses ``attr_losses`` and ``weighted`` give,
    bit for bit; ``None`` where
    those need the tuples (missing values, plug-ins), and the release then asks them."""
    rules = dict(RULES)
    if plugin:
        rules["attribute"] = [*RULES["attribute"], {"name": "zip", "generalizer": "reduction"}]
    op = CastleAnonymizer(RuleSet.from_dict(rules), k=3, l=2, delta=10_000, split="window",
                          missing="star" if missing else "reject")
    rows = _rows(600, 10_000, seed=4)
    if plugin:
        rows = [CastleRow({**r.values, "zip": f"75{i % 97:03d}"}, r.line)
                for i, r in enumerate(rows)]
    if missing:
        rows[5] = CastleRow({**rows[5].values, "age": None}, rows[5].line)
    for row in rows:
        assert op.process(row) == []  # nothing expires: every tuple is held
    cset, held = op._current, list(op._held)
    parts = window_parts(WindowCache(), cset, window_held(cset, held, held[0]), k=3,
                         rule=cset.params.rule)
    assert len(parts) > 20 and sum(map(len, parts)) == len(held)
    known = part_states(cset, parts)
    if missing or plugin:
        assert known is None
        return
    assert known is not None and len(known) == len(parts)
    for part, items in zip(known, parts, strict=True):
        st = cset.state_of(items)
        assert part.state.lo.tolist() == st.lo.tolist()  # (a zero's sign may differ)
        assert part.state.hi.tolist() == st.hi.tolist()
        assert part.state.nodes.tolist() == st.nodes.tolist()
        attr = cset.attr_losses(st, items)
        assert part.attr == attr and list(part.attr) == list(attr)
        assert part.loss == cset.weighted(attr)
        x, at = part.rows
        assert x.tolist() == [it.numbers.tolist() for it in items]
        assert at.tolist() == [list(it.nodes) for it in items]


def test_every_class_of_a_cut_leaves_at_the_cut_in_the_order_of_its_oldest_tuple() -> None:
    """At the cut, every held tuple is released, class after class: the expiring tuple's
    class first, then the classes by their oldest tuple; the clusters are left empty."""
    rules = RuleSet.from_dict(RULES)
    op = CastleAnonymizer(rules, k=3, l=2, delta=1_000, split="window")
    for row in _rows(301, 10_000, seed=8):
        assert op.process(row) == []
    twin = copy.deepcopy(op)
    held = list(twin._held)
    parts = window_parts(WindowCache(), twin._current, window_held(twin._current, held, held[0]),
                         k=3, rule=twin._current.params.rule)
    out = op.flush()  # the first tuple is due first: the cut
    assert len(out) == 301 and all(isinstance(r, Released) for r in out)
    assert not op._current.clusters and not op._held
    part_of = {it.row.line: i for i, part in enumerate(parts) for it in part}
    turns = [part_of[r.line] for r in out]
    assert turns == sorted(turns) and set(turns) == set(range(len(parts)))
    assert any(it.row.line == 2 for it in parts[0])  # the expiring (first) tuple's class
    oldest = [min(it.pos for it in part) for part in parts[1:]]
    assert oldest == sorted(oldest) and len(parts) > 20


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


def _outcomes(out: list) -> list:
    return [(type(r).__name__, r.line, sorted((k, str(v)) for k, v in r.values.items()),
             r.loss, r.cluster)
            if isinstance(r, Released) else (type(r).__name__, r.record.line, r.reason)
            for r in out]


def _skewed(n: int, people: int, seed: int, rare: float) -> list[CastleRow]:
    """Rows whose sensitive value is mostly ``a``: a window of them often fails the
    entropy rule while some of its clusters meet it."""
    rnd = random.Random(seed)
    return [CastleRow({"u": f"p{rnd.randrange(people)}", "age": rnd.randint(18, 90),
                       "hours": rnd.randint(0, 99),
                       "city": rnd.choice(["Paris", "Lyon", "DE", "US"]),
                       "dx": "b" if rnd.random() < rare else "a"}, i + 2) for i in range(n)]


@pytest.mark.parametrize(("people", "diversity", "missing", "rare"), [
    (50, "entropy", "reject", 0.3), (50, "entropy", "star", 0.25),
    (4, "distinct", "reject", 0.5), (400, "distinct", "reject", 0.5)])
def test_tuples_placed_when_castles_rules_need_them_as_if_placed_on_arrival(
        monkeypatch, people: int, diversity: str, missing: str, rare: float) -> None:
    """The window release places a tuple in a cluster only when the held tuples together
    cannot form a class (``ClusterSet.settle``): every outcome, the classes CASTLE's rules
    release and the suppressions with their reasons, is the one placing every tuple on
    arrival gives, through a change of rules with another δ (τ as each tuple arrived
    under), missing values and the end."""
    from streamanon.castle import cluster as cluster_module
    from streamanon.castle.operator import _EPS

    def run(eager: bool) -> tuple[list, int]:
        settled = []
        if eager:
            monkeypatch.setattr(cluster_module.ClusterSet, "wait", lambda self, item, tau:
                                self.place(item, tau, self.params.beta, _EPS))
        real = cluster_module.ClusterSet.settle

        def settle(self, beta, eps):
            settled.append(0 if self._waiting is None else len(self._waiting.items))
            real(self, beta, eps)

        monkeypatch.setattr(cluster_module.ClusterSet, "settle", settle)
        rows = _skewed(900, people, 11, rare)
        if missing == "star":
            rows = [CastleRow({**r.values, "age": None}, r.line) if i % 7 == 0 else r
                    for i, r in enumerate(rows)]
        # the ages' domain grows with the rows: a class's loss depends on it
        rules = {**RULES, "attribute": [{"name": "age", "generalizer": "range"},
                                        *RULES["attribute"][1:]]}
        op = CastleAnonymizer(RuleSet.from_dict(rules), k=3, l=2, delta=60 if people > 4 else 9,
                              split="window", diversity=diversity, missing=missing)
        out = []
        for i, row in enumerate(rows):
            if i == 450:  # newer rules, a shorter delta: the older tuples are due later
                out += op.set_rules(RuleSet.from_dict({**rules, "parameters": {"delta": 5}}))
            out += op.process(row)
        out += op.flush()
        monkeypatch.undo()
        assert op.read == len(out) == 900
        return _outcomes(out), sum(settled)

    lazy, placed_late = run(False)
    eager, _ = run(True)
    assert lazy == eager
    if people < 100:
        assert placed_late > 0  # CASTLE's rules ran on tuples placed late
        reasons = {o[2] for o in lazy if o[0] == "Suppressed"}
        assert len(reasons) >= (2 if diversity == "entropy" else 1)

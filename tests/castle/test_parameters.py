"""k, l, delta and beta set by a rule set's ``[parameters]`` (the rules broadcast)."""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest

from streamanon.castle import CastleAnonymizer, Released
from streamanon.castle.rules import RuleSet
from streamanon.errors import ConfigError
from streamanon.records import Suppressed
from streamanon.verify.castle import check_castle, columns_spec

_RULES = '''id = "u"
{params}
[[attribute]]
name = "age"
generalizer = "range"

[[attribute]]
name = "dx"
sensitive = true
'''


def rules(**params: int) -> RuleSet:
    table = "[parameters]\n" + "".join(f"{k} = {v}\n" for k, v in params.items())
    return RuleSet.from_toml(_RULES.format(params=table if params else ""))


def test_the_parameters_table_is_parsed_and_described() -> None:
    rs = rules(k=7, delta=50)
    assert rs.parameters == {"k": 7, "delta": 50}
    assert rs.describe()["parameters"] == {"k": 7, "delta": 50}
    assert "parameters" not in rules().describe()  # rules without the table: as before
    assert rules().parameters == {}


@pytest.mark.parametrize(("table", "line", "words"), [
    ("k = 0", 3, "k must be an integer >= 1"),
    ("l = \"2\"", 3, "l must be an integer >= 0"),
    ("delta = true", 3, "delta must be an integer >= 1"),
    ("k = 3\nmu = 4", 4, "unknown key(s) in parameters: mu"),
])
def test_a_bad_parameter_is_refused_naming_its_line(table: str, line: int, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RuleSet.from_toml(_RULES.format(params="[parameters]\n" + table))
    assert str(caught.value).startswith(f"line {line}: ") and words in str(caught.value)


def test_the_constructor_values_are_the_defaults() -> None:
    op = CastleAnonymizer(rules(l=3), k=4, l=2, delta=30, beta=9)
    assert op.parameters.as_dict() == {"k": 4, "l": 3, "delta": 30, "beta": 9}
    assert op.summary()["parameters"] == {"k": 4, "l": 3, "delta": 30, "beta": 9}
    assert (op.k, op.l, op.delta, op.beta) == (4, 2, 30, 9)  # the operator's own: unchanged
    with pytest.raises(ConfigError, match="l = 2 needs at least one sensitive"):
        CastleAnonymizer(RuleSet.from_toml('id = "u"\n[parameters]\nl = 2\n'), k=2, l=0)


def _stream(n: int, seed: int, start: int = 0) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    return [{"u": f"p{rnd.randrange(12)}", "age": rnd.randint(18, 90),
             "dx": rnd.choice("abcd"), "n": start + i} for i in range(n)]


def test_raising_k_mid_stream_holds_later_clusters_to_it_and_earlier_ones_to_theirs() -> None:
    op = CastleAnonymizer(rules(), k=2, l=2, delta=40, beta=8)
    before, after = _stream(150, 1), _stream(300, 2, start=150)
    out = [r for row in before for r in op.process(row)]
    released_before_update = {r.cluster for r in out if isinstance(r, Released)}
    out += op.set_rules(rules(k=5))
    assert op.parameters.k == 5 and op.summary()["parameters"]["k"] == 5
    out += [r for row in after for r in op.process(row)] + op.flush()
    classes: dict[int, list[dict[str, Any]]] = {}
    for r in out:
        if isinstance(r, Released):
            classes.setdefault(r.cluster, []).append(r.values)
    assert sum(len(v) for v in classes.values()) + sum(
        isinstance(r, Suppressed) for r in out) == 450
    old_after_update = []
    for cid, rows in classes.items():
        people = {v["u"] for v in rows}
        late = {v["n"] >= 150 for v in rows}
        assert len(late) == 1, "a class mixes tuples of two rule sets"
        assert len({v["dx"] for v in rows}) >= 2
        if late == {True}:
            assert len(people) >= 5, (cid, sorted(people))
        else:
            assert len(people) >= 2
            if cid not in released_before_update:
                old_after_update.append(len(people))
    # clusters opened before the update were released after it under the old k
    assert old_after_update and min(old_after_update) < 5
    # the checker has no rule version per row: it can vouch for the smallest k ever in force
    spec = columns_spec("u", ["age"], ["dx"])
    released = [r.values for r in out if isinstance(r, Released)]
    assert check_castle(released, spec, k=2, l=2).ok
    assert check_castle(released, spec, k=5, l=2).k_violations > 0


def _waits(op: CastleAnonymizer, rows: list[dict[str, Any]], *, update: RuleSet,
           at: int) -> dict[int, int]:
    """Per tuple (its ``n``), how many arrivals after its own it left at."""
    left: dict[int, int] = {}
    for pos, row in enumerate(rows):
        if pos == at:
            assert op.set_rules(update) == []
        for r in op.process(row):
            assert isinstance(r, Released)
            left[r.values["n"]] = pos - r.values["n"]
    return left


@pytest.mark.parametrize(("old", "new"), [(10, 3), (3, 10)])
@pytest.mark.parametrize("split", ["prink", "window"])
def test_a_delta_change_applies_to_the_tuples_arriving_after_it(old: int, new: int,
                                                                 split: str) -> None:
    # k = 1 and far-apart values: every tuple is a cluster of its own, released when it
    # expires, so each waits exactly its delta (prink); the window release releases every
    # tuple held when the oldest is due, so each waits at most its delta, the oldest exactly
    op = CastleAnonymizer(rules(), k=1, l=0, delta=old, beta=10_000, split=split)
    rows = [{"u": f"p{i}", "age": 1000 * i, "dx": "a", "n": i} for i in range(60)]
    waits = _waits(op, rows, update=rules(delta=new), at=30)
    before = {waits[n] for n in range(30) if n in waits}
    after = {waits[n] for n in range(30, 60) if n in waits}
    if split == "prink":
        assert before == {old} and after == {new}
        assert len(waits) == 60 - new  # the last `new` tuples are still held
        assert len(op.flush()) == new
        return
    assert max(before) == old and max(after) == new
    assert len(waits) + len(op.flush()) == 60


def test_beta_and_l_follow_the_rule_set() -> None:
    # (β bounds CASTLE's clusters: the Prink split's; the window release builds none)
    op = CastleAnonymizer(rules(beta=1, l=0), k=3, l=2, delta=30, beta=50, split="prink")
    for row in _stream(20, 3):
        op.process(row)
    only = op.rules and op._current
    assert only is not None and len(only.clusters) == 1  # beta = 1: one open cluster
    assert op.parameters.l == 0


def test_parameters_survive_pickling_and_an_older_state_gets_the_defaults() -> None:
    op = CastleAnonymizer(rules(), k=2, l=2, delta=40)
    for row in _stream(30, 4):
        op.process(row)
    op.set_rules(rules(k=4, delta=20))
    for row in _stream(10, 5, start=30):
        op.process(row)
    clone = pickle.loads(pickle.dumps(op))
    assert [s.params.as_dict() for s in clone._sets] == [s.params.as_dict() for s in op._sets]
    rest = _stream(60, 6, start=40)
    a = [r for row in rest for r in op.process(row)] + op.flush()
    b = [r for row in rest for r in clone.process(row)] + clone.flush()
    assert [(type(x).__name__, x.values if isinstance(x, Released) else x.reason)
            for x in a] == [(type(x).__name__, x.values if isinstance(x, Released)
                             else x.reason) for x in b]
    old = CastleAnonymizer(rules(), k=3, l=2, delta=40)
    old.process(_stream(1, 7)[0])
    del old._current.__dict__["params"]  # a state pickled before there were parameters
    restored = pickle.loads(pickle.dumps(old))
    assert restored.parameters.as_dict() == {"k": 3, "l": 2, "delta": 40, "beta": 50}

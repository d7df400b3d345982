"""CASTLE operator: hand-checked behaviour of each rule and of the Prink defects not repeated.

The operator contract (accounting, pickling, determinism, bad records) is checked for every
operator in tests/test_conformance.py; the checker's mutation suite is tests/castle/test_verify.py.
"""

from __future__ import annotations

import pickle

import pytest

from streamanon.castle import CastleAnonymizer, CastleRow, Released, RuleSet
from streamanon.data import ashrae
from streamanon.errors import (
    BadRecordError,
    BadValueError,
    ConfigError,
    MissingFieldError,
    UnknownCategoryError,
)
from streamanon.records import Suppressed
from streamanon.verify.castle import check_castle, columns_spec, rules_from_toml


def rules(sensitive: bool = True, **extra) -> RuleSet:
    attrs = [{"name": "age", "generalizer": "range", **extra}]
    if sensitive:
        attrs.append({"name": "dx", "sensitive": True})
    return RuleSet.from_dict({"id": "u", "attribute": attrs})


def run(op: CastleAnonymizer, rows) -> list:
    return [x for r in rows for x in op.process(r)] + op.flush()


def test_the_ashrae_shaped_stream_passes_the_full_checker() -> None:
    rs = ashrae.rules_toml()
    rows = [CastleRow(r, i + 2) for i, r in enumerate(ashrae.generate(600, seed=3))]
    op = CastleAnonymizer(RuleSet.from_toml(rs), k=5, l=2, delta=200, beta=20, mu=10, zeta=5)
    out = run(op, rows)
    released = [x.values for x in out if isinstance(x, Released)]
    suppressed = [x.record.values for x in out if isinstance(x, Suppressed)]
    report = check_castle(released, rules_from_toml(rs), k=5, l=2, inputs=rows,
                          suppressed=suppressed)
    assert report.ok, report.first_problem
    assert report.min_individuals is not None and report.min_individuals >= 5
    assert report.unverified == 0 and report.lost == 0


def test_a_cluster_is_released_when_it_has_k_individuals_and_l_values() -> None:
    op = CastleAnonymizer(rules(), k=2, l=2, delta=10)
    rows = [{"u": "a", "age": 30, "dx": "flu"}, {"u": "a", "age": 31, "dx": "cold"},
            {"u": "b", "age": 33, "dx": "flu"}]
    out = run(op, rows)
    assert [x.values["age"] for x in out] == ["[30,33]"] * 3
    assert len({x.cluster for x in out}) == 1


def test_repeated_individual_does_not_count_twice() -> None:
    op = CastleAnonymizer(rules(sensitive=False), k=2, l=0, delta=3)
    out = run(op, [{"u": "a", "age": 30}, {"u": "a", "age": 31}, {"u": "a", "age": 32}])
    assert all(isinstance(x, Suppressed) for x in out) and len(out) == 3


def test_negative_numbers_keep_correct_ranges_after_a_removal() -> None:
    # Prink resets max to the smallest positive float after a removal: wrong for negatives
    op = CastleAnonymizer(rules(sensitive=False), k=2, l=0, delta=2, beta=1)
    out = run(op, [{"u": "a", "age": -5}, {"u": "a", "age": -9}, {"u": "b", "age": -7},
                   {"u": "c", "age": -8}])
    for x in out:
        if isinstance(x, Released):
            lo, hi = (float(v) for v in x.values["age"].strip("[]").split(","))
            assert lo <= hi < 0


def test_l_with_no_sensitive_attribute_is_refused_instead_of_looping() -> None:
    with pytest.raises(ConfigError, match="sensitive"):
        CastleAnonymizer(rules(sensitive=False), k=2, l=2)


def test_tuples_before_rules_are_held_then_processed() -> None:
    op = CastleAnonymizer(None, k=2, l=0, delta=5)
    assert op.process({"u": "a", "age": 1}) == []
    assert op.process({"u": "b", "age": 2}) == []
    assert op.held == 2
    out = op.set_rules(rules(sensitive=False)) + op.flush()
    assert len(out) == 2 and all(isinstance(x, Released) for x in out)
    assert op.read == 2


def test_a_held_tuple_the_rules_refuse_is_suppressed_not_lost() -> None:
    op = CastleAnonymizer(None, k=1, l=0)
    op.process({"u": "a", "age": "old"})
    op.process({"u": "b", "age": 3})
    out = op.set_rules(rules(sensitive=False)) + op.flush()
    assert [type(x).__name__ for x in out] == ["Suppressed", "Released"]
    assert "needs a number" in out[0].reason and op.read == 2


def test_tuples_without_any_rules_are_counted_as_suppressed() -> None:
    op = CastleAnonymizer(None, k=2, l=0)
    op.process({"u": "a", "age": 1})
    out = op.flush()
    assert len(out) == 1 and isinstance(out[0], Suppressed)
    assert "no rules" in out[0].reason


def test_rules_survive_pickling() -> None:
    op = CastleAnonymizer(rules(), k=2, l=2, delta=50)
    op.process({"u": "a", "age": 1, "dx": "x"})
    clone = pickle.loads(pickle.dumps(op))
    assert clone.rules is not None and clone.rules.sensitive == ["dx"]
    assert clone.summary()["held"] == 1


def test_a_cluster_keeps_the_rules_it_was_created_with() -> None:
    op = CastleAnonymizer(rules(sensitive=False), k=2, l=0, delta=100)
    op.process({"u": "a", "age": 10, "zip": "75001"})
    op.set_rules(RuleSet.from_dict({"id": "u", "attribute": [
        {"name": "zip", "generalizer": "reduction"}]}))
    op.process({"u": "b", "age": 20, "zip": "75013"})
    op.process({"u": "c", "age": 30, "zip": "75014"})
    out = op.flush()
    by_user = {(x.record if isinstance(x, Suppressed) else x).values["u"]: x for x in out}
    assert isinstance(by_user["a"], Suppressed)  # its rule set had nobody else
    assert by_user["b"].values["zip"] == by_user["c"].values["zip"] == "7501*"
    assert by_user["b"].values["age"] == 20 and by_user["c"].values["age"] == 30


def test_bad_record_leaves_the_operator_unchanged() -> None:
    op = CastleAnonymizer(rules(), k=2, l=2)
    op.process({"u": "a", "age": 1, "dx": "x"})
    before = pickle.dumps(op)
    for bad, error, field in (({"u": "b", "dx": "x"}, MissingFieldError, "age"),
                              ({"u": "b", "age": "old", "dx": "x"}, BadValueError, "age"),
                              ({"u": "b", "age": float("nan"), "dx": "x"}, BadValueError, "age"),
                              ({"age": 3, "dx": "x"}, MissingFieldError, "u"),
                              ({"u": "b", "age": 3}, MissingFieldError, "dx"),
                              ({"u": "b", "age": True, "dx": "y"}, BadValueError, "age"),
                              (["not", "a", "row"], BadValueError, None)):
        with pytest.raises(error) as caught:
            op.process(bad)
        assert isinstance(caught.value, BadRecordError) and caught.value.field == field
        assert caught.value.record is not None and str(caught.value)
    assert op.read == 1 and op.held == 1
    assert pickle.loads(before).summary() == op.summary()


def test_unknown_category_is_refused_unless_the_tree_may_grow() -> None:
    spec = {"id": "u", "attribute": [{"name": "city", "generalizer": "hierarchy",
                                      "paths": [["EU", "FR", "Paris"], ["EU", "DE", "Berlin"]]}]}
    op = CastleAnonymizer(RuleSet.from_dict(spec), k=2, l=0)
    with pytest.raises(UnknownCategoryError, match="unknown category 'Rome'"):
        op.process({"u": "a", "city": "Rome"})
    # a record carrying its own path (leaf first) grows the tree
    op.process({"u": "a", "city": ["Rome", "IT", "EU"]})
    op.process({"u": "b", "city": "Paris"})
    out = op.flush()
    assert {x.values["city"] for x in out} == {"EU"}


@pytest.mark.parametrize("strategy", ["drop", "null", "generalize"])
def test_suppression_strategies_account_for_every_tuple(strategy: str) -> None:
    op = CastleAnonymizer(rules(domain=[0, 100]), k=3, l=0, delta=2, suppression=strategy)
    out = run(op, [{"u": "a", "age": 5, "dx": "x"}, {"u": "b", "age": 6, "dx": "y"}])
    assert len(out) == 2 and all(isinstance(x, Suppressed) for x in out)
    ages = [getattr(x.record, "values", {}).get("age") for x in out]
    expected = {"drop": [5, 6], "null": [None, None], "generalize": ["[0,100]", "[0,100]"]}
    assert ages == expected[strategy]
    assert all(x.record.values["dx"] in ("x", "y") for x in out)


@pytest.mark.parametrize("split", ["prink", "window"])
def test_max_delay_releases_by_time(split: str) -> None:
    spec = {"id": "u", "time": "t", "attribute": [{"name": "age", "generalizer": "range"}]}
    op = CastleAnonymizer(RuleSet.from_dict(spec), k=2, l=0, delta=1000, max_delay=60,
                          split=split)
    assert op.process({"u": "a", "t": 0, "age": 1}) == []
    assert op.process({"u": "b", "t": 10, "age": 2}) == []
    out = op.process({"u": "c", "t": 70, "age": 3})  # a waited 70 s >= 60 s
    assert {x.values["u"] for x in out} >= {"a"}
    if split == "window":  # the cut releases every tuple held, c too
        assert {x.values["u"] for x in out} == {"a", "b", "c"}
        assert op.advance(200) == [] and op.held == 0
        return
    assert op.advance(200) and op.held == 0


def test_loss_column_and_split_of_large_clusters() -> None:
    op = CastleAnonymizer(rules(sensitive=False), k=2, l=0, delta=8, beta=1,
                          loss_field="loss")
    rows = [{"u": f"p{i}", "age": a} for i, a in enumerate([1, 2, 50, 51, 3, 52, 4, 53])]
    out = run(op, rows)
    assert all(isinstance(x, Released) for x in out)
    classes = {x.values["age"] for x in out}
    assert len(classes) >= 2  # 8 individuals >= 2k: split into several groups
    assert all(0.0 <= x.values["loss"] <= 1.0 for x in out)
    report = check_castle([x.values for x in out], columns_spec("u", ["age"]), k=2,
                          inputs=rows)
    assert report.ok, report.first_problem


def test_invalid_parameters_are_refused() -> None:
    for kwargs in ({"k": 0}, {"l": -1}, {"delta": 0}, {"beta": 0}, {"mu": 0}, {"zeta": -1},
                   {"max_delay": float("inf")}, {"k": 2.5}, {"suppression": "burn"}):
        with pytest.raises(ConfigError):
            CastleAnonymizer(rules(), **kwargs)


def test_parameters_are_keyword_only_with_a_deprecated_positional_path() -> None:
    with pytest.warns(DeprecationWarning, match="by keyword"):
        op = CastleAnonymizer(rules(), 3, 2, 50)
    assert (op.k, op.l, op.delta) == (3, 2, 50)


def test_operators_sharing_one_rule_set_do_not_influence_each_other() -> None:
    """Adaptive domains live in the generalizers: each operator installs its own copy."""
    rs = ashrae.rules_toml()
    shared = RuleSet.from_toml(rs)
    first = [CastleRow(r, i + 2) for i, r in enumerate(ashrae.generate(400, seed=5))]
    other = [CastleRow(r, i + 2) for i, r in enumerate(ashrae.generate(400, seed=6))]
    params = {"k": 5, "l": 2, "delta": 100, "beta": 20, "mu": 10, "zeta": 5}
    alone = run(CastleAnonymizer(RuleSet.from_toml(rs), **params), other)
    a = CastleAnonymizer(shared, **params)
    b = CastleAnonymizer(shared, **params)
    run(a, first)  # widens a's adaptive domains; b must not see them
    assert run(b, other) == alone

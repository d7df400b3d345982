"""CASTLE's missing-value policy: an empty quasi-identifier rejects its tuple (reject, the
default), is suppressed and counted (suppress), or counts as its attribute's top (star)."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import numpy as np
import pytest

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.castle.cluster import ClusterSet, State
from streamanon.castle.records import CastleRow
from streamanon.errors import ConfigError, MissingFieldError
from streamanon.records import Suppressed

RULES = {"id": "u", "attribute": [
    {"name": "age", "generalizer": "range", "domain": [0, 100]},
    {"name": "city", "generalizer": "hierarchy",
     "paths": [["EU", "FR"], ["EU", "DE"], ["US"]]},
    {"name": "zip", "generalizer": "reduction"},
    {"name": "dx", "sensitive": True}]}


def stream(n: int = 300, seed: int = 1, *, blank: str = "") -> list[dict[str, Any]]:
    """Rows over 20 individuals; some ages, cities and zips empty (``blank``)."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        row = {"u": f"p{rnd.randrange(20)}", "age": rnd.randint(20, 60),
               "city": rnd.choice(["FR", "DE", "US"]),
               "zip": rnd.choice(["75013", "75001", "6900"]), "dx": rnd.choice("abc")}
        if i % 17 == 3:
            row["age"] = blank
        if i % 23 == 5:
            row["city"] = blank
        if i % 29 == 7:
            row["zip"] = blank
        rows.append(row)
    return rows


def run(rows: list[dict[str, Any]], rules: dict[str, Any] = RULES, **params: Any
        ) -> tuple[CastleAnonymizer, list[Any]]:
    op = CastleAnonymizer(RuleSet.from_dict(rules), **{"k": 3, "l": 2, "delta": 25, **params})
    out = [x for i, r in enumerate(rows) for x in op.process(CastleRow(r, i))] + op.flush()
    return op, out


def empty(value: Any) -> bool:
    return value is None or not str(value).strip()


def test_reject_is_the_default_and_names_the_field() -> None:
    row = {"u": "a", "age": "", "city": "FR", "zip": "75013", "dx": "a"}
    for params in ({}, {"missing": "reject"}):
        op = CastleAnonymizer(RuleSet.from_dict(RULES), k=2, l=0, **params)
        with pytest.raises(MissingFieldError) as err:
            op.process(row)
        assert err.value.field == "age"
        assert op.summary()["read"] == 0


def test_reject_releases_what_it_released_before() -> None:
    rows = stream(seed=3)
    rows = [r for r in rows if not any(empty(v) for v in r.values())]
    _, before = run(rows)
    _, now = run(rows, missing="reject")
    assert [(type(x).__name__, getattr(x, "values", None)) for x in before] == \
        [(type(x).__name__, getattr(x, "values", None)) for x in now]


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ConfigError, match="missing must be one of reject, suppress, star"):
        CastleAnonymizer(RuleSet.from_dict(RULES), missing="drop")


@pytest.mark.parametrize("blank", ["", "  ", None])
def test_suppress_counts_each_row_with_an_empty_quasi_identifier(blank) -> None:
    rows = stream(blank=blank)
    n_missing = sum(any(empty(r[a]) for a in ("age", "city", "zip")) for r in rows)
    op, out = run(rows, missing="suppress")
    s = op.summary()
    assert s["suppressed_by_reason"]["missing value"] == n_missing > 0
    assert s["read"] == len(rows) == s["released"] + s["suppressed"] + s["held"]
    assert s["held"] == 0
    released_lines = {x.line for x in out if isinstance(x, Released)}
    missing_lines = {x.record.line for x in out if isinstance(x, Suppressed)
                     and x.reason == "missing value"}
    assert len(missing_lines) == n_missing
    assert missing_lines == {i for i, r in enumerate(rows)
                             if any(empty(r[a]) for a in ("age", "city", "zip"))}
    assert not released_lines & missing_lines


def test_suppress_follows_the_suppression_mode() -> None:
    _, out = run(stream(), missing="suppress", suppression="generalize")
    rec = next(x.record for x in out if isinstance(x, Suppressed) and x.reason ==
               "missing value")
    assert isinstance(rec, Released)
    assert (rec.values["age"], rec.values["city"], rec.values["zip"]) == ("[0,100]", "*", "*")


@pytest.mark.parametrize("missing", ["suppress", "star"])
@pytest.mark.parametrize("field", ["u", "dx"])
def test_an_empty_id_or_sensitive_value_is_refused_whatever_the_policy(missing, field) -> None:
    op = CastleAnonymizer(RuleSet.from_dict(RULES), k=2, l=0, missing=missing)
    row = {"u": "a", "age": "", "city": "FR", "zip": "75013", "dx": "a", field: ""}
    with pytest.raises(MissingFieldError) as err:
        op.process(row)
    assert err.value.field == field
    assert op.summary()["read"] == 0 and op.summary()["suppressed"] == 0


def test_suppress_still_refuses_another_bad_value_of_the_row() -> None:
    op = CastleAnonymizer(RuleSet.from_dict(RULES), k=2, l=0, missing="suppress")
    with pytest.raises(Exception, match="city"):
        op.process({"u": "a", "age": "", "city": "Rome", "zip": "75013", "dx": "a"})


def check_star(rows: list[dict[str, Any]], out: list[Any], top_age: str | None = "[0,100]"
               ) -> int:
    """Every released row whose input lacks a value shows the attribute's top, and so does
    every row of its cluster; returns how many such rows were released."""
    clusters: dict[int, list[Released]] = defaultdict(list)
    for x in out:
        if isinstance(x, Released):
            clusters[x.cluster].append(x)
    seen = 0
    for members in clusters.values():
        for x in members:
            src = rows[x.line]
            tops = []
            if empty(src["age"]):
                tops.append("age")
                if top_age is not None:
                    assert x.values["age"] == top_age
            if empty(src["city"]):
                tops.append("city")
                assert x.values["city"] == "*"
            if empty(src["zip"]):
                tops.append("zip")
                assert set(x.values["zip"]) == {"*"}
            seen += bool(tops)
            for other in members:  # one class: the same released values
                assert all(other.values[a] == x.values[a] for a in tops)
    return seen


@pytest.mark.parametrize("split", ["prink", "median", "window"])
@pytest.mark.parametrize("zeta", [0, 10])
def test_star_releases_a_missing_value_only_under_the_top(split, zeta) -> None:
    rows = stream()
    op, out = run(rows, missing="star", split=split, zeta=zeta)
    s = op.summary()
    assert s["read"] == len(rows) == s["released"] + s["suppressed"]
    assert "missing value" not in s["suppressed_by_reason"]
    assert check_star(rows, out) > 30


def test_star_with_an_adaptive_domain_releases_the_domain_seen_so_far() -> None:
    rules = {**RULES, "attribute": [{"name": "age", "generalizer": "range"},
                                    *RULES["attribute"][1:]]}
    rows = stream(seed=7)
    _, out = run(rows, rules, missing="star")
    ages: list[float] = []
    releases = 0
    for i, r in enumerate(rows):  # the domain only grows: a top covers all ages before it
        if not empty(r["age"]):
            ages.append(float(r["age"]))
        for x in out:
            if isinstance(x, Released) and x.line == i and empty(r["age"]) and ages:
                lo, hi = (float(v) for v in x.values["age"].strip("[]").split(","))
                assert lo <= min(ages) and max(ages) <= hi
                assert lo >= min(float(q["age"]) for q in rows if not empty(q["age"]))
                releases += 1
    assert releases > 5
    assert check_star(rows, out, top_age=None) > 0


def test_star_with_only_missing_values_releases_star_and_loses_everything() -> None:
    rules = {"id": "u", "attribute": [{"name": "age", "generalizer": "range"},
                                      {"name": "city", "generalizer": "hierarchy",
                                       "paths": [["EU", "FR"], ["US"]]}]}
    rows = [{"u": f"p{i % 4}", "age": "", "city": "FR" if i % 2 else "US"} for i in range(12)]
    op, out = run(rows, rules, k=2, l=0, delta=4, missing="star")
    released = [x for x in out if isinstance(x, Released)]
    assert len(released) + op.summary()["suppressed"] == 12 and len(released) >= 8
    assert {x.values["age"] for x in released} == {"[*]"}
    assert op.summary()["info_loss"]["age"] == 1.0


def test_a_kept_cluster_covers_a_missing_value_only_when_it_is_the_top() -> None:
    cset = ClusterSet(RuleSet.from_dict(RULES))
    row = CastleRow({"u": "a", "age": "", "city": "", "zip": "75013", "dx": "a"}, 1)
    with pytest.raises(MissingFieldError):
        cset.parse(row, 1)
    item, _, _ = cset.parse_star(row, 1)
    full, hier_raw, other_raw = cset.parse(CastleRow({"u": "b", "age": 40, "city": "FR",
                                                      "zip": "75013", "dx": "a"}, 2), 2)
    cset.observe(full, hier_raw, other_raw)
    root = cset.hier[0].tree.index("*")
    fr = cset.hier[0].tree.index("FR")
    narrow = State(np.array([30.0]), np.array([50.0]), np.array([root]), [("75013", 5)])
    top = State(np.array([0.0]), np.array([100.0]), np.array([root]), [("75013", 5)])
    below = State(np.array([0.0]), np.array([100.0]), np.array([fr]), [("75013", 5)])
    assert cset.covers(narrow, full)  # a value inside the range: reusable
    assert not cset.covers(narrow, item)  # a missing age: only the whole domain
    assert cset.covers(top, item)
    assert not cset.covers(below, item)  # a missing city: only the root


def test_star_reuses_no_kept_cluster_below_the_top() -> None:
    """A kept cluster [41,44] covers a late tuple's age 44 (it is released under it, alone),
    but not its missing age: that tuple is suppressed rather than released below the top."""
    rules = {"id": "u", "attribute": [{"name": "age", "generalizer": "range",
                                       "domain": [0, 100]}]}
    ages = [10, 50, 90, 40, 41, 42, 43, 44, 45]
    rows = [CastleRow({"u": f"p{i % 3}", "age": a}, i) for i, a in enumerate(ages)]
    for value, expected in ((44, "[41,44]"), ("", None)):
        op = CastleAnonymizer(RuleSet.from_dict(rules), k=3, l=0, delta=3, zeta=5,
                              missing="star")
        for row in rows:
            op.process(row)
        op.flush()
        assert [kept.values for kept in op._kept] == [{"age": "[41,44]"}]
        late = op.process(CastleRow({"u": "p9", "age": value}, 9)) + op.flush()
        assert len(late) == 1
        if expected is None:
            assert isinstance(late[0], Suppressed)
        else:
            assert isinstance(late[0], Released) and late[0].values["age"] == expected


@pytest.mark.parametrize("missing", ["suppress", "star"])
def test_an_empty_time_is_refused_even_when_it_is_a_quasi_identifier(missing) -> None:
    rules = {"id": "u", "time": "t", "attribute": [
        {"name": "t", "generalizer": "range"}, {"name": "age", "generalizer": "range"}]}
    op = CastleAnonymizer(RuleSet.from_dict(rules), k=2, l=0, max_delay=10, missing=missing)
    with pytest.raises(MissingFieldError) as err:
        op.process({"u": "a", "t": "", "age": ""})
    assert err.value.field == "t"
    assert op.summary()["read"] == 0
    out = op.process({"u": "a", "t": 5, "age": ""})  # the age alone: taken
    assert [getattr(x, "reason", None) for x in out] == (
        ["missing value"] if missing == "suppress" else [])
    assert op.summary()["read"] == 1

"""Static quasi-identifiers bound the intersection: every release of an individual covers,
on the static attributes, the class it was first released in (its anchor), on every release
path (whole clusters, Prink's and the median split, the window release, Ω reuse), across a
checkpoint, and an attribute not declared static is left as it was; on random rule sets and
streams the independent checker agrees."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.castle.anchors import static_columns
from streamanon.data import ashrae
from streamanon.errors import ConfigError
from streamanon.records import Suppressed
from streamanon.verify.castle import check_castle, rules_from_dict
from tests.castle.strategies import make_rules, rule_sets, streams

STATIC = ("square_feet", "year_built", "floor_count", "primary_use")
ROWS = list(ashrae.generate(2000, seed=3))


def rules_text(static: bool) -> str:
    text = ashrae.rules_toml()
    if static:
        for name in STATIC:
            text = text.replace(f'name = "{name}"\n', f'name = "{name}"\nstatic = true\n')
    return text


def run(static: bool, rows: list[dict[str, Any]] = ROWS, **params: Any) -> list[Any]:
    params = {"k": 4, "l": 2, "delta": 300, **params}
    op = CastleAnonymizer(RuleSet.from_toml(rules_text(static)), **params)
    out = [r for row in rows for r in op.process(row)]
    return out + op.flush()


def box(text: str) -> tuple[float, float]:
    if text.startswith("["):
        lo, hi = text[1:-1].split(",")
        return float(lo), float(hi)
    return float(text), float(text)


def ancestors(node: str) -> set[str]:
    out = {node}
    for path in ashrae.PRIMARY_USE_PATHS:
        if node in path:
            out |= set(path[:path.index(node)])
    return out | {"*"}


def uncovered(out: list[Any]) -> int:
    """Later releases that do not cover their individual's first one (static attributes)."""
    first: dict[str, dict[str, Any]] = {}
    bad = 0
    for r in out:
        if not isinstance(r, Released):
            continue
        v = r.values
        was = first.setdefault(v["building_id"], v)
        if was is v:
            continue
        for name in STATIC[:3]:
            (lo, hi), (lo2, hi2) = box(was[name]), box(v[name])
            bad += not (lo2 <= lo and hi <= hi2)
        bad += v["primary_use"] not in ancestors(was["primary_use"])
    return bad


def test_rules_read_static_and_refuse_it_where_it_cannot_hold() -> None:
    rules = RuleSet.from_toml(rules_text(True))
    assert [a.name for a in rules.qi_rules if a.static] == list(STATIC)
    with pytest.raises(ConfigError, match="static must be true or false"):
        RuleSet.from_dict({"id": "u", "attribute": [
            {"name": "a", "generalizer": "range", "static": "yes"}]})
    with pytest.raises(ConfigError, match="static"):
        RuleSet.from_dict({"id": "u", "attribute": [
            {"name": "d", "sensitive": True, "static": True}]})
    reduction = RuleSet.from_dict({"id": "u", "attribute": [
        {"name": "zip", "generalizer": "reduction", "static": True}]})
    with pytest.raises(ConfigError, match="range or hierarchy"):
        CastleAnonymizer(reduction, k=2, l=0)


@pytest.mark.parametrize("split", ["prink", "median", "window"])
def test_every_release_covers_the_first_one_on_static_attributes(split: str) -> None:
    plain, bounded = run(False, split=split), run(True, split=split)
    assert uncovered(plain) > 0  # the stream does narrow without the bound
    assert uncovered(bounded) == 0
    released = [r for r in bounded if isinstance(r, Released)]
    assert len(released) > 0.9 * len(ROWS)
    # the price: wider static attributes, never narrower than without the bound on average
    def mean_loss(out: list[Any]) -> float:
        rel = [r.loss for r in out if isinstance(r, Released)]
        return sum(rel) / len(rel)
    assert mean_loss(bounded) >= mean_loss(plain)


def test_omega_reuse_requires_the_anchor() -> None:
    """A kept cluster is reused for a tuple only when it covers the individual's anchor."""
    out = run(True, zeta=20, delta=150)
    assert uncovered(out) == 0
    ids = [r.cluster for r in out if isinstance(r, Released)]
    # a reused class: its id comes back after other classes were released
    runs = [c for i, c in enumerate(ids) if i == 0 or ids[i - 1] != c]
    assert len(runs) > len(set(runs))


def test_anchors_survive_a_checkpoint() -> None:
    rules = RuleSet.from_toml(rules_text(True))
    whole = CastleAnonymizer(rules, k=4, l=2, delta=300)
    expected = [r for row in ROWS for r in whole.process(row)] + whole.flush()
    op = CastleAnonymizer(rules, k=4, l=2, delta=300)
    out = [r for row in ROWS[:1100] for r in op.process(row)]
    assert len(op._anchors) > 0
    op = pickle.loads(pickle.dumps(op))
    out += [r for row in ROWS[1100:] for r in op.process(row)] + op.flush()
    assert [(getattr(r, "values", None), getattr(r, "line", None)) for r in out] == [
        (getattr(r, "values", None), getattr(r, "line", None)) for r in expected]
    assert uncovered(out) == 0


def test_only_static_attributes_are_bound() -> None:
    rules = RuleSet.from_toml(rules_text(True))
    from streamanon.castle.cluster import ClusterSet
    assert [name for name, _, _ in static_columns(ClusterSet(rules))] == list(STATIC)
    plain = RuleSet.from_toml(rules_text(False))
    assert static_columns(ClusterSet(plain)) == []


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_streams_pass_the_full_checker_with_static_attributes(data: Any) -> None:
    """Every range and hierarchy of a random rule set declared static: the independent
    checker (k, l, coverage, accounting and the bound) passes on every release path."""
    spec = data.draw(rule_sets())
    for a in spec["attribute"]:
        if a.get("generalizer") in ("range", "hierarchy"):
            a["static"] = True
    rows = data.draw(streams(spec))
    has_sa = any(a.get("sensitive") for a in spec["attribute"])
    params = {"k": data.draw(st.integers(1, 4)),
              "l": data.draw(st.integers(0, 3)) if has_sa else 0,
              "delta": data.draw(st.integers(1, 30)), "beta": data.draw(st.integers(1, 8)),
              "zeta": data.draw(st.integers(0, 3)),
              "split": data.draw(st.sampled_from(["prink", "median", "window"]))}
    op = CastleAnonymizer(make_rules(spec), **params)
    out = [x for r in rows for x in op.process(r)] + op.flush()
    released = [x.values for x in out if isinstance(x, Released)]
    suppressed = [x.record.values for x in out if isinstance(x, Suppressed)]
    report = check_castle(released, rules_from_dict(spec), k=params["k"], l=params["l"],
                          inputs=rows, suppressed=suppressed, allow_empty=True)
    assert report.ok, report.first_problem
    assert report.static_violations == 0

"""The anchors of static attributes: ``static=`` marks them as the rules' key does (same
releases); ``static_ttl`` and ``static_max`` bound how many are kept, count the forgotten
ones, keep that count across a checkpoint, and an individual seen again after its anchor was
forgotten gets a new one (its releases before and after may then not cover each other)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from streamanon.castle import CastleAnonymizer, CastleRow, Released, RuleSet
from streamanon.data import ashrae
from streamanon.errors import ConfigError
from tests.castle.test_anchors import ROWS, STATIC, rules_text, uncovered

HOUR = 3600


def _gapped() -> list[dict[str, Any]]:
    """ASHRAE rows where a third of the buildings stop reporting for 12 hours mid-stream
    (then report again): their anchors go unused for that long."""
    rows = list(ashrae.generate(3000, seed=4))
    t0 = rows[0]["timestamp"]
    return [r for r in rows if not (r["building_id"] % 3 == 0
                                    and t0 + 6 * HOUR <= r["timestamp"] < t0 + 18 * HOUR)]


GAPPED = _gapped()


def _run(rows: list[dict[str, Any]], rules: RuleSet, **params: Any
         ) -> tuple[list[Any], CastleAnonymizer]:
    op = CastleAnonymizer(rules, **{"k": 4, "l": 2, "delta": 300, **params})
    out = [r for i, row in enumerate(rows) for r in op.process(CastleRow(row, i))]
    return out + op.flush(), op


def _released(out: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.line, tuple(r.values.items())) for r in out if isinstance(r, Released)]


def test_static_parameter_gives_the_releases_of_the_rules_key() -> None:
    by_key, _ = _run(ROWS, RuleSet.from_toml(rules_text(True)))
    by_param, op = _run(ROWS, RuleSet.from_toml(rules_text(False)), static=list(STATIC))
    assert _released(by_param) == _released(by_key)
    assert op.params()["static"] == list(STATIC)
    assert [a.name for a in op.rules.qi_rules if a.static] == list(STATIC)
    plain = RuleSet.from_toml(rules_text(False))
    assert not any(a.static for a in plain.attributes)  # the given rules are left as they are
    with pytest.raises(ConfigError, match="no attribute"):
        CastleAnonymizer(plain, static=["nope"])
    with pytest.raises(ConfigError, match="quasi-identifier"):
        CastleAnonymizer(RuleSet.from_dict({"id": "u", "attribute": [
            {"name": "d", "sensitive": True}]}), l=0, static=["d"])


def test_unbounded_anchors_are_never_forgotten_and_a_wide_bound_changes_nothing() -> None:
    rules = RuleSet.from_toml(rules_text(True))
    plain, op = _run(GAPPED, rules)
    assert op.summary()["anchors"]["forgotten"] == 0
    wide, op_wide = _run(GAPPED, rules, static_ttl=48 * HOUR, static_max=10_000)
    assert _released(wide) == _released(plain)
    figures = op_wide.summary()["anchors"]
    assert figures == {"kept": len({r["building_id"] for r in GAPPED}), "forgotten": 0,
                       "ttl": 48.0 * HOUR, "max_count": 10_000}
    assert uncovered(plain) == 0


def test_a_ttl_forgets_the_anchors_of_absent_individuals_who_then_get_new_ones() -> None:
    rules = RuleSet.from_toml(rules_text(True))
    out, op = _run(GAPPED, rules, static_ttl=6 * HOUR)
    figures = op.summary()["anchors"]
    absent = {r["building_id"] for r in GAPPED if r["building_id"] % 3 == 0}
    # every absent building's anchor went (none of the others'), and came back on return
    assert figures["forgotten"] == len(absent)
    assert figures["kept"] == len({r["building_id"] for r in GAPPED})
    # what forgetting gives up: a later release need not cover the first one any more, but
    # only for the individuals whose anchor was forgotten
    t_back = GAPPED[0]["timestamp"] + 18 * HOUR
    def narrowed(rows: list[Any]) -> set[Any]:
        bad = set()
        for r in rows:
            if uncovered([first[r.values["building_id"]], r]):
                bad.add(r.values["building_id"])
        return bad
    released = [r for r in out if isinstance(r, Released)]
    first: dict[Any, Released] = {}
    for r in released:
        first.setdefault(r.values["building_id"], r)
    assert narrowed(released) <= absent
    # after the return, each release of an absent individual covers its first release after
    # it (its new anchor)
    first = {}
    later = [r for r in released if GAPPED[r.line]["timestamp"] >= t_back
             and r.values["building_id"] in absent]
    for r in later:
        first.setdefault(r.values["building_id"], r)
    assert narrowed(later) == set()


def test_a_max_count_keeps_the_most_recently_used_anchors() -> None:
    rules = RuleSet.from_toml(rules_text(True))
    op = CastleAnonymizer(rules, k=4, l=2, delta=40, static_max=25)
    for row in GAPPED:
        op.process(row)
        # beyond the bound only the anchors of individuals with a tuple held (in use)
        held = {it.individual for it in op._held if not it.done}
        assert len(op._anchors) <= 25 + len(held)
    op.flush()
    figures = op.summary()["anchors"]
    assert figures["kept"] <= 25
    assert figures["forgotten"] > 0
    with pytest.raises(ConfigError, match="static_max"):
        CastleAnonymizer(rules, static_max=0)
    with pytest.raises(ConfigError, match="time column"):
        CastleAnonymizer(RuleSet.from_dict({"id": "u", "attribute": [
            {"name": "a", "generalizer": "range", "static": True}]}), l=0, static_ttl=5)


def test_the_bound_and_the_forgotten_count_survive_a_checkpoint() -> None:
    rules = RuleSet.from_toml(rules_text(True))
    params = {"static_ttl": 6 * HOUR, "static_max": 40}
    expected, whole = _run(GAPPED, rules, **params)
    op = CastleAnonymizer(rules, k=4, l=2, delta=300, **params)
    half = len(GAPPED) // 2
    out = [r for i, row in enumerate(GAPPED[:half]) for r in op.process(CastleRow(row, i))]
    before = op.summary()["anchors"]["forgotten"]
    assert before > 0
    op = pickle.loads(pickle.dumps(op))
    assert op.summary()["anchors"]["forgotten"] == before
    out += [r for i, row in enumerate(GAPPED[half:], half) for r in op.process(
        CastleRow(row, i))] + op.flush()
    assert _released(out) == _released(expected)
    assert op.summary()["anchors"] == whole.summary()["anchors"]


def test_the_window_release_never_forgets_the_anchor_of_an_individual_still_held(
        monkeypatch) -> None:
    """An anchor in use is kept: with the window release an individual is held while a
    tuple of it waits (not in any cluster; under older rules, while newer ones release) or
    sits in a part of the cut not released yet; a bound as tight as 5 anchors forgets many
    others."""
    from streamanon.castle import anchors as anchors_module

    rules = RuleSet.from_toml(rules_text(True))
    op = CastleAnonymizer(rules, k=4, l=2, delta=300, static_max=5, split="window")
    real = anchors_module.Anchors.forget
    checked = []

    def forget(self, now, held):
        before = set(self.by_individual)
        waiting = {p for s in op._sets if s._waiting is not None for p in s._waiting_ids}
        releasing = set(op._releasing or ())
        gone = real(self, now, held)
        kept = set(self.by_individual)
        in_use = (waiting | releasing) & before
        assert in_use <= kept, in_use - kept
        checked.append(len(in_use))
        return gone

    monkeypatch.setattr(anchors_module.Anchors, "forget", forget)
    shorter = RuleSet.from_toml(rules_text(True) + "\n[parameters]\ndelta = 60\n")
    for i, row in enumerate(GAPPED):
        if i == len(GAPPED) // 2:  # newer rules, a shorter δ: the older tuples still wait
            op.set_rules(shorter)
        op.process(CastleRow(row, i))
    op.flush()
    assert op.summary()["anchors"]["forgotten"] > 0
    assert sum(checked) > 0  # anchors in use were at stake

"""Property tests: on random streams, rule sets and parameters the full checker passes (k, l,
every released row covering its own input row under the rules, every input row released or
suppressed exactly once), an empty release is flagged with its reason, and nothing hangs."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streamanon.castle import CastleAnonymizer, Released
from streamanon.records import Suppressed
from streamanon.verify.castle import check_castle, rules_from_dict
from tests.castle.strategies import make_rules, rule_sets, streams


@st.composite
def cases(draw: st.DrawFn, min_sensitive: int = 0
          ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    spec = draw(rule_sets(min_sensitive))
    rows = draw(streams(spec))
    has_sa = any(a.get("sensitive") for a in spec["attribute"])
    params = {
        "k": draw(st.integers(1, 6)),
        "l": draw(st.integers(0, 6)) if has_sa else draw(st.sampled_from([0, 1])),
        "delta": draw(st.integers(1, 30)),
        "beta": draw(st.integers(1, 8)),
        "mu": draw(st.integers(1, 5)),
        "zeta": draw(st.integers(0, 3)),
        "suppression": draw(st.sampled_from(["drop", "null", "generalize"])),
    }
    return spec, rows, params


def run(spec: dict[str, Any], rows: list[dict[str, Any]], params: dict[str, Any]) -> list:
    op = CastleAnonymizer(make_rules(spec), **params)
    return [x for r in rows for x in op.process(r)] + op.flush()


@given(cases())
def test_the_full_checker_passes_on_random_streams_and_rules(case) -> None:
    spec, rows, params = case
    out = run(spec, rows, params)
    released = [x.values for x in out if isinstance(x, Released)]
    suppressed = [x.record.values for x in out if isinstance(x, Suppressed)]
    report = check_castle(released, rules_from_dict(spec), k=params["k"], l=params["l"],
                          inputs=rows, suppressed=suppressed, allow_empty=True)
    assert report.ok, report.first_problem
    assert report.unverified == 0 and report.lost == 0
    assert len(released) + len(suppressed) == len(rows)
    individuals = {r["u"] for r in rows}
    if len(individuals) < params["k"]:
        assert not released  # a single (or too few) individual(s): nothing can be released
    if rows and not released:  # an empty release is never called ok without allow_empty
        strict = check_castle(released, rules_from_dict(spec), k=params["k"], l=params["l"],
                              inputs=rows)
        assert strict.empty and not strict.ok and strict.why_empty


@given(cases(min_sensitive=1))
def test_l_above_the_number_of_sensitive_values_suppresses_everything(case) -> None:
    spec, rows, params = case
    rules = make_rules(spec)
    assert rules.sensitive
    distinct = min(len({r[s] for r in rows}) for s in rules.sensitive) if rows else 0
    params["l"] = distinct + 1 if distinct + 1 > 1 else 2
    op = CastleAnonymizer(rules, **params)
    out = [x for r in rows for x in op.process(r)] + op.flush()
    assert all(isinstance(x, Suppressed) for x in out)
    assert len(out) == len(rows)
    assert op.held == 0
    if rows:
        report = check_castle([], rules_from_dict(spec), k=params["k"], l=params["l"],
                              inputs=rows)
        assert report.empty and not report.ok
        assert report.why_empty is not None and (
            "l = " in report.why_empty or "k = " in report.why_empty)

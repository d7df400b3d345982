"""Property tests: on random streams, rule sets and parameters the checker passes, the
accounting adds up, every released row stands for its own input row, and nothing hangs."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streamanon.castle import CastleAnonymizer, Released
from streamanon.castle.verify import check_castle
from streamanon.conformance import check_operator
from streamanon.records import Suppressed
from tests.castle.strategies import make_rules, rule_sets, streams


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    spec = draw(rule_sets())
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


@given(cases())
def test_released_classes_meet_k_and_l_and_accounting_adds_up(case) -> None:
    spec, rows, params = case
    rules = make_rules(spec)
    out = check_operator(lambda: CastleAnonymizer(make_rules(spec), **params), rows)
    released = [x.values for x in out if isinstance(x, Released)]
    suppressed = [x for x in out if isinstance(x, Suppressed)]
    assert len(released) + len(suppressed) == len(rows)
    report = check_castle(released, "u", rules.quasi_identifiers, rules.sensitive,
                          k=params["k"], l=params["l"], inputs=rows)
    assert report.ok, report.first_problem
    individuals = {r["u"] for r in rows}
    if len(individuals) < params["k"]:
        assert not released  # a single (or too few) individual(s): nothing can be released


@given(cases())
def test_l_above_the_number_of_sensitive_values_suppresses_everything(case) -> None:
    spec, rows, params = case
    rules = make_rules(spec)
    if not rules.sensitive:
        return
    distinct = min(len({r[s] for r in rows}) for s in rules.sensitive) if rows else 0
    params["l"] = distinct + 1 if distinct + 1 > 1 else 2
    op = CastleAnonymizer(rules, **params)
    out = [x for r in rows for x in op.process(r)] + op.flush()
    assert all(isinstance(x, Suppressed) for x in out)
    assert len(out) == len(rows)
    assert op.held == 0

"""The diversity rules: their definitions, their closure under union (what CASTLE relies on),
and CASTLE's releases under each rule, checked by the independent checker and by pycanon.

pycanon's ``entropy_l_diversity`` returns ``int(exp(min entropy))``; its
``recursive_c_l_diversity`` sorts a class's counts in increasing order before applying the
formula, so its c is not the definition's (Machanavajjhala et al. order them decreasingly):
recursive diversity is compared with the definition written out here instead, and with
pycanon's distinct l that the rule implies.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.castle.diversity import Diversity
from streamanon.errors import ConfigError
from streamanon.verify.castle import check_castle
from streamanon.verify.diversity import check_diversity

counts_st = st.lists(st.integers(1, 20), min_size=1, max_size=8)


def _entropy(counts: list[int]) -> float:
    n = sum(counts)
    return -sum(r / n * math.log(r / n) for r in counts)


def _recursive(counts: list[int], c: float, l: int) -> bool:  # noqa: E741
    r = sorted(counts, reverse=True)
    return len(r) >= l and r[0] < c * sum(r[l - 1:])


@given(counts_st, st.integers(2, 5))
def test_entropy_rule_is_the_definition(counts: list[int], l: int) -> None:  # noqa: E741
    assert Diversity("entropy", l=l).holds(counts) == (
        _entropy(counts) >= math.log(l) - 1e-9)


@given(counts_st, st.integers(2, 5), st.sampled_from([0.5, 1, 1.5, 2, 3]))
def test_recursive_rule_is_the_definition(counts: list[int], l: int, c: float) -> None:  # noqa: E741
    assert Diversity("recursive", l=l, c=c).holds(counts) == _recursive(counts, c, l)


@settings(max_examples=150)
@given(st.dictionaries(st.integers(0, 6), st.integers(1, 9), min_size=1),
       st.dictionaries(st.integers(0, 6), st.integers(1, 9), min_size=1),
       st.sampled_from(["distinct", "entropy", "recursive"]), st.integers(2, 4),
       st.sampled_from([0.5, 1, 2, 3]))
def test_every_rule_is_closed_under_union(x: dict, y: dict, measure: str, l: int,  # noqa: E741
                                          c: float) -> None:
    rule = Diversity(measure, l=l, c=c if measure == "recursive" else None)
    if rule.holds(list(x.values())) and rule.holds(list(y.values())):
        assert rule.holds(list((Counter(x) + Counter(y)).values()))


def test_bad_rules_are_refused() -> None:
    with pytest.raises(ConfigError, match="needs c"):
        Diversity("recursive", l=2)
    with pytest.raises(ConfigError, match="takes none"):
        Diversity("entropy", l=2, c=2)
    with pytest.raises(ConfigError, match="one of"):
        CastleAnonymizer(None, diversity="shannon")


RULES = RuleSet.from_dict({"id": "u", "attribute": [
    {"name": "a", "generalizer": "range"}, {"name": "b", "generalizer": "range"},
    {"name": "s", "sensitive": True}]})
#: a skewed sensitive attribute: entropy 1.33 > ln 3 overall, so l = 3 can be met
WEIGHTS = {"v0": 50, "v1": 20, "v2": 15, "v3": 10, "v4": 5}


def _stream(seed: int, n: int = 600) -> list[dict]:
    rnd = random.Random(seed)
    values = list(WEIGHTS)
    return [{"u": f"p{rnd.randrange(30)}", "a": rnd.randint(0, 99), "b": rnd.random(),
             "s": rnd.choices(values, weights=list(WEIGHTS.values()))[0]} for _ in range(n)]


def _release(rows: list[dict], **params) -> list[dict]:
    op = CastleAnonymizer(RULES, **params)
    out = [x for r in rows for x in op.process(r)] + op.flush()
    return [x.values for x in out if isinstance(x, Released)]


CASES = [("entropy", 3, None), ("entropy", 2, None), ("recursive", 3, 2.0),
         ("recursive", 2, 1.0)]


@pytest.mark.parametrize("split", ["prink", "median", "window"])
@pytest.mark.parametrize(("measure", "l", "c"), CASES)
def test_castle_releases_meet_the_rule(measure: str, l: int, c: float | None,  # noqa: E741
                                       split: str) -> None:
    for seed in range(3):
        released = _release(_stream(seed), k=3, l=l, delta=60, beta=8, zeta=5, split=split,
                            diversity=measure, c=c)
        assert len(released) > 300, "the rule can be met: most tuples are released"
        k_report = check_castle(released, "u", ["a", "b"], ["s"], k=3, l=l)
        assert k_report.ok, k_report.first_problem
        report = check_diversity(released, qi=["a", "b"], sensitive=["s"], measure=measure,
                                 l=l, c=c)
        assert report.ok, report.first_problem
        df = pd.DataFrame(released).astype(str)
        assert anonymity.l_diversity(df, ["a", "b"], ["s"]) >= l
        if measure == "entropy":
            ent_l = anonymity.entropy_l_diversity(df, ["a", "b"], ["s"])
            worst = report.worst["s"]
            assert worst >= l - 1e-6
            assert ent_l <= worst + 1e-6 and worst - ent_l < 1 + 1e-6
        else:
            for _, cls in df.groupby(["a", "b"]):
                assert _recursive(list(cls["s"].value_counts()), c, l)  # type: ignore[arg-type]


def test_the_distinct_rule_alone_lets_skewed_classes_through() -> None:
    """What the new rules add: distinct 3-diversity releases classes that entropy 3-diversity
    refuses, on the same stream."""
    rows = _stream(1)
    plain = _release(rows, k=3, l=3, delta=60, beta=8, zeta=5)
    report = check_diversity(plain, qi=["a", "b"], sensitive=["s"], measure="entropy", l=3)
    assert not report.ok and report.violations > 0


def test_default_rule_is_distinct_and_unchanged() -> None:
    rows = _stream(2)
    assert _release(rows, k=3, l=3, delta=60) == _release(rows, k=3, l=3, delta=60,
                                                           diversity="distinct")

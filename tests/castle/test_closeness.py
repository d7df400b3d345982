"""t-closeness: the operator's distance and the checker's, each against pycanon's
``t_closeness`` (whose reference is the whole table's distribution), its closure under union,
and CASTLE's releases under it."""

from __future__ import annotations

import random
from collections import Counter

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.castle.diversity import Closeness, reference_of
from streamanon.errors import ConfigError
from streamanon.verify.diversity import check_closeness, reference_from_rows

tables = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6)), min_size=2, max_size=60)


def _pycanon_and_ours(pairs: list[tuple[int, int]], numeric: bool) -> tuple[float, float, float]:
    values = [v if numeric else f"v{v}" for _, v in pairs]
    df = pd.DataFrame({"q": [f"c{c}" for c, _ in pairs], "s": values})
    theirs = anonymity.t_closeness(df, ["q"], ["s"])
    keys = [repr(float(v)) if numeric else v for v in values]
    close = Closeness(1.0, {"s": Counter(keys)})
    per: dict[str, Counter] = {}
    for (c, _), key in zip(pairs, keys, strict=True):
        per.setdefault(f"c{c}", Counter())[key] += 1
    ours = max(close.distance("s", cnt) for cnt in per.values())
    rows = [{"q": f"c{c}", "s": v} for (c, _), v in zip(pairs, values, strict=True)]
    checker = check_closeness(rows, qi=["q"], sensitive=["s"], t=1.0,
                              reference=reference_from_rows(rows, ["s"])).worst["s"]
    return theirs, ours, checker


@settings(max_examples=60)
@given(tables, st.booleans())
def test_both_distances_equal_pycanons(pairs: list[tuple[int, int]], numeric: bool) -> None:
    if len({v for _, v in pairs}) < 2:  # pycanon divides by m - 1
        return
    theirs, ours, checker = _pycanon_and_ours(pairs, numeric)
    assert ours == pytest.approx(theirs, abs=1e-9)
    assert checker == pytest.approx(theirs, abs=1e-8)


@settings(max_examples=200)
@given(st.dictionaries(st.sampled_from("0123456"), st.integers(1, 9), min_size=1),
       st.dictionaries(st.sampled_from("0123456"), st.integers(1, 9), min_size=1),
       st.booleans(), st.sampled_from([0.1, 0.2, 0.3, 0.5]))
def test_closeness_is_closed_under_union(x: dict, y: dict, numeric: bool, t: float) -> None:
    ref = {(k if numeric else f"v{k}"): w for k, w in {"0": 3, "2": 1, "3": 2, "6": 4}.items()}
    x = {(k if numeric else f"v{k}"): w for k, w in x.items()}
    y = {(k if numeric else f"v{k}"): w for k, w in y.items()}
    close = Closeness(t, {"s": ref})
    if close.holds("s", x) and close.holds("s", y):
        assert close.holds("s", Counter(x) + Counter(y))


def test_bad_closeness_is_refused() -> None:
    rules = RuleSet.from_dict({"id": "u", "attribute": [
        {"name": "a", "generalizer": "range"}, {"name": "s", "sensitive": True}]})
    with pytest.raises(ConfigError, match="both t and a reference"):
        CastleAnonymizer(rules, t=0.2)
    with pytest.raises(ConfigError, match="missing: s"):
        CastleAnonymizer(rules, t=0.2, reference={"other": {"x": 1}})
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        Closeness(1.5, {"s": {"x": 1}})


RULES = RuleSet.from_dict({"id": "u", "attribute": [
    {"name": "a", "generalizer": "range"}, {"name": "s", "sensitive": True},
    {"name": "n", "sensitive": True}]})


def _stream(seed: int, n: int = 600) -> list[dict]:
    rnd = random.Random(seed)
    return [{"u": f"p{rnd.randrange(30)}", "a": rnd.randint(0, 99),
             "s": rnd.choices("vwxyz", weights=[50, 20, 15, 10, 5])[0],
             "n": rnd.randint(0, 20)} for _ in range(n)]


@pytest.mark.parametrize("split", ["prink", "median", "window"])
@pytest.mark.parametrize(("t", "l", "diversity"), [(0.2, 0, "distinct"), (0.3, 2, "entropy"),
                                                  (0.15, 2, "distinct")])
def test_castle_releases_are_t_close(t: float, l: int, diversity: str,  # noqa: E741
                                     split: str) -> None:
    for seed in range(2):
        rows = _stream(seed)
        op = CastleAnonymizer(RULES, k=3, l=l, delta=60, beta=8, zeta=5, split=split,
                              diversity=diversity, t=t,
                              reference=reference_of(rows, ["s", "n"]))
        out = [x for r in rows for x in op.process(r)] + op.flush()
        released = [x.values for x in out if isinstance(x, Released)]
        assert len(released) > 300
        report = check_closeness(released, qi=["a"], sensitive=["s", "n"], t=t,
                                 reference=reference_from_rows(rows, ["s", "n"]))
        assert report.ok, report.first_problem
        assert report.ground == {"s": "equal", "n": "ordered"}
        if seed:
            continue
        # the checker's distance on the released table against pycanon's (its reference)
        df = pd.DataFrame(released).astype({"a": str, "s": str, "n": int})
        own = check_closeness(released, qi=["a"], sensitive=["s", "n"], t=1.0,
                              reference=reference_from_rows(released, ["s", "n"]))
        for s in ("s", "n"):
            assert own.worst[s] == pytest.approx(anonymity.t_closeness(df, ["a"], [s]),
                                                 abs=1e-8)


def test_without_t_the_classes_stray_and_the_checker_says_so() -> None:
    rows = _stream(5)
    op = CastleAnonymizer(RULES, k=3, l=0, delta=60, beta=8, zeta=5)
    out = [x for r in rows for x in op.process(r)] + op.flush()
    released = [x.values for x in out if isinstance(x, Released)]
    report = check_closeness(released, qi=["a"], sensitive=["s", "n"], t=0.15,
                             reference=reference_from_rows(rows, ["s", "n"]))
    assert not report.ok and "distance" in (report.first_problem or "")

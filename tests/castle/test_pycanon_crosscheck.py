"""Cross-check the checker's k and l with pycanon on CASTLE outputs.

pycanon's k counts rows per equivalence class, so it is given one row per (class, individual):
its k is then the fewest distinct individuals in a class, which must equal the checker's and be
>= k. Its l-diversity on the full output must equal the checker's fewest distinct sensitive
values and be >= l.
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.castle.verify import check_castle
from streamanon.data import ashrae


def _crosscheck(released: list[dict], rules: RuleSet, k: int, l: int) -> None:  # noqa: E741
    report = check_castle(released, rules.id_field, rules.quasi_identifiers, rules.sensitive,
                          k=k, l=l)
    assert report.ok, report.first_problem
    df = pd.DataFrame(released).astype(str)
    qi = rules.quasi_identifiers
    per_person = df[[*qi, rules.id_field]].drop_duplicates()
    k_pycanon = anonymity.k_anonymity(per_person, qi)
    assert k_pycanon == report.min_individuals
    assert k_pycanon >= k
    for s in rules.sensitive:
        l_pycanon = anonymity.l_diversity(df, qi, [s])
        assert l_pycanon == report.min_diversity[s]
        assert l_pycanon >= l


@pytest.mark.parametrize(("k", "l"), [(5, 0), (5, 2), (10, 4)])
def test_pycanon_agrees_on_the_ashrae_shaped_stream(k: int, l: int) -> None:  # noqa: E741
    rules = RuleSet.from_toml(ashrae.rules_toml())
    op = CastleAnonymizer(rules, k, l, 400, 30, 50, 5)
    out = [x for r in ashrae.generate(1500, seed=7) for x in op.process(r)] + op.flush()
    released = [x.values for x in out if isinstance(x, Released)]
    assert released
    _crosscheck(released, rules, k, l)


@settings(max_examples=15)
@given(st.integers(1, 4), st.integers(0, 3), st.integers(1, 40), st.integers(0, 10_000))
def test_pycanon_agrees_on_random_streams(k: int, l: int, delta: int, seed: int) -> None:  # noqa: E741
    rules = RuleSet.from_dict({"id": "u", "attribute": [
        {"name": "a", "generalizer": "range"}, {"name": "b", "generalizer": "range"},
        {"name": "s", "sensitive": True}]})
    import random

    rnd = random.Random(seed)
    rows = [{"u": f"p{rnd.randrange(8)}", "a": rnd.randint(-20, 20), "b": rnd.random(),
             "s": f"v{rnd.randrange(5)}"} for _ in range(120)]
    op = CastleAnonymizer(rules, k, l, delta, 5, 5, 2)
    out = [x for r in rows for x in op.process(r)] + op.flush()
    released = [x.values for x in out if isinstance(x, Released)]
    if released:
        _crosscheck(released, rules, k, l)

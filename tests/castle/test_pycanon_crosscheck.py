"""Cross-check the checker's k and l with pycanon on CASTLE outputs.

pycanon's k counts rows per equivalence class, so it is given one row per (class, individual):
its k is then the fewest distinct individuals in a class, which must equal the checker's and be
>= k. Its l-diversity on the full output must equal the checker's fewest distinct sensitive
values and be >= l. Every stream here can meet k and l (8 individuals, 5 sensitive values, k <= 4,
l <= 3, and δ >= 10 so that enough tuples wait together), so an empty release would itself be
a failure: nothing is skipped.
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.data import ashrae
from streamanon.verify.castle import check_castle, rules_from_toml


def _crosscheck(released: list[dict], rules: RuleSet, k: int, l: int) -> None:  # noqa: E741
    assert released, "k and l can be met on every stream here: something must be released"
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
    op = CastleAnonymizer(rules, k=k, l=l, delta=400, beta=30, mu=50, zeta=5)
    rows = list(ashrae.generate(1500, seed=7))
    out = [x for r in rows for x in op.process(r)] + op.flush()
    released = [x.values for x in out if isinstance(x, Released)]
    _crosscheck(released, rules, k, l)
    # and the full checker (rules read on its own, coverage of every input row) agrees
    full = check_castle(released, rules_from_toml(ashrae.rules_toml()), k=k, l=l, inputs=rows)
    assert full.ok and full.unverified == 0, full.first_problem


@settings(max_examples=15)
@given(st.integers(1, 4), st.integers(0, 3), st.integers(10, 40), st.integers(0, 10_000))
def test_pycanon_agrees_on_random_streams(k: int, l: int, delta: int, seed: int) -> None:  # noqa: E741
    rules = RuleSet.from_dict({"id": "u", "attribute": [
        {"name": "a", "generalizer": "range"}, {"name": "b", "generalizer": "range"},
        {"name": "s", "sensitive": True}]})
    import random

    rnd = random.Random(seed)
    # every individual and every sensitive value occurs, so k and l can always be met
    rows = [{"u": f"p{i % 8}", "a": rnd.randint(-20, 20), "b": rnd.random(),
             "s": f"v{i % 5}" if i < 40 else f"v{rnd.randrange(5)}"} for i in range(120)]
    rnd.shuffle(rows)
    op = CastleAnonymizer(rules, k=k, l=l, delta=delta, beta=5, mu=5, zeta=2)
    out = [x for r in rows for x in op.process(r)] + op.flush()
    released = [x.values for x in out if isinstance(x, Released)]
    _crosscheck(released, rules, k, l)

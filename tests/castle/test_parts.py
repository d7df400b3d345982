"""Hierarchies, generalizers, loss metrics and rules: each part on hand-derived cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamanon.castle import Hierarchy, RuleSet
from streamanon.castle.generalizers import (
    HierarchyGeneralizer,
    RangeGeneralizer,
    ReductionGeneralizer,
)
from streamanon.castle.loss import glm, ncp, prl
from streamanon.data import ashrae


def test_overlapping_paths_build_a_tree_not_a_chain() -> None:
    h = Hierarchy.from_paths(ashrae.PRIMARY_USE_PATHS)
    leaves = [n for n in h.names if h.is_leaf(n)]
    assert sorted(leaves) == sorted(ashrae.USES)  # Prink's chain had 5 leaves, not 9
    assert h.n_leaves == 9
    for a in leaves:
        for b in leaves:
            if a != b:
                assert h.lca(a, b) not in (a, b)


def test_a_name_below_two_parents_is_refused() -> None:
    with pytest.raises(ValueError, match="already below"):
        Hierarchy.from_paths([["EU", "Other"], ["US", "Other"]])


def test_outline_file_and_growth(tmp_path) -> None:
    f = tmp_path / "t.txt"
    f.write_text("world\n  EU\n    Paris\n    Berlin\n  US\n    Boston\n")
    h = Hierarchy.from_file(f)
    assert h.root == "world" and h.n_leaves == 3
    assert h.add_path(["world", "US", "NY"]) and h.n_leaves == 4
    assert not h.add_path(["US", "NY"])


@given(st.lists(st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=4, unique=True),
                min_size=1, max_size=8))
def test_lca_table_agrees_with_walking_the_tree(paths) -> None:
    h = Hierarchy()
    for p in paths:
        try:
            h.add_path(p)
        except ValueError:
            continue
        h.lca_table()  # grown incrementally between insertions
    table = h.lca_table()
    for a in h.names:
        anc_a = h.ancestors(a)
        for b in h.names:
            common = next(x for x in anc_a if x in set(h.ancestors(b)))
            assert h.names[table[h.index(a), h.index(b)]] == common


def test_loss_metrics_follow_their_definitions() -> None:
    h = Hierarchy.from_paths([["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE"],
                              ["US"]])
    g = HierarchyGeneralizer("city", h)
    assert g.loss("Paris") == glm(1, 4) == 0.0
    assert g.loss("FR") == pytest.approx((2 - 1) / (4 - 1))
    assert g.loss("*") == 1.0
    n = HierarchyGeneralizer("city", h, "ncp")
    for v in ("Paris", "Lyon", "US"):
        n.observe(v)
    assert n.loss("FR") == ncp(2, 3) == pytest.approx(2 / 3)
    assert n.loss("Paris") == 0.0
    p = HierarchyGeneralizer("city", h, "prl")
    for v in ("Paris", "Paris", "Lyon", "US"):
        p.observe(v)
    assert p.loss("FR") == prl(3, 4, leaf=False) == 0.75
    assert p.loss("US") == 0.0


def test_prl_counts_are_reset_periodically() -> None:
    h = Hierarchy.from_paths([["A", "a1"], ["A", "a2"], ["B"]])
    p = HierarchyGeneralizer("x", h, "prl", prl_reset=2)
    for v in ("a1", "a1", "B"):
        p.observe(v)
    assert p.requests == {"B": 1, "*": 1}


def test_range_with_negative_numbers_and_adaptive_domain() -> None:
    g = RangeGeneralizer("t")
    for v in (-10.0, -2.0, 6.0):
        g.observe(v)
    s = g.add(g.add(None, -10.0), -2.0)
    assert g.output(s) == "[-10,-2]"
    assert g.loss(s) == pytest.approx(8 / 16)
    assert g.covers(s, -5.0) and not g.covers(s, 0.0)


def test_configured_domain_widens_for_values_outside() -> None:
    g = RangeGeneralizer("t", domain=[0, 10])
    g.observe(20.0)
    assert g.loss((0.0, 20.0)) == 1.0


def test_reduction_masks_until_values_agree() -> None:
    r = ReductionGeneralizer("zip")
    s = r.add(r.add(None, "75001"), "75113")
    assert r.output(s) == "75***" and r.loss(s) == pytest.approx(3 / 5)
    assert r.covers(s, "75999") and not r.covers(s, "76000")


def test_rules_from_toml_with_tree_file(tmp_path) -> None:
    (tmp_path / "use.txt").write_text("*\n  public\n    Education\n  private\n    Office\n")
    f = tmp_path / "rules.toml"
    f.write_text('id = "b"\n[[attribute]]\nname = "use"\ngeneralizer = "hierarchy"\n'
                 'tree = "use.txt"\nmetric = "ncp"\nweight = 0.5\n'
                 '[[attribute]]\nname = "m"\nsensitive = true\n')
    rs = RuleSet.load(f)
    assert rs.quasi_identifiers == ["use"] and rs.sensitive == ["m"]
    assert rs.qi_rules[0].weight == 0.5


@pytest.mark.parametrize(("text", "message"), [
    ('[[attribute]]\nname = "a"\ngeneralizer = "range"\n', "id"),
    ('id = "u"\n[[attribute]]\nname = "a"\ngeneralizer = "ranges"\n', "unknown generalizer"),
    ('id = "u"\n[[attribute]]\nname = "a"\ngeneralizer = "range"\ndomian = [0, 1]\n',
     "unknown key"),
    ('id = "u"\n[[attribute]]\nname = "a"\ngeneralizer = "range"\nsensitive = true\n',
     "sensitive"),
    ('id = "u"\n[[attribute]]\nname = "a"\ngeneralizer = "range"\nweight = 2\n', "weight"),
    ('id = "u"\n[[attribute]]\nname = "a"\ngeneralizer = "hierarchy"\n', "paths or tree"),
    ('id = "u"\n[[attribute]\n', "TOML"),
])
def test_bad_rules_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RuleSet.from_toml(text)


def test_the_light_defaults_are_the_operators():
    import inspect

    from streamanon.castle import CastleAnonymizer
    from streamanon.castle.defaults import DEFAULTS

    sig = {name: p.default for name, p in inspect.signature(CastleAnonymizer).parameters.items()
           if p.default is not inspect.Parameter.empty}
    assert sig == DEFAULTS

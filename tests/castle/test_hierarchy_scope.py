"""Per-cluster hierarchies (``hierarchy_scope = "cluster"``, Prink's DGH per cluster).

A released class's categorical loss is the GLM of its node in a tree built here from scratch
(the configured paths plus the class's own values), never from the operator's grown tree;
the node covers every value of the class; with a tree that never grows both scopes release
the same rows; the rules key and the option are checked and the rules win.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.castle.generalizers import HierarchyGeneralizer
from streamanon.castle.hierarchy import Hierarchy
from streamanon.castle.loss import glm
from streamanon.errors import ConfigError

PATHS = [["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE", "Berlin"], ["US", "Boston"]]
GROWN = ["Oslo", "Rome", "Cairo", "Lima", "Quito", "Tokyo"]


def rules_text(*, grow: bool, scope: str | None = None) -> str:
    head = f'hierarchy_scope = "{scope}"\n' if scope else ""
    return head + f"""id = "u"
[[attribute]]
name = "city"
generalizer = "hierarchy"
paths = {PATHS!r}
grow = {str(grow).lower()}
[[attribute]]
name = "dx"
sensitive = true
""".replace("'", '"')


def stream(n: int, seed: int, cities: list[str]) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    return [{"u": f"p{rnd.randrange(15)}", "city": rnd.choice(cities),
             "dx": rnd.choice(["flu", "cold", "cough"]), "row": str(i)} for i in range(n)]


def run(text: str, rows: list[dict[str, Any]], **params: Any) -> list[Released]:
    op = CastleAnonymizer(RuleSet.from_toml(text), **{"k": 3, "l": 2, "delta": 40, "beta": 10,
                                                      "zeta": 0, **params})
    out = [x for r in rows for x in op.process(r)] + op.flush()
    return [x for x in out if isinstance(x, Released)]


def own_tree_loss(node: str, values: set[str]) -> tuple[float, Hierarchy]:
    """GLM of ``node`` in a tree of the configured paths and the class's grown values."""
    leaves = {p[-1] for p in PATHS}
    h = Hierarchy.from_paths([*PATHS, *([v] for v in sorted(values - leaves))])
    return glm(h.leaves_under(node), h.n_leaves), h


@pytest.mark.parametrize("split", ["window", "prink"])
def test_a_released_class_is_measured_in_its_own_tree_and_covers_its_values(split) -> None:
    cities = [p[-1] for p in PATHS] + GROWN
    shared = HierarchyGeneralizer("city", Hierarchy.from_paths([*PATHS, *([v] for v in GROWN)]))
    differs = 0
    for seed in (1, 2, 3):
        rows = stream(400, seed, cities)
        released = run(rules_text(grow=True, scope="cluster"), rows, split=split)
        assert released
        by_class: dict[int, list[Released]] = {}
        for r in released:
            by_class.setdefault(r.cluster, []).append(r)
        for members in by_class.values():
            node = members[0].values["city"]
            values = {rows[int(m.values["row"])]["city"] for m in members}
            loss, tree = own_tree_loss(node, values)
            assert all(tree.covers(node, v) for v in values), (node, values)
            assert all(m.loss == pytest.approx(loss) for m in members), (node, values)
            differs += abs(shared.loss(node) - loss) > 1e-9
    assert differs  # the grown values of other clusters do change the shared tree's GLM


def test_without_growth_both_scopes_release_the_same_rows() -> None:
    rows = stream(300, 5, [p[-1] for p in PATHS])
    a = run(rules_text(grow=False), rows)
    b = run(rules_text(grow=False), rows, hierarchy_scope="cluster")
    assert [(x.values, x.loss, x.cluster) for x in a] == [(x.values, x.loss, x.cluster)
                                                           for x in b]


def test_cluster_loss_equals_a_tree_built_from_scratch() -> None:
    rnd = random.Random(7)
    for _ in range(200):
        g = HierarchyGeneralizer("c", Hierarchy.from_paths(PATHS), grow=True)
        for v in rnd.sample(GROWN, rnd.randint(0, len(GROWN))):
            g.observe(g.parse(v))
        known = [n for n in g.tree.names if g.tree.is_leaf(n)]
        values = set(rnd.sample(known, rnd.randint(1, min(4, len(known)))))
        node = next(iter(values))
        for v in values:
            node = g.tree.lca(node, v)
        expected, _ = own_tree_loss(node, values)
        assert g.cluster_loss(node, values) == pytest.approx(expected)


def test_a_path_below_a_configured_leaf_makes_it_an_inner_node_of_the_clusters_tree():
    g = HierarchyGeneralizer("c", Hierarchy.from_paths(PATHS))
    g.observe(g.parse(["Montmartre", "Paris", "FR", "EU"]))  # a record's own path
    # the cluster's tree: Lyon, Berlin, Boston and Montmartre (Paris is no longer a leaf)
    assert g.cluster_loss("Paris", ["Montmartre"]) == 0.0
    assert g.cluster_loss("FR", ["Montmartre", "Lyon"]) == pytest.approx(1 / 3)
    assert g.cluster_loss("FR", ["Paris", "Lyon"]) == pytest.approx(1 / 3)  # Paris a leaf


def test_the_rules_key_and_the_option_are_checked_and_the_rules_win() -> None:
    with pytest.raises(ConfigError, match="hierarchy_scope must be one of shared, cluster"):
        RuleSet.from_toml(rules_text(grow=True, scope="global"))
    with pytest.raises(ConfigError, match="hierarchy_scope must be one of"):
        CastleAnonymizer(RuleSet.from_toml(rules_text(grow=True)), hierarchy_scope="tree")
    rules = RuleSet.from_toml(rules_text(grow=True, scope="cluster"))
    assert rules.describe()["hierarchy_scope"] == "cluster"
    rows = stream(300, 2, [p[-1] for p in PATHS] + GROWN)
    by_rules = run(rules_text(grow=True, scope="cluster"), rows, hierarchy_scope="shared")
    by_option = run(rules_text(grow=True), rows, hierarchy_scope="cluster")
    assert [(x.values, x.loss) for x in by_rules] == [(x.values, x.loss) for x in by_option]
    with pytest.raises(ConfigError, match="measures GLM only"):
        CastleAnonymizer(RuleSet.from_toml(rules_text(grow=True).replace(
            "grow = true", 'grow = true\nmetric = "ncp"')), hierarchy_scope="cluster")

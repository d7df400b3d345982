"""t-closeness with the hierarchical ground distance (Li et al.): the operator's bottom-up
formula and the checker's tree-metric formula both equal the earth mover's distance as written
(a minimum-cost transport, solved here exactly), CASTLE's releases meet it, and the checker
refuses releases that do not."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.castle.diversity import Closeness
from streamanon.errors import ConfigError
from streamanon.verify.diversity import _Reference, check_closeness

PATHS = [["respiratory", "flu"], ["respiratory", "cold"], ["respiratory", "lung", "asthma"],
         ["digestive", "ulcer"], ["digestive", "gastritis"], ["other"]]


def _lca_distance(paths: list[list[str]]):
    """The written ground distance: (H - depth of the lowest common ancestor) / H."""
    where = {}
    for p in paths:
        for i in range(1, len(p) + 1):
            where.setdefault(p[i - 1], tuple(p[:i]))
    h = max(len(p) for p in paths)

    def d(u: str, v: str) -> float:
        if u == v:
            return 0.0
        a, b = where.get(u, ()), where.get(v, ())
        common = 0
        while common < min(len(a), len(b)) and a[common] == b[common]:
            common += 1
        return (h - common) / h

    return d


def _transport(supply: dict[str, int], demand: dict[str, int], d) -> float:
    """The minimum cost of moving ``supply`` onto ``demand`` (equal integer totals), by
    successive shortest paths (Bellman-Ford on the residual graph), per unit moved."""
    src, dst = list(supply), list(demand)
    n, m = len(src), len(dst)
    s, t = n + m, n + m + 1
    cap: dict[tuple[int, int], int] = {}
    cost: dict[tuple[int, int], float] = {}

    def edge(u: int, v: int, c: int, w: float) -> None:
        cap[(u, v)] = cap.get((u, v), 0) + c
        cap.setdefault((v, u), 0)
        cost[(u, v)], cost[(v, u)] = w, -w

    total = sum(supply.values())
    for i, u in enumerate(src):
        edge(s, i, supply[u], 0.0)
        for j, v in enumerate(dst):
            edge(i, n + j, total, d(u, v))
    for j, v in enumerate(dst):
        edge(n + j, t, demand[v], 0.0)
    moved, spent = 0, 0.0
    while moved < total:
        dist = [float("inf")] * (n + m + 2)
        back = [-1] * (n + m + 2)
        dist[s] = 0.0
        for _ in range(n + m + 1):
            changed = False
            for (u, v), c in cap.items():
                if c > 0 and dist[u] + cost[(u, v)] < dist[v] - 1e-12:
                    dist[v], back[v] = dist[u] + cost[(u, v)], u
                    changed = True
            if not changed:
                break
        path, v = [], t
        while v != s:
            path.append((back[v], v))
            v = back[v]
        push = min(cap[e] for e in path)
        for u, v in path:
            cap[(u, v)] -= push
            cap[(v, u)] += push
        moved += push
        spent += push * dist[t]
    return spent / total


@pytest.mark.parametrize("seed", range(40))
def test_both_formulas_equal_the_written_earth_movers_distance(seed: int) -> None:
    rnd = random.Random(seed)
    leaves = ["flu", "cold", "asthma", "ulcer", "gastritis", "other", "lung", "digestive",
              "unknown"]  # inner nodes and a value outside the hierarchy too
    ref = {v: rnd.randint(1, 6) for v in rnd.sample(leaves[:6], rnd.randint(2, 6))}
    cls = Counter({v: rnd.randint(1, 5) for v in rnd.sample(leaves, rnd.randint(1, 5))})
    n, total = sum(cls.values()), sum(ref.values())
    # one unit of class mass = total, of reference mass = n: equal integer totals
    want = _transport({v: c * total for v, c in cls.items()},
                      {v: w * n for v, w in ref.items()}, _lca_distance(PATHS))
    op = Closeness(0.5, {"dx": ref}, distance="hierarchical", hierarchies={"dx": PATHS})
    checker = _Reference({k: float(v) for k, v in ref.items()}, "hierarchical", PATHS)
    assert op.distance("dx", cls) == pytest.approx(want, abs=1e-9)
    assert checker.emd(cls) == pytest.approx(want, abs=1e-9)


def test_worked_example() -> None:
    paths = [["resp", "flu"], ["resp", "cold"], ["dig", "ulcer"], ["dig", "gastritis"]]
    ref = dict.fromkeys(["flu", "cold", "ulcer", "gastritis"], 1)
    c = Closeness(0.3, {"dx": ref}, distance="hierarchical", hierarchies={"dx": paths})
    # half the mass crosses the root (cost 1): 0.5; one value: a quarter stays under resp
    # (cost 1/2), half crosses the root: 0.125 + 0.5
    assert c.distance("dx", {"flu": 1, "cold": 1}) == pytest.approx(0.5)
    assert c.distance("dx", {"flu": 2}) == pytest.approx(0.625)
    assert c.distance("dx", Counter(ref)) == 0
    # equal distance counts the same class as far as the hierarchy's root
    eq = Closeness(0.3, {"dx": ref}, distance="equal")
    assert eq.distance("dx", {"flu": 1, "cold": 1}) == pytest.approx(0.5)
    assert eq.distance("dx", {"flu": 1, "ulcer": 1}) == pytest.approx(0.5)
    assert c.distance("dx", {"flu": 1, "ulcer": 1}) == pytest.approx(0.25)


def test_bad_configurations_are_refused() -> None:
    ref = {"dx": {"flu": 1, "cold": 1}}
    with pytest.raises(ConfigError, match="needs a hierarchy"):
        Closeness(0.2, ref, distance="hierarchical")
    with pytest.raises(ConfigError, match="closeness must be"):
        Closeness(0.2, ref, distance="tree")
    with pytest.raises(ConfigError, match="needs numbers"):
        Closeness(0.2, ref, distance="ordered")
    with pytest.raises(ConfigError, match="two places"):
        Closeness(0.2, ref, distance="hierarchical",
                  hierarchies={"dx": [["a", "flu"], ["b", "flu"]]})
    with pytest.raises(ConfigError, match="go with t"):
        CastleAnonymizer(None, closeness="hierarchical")


def _stream(n: int = 2500, seed: int = 3) -> list[dict]:
    rnd = random.Random(seed)
    values = ["flu", "cold", "asthma", "ulcer", "gastritis", "other"]
    return [{"u": f"p{rnd.randrange(80)}", "age": rnd.randint(0, 99),
             "dx": rnd.choices(values, weights=[30, 25, 5, 20, 15, 5])[0]} for _ in range(n)]


RULES = {"id": "u", "attribute": [{"name": "age", "generalizer": "range"},
                                  {"name": "dx", "sensitive": True}]}


def _release(rows: list[dict], **kw) -> list[dict]:
    op = CastleAnonymizer(RuleSet.from_dict(RULES), k=4, l=0, delta=100, beta=12, **kw)
    out = [r for row in rows for r in op.process(row)] + op.flush()
    return [r.values for r in out if isinstance(r, Released)]


def test_a_hierarchical_release_passes_the_checker_and_a_plain_one_does_not() -> None:
    rows = _stream()
    ref = dict(Counter(r["dx"] for r in rows))
    tree = {"dx": PATHS}
    released = _release(rows, t=0.12, reference={"dx": ref}, closeness="hierarchical",
                        t_hierarchy=tree)
    assert len(released) > 2000
    rep = check_closeness(released, qi=["age"], sensitive=["dx"], t=0.12,
                          reference={"dx": ref}, ground="hierarchical", hierarchies=tree)
    assert rep.ok, rep.first_problem
    assert rep.ground == {"dx": "hierarchical"} and rep.worst["dx"] <= 0.12
    plain = _release(rows)  # no t-closeness: small classes stray from the reference
    bad = check_closeness(plain, qi=["age"], sensitive=["dx"], t=0.12, reference={"dx": ref},
                          ground="hierarchical", hierarchies=tree)
    assert not bad.ok and bad.violations > 0


def test_the_checker_catches_tampered_classes_and_the_wrong_hierarchy() -> None:
    rows = _stream(seed=5)
    ref = dict(Counter(r["dx"] for r in rows))
    tree = {"dx": PATHS}
    released = _release(rows, t=0.12, reference={"dx": ref}, closeness="hierarchical",
                        t_hierarchy=tree)

    def check(rs, paths=PATHS):
        return check_closeness(rs, qi=["age"], sensitive=["dx"], t=0.12,
                               reference={"dx": ref}, ground="hierarchical",
                               hierarchies={"dx": paths})

    assert check(released).ok
    first = released[0]["age"]
    skewed = [dict(r, dx="asthma") if r["age"] == first else r for r in released]
    rep = check(skewed)
    assert rep.violations == 1 and first in rep.first_problem
    # a flat hierarchy (every value under the root) is the equal distance: larger distances
    flat = [[v] for v in ref]
    assert check(released, flat).worst["dx"] >= check(released).worst["dx"]

"""The checker on a release measured in per-cluster hierarchies (``hierarchy_scope``).

The released categorical is the same kind of node whichever tree its loss is measured in, so
the checker, reading the rules file itself (the ``hierarchy_scope`` key included), proves the
genuine release, and a class whose node is moved to a sibling is caught.
"""

from __future__ import annotations

import copy
import random

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.records import Suppressed
from streamanon.verify.castle import check_castle, rules_from_toml

RULES = """
hierarchy_scope = "cluster"
id = "u"
[[attribute]]
name = "city"
generalizer = "hierarchy"
paths = [["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE", "Berlin"], ["US", "Boston"]]
grow = true
[[attribute]]
name = "dx"
sensitive = true
"""
CITIES = ["Paris", "Lyon", "Berlin", "Boston", "Oslo", "Rome"]
SIBLING = {"Paris": "Lyon", "Lyon": "Paris", "FR": "DE", "DE": "FR", "Berlin": "Paris"}


def release() -> tuple[list[dict], list[dict], list[dict]]:
    rnd = random.Random(3)
    rows = [{"u": f"p{rnd.randrange(12)}", "city": rnd.choice(CITIES),
             "dx": rnd.choice(["flu", "cold", "cough"])} for _ in range(300)]
    op = CastleAnonymizer(RuleSet.from_toml(RULES), k=3, l=2, delta=30, beta=8)
    out = [x for r in rows for x in op.process(r)] + op.flush()
    return (rows, [dict(x.values) for x in out if isinstance(x, Released)],
            [dict(x.record.values) for x in out if isinstance(x, Suppressed)])


def test_the_genuine_release_passes_and_a_sibling_node_is_caught() -> None:
    rows, released, suppressed = release()
    spec = rules_from_toml(RULES)
    report = check_castle(released, spec, k=3, l=2, inputs=rows, suppressed=suppressed)
    assert report.ok, report.first_problem
    assert report.unverified == 0
    target = next(r["city"] for r in released if r["city"] in SIBLING)
    broken = copy.deepcopy(released)
    for r in broken:
        if r["city"] == target:
            r["city"] = SIBLING[target]
    bad = check_castle(broken, spec, k=3, l=2, inputs=rows, suppressed=suppressed)
    assert not bad.ok
    assert bad.not_covered > 0

"""The intersection attack: exact figures on hand-made releases, properties on random ones
(an intersection of releases that each hold the true value holds it too, never widens, and
pins it when two releases touch at it), the rules' trees read by the attack itself, and no
import of the operator or its readers."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamanon.attack as attack_module
from streamanon.attack import Attribute, attributes_from_rules, intersect, parse_interval
from streamanon.errors import ConfigError

PATHS = ('paths = [["public", "education", "Education"], ["public", "Office"], '
         '["private", "Retail"]]')


def test_hand_made_release_gives_the_exact_widths() -> None:
    rows = [
        {"u": "a", "x": "[0,10]", "h": "public"},
        {"u": "b", "x": "[0,10]", "h": "public"},
        {"u": "a", "x": "[4,20]", "h": "*"},
        {"u": "b", "x": "[8,12]", "h": "education"},
        {"u": "a", "x": "[4,6]", "h": "public"},
        {"u": "c", "x": "7", "h": "Retail"},
    ]
    leaves = {"*": frozenset({"Education", "Office", "Retail"}),
              "public": frozenset({"Education", "Office"}),
              "education": frozenset({"Education"}), "Education": frozenset({"Education"}),
              "Office": frozenset({"Office"}), "private": frozenset({"Retail"}),
              "Retail": frozenset({"Retail"})}
    r = intersect(rows, id_field="u", attributes=[Attribute("x"), Attribute("h", leaves)], k=2)
    assert (r.rows, r.individuals, r.repeated) == (6, 3, 2)
    x = r.attributes["x"]
    # a: [4,6] of widest 16 -> 2/16; b: [8,10] of widest 10 -> 2/10
    assert x.individuals == 2 and math.isclose(x.median, (2 / 16 + 2 / 10) / 2)
    assert x.narrowed == 1.0 and x.pinned == 0.0 and x.varying == 0.0
    h = r.attributes["h"]
    # a: public & * & public = 2 leaves of widest 3 -> (2-1)/(3-1); b: 1 leaf -> 0
    assert math.isclose(h.median, 0.25) and h.pinned == 0.5 and h.narrowed == 0.5
    # a and b share their first class; their intersections ([4,6] vs [8,10]) part them
    assert r.below_first_class == 1.0 and r.candidates["median"] == 1.0 and r.below_k == 1.0


def test_a_varying_attribute_is_left_out_and_says_so() -> None:
    rows = [{"u": "a", "t": "[0,5]"}, {"u": "a", "t": "[6,9]"}, {"u": "b", "t": "[0,5]"},
            {"u": "b", "t": "[1,5]"}]
    t = intersect(rows, id_field="u", attributes=[Attribute("t")]).attributes["t"]
    assert t.varying == 0.5 and t.individuals == 1


@st.composite
def releases(draw: st.DrawFn) -> tuple[list[dict], dict[str, float]]:
    truth = {f"u{i}": draw(st.integers(0, 100)) for i in range(draw(st.integers(1, 8)))}
    rows = []
    for _ in range(draw(st.integers(1, 40))):
        u = draw(st.sampled_from(sorted(truth)))
        lo = truth[u] - draw(st.integers(0, 30))
        hi = truth[u] + draw(st.integers(0, 30))
        rows.append({"u": u, "x": f"[{lo},{hi}]"})
    return rows, truth


@settings(max_examples=150, deadline=None)
@given(releases())
def test_the_intersection_holds_the_truth_and_never_widens(data: tuple[list[dict], dict]
                                                           ) -> None:
    rows, truth = data
    inputs = [{"u": u, "x": v} for u, v in truth.items()]
    r = intersect(rows, id_field="u", attributes=[Attribute("x")], k=3, inputs=inputs)
    x = r.attributes["x"]
    assert x.varying == 0.0  # constant values: releases always intersect
    counts = {u: sum(row["u"] == u for row in rows) for u in truth}
    assert x.individuals == r.repeated == sum(c >= 2 for c in counts.values())
    if x.individuals:
        assert x.contains_input == 1.0 and x.constant == 1.0
        assert 0.0 <= x.p10 <= x.median <= x.p90 <= 1.0
        # brute force: the median of intersected / widest width over repeated individuals
        ratios = []
        for u, c in counts.items():
            if c < 2:
                continue
            ivs = [parse_interval(row["x"]) for row in rows if row["u"] == u]
            width = min(h for _, h in ivs) - max(lo for lo, _ in ivs)
            widest = max(h - lo for lo, h in ivs)
            ratios.append(width / widest if widest else 1.0)
        ratios.sort()
        mid = len(ratios) // 2
        median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
        assert math.isclose(x.median, median, abs_tol=1e-12)
    # each individual is compatible with itself: at least one candidate
    assert r.candidates["p10"] is None or r.candidates["p10"] >= 1


def test_the_rules_trees_are_read_by_the_attack(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('id = "u"\n[[attribute]]\nname = "x"\ngeneralizer = "range"\n'
                     '[[attribute]]\nname = "h"\ngeneralizer = "hierarchy"\n' + PATHS + "\n"
                     '[[attribute]]\nname = "z"\ngeneralizer = "reduction"\n'
                     '[[attribute]]\nname = "s"\nsensitive = true\n'
                     '[[attribute]]\nname = "o"\ngeneralizer = "hierarchy"\n'
                     'tree = "o.txt"\n')
    (tmp_path / "o.txt").write_text("any\n  left\n    l1\n    l2\n  right\n")
    id_field, attrs = attributes_from_rules(rules)
    assert id_field == "u" and [a.name for a in attrs] == ["x", "h", "o"]
    h, o = attrs[1].leaves, attrs[2].leaves
    assert h["public"] == {"Education", "Office"} and h["*"] == {"Education", "Office",
                                                                 "Retail"}
    assert o["any"] == {"l1", "l2", "right"} and o["left"] == {"l1", "l2"}
    rules.write_text("id = ")
    with pytest.raises(ConfigError):
        attributes_from_rules(rules)


def test_the_attack_imports_nothing_of_the_operator() -> None:
    src = Path(attack_module.__file__).parent
    for file in (src / "attack.py", src / "cli" / "attack.py"):
        names = set()
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        ours = {n for n in names if n.startswith("streamanon")}
        assert ours <= {"streamanon.errors", "streamanon.attack", "streamanon.cli.app",
                        "streamanon.cli.common"}, (file, ours)

"""Hypothesis strategies for CASTLE: random rule sets and streams that fit them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from streamanon.castle import RuleSet

# overlapping root-first paths: shared prefixes must become shared nodes, not a chain
PATHS = [
    ["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE", "Berlin"], ["EU", "DE"],
    ["US", "Boston"], ["US", "NY"], ["Asia"],
]
LEAVES = ["Paris", "Lyon", "Berlin", "Boston", "NY", "Asia", "FR", "EU"]


@st.composite
def rule_sets(draw: st.DrawFn, min_sensitive: int = 0) -> dict[str, Any]:
    """A rules dict: 1-3 numeric ranges, maybe a hierarchy, maybe a reduction, 0-2 sensitive
    (at least ``min_sensitive``)."""
    attrs: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 3))):
        spec: dict[str, Any] = {"name": f"x{i}", "generalizer": "range",
                                "weight": draw(st.sampled_from([1.0, 0.5, 0.0]))}
        if draw(st.booleans()):
            spec["domain"] = [-50, 50]
        attrs.append(spec)
    if draw(st.booleans()):
        attrs.append({"name": "place", "generalizer": "hierarchy", "paths": PATHS,
                      "metric": draw(st.sampled_from(["glm", "ncp", "prl"]))})
    if draw(st.booleans()):
        attrs.append({"name": "zip", "generalizer": "reduction"})
    for j in range(draw(st.integers(min_sensitive, 2))):
        attrs.append({"name": f"s{j}", "sensitive": True})
    return {"id": "u", "attribute": attrs}


@st.composite
def streams(draw: st.DrawFn, spec: dict[str, Any], max_size: int = 80) -> list[dict[str, Any]]:
    """Rows for ``spec``: few individuals (sometimes one), negative numbers, few sensitive
    values."""
    n_people = draw(st.integers(1, 12))
    n_values = draw(st.integers(1, 4))
    rows = []
    for _ in range(draw(st.integers(0, max_size))):
        row: dict[str, Any] = {"u": f"p{draw(st.integers(0, n_people - 1))}"}
        for a in spec["attribute"]:
            kind = a.get("generalizer")
            if kind == "range":
                row[a["name"]] = draw(st.integers(-60, 60)) / draw(st.sampled_from([1, 4]))
            elif kind == "hierarchy":
                row[a["name"]] = draw(st.sampled_from(LEAVES))
            elif kind == "reduction":
                row[a["name"]] = draw(st.sampled_from(["75001", "75013", "69001", "7500"]))
            elif a.get("sensitive"):
                row[a["name"]] = f"v{draw(st.integers(0, n_values - 1))}"
        row["note"] = "pass"
        rows.append(row)
    return rows


def make_rules(spec: dict[str, Any]) -> RuleSet:
    return RuleSet.from_dict(spec)

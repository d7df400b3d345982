"""The bound on the intersection, checked from the files: on the attributes the rules mark
``static``, every release of an individual covers its first one. The genuine release of a
stream with static attributes passes; a later release narrower than the first (a range, a
hierarchy node) is caught, row by row and from CSV files; without ``static`` in the rules
the same narrowing is no problem of this check."""

from __future__ import annotations

import csv
import random
from pathlib import Path
from typing import Any

import pytest

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.verify.castle import check_castle, check_castle_files, rules_from_toml

RULES = """
id = "u"
[[attribute]]
name = "age"
generalizer = "range"
domain = [0, 120]
static = true
[[attribute]]
name = "city"
generalizer = "hierarchy"
paths = [["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE", "Berlin"],
         ["EU", "DE", "Munich"], ["US", "Boston"]]
static = true
[[attribute]]
name = "visit"
generalizer = "range"
[[attribute]]
name = "dx"
sensitive = true
"""
K, L = 3, 2
CITIES = ["Paris", "Lyon", "Berlin", "Munich", "Boston"]


def stream(n: int = 300, seed: int = 7) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    people = {f"p{i}": (rnd.randint(20, 70), rnd.choice(CITIES)) for i in range(15)}
    rows = []
    for _ in range(n):
        u = f"p{rnd.randrange(15)}"
        age, city = people[u]
        rows.append({"u": u, "age": age, "city": city, "visit": rnd.randint(0, 50),
                     "dx": rnd.choice(["flu", "cold", "cough"])})
    return rows


ROWS = stream()


def release(rules_text: str) -> list[dict[str, Any]]:
    op = CastleAnonymizer(RuleSet.from_toml(rules_text), k=K, l=L, delta=25, beta=8)
    out = [x for r in ROWS for x in op.process(r)] + op.flush()
    return [dict(x.values) for x in out if isinstance(x, Released)]


RELEASED = release(RULES)
SPEC = rules_from_toml(RULES)


def later_release(released: list[dict[str, Any]], column: str) -> tuple[int, int]:
    """An individual's first row and a later row of it whose ``column`` can be narrowed."""
    first: dict[str, int] = {}
    for i, row in enumerate(released):
        j = first.setdefault(row["u"], i)
        if j != i and row[column] == released[j][column]:
            return j, i
    raise AssertionError("no individual released twice in one generalization")


def test_the_genuine_release_passes() -> None:
    report = check_castle(RELEASED, SPEC, k=K, l=L, inputs=ROWS)
    assert report.ok, report.problems
    assert report.static_violations == 0
    people = {r["u"] for r in RELEASED}
    assert len(RELEASED) > len(people)  # individuals are released more than once


@pytest.mark.parametrize("column", ["age", "city"])
def test_a_later_release_narrower_than_the_first_is_caught(column: str, tmp_path: Path) -> None:
    first, later = later_release(RELEASED, column)
    mutated = [dict(r) for r in RELEASED]
    original = next(r for r in ROWS if r["u"] == mutated[later]["u"])
    mutated[later][column] = (f"[{original['age']},{original['age']}]" if column == "age"
                              else original["city"])
    assert mutated[later][column] != RELEASED[first][column]
    report = check_castle(mutated, SPEC, k=K, l=L, inputs=ROWS)
    assert not report.ok
    assert report.static_violations == 1
    assert any(f"does not cover its first release {RELEASED[first][column]}" in p
               for p in report.problems)
    out, src = tmp_path / "out.csv", tmp_path / "in.csv"
    for path, rows in ((out, mutated), (src, ROWS)):
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    files = check_castle_files(out, SPEC, k=K, l=L, source=src)
    assert files.static_violations == 1 and not files.ok
    plain = rules_from_toml(RULES.replace("static = true\n", ""))
    assert check_castle(mutated, plain, k=K, l=L).static_violations == 0


def test_the_genuine_release_from_files_passes(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(RELEASED[0]))
        w.writeheader()
        w.writerows(RELEASED)
    report = check_castle_files(out, SPEC, k=K, l=L)
    assert report.ok and report.static_violations == 0


def test_static_must_be_a_boolean() -> None:
    from streamanon.errors import ConfigError
    with pytest.raises(ConfigError, match=r"line 7: .*static must be true or false"):
        rules_from_toml(RULES.replace("static = true", 'static = "yes"', 1))

"""The CASTLE checker and missing input values (``castle --missing star``): a missing value
stands only under its attribute's top; a release that shows anything less is caught.

=========================================================  ===================================
broken output (a row whose input value is missing)         caught as
=========================================================  ===================================
age a narrower range than the domain                       not_covered (not the top)
age a range narrower than the domain when the row arrived  not_covered (adaptive domain)
city a node below the root                                 not_covered (not the root)
zip a mask that keeps a character                          not_covered (not all *)
=========================================================  ===================================
"""

from __future__ import annotations

import csv
import random
from pathlib import Path
from typing import Any

import pytest

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.castle.records import CastleRow
from streamanon.records import Suppressed
from streamanon.verify.castle import check_castle, check_castle_files, rules_from_toml

RULES = """
id = "u"
[[attribute]]
name = "age"
generalizer = "range"
{domain}
[[attribute]]
name = "city"
generalizer = "hierarchy"
paths = [["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE", "Berlin"], ["US", "Boston"]]
[[attribute]]
name = "zip"
generalizer = "reduction"
[[attribute]]
name = "dx"
sensitive = true
"""
CITIES = ["Paris", "Lyon", "Berlin", "Boston"]


def stream(n: int = 240, seed: int = 5) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        row = {"u": f"p{rnd.randrange(12)}", "age": str(rnd.randint(20, 70)),
               "city": rnd.choice(CITIES), "zip": rnd.choice(["75013", "75001", "69001"]),
               "dx": rnd.choice(["flu", "cold", "cough"]), "note": f"n{i}"}
        for col, every in (("age", 13), ("city", 17), ("zip", 19)):
            if i % every == 4:
                row[col] = ""
        rows.append(row)
    return rows


def release(text: str, rows: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    op = CastleAnonymizer(RuleSet.from_toml(text), k=3, l=2, delta=30, beta=8,
                          missing="star")
    out = [x for i, r in enumerate(rows) for x in op.process(CastleRow(r, i + 2))]
    out += op.flush()
    released = [(x.line, dict(x.values)) for x in out if isinstance(x, Released)]
    suppressed = [(x.record.line, dict(x.record.values)) for x in out
                  if isinstance(x, Suppressed)]
    return released, suppressed


@pytest.fixture(scope="module", params=["domain = [0, 120]", ""], ids=["domain", "adaptive"])
def case(request) -> tuple[str, list, list, list]:
    text = RULES.format(domain=request.param)
    rows = stream()
    released, suppressed = release(text, rows)
    return text, rows, released, suppressed


def check(text, rows, released, suppressed):
    return check_castle([r for _, r in released], rules_from_toml(text), k=3, l=2,
                        inputs=list(enumerate(rows, start=2)),
                        suppressed=[r for _, r in suppressed])


def blank_rows(rows, released, column):
    """Indices of released rows whose input value of ``column`` is missing."""
    return [j for j, (line, _) in enumerate(released) if not rows[line - 2][column]]


def test_the_genuine_star_release_passes(case) -> None:
    text, rows, released, suppressed = case
    assert all(blank_rows(rows, released, c) for c in ("age", "city", "zip"))
    report = check(text, rows, released, suppressed)
    assert report.ok, report.first_problem
    assert report.unverified == 0


def mutated(released, j, column, value):
    """``released`` with ``column`` of row ``j`` and of every row of its class set to
    ``value`` (so the class still holds k individuals)."""
    qi = ("age", "city", "zip")
    key = tuple(released[j][1][c] for c in qi)
    out = [(line, dict(r)) for line, r in released]
    for _, r in out:
        if tuple(r[c] for c in qi) == key:
            r[column] = value
    return out


PATHS = {"Paris": ["*", "EU", "FR", "Paris"], "Lyon": ["*", "EU", "FR", "Lyon"],
         "Berlin": ["*", "EU", "DE", "Berlin"], "Boston": ["*", "US", "Boston"]}


def tightest(column: str, values: list[str]) -> str:
    """The least generalization of the present ``values``: what the class could show if
    the missing value were not there."""
    if column == "age":
        return f"[{min(map(int, values))},{max(map(int, values))}]"
    if column == "city":
        common = [p for p in zip(*(PATHS[v] for v in values), strict=False)
                  if len(set(p)) == 1]
        return common[-1][0]
    prefix = values[0]
    for v in values[1:]:
        while not v.startswith(prefix):
            prefix = prefix[:-1]
    return prefix + "*" * (5 - len(prefix))


def below_top(rows, released, column, top):
    """A released row with a missing ``column`` and, for its class, the generalization of
    the class's present values when it is below the top."""
    qi = ("age", "city", "zip")
    for j in blank_rows(rows, released, column):
        key = tuple(released[j][1][c] for c in qi)
        present = [rows[line - 2][column] for line, r in released
                   if tuple(r[c] for c in qi) == key and rows[line - 2][column]]
        if present and (value := tightest(column, present)) != top:
            return j, value
    raise AssertionError(f"no class with a missing {column} below the top")


@pytest.mark.parametrize("column, top, reason", [
    ("age", None, "age '[{}' is not the attribute's top, but the input value is missing"),
    ("city", "*", "(the root '*')"),
    ("zip", "*****", "is not the attribute's top, but the input value is missing"),
])
def test_a_missing_value_under_less_than_the_top_is_caught(case, column, top, reason) -> None:
    """The class shows the least generalization of its present values: right for them,
    wrong for the row whose value is missing."""
    text, rows, released, suppressed = case
    j, value = below_top(rows, released, column, top)
    report = check(text, rows, mutated(released, j, column, value), suppressed)
    assert not report.ok
    assert report.not_covered >= 1 and report.k_violations == 0
    assert any(reason.format(value[1:]) in p for p in report.problems), report.problems


def test_an_adaptive_domain_top_must_cover_the_domain_when_the_row_arrived(case) -> None:
    text, rows, released, suppressed = case
    if "domain =" in text:
        pytest.skip("a configured domain is the top")
    j = blank_rows(rows, released, "age")[-1]
    line = released[j][0]
    before = [int(r["age"]) for r in rows[:line - 2] if r["age"]]
    lo, hi = (int(v) for v in released[j][1]["age"].strip("[]").split(","))
    assert lo <= min(before) and max(before) <= hi  # the genuine top
    narrower = f"[{min(before) + 1},{hi}]"  # within the domain, one short of it
    report = check(text, rows, mutated(released, j, "age", narrower), suppressed)
    assert not report.ok
    assert any("when the row arrived" in p for p in report.problems), report.problems


def test_the_files_of_a_star_run_pass_verify_castle(tmp_path: Path) -> None:
    text = RULES.format(domain="domain = [0, 120]")
    rows = stream(seed=9)
    released, suppressed = release(text, rows)
    paths = {}
    for name, data in (("in", [(i + 2, r) for i, r in enumerate(rows)]),
                       ("out", released), ("sup", suppressed)):
        paths[name] = tmp_path / f"{name}.csv"
        with open(paths[name], "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(r for _, r in data)
    report = check_castle_files(paths["out"], rules_from_toml(text), k=3, l=2,
                                source=paths["in"], suppressed=paths["sup"])
    assert report.ok, report.first_problem
    j = blank_rows(rows, released, "city")[0]
    with open(paths["out"], "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(r for _, r in mutated(released, j, "city", "FR"))
    report = check_castle_files(paths["out"], rules_from_toml(text), k=3, l=2,
                                source=paths["in"], suppressed=paths["sup"])
    assert not report.ok and "the input value is missing" in report.first_problem

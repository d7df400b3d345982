"""The independent CASTLE checker: the genuine release passes, every mutation below is caught.

The genuine operator's release of a seeded stream (range with a domain, a hierarchy, a
reduction, a sensitive and a pass-through column) passes with the rules read by the checker
itself; the property tests (test_operator_properties.py) and the pycanon cross-check
(test_pycanon_crosscheck.py) add random rule sets, streams and the ASHRAE-shaped stream.

Broken outputs, and the check that catches each:

=========================================================  ===================================
mutation                                                   caught as
=========================================================  ===================================
an interval shifted by one (a whole class)                 not_covered (interval)
age "99" for input 30 (a whole class)                      not_covered (interval)
an interval reaching outside the domain                    not_covered (domain)
city "banana" (a whole class)                              not_covered (not in the tree)
a hierarchy node that is a sibling, not an ancestor        not_covered (ancestors)
a mask that disagrees with the input ("751**" for 75013)   not_covered (mask)
a pass-through value changed                               unmatched
a fabricated row (an individual not in the input)          unmatched (and k)
one input row released twice                               unmatched
a cluster released one individual short                    k violation
a missing sensitive value counted as a value               l violation (even without input)
a leaked suppressed tuple (raw values)                     k violation (a class of one)
a dropped publishable tuple                                lost (with the suppressed rows)
a suppressed row that stands for no input row              extra_suppressed
nothing released because l cannot be met                   empty (why_empty names l)
=========================================================  ===================================

Broken operators, and the check that catches each:

=========================================================  ===================================
mutation                                                   caught as
=========================================================  ===================================
off-by-one in k (the operator enforcing k - 1)             k violation
off-by-one in l (the operator enforcing l - 1)             l violation
a range generalizer writing [lo+1, hi+1]                   not_covered (interval)
a hierarchy generalizer writing a sibling of its node      not_covered (ancestors)
=========================================================  ===================================

Without the rules (column names only) a wrong hierarchy node cannot be told from a right one:
the checker counts it as ``unverified`` instead of calling it covered, which is why the CLI
asks for ``--rules``.
"""

from __future__ import annotations

import copy
import csv
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.castle.generalizers import HierarchyGeneralizer, RangeGeneralizer, format_number
from streamanon.castle.rules import AttributeRule
from streamanon.errors import ConfigError
from streamanon.records import Suppressed
from streamanon.verify.castle import (
    _check_columns,
    _check_rows,
    _read_table,
    _table_of_rows,
    check_castle,
    check_castle_files,
    columns_spec,
    read_released,
    rules_from_toml,
)

RULES = """
id = "u"
[[attribute]]
name = "age"
generalizer = "range"
domain = [0, 120]
[[attribute]]
name = "city"
generalizer = "hierarchy"
paths = [["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE", "Berlin"],
         ["EU", "DE", "Munich"], ["US", "Boston"]]
[[attribute]]
name = "zip"
generalizer = "reduction"
[[attribute]]
name = "dx"
sensitive = true
"""
K, L = 3, 2
CITIES = ["Paris", "Lyon", "Berlin", "Munich", "Boston"]


def stream(n: int = 240, seed: int = 4) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    return [{"u": f"p{rnd.randrange(12)}", "age": rnd.randint(20, 70),
             "city": rnd.choice(CITIES), "zip": rnd.choice(["75013", "75001", "69001", "6900"]),
             "dx": rnd.choice(["flu", "cold", "cough"]), "note": f"n{i}"} for i in range(n)]


def release(rules: RuleSet, rows, **params) -> tuple[list[dict], list[dict]]:
    op = CastleAnonymizer(rules, **{"k": K, "l": L, "delta": 30, "beta": 8, **params})
    out = [x for r in rows for x in op.process(r)] + op.flush()
    released = [dict(x.values) for x in out if isinstance(x, Released)]
    suppressed = [dict(x.record.values) for x in out if isinstance(x, Suppressed)]
    return released, suppressed


ROWS = stream()
# CASTLE's own clustering (--split prink): on these rows it suppresses some tuples, which the
# accounting checks below need; the window release (the default) is checked on its own below
RELEASED, SUPPRESSED = release(RuleSet.from_toml(RULES), ROWS, split="prink")
SPEC = rules_from_toml(RULES)


def check(released, *, k=K, l=L, inputs=ROWS, suppressed=None, spec=SPEC, **kw):  # noqa: E741
    report = check_castle(released, spec, k=k, l=l, inputs=inputs, suppressed=suppressed, **kw)
    same_column_wise(released, spec, k=k, l=l, inputs=inputs, suppressed=suppressed, **kw)
    return report


def as_text(rows):
    """The rows as a CSV file holds them (every cell text; ``None`` when empty)."""
    if rows is None:
        return None
    return [{c: None if v is None or str(v).strip() == "" else str(v) for c, v in r.items()}
            for r in rows]


def same_column_wise(released, spec, *, k, l, inputs, suppressed,  # noqa: E741
                     rejected_lines=(), allow_empty=False) -> None:
    """The column-wise pass (on the rows as text, and on them as CSV files) gives the
    report of the checks row by row, whether the release is right or broken."""
    rel, src, sup = as_text(released), as_text(inputs), as_text(suppressed)
    skip = set(rejected_lines)
    numbered = [(n, r) for n, r in enumerate(src, start=1) if n not in skip] if src else src
    slow = _check_rows(list(enumerate(rel, start=1)), spec, k=k, l=l, source=numbered,
                       suppressed=list(enumerate(sup, start=1)) if sup is not None else None,
                       allow_empty=allow_empty)
    fast = check_castle(rel, spec, k=k, l=l, inputs=src, suppressed=sup,
                        rejected_lines=rejected_lines, allow_empty=allow_empty)
    assert fast.to_dict() == slow.to_dict()
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, rows in (("out", rel), ("in", src), ("sup", sup)):
            if rows is not None:
                files[name] = Path(tmp) / f"{name}.csv"
                cols = list(dict.fromkeys(c for r in rows for c in r)) or ["u", "age"]
                with open(files[name], "w", newline="", encoding="utf-8") as fh:
                    w = csv.writer(fh)
                    w.writerow(cols)
                    w.writerows([r.get(c) or "" for c in cols] for r in rows)
        rejects = None
        if skip:
            rejects = Path(tmp) / "rejects.jsonl"
            rejects.write_text("".join(json.dumps({"line": n + 1}) + "\n" for n in skip))
        by_file = check_castle_files(files["out"], spec, k=k, l=l, source=files.get("in"),
                                     suppressed=files.get("sup"), rejects=rejects,
                                     allow_empty=allow_empty)
        by_rows = _check_rows(*(_file_rows(files.get(x)) for x in ("out",)), spec, k=k, l=l,
                              source=[(n, r) for n, r in _file_rows(files.get("in")) or []
                                      if n not in {m + 1 for m in skip}]
                              if "in" in files else None,
                              suppressed=_file_rows(files.get("sup")),
                              allow_empty=allow_empty)
        by_rows.input_rejected = len(skip)
        assert by_file.to_dict() == by_rows.to_dict()


def _file_rows(path):
    return read_released(path)[0] if path is not None else None


def classes(released) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = {}
    for i, r in enumerate(released):
        out.setdefault((r["age"], r["city"], r["zip"]), []).append(i)
    return out


def change_class(where, column: str, new) -> list[dict]:
    """A copy of the release with ``column`` set to ``new(old)`` for a whole class."""
    out = copy.deepcopy(RELEASED)
    members = next(m for c, m in classes(RELEASED).items() if where(c, m))
    for i in members:
        out[i][column] = new(out[i][column])
    return out


def test_the_genuine_release_passes_every_check() -> None:
    assert RELEASED and SUPPRESSED
    report = check(RELEASED, suppressed=SUPPRESSED)
    assert report.ok, report.first_problem
    assert (report.unverified, report.lost, report.input_rows) == (0, 0, len(ROWS))
    assert report.min_individuals is not None and report.min_individuals >= K


def test_the_default_window_release_passes_every_check_and_a_broken_one_fails() -> None:
    released, suppressed = release(RuleSet.from_toml(RULES), ROWS)
    assert len(released) + len(suppressed) == len(ROWS)
    report = check(released, suppressed=suppressed)
    assert report.ok, report.first_problem
    assert (report.unverified, report.lost, report.input_rows) == (0, 0, len(ROWS))
    assert report.min_individuals is not None and report.min_individuals >= K
    by_class = classes(released)
    members = min(by_class.values(), key=len)
    broken = [r for i, r in enumerate(released) if i != members[0]]  # a class one short
    report = check(broken, suppressed=suppressed)
    assert not report.ok and report.lost == 1


def interval(text: str) -> tuple[float, float]:
    lo, hi = text.strip("[]").split(",")
    return float(lo), float(hi)


def shift(text: str) -> str:
    lo, hi = interval(text)
    return f"[{format_number(lo + 1)},{format_number(hi + 1)}]"


@pytest.mark.parametrize(("name", "column", "new", "reason"), [
    ("an interval shifted by one", "age", shift, "does not contain"),
    ("age 99 for input 30", "age", lambda _: "99", "does not contain"),
    ("an interval reaching outside the domain",
     "age", lambda v: f"[{format_number(interval(v)[0])},500]", "outside the domain"),
    ("city banana", "city", lambda _: "banana", "nor one of its ancestors"),
    ("a sibling, not an ancestor", "city",
     lambda v: {"FR": "DE", "DE": "FR", "Paris": "Lyon", "Lyon": "Paris", "Berlin": "Munich",
                "Munich": "Berlin", "EU": "US", "US": "EU"}.get(v, "EU"),
     "nor one of its ancestors"),
    ("a mask that disagrees", "zip", lambda v: "1" + v[1:], "does not mask"),
])
def test_a_generalization_that_does_not_contain_the_input_is_caught(name, column, new, reason):
    broken = change_class(lambda c, m: True, column, new)
    report = check(broken)
    assert report.not_covered >= 1 and not report.ok, name
    assert reason in (report.first_problem or ""), report.first_problem
    assert report.k_violations == 0 and report.l_violations == 0  # the class is intact


def test_without_rules_a_wrong_hierarchy_node_is_unverified_not_ok() -> None:
    broken = change_class(lambda c, m: True, "city", lambda _: "banana")
    report = check(broken, spec=columns_spec("u", ["age", "city", "zip"], ["dx"]))
    assert report.unverified >= 1
    assert check(broken).not_covered >= 1


@pytest.mark.parametrize(("name", "mutate"), [
    ("a pass-through value changed", lambda out: out[0].update(note="forged")),
    ("a fabricated row", lambda out: out.append({**out[0], "u": "mallory"})),
    ("one input released twice", lambda out: out.append(dict(out[0]))),
])
def test_rows_that_stand_for_no_input_row_are_unmatched(name, mutate) -> None:
    broken = copy.deepcopy(RELEASED)
    mutate(broken)
    report = check(broken)
    assert report.unmatched == 1 and not report.ok, name


def test_a_cluster_released_one_individual_short() -> None:
    members = next(m for m in classes(RELEASED).values()
                   if len({RELEASED[i]["u"] for i in m}) == K)
    gone = RELEASED[members[0]]["u"]
    broken = [r for i, r in enumerate(RELEASED) if not (i in members and r["u"] == gone)]
    report = check(broken)
    assert report.k_violations == 1 and f"{K - 1} distinct individual" in report.first_problem


def test_a_missing_sensitive_value_is_not_a_value() -> None:
    members = next(m for m in classes(RELEASED).values()
                   if len({RELEASED[i]["dx"] for i in m}) == L)
    one = RELEASED[members[0]]["dx"]
    broken = copy.deepcopy(RELEASED)
    for i in members:
        if broken[i]["dx"] == one:
            broken[i]["dx"] = ""
    for inputs in (ROWS, None):
        report = check(broken, inputs=inputs)
        assert report.l_violations == 1, inputs is None


def test_a_leaked_suppressed_tuple_is_a_class_of_one() -> None:
    report = check([*RELEASED, SUPPRESSED[0]])
    assert report.k_violations >= 1 and not report.ok


def test_accounting_catches_a_dropped_tuple_and_a_forged_suppressed_row() -> None:
    report = check(RELEASED[1:], suppressed=SUPPRESSED)
    assert report.lost == 1 and "neither released nor suppressed" in report.first_problem
    report = check(RELEASED, suppressed=[*SUPPRESSED, {**SUPPRESSED[0], "note": "forged"}])
    assert report.extra_suppressed == 1 and report.lost == 0
    rejected = check(RELEASED[1:], suppressed=SUPPRESSED,
                     rejected_lines=[ROWS.index(next(
                         r for r in ROWS if r["note"] == RELEASED[0]["note"])) + 1])
    assert rejected.lost == 0, "an input row listed as rejected is not lost"


def test_an_empty_release_is_not_ok_and_says_why() -> None:
    report = check([], l=4)
    assert report.empty and not report.ok
    assert "3 distinct value(s) of dx, fewer than l = 4" in (report.why_empty or "")
    assert check([], l=4, allow_empty=True).ok
    assert check([], inputs=[]).ok  # nothing came in, nothing went out


# -- broken operators ----------------------------------------------------------------------
def test_off_by_one_in_k_and_l() -> None:
    released, _ = release(RuleSet.from_toml(RULES), ROWS, k=K - 1)
    report = check(released)
    assert report.k_violations >= 1 and report.min_individuals == K - 1
    released, _ = release(RuleSet.from_toml(RULES), ROWS, l=L - 1)
    report = check(released)
    assert report.l_violations >= 1 and report.min_diversity["dx"] == L - 1


class ShiftedRange(RangeGeneralizer):
    def output(self, state):
        return f"[{format_number(state[0] + 1)},{format_number(state[1] + 1)}]"


class SiblingHierarchy(HierarchyGeneralizer):
    def output(self, state):
        parent = self.tree.parent[state]
        others = [c for c in self.tree.children.get(parent, []) if c != state] if parent else []
        return others[0] if others else state


def broken_rules(name: str, make) -> RuleSet:
    good = RuleSet.from_toml(RULES)
    attrs = [AttributeRule(a.name, make(a.generalizer), a.sensitive, a.weight)
             if a.name == name else a for a in good.attributes]
    return RuleSet(good.id_field, attrs)


@pytest.mark.parametrize(("name", "rules", "reason"), [
    ("range writes [lo+1, hi+1]",
     broken_rules("age", lambda g: ShiftedRange("age", (0, 120))), "does not contain"),
    ("hierarchy writes a sibling",
     broken_rules("city", lambda g: SiblingHierarchy("city", g.tree)), "ancestors"),
])
def test_broken_generalizers_are_caught(name, rules, reason) -> None:
    released, _ = release(rules, ROWS)
    report = check(released)
    assert report.not_covered >= 1, name
    assert reason in (report.first_problem or "")


# -- the column-wise pass --------------------------------------------------------------------
def test_the_column_wise_pass_proves_the_genuine_release() -> None:
    def table(rows):
        return _table_of_rows(list(enumerate(as_text(rows), start=1)))

    for spec in (SPEC, columns_spec("u", ["age", "city", "zip"], ["dx"])):
        report = _check_columns(table(RELEASED), spec, k=K, l=L, src=table(ROWS),
                               sup=table(SUPPRESSED))
        assert report is not None and report.ok
        assert report.to_dict() == check(RELEASED, suppressed=SUPPRESSED, spec=spec).to_dict()
    # a broken release is left to the checks row by row
    assert _check_columns(table(RELEASED[1:]), SPEC, k=K, l=L, src=table(ROWS),
                         sup=table(SUPPRESSED)) is None


@pytest.mark.parametrize("text", [
    'u,age,note\n1,"[3,4]",plain\n2, 5 ,"say ""hi"""\n3,,x"y\n',
    '\ufeffu,age\r\n1,2\r\n3,4\r\n',
    "u,age\n1,2",
    "u , age\n1,  \n",
])
def test_arrow_reads_a_csv_file_as_the_row_reader_does(tmp_path, text) -> None:
    path = tmp_path / "f.csv"
    path.write_bytes(text.encode("utf-8"))
    table = _read_table(path)
    assert table is not None
    assert table.as_rows() == read_released(path)[0]


@pytest.mark.parametrize("text", [
    "u,age\n1,2\n\n3,4\n",  # a blank line: line numbers would shift
    'u,age\n1,"2\n3"\n',  # a row over two lines
    "u,age\n1,2,3\n",  # a bad row
    '"u",age\n1,2\n',  # a quoted header
    "u,age\r1,2\r",  # old Mac line ends
    "u\n1\n",  # one column: a line of spaces would be a row
])
def test_files_arrow_might_read_otherwise_are_left_to_the_row_reader(tmp_path, text) -> None:
    path = tmp_path / "f.csv"
    path.write_bytes(text.encode("utf-8"))
    assert _read_table(path) is None


def test_pass_through_numbers_match_by_value_column_wise() -> None:
    """``1`` and ``1.0`` are one pass-through value, ``-0`` and ``0`` are two (as ``_key``
    says), whether the cells are read column-wise from bytes or row by row."""
    spec = columns_spec("u", ["age"], [])
    inputs = [{"u": "a", "age": "30", "m": "1"}, {"u": "b", "age": "31", "m": "-0"}]
    for released, ok in (([{"u": "a", "age": "[30,31]", "m": "1.0"},
                           {"u": "b", "age": "[30,31]", "m": "-0.0"}], True),
                         ([{"u": "a", "age": "[30,31]", "m": "1"},
                           {"u": "b", "age": "[30,31]", "m": "0"}], False)):
        report = check(released, spec=spec, k=2, l=0, inputs=inputs)
        assert report.ok is ok, report.first_problem


def test_attributes_without_rules_are_decided_column_wise_as_why_not_decides():
    """Coverage of an attribute no rule describes (``--qi`` without rules), decided per
    distinct value over all pairs, gives ``why_not``'s verdict for each pair."""
    import numpy as np

    from streamanon.verify.castle import AttributeSpec, _Coverage, _unruled_verdicts

    attr = AttributeSpec("x", "unknown")
    shown = ["5", "[1,9]", "[2.5,3]", " 5 ", "[-inf,0]", "a*", "abc", "", None, "7.0", "[*]"]
    original = ["5", "3", "2.5", "10", "-1", "abc", "x", "", None, "7", "1e0", " 3 ", "nan"]
    pairs = [(s, o) for s in range(len(shown)) for o in range(len(original))]
    s_idx = np.array([s for s, _ in pairs])
    o_idx = np.array([o for _, o in pairs])
    coverage = _Coverage(columns_spec("id", ["x"]), [])
    got = _unruled_verdicts(attr, s_idx, o_idx, shown, original, coverage)
    want = [coverage.why_not(-1, attr, shown[s], original[o]) for s, o in pairs]
    assert [tuple(map(bool, row)) for row in got] == [(why is None, unsure)
                                                     for why, unsure in want]


def test_the_rules_parameters_table_is_read_for_k_and_l() -> None:
    text = ('id = "u"\n[parameters]\nk = 4\nl = 3\ndelta = 90\nbeta = 7\n'
            '[[attribute]]\nname = "age"\ngeneralizer = "range"\n')
    assert rules_from_toml(text).parameters == {"k": 4, "l": 3}
    assert rules_from_toml(text.replace("[parameters]\nk = 4\nl = 3\n", "")).parameters == {}
    with pytest.raises(ConfigError, match="k must be an integer >= 1"):
        rules_from_toml(text.replace("k = 4", "k = 0"))

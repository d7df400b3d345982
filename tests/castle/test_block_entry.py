"""The operator's block entry point gives what row-at-a-time processing gives."""

from __future__ import annotations

from typing import Any

import pytest

from streamanon.castle import CastleAnonymizer, CastleRow, RuleSet
from streamanon.data import ashrae
from streamanon.errors import BadRecordError


def _columns(rows: list[dict[str, Any]], numeric: set[str]
             ) -> tuple[dict[str, list[float]], dict[str, tuple[list[str | None], list[int]]]]:
    """Rows as a reader's clean block gives them (numbers; distinct texts and codes)."""
    numbers: dict[str, list[float]] = {}
    texts: dict[str, tuple[list[str | None], list[int]]] = {}
    for name in rows[0]:
        if name in numeric:
            numbers[name] = [float(r[name]) for r in rows]
            continue
        distinct: dict[str | None, int] = {}
        codes = [distinct.setdefault(r[name], len(distinct)) for r in rows]
        texts[name] = (list(distinct), codes)
    return numbers, texts


def _rows(n: int) -> list[dict[str, Any]]:
    numeric = set(ashrae.NUMERIC_QI) | {"timestamp"}
    out = []
    for i, r in enumerate(ashrae.generate(n, seed=3)):
        row = {k: float(v) if k in numeric else (None if v == "" else str(v))
               for k, v in r.items()}
        if i % 97 == 5:
            row["primary_use"] = "Spaceport"  # unknown: refused by the rules
        if i % 89 == 7:
            row["meter_reading"] = None  # blank sensitive value: refused
        if i % 83 == 11:
            row["primary_use"] = None  # blank quasi-identifier: as --missing says
        out.append(row)
    return out


def _outcome(items: list[Any]) -> list[tuple[Any, ...]]:
    return [(type(x).__name__, getattr(x, "cluster", None), getattr(x, "line", None),
             sorted(getattr(x, "values", {}).items(), key=str)) for x in items]


@pytest.mark.parametrize("options", [
    {"l": 2}, {"l": 0}, {"l": 2, "missing": "suppress"}, {"l": 2, "missing": "star"},
    {"l": 2, "diversity": "entropy"}, {"l": 2, "split": "median"}, {"l": 2, "split": "window"},
    {"l": 2, "max_delay": 3600.0},
])
def test_block_entry_gives_what_process_gives(options: dict[str, Any]) -> None:
    rules = RuleSet.from_toml(ashrae.rules_toml())
    numeric = set(ashrae.NUMERIC_QI) | {"timestamp"}
    data = _rows(1500)
    one = CastleAnonymizer(rules, k=5, delta=200, **options)
    expected: list[Any] = []
    refused_one = []
    for i, r in enumerate(data):
        try:
            expected += one.process(CastleRow(r, i + 2))
        except BadRecordError as exc:
            refused_one.append((i + 2, str(exc)))
    expected += one.flush()
    block = CastleAnonymizer(rules, k=5, delta=200, **options)
    got: list[Any] = []
    refused_block = []
    for lo in range(0, len(data), 400):  # blocks of 400 rows
        part = data[lo:lo + 400]
        numbers, texts = _columns(part, numeric)
        rows = iter([CastleRow(r, lo + i + 2) for i, r in enumerate(part)])
        start = 0
        while start < len(part):
            items, taken, error = block.process_block(rows, n=len(part), numbers=numbers,
                                                      texts=texts, start=start)
            got += items
            if error is None:
                break
            refused_block.append((lo + start + taken + 2, str(error)))
            start += taken + 1
    got += block.flush()
    assert refused_one and refused_block == refused_one
    assert _outcome(got) == _outcome(expected)
    assert block.summary() == one.summary()


@pytest.mark.parametrize("options", [
    {"l": 2}, {"l": 0, "missing": "suppress"},
    {"l": 2, "suppression": "generalize", "loss_field": "loss"},
    {"l": 3, "suppression": "null"}, {"l": 2, "split": "median"}, {"l": 2, "split": "window"},
])
def test_block_rows_given_as_fields_give_what_process_gives(options: dict[str, Any]) -> None:
    """Rows given as tuples of their fields (``header``; no dict per row until it is
    released) give the same records as row-at-a-time processing: the same values in the same
    key order, lines, clusters and suppressed records."""
    rules = RuleSet.from_toml(ashrae.rules_toml())
    numeric = set(ashrae.NUMERIC_QI) | {"timestamp"}
    data = _rows(1500)
    header = list(data[0])
    one = CastleAnonymizer(rules, k=5, delta=200, **options)
    expected: list[Any] = []
    refused_one = []
    for i, r in enumerate(data):
        try:
            expected += one.process(CastleRow(dict(r), i + 2))
        except BadRecordError as exc:
            refused_one.append((i + 2, str(exc)))
    expected += one.flush()
    block = CastleAnonymizer(rules, k=5, delta=200, **options)
    got: list[Any] = []
    refused_block = []
    for lo in range(0, len(data), 400):
        part = data[lo:lo + 400]
        numbers, texts = _columns(part, numeric)
        rows = iter([tuple(r[h] for h in header) for r in part])
        start = 0
        while start < len(part):
            items, taken, error = block.process_block(
                rows, n=len(part), numbers=numbers, texts=texts, start=start, lines=lo + 2,
                header=header)
            got += items
            if error is None:
                break
            refused_block.append((lo + start + taken + 2, str(error)))
            start += taken + 1
    got += block.flush()
    assert refused_one and refused_block == refused_one
    assert len(got) == len(expected)
    if options.get("split") != "window":  # (the window split suppresses none of these rows)
        assert any(type(x).__name__ == "Suppressed" for x in got)
    assert [repr(x) for x in got] == [repr(x) for x in expected]  # values in key order too
    assert block.summary() == one.summary()

"""The operator's block entry point gives what row-at-a-time processing gives."""

from __future__ import annotations

from typing import Any

import pytest

from streamanon.castle import CastleAnonymizer, CastleRow, RuleSet
from streamanon.castle.defaults import DEFAULTS
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


def _row_at_a_time(rules: RuleSet, data: list[dict[str, Any]], options: dict[str, Any]
                   ) -> tuple[CastleAnonymizer, list[Any], list[tuple[int, str]]]:
    """The reference: every row through :meth:`CastleAnonymizer.process` (a copy of its dict,
    which a released row takes over), then the flush; the operator, outcomes and refusals."""
    one = CastleAnonymizer(rules, k=5, delta=200, **options)
    expected: list[Any] = []
    refused = []
    for i, r in enumerate(data):
        try:
            expected += one.process(CastleRow(dict(r), i + 2))
        except BadRecordError as exc:
            refused.append((i + 2, str(exc)))
    expected += one.flush()
    return one, expected, refused


def _in_blocks(block: CastleAnonymizer, data: list[dict[str, Any]],
               rows_of: Any, **extra: Any) -> tuple[list[Any], list[tuple[int, str]]]:
    """``data`` through ``block.process_block`` in blocks of 400 rows (``rows_of(part, lo)``
    gives a block's rows; ``extra`` goes to each call, ``lo`` to ``lines`` when it is there),
    going on after each refused row, then the flush; the outcomes and refusals."""
    numeric = set(ashrae.NUMERIC_QI) | {"timestamp"}
    got: list[Any] = []
    refused = []
    for lo in range(0, len(data), 400):
        part = data[lo:lo + 400]
        numbers, texts = _columns(part, numeric)
        rows = iter(rows_of(part, lo))
        lines = {"lines": lo + 2} if "header" in extra else {}
        start = 0
        while start < len(part):
            items, taken, error = block.process_block(rows, n=len(part), numbers=numbers,
                                                      texts=texts, start=start, **lines,
                                                      **extra)
            got += items
            if error is None:
                break
            refused.append((lo + start + taken + 2, str(error)))
            start += taken + 1
    got += block.flush()
    return got, refused


@pytest.mark.parametrize("options", [
    {"l": 2}, {"l": 0}, {"l": 2, "missing": "suppress"}, {"l": 2, "missing": "star"},
    {"l": 2, "diversity": "entropy"}, {"l": 2, "split": "median"}, {"l": 2, "split": "prink"},
    {"l": 2, "max_delay": 3600.0},
])
def test_block_entry_gives_what_process_gives(options: dict[str, Any]) -> None:
    rules = RuleSet.from_toml(ashrae.rules_toml())
    data = _rows(1500)
    one, expected, refused_one = _row_at_a_time(rules, data, options)
    block = CastleAnonymizer(rules, k=5, delta=200, **options)
    got, refused_block = _in_blocks(block, data, lambda part, lo: [
        CastleRow(dict(r), lo + i + 2) for i, r in enumerate(part)])
    assert refused_one and refused_block == refused_one
    assert _outcome(got) == _outcome(expected)
    assert block.summary() == one.summary()


@pytest.mark.parametrize("options", [
    {"l": 2}, {"l": 2, "split": "prink"}, {"l": 0, "missing": "suppress"},
    {"l": 2, "suppression": "generalize", "loss_field": "loss", "split": "prink"},
    {"l": 3, "suppression": "null", "split": "prink"}, {"l": 2, "split": "median"},
])
def test_block_rows_given_as_fields_give_what_process_gives(options: dict[str, Any]) -> None:
    """Rows given as tuples of their fields (``header``; no dict per row until it is
    released) give the same records as row-at-a-time processing: the same values in the same
    key order, lines, clusters and suppressed records."""
    rules = RuleSet.from_toml(ashrae.rules_toml())
    data = _rows(1500)
    header = list(data[0])
    one, expected, refused_one = _row_at_a_time(rules, data, options)
    block = CastleAnonymizer(rules, k=5, delta=200, **options)
    got, refused_block = _in_blocks(block, data, lambda part, lo: [
        tuple(r[h] for h in header) for r in part], header=header)
    assert refused_one and refused_block == refused_one
    assert len(got) == len(expected)
    if options.get("split", DEFAULTS["split"]) != "window" or options.get("missing"):
        # (the window release suppresses none of these rows unless a value is missing)
        assert any(type(x).__name__ == "Suppressed" for x in got)
    assert [repr(x) for x in got] == [repr(x) for x in expected]  # values in key order too
    assert block.summary() == one.summary()

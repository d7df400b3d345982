"""Guards: ``streamanon castle`` on a clean CSV file stays on its fast path end to end: the
rows reach the operator through its block entry point (numbers and codes, not a parse per
row), and the released clusters are written as blocks of text, not row by row. A merge that
makes the command bypass either fails here, not only in a benchmark."""

from __future__ import annotations

import csv
from typing import Any

import pytest
from typer.testing import CliRunner

from streamanon.castle import CastleAnonymizer
from streamanon.cli import app
from streamanon.data import ashrae
from streamanon.io.rows import RowWriter

runner = CliRunner()


@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_castle_command_takes_clean_rows_as_blocks_and_writes_clusters_as_blocks(
        tmp_path, monkeypatch, end) -> None:
    n = 2000
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(n, seed=5))
    data.write_bytes(data.read_bytes().replace(b"\n", end.encode()))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    taken: list[int] = []
    parsed: list[int] = []
    row_by_row: list[int] = []
    grouped: list[int] = []
    classes: list[int] = []
    block, one = CastleAnonymizer.process_block, CastleAnonymizer.process
    many, groups, write_class = RowWriter.write_many, RowWriter.write_groups, RowWriter.write_class

    def spy_block(self: CastleAnonymizer, rows: Any, **kw: Any) -> Any:
        out = block(self, rows, **kw)
        taken.append(out[1])
        return out

    def spy_one(self: CastleAnonymizer, row: Any) -> Any:
        parsed.append(1)
        return one(self, row)

    def spy_many(self: RowWriter, rows: Any) -> None:
        rows = list(rows)
        row_by_row.append(len(rows))
        many(self, rows)

    def spy_groups(self: RowWriter, gs: Any) -> None:
        gs = list(gs)
        grouped.append(sum(map(len, gs)))
        groups(self, gs)

    def spy_class(self: RowWriter, rows: Any) -> None:
        classes.append(len(rows))
        write_class(self, rows)

    monkeypatch.setattr(CastleAnonymizer, "process_block", spy_block)
    monkeypatch.setattr(CastleAnonymizer, "process", spy_one)
    monkeypatch.setattr(RowWriter, "write_many", spy_many)
    monkeypatch.setattr(RowWriter, "write_groups", spy_groups)
    monkeypatch.setattr(RowWriter, "write_class", spy_class)
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "5", "--l", "2",
                              "--delta", "300", str(data), "-o", str(out)])
    assert res.exit_code == 0, res.output
    with out.open(newline="") as fh:
        released = sum(1 for _ in csv.reader(fh)) - 1
    assert released > 0.95 * n
    # only the first rows (until k individuals and l sensitive values are seen) go one by one
    assert parsed and len(parsed) < 20, len(parsed)
    assert sum(taken) + len(parsed) == n
    # every released row goes to a grouped writer, almost all a class at a time from their
    # fields; only a tuple released alone (under a kept cluster's generalization) is written
    # on its own, never a cluster row by row
    assert sum(grouped) + sum(classes) == released
    assert sum(classes) > 0.9 * released, (sum(classes), released)
    assert set(row_by_row) <= {1} and len(row_by_row) < 0.01 * n, row_by_row


def test_castle_command_builds_no_dict_for_a_block_row(tmp_path, monkeypatch) -> None:
    """A row taken through the block entry point reaches the operator as the reader's tuple
    of its fields (no dict per row while it is held) and is released as those fields and its
    class's template: the writer writes it without a dict, and its values, once read, are the
    merge of its class's values and its other fields, in the input's column order."""
    from streamanon.castle import Released
    from streamanon.castle.records import ReleasedFields
    from streamanon.io.rows import RowReader

    n = 1500
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(n, seed=6))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    given: dict[int, tuple[Any, ...]] = {}  # by line
    released: list[Any] = []
    dicts: list[int] = []
    fields_of, values_of, emit = RowReader.fields_of, RowReader.values_of, CastleAnonymizer._emit
    block = CastleAnonymizer.process_block

    def spy_fields(self: RowReader, blk: Any) -> Any:
        header, fields = fields_of(self, blk)

        def seen() -> Any:
            for i, f in enumerate(fields):
                assert type(f) is tuple
                given[blk.first + i] = f
                yield f
        return header, seen()

    def spy_values(self: RowReader, blk: Any) -> Any:
        dicts.append(blk.columns.n)
        return values_of(self, blk)

    def spy_block(self: CastleAnonymizer, rows: Any, **kw: Any) -> Any:
        assert kw["header"] is not None and kw["lines"] is not None
        return block(self, rows, **kw)

    def spy_emit(self: CastleAnonymizer, cset: Any, items: Any, *args: Any) -> None:
        out = args[-1]
        before = len(out)
        emit(self, cset, items, *args)
        released.extend(x for x in out[before:] if isinstance(x, Released))

    monkeypatch.setattr(RowReader, "fields_of", spy_fields)
    monkeypatch.setattr(RowReader, "values_of", spy_values)
    monkeypatch.setattr(CastleAnonymizer, "process_block", spy_block)
    monkeypatch.setattr(CastleAnonymizer, "_emit", spy_emit)
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "5", "--l", "2",
                              "--delta", "300", str(data), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert dicts == []  # the reader built no dict per row
    assert len(released) > 0.95 * n
    header = next(csv.reader(data.open()))
    from_blocks = [r for r in released if r.line in given]
    # only the first rows (taken one by one until k individuals are seen) come otherwise
    assert len(from_blocks) > len(released) - 20, (len(from_blocks), len(released))
    as_fields = [r for r in from_blocks if type(r) is ReleasedFields]
    # (the first rows, taken one by one while the summary counts individuals, are records)
    assert len(as_fields) > len(from_blocks) - 20, (len(as_fields), len(from_blocks))
    values_slot = Released.__dict__["values"]
    unbuilt = 0
    for r in as_fields:  # written without their values ever being built
        try:
            values_slot.__get__(r, Released)
        except AttributeError:
            unbuilt += 1
    assert unbuilt == len(as_fields)
    assert len({id(r.values) for r in from_blocks}) == len(from_blocks)  # a dict each
    from streamanon.castle import RuleSet

    qi = {r.name for r in RuleSet.from_toml(ashrae.rules_toml()).qi_rules}
    assert {"square_feet", "primary_use"} <= qi and "building_id" not in qi
    for r in from_blocks:
        row = dict(zip(header, given[r.line], strict=True))
        assert list(r.values) == header  # the columns in the input's order
        assert {c: r.values[c] for c in header if c not in qi} == {
            c: row[c] for c in header if c not in qi}
        assert "[" in r.values["square_feet"]  # generalized

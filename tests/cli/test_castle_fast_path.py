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
    block, one = CastleAnonymizer.process_block, CastleAnonymizer.process
    many, groups = RowWriter.write_many, RowWriter.write_groups

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

    monkeypatch.setattr(CastleAnonymizer, "process_block", spy_block)
    monkeypatch.setattr(CastleAnonymizer, "process", spy_one)
    monkeypatch.setattr(RowWriter, "write_many", spy_many)
    monkeypatch.setattr(RowWriter, "write_groups", spy_groups)
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
    # every released row goes to the grouped writer; only a tuple released alone (under a
    # kept cluster's generalization) is written on its own, never a cluster row by row
    assert sum(grouped) == released
    assert set(row_by_row) <= {1} and len(row_by_row) < 0.01 * n, row_by_row


def test_castle_command_releases_a_block_row_in_the_dict_the_reader_made(tmp_path,
                                                                          monkeypatch) -> None:
    """A row taken through the block entry point is released in the dict the reader built
    for it (its quasi-identifiers replaced in place), not in a copy made per row."""
    from streamanon.castle import Released
    from streamanon.io.rows import RowReader

    n = 1500
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(n, seed=6))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    made: dict[int, dict[str, Any]] = {}  # by id, kept alive so that ids stay unique
    released: list[dict[str, Any]] = []
    values_of, emit = RowReader.values_of, CastleAnonymizer._emit

    def spy_values(self: RowReader, block: Any) -> Any:
        for values in values_of(self, block):
            made[id(values)] = values
            yield values

    def spy_emit(self: CastleAnonymizer, cset: Any, items: Any, *args: Any) -> None:
        out = args[-1]
        before = len(out)
        emit(self, cset, items, *args)
        released.extend(x.values for x in out[before:] if type(x) is Released)

    monkeypatch.setattr(RowReader, "values_of", spy_values)
    monkeypatch.setattr(CastleAnonymizer, "_emit", spy_emit)
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "5", "--l", "2",
                              "--delta", "300", str(data), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert len(released) > 0.95 * n
    reused = [v for v in released if made.get(id(v)) is v]
    # only the first rows (taken one by one until k individuals are seen) are copies
    assert len(reused) > len(released) - 20, (len(reused), len(released))
    assert all("[" in v["square_feet"] for v in reused)  # generalized in place

"""CASTLE rows line at a time and the merge of CASTLE outcomes (no Flink needed)."""

from __future__ import annotations

import io
from collections import Counter

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.castle.cluster import Row
from streamanon.cli.castle import run_castle
from streamanon.data import ashrae
from streamanon.flink.castle_rows import (
    RowLineParser,
    merge_castle_outcomes,
    outcome_lines,
    partition_of,
)
from streamanon.io import OnError
from streamanon.io.rows import RowReader

RULES = RuleSet.from_toml(ashrae.rules_toml())
NUMERIC = [r.name for r in RULES.qi_rules if type(r.generalizer).__name__ == "RangeGeneralizer"]


def ashrae_lines(n: int, tmp_path) -> list[str]:
    path = ashrae.write_csv(tmp_path / "a.csv", ashrae.generate(n, seed=5))
    lines = path.read_text().splitlines()
    bad = [",".join(["7", "x"]), "", "," + lines[3].split(",", 1)[1],
           lines[4].replace(lines[4].split(",")[4], "big", 1), lines[5] + "\r"]
    return lines[:6] + bad + lines[6:]


def test_parser_reads_what_the_row_reader_reads(tmp_path):
    lines = ashrae_lines(300, tmp_path)
    parser = RowLineParser("csv", RULES.id_field, NUMERIC, 3)
    got, refused = [], []
    for text in lines:
        meta, row = parser.feed(text)
        refused += [m.split("\t")[0] for m in meta if "\tR\t" in m]
        if row is not None:
            got.append((row[1], row[2]))
    rejects: list = []
    reader = RowReader(io.StringIO("\n".join(lines) + "\n"), "csv", on_error=OnError.skip,
                       rejects=rejects.append, numeric=NUMERIC, required=[RULES.id_field])
    expected = [(r.line, dict(r.values)) for r in reader]
    assert got == expected
    assert refused == [str(r.line) for r in rejects] and len(refused) >= 3


def test_partitions_keep_each_individual_together_and_spread(tmp_path):
    parser = RowLineParser("csv", RULES.id_field, NUMERIC, 4)
    seen: dict[str, set[int]] = {}
    for text in ashrae_lines(890, tmp_path):
        _, row = parser.feed(text)
        if row is not None:
            seen.setdefault(row[2][RULES.id_field], set()).add(row[0])
            assert row[0] == partition_of(row[2][RULES.id_field], 4)
    assert all(len(p) == 1 for p in seen.values())
    assert len(Counter(next(iter(p)) for p in seen.values())) == 4


def test_merge_of_line_outcomes_equals_run_castle(tmp_path):
    lines = ashrae_lines(1200, tmp_path)
    src = tmp_path / "in.csv"
    src.write_text("\n".join(lines) + "\n")
    params = {"k": 4, "l": 2, "delta": 60, "beta": 50, "mu": 10, "zeta": 10}
    run_castle(src, tmp_path / "pure.csv", CastleAnonymizer(RuleSet.from_toml(
        ashrae.rules_toml()), **params), on_error=OnError.skip)
    parser = RowLineParser("csv", RULES.id_field, NUMERIC, 1)
    op = CastleAnonymizer(RuleSet.from_toml(ashrae.rules_toml()), **params)
    outcomes: list[str] = []
    for text in lines:
        meta, row = parser.feed(text)
        outcomes += meta
        if row is not None:
            outcomes += outcome_lines(op.process(Row(row[2], row[1])))
    outcomes += outcome_lines(op.flush())
    folder = tmp_path / "parts" / "bucket"
    folder.mkdir(parents=True)
    (folder / "part-a").write_text("".join(x + "\n" for x in outcomes[::2]))
    (folder / "part-b").write_text("".join(x + "\n" for x in outcomes[1::2]))
    result = merge_castle_outcomes(tmp_path / "parts", tmp_path / "merged.csv",
                                   on_error=OnError.skip)
    pure = (tmp_path / "pure.csv").read_text().splitlines()
    merged = (tmp_path / "merged.csv").read_text().splitlines()
    assert merged[0] == pure[0] and Counter(merged[1:]) == Counter(pure[1:])
    assert result.stats.balanced and result.stats.rejected >= 3
    assert result.stats.published + result.stats.suppressed + result.stats.rejected == \
        result.stats.read == len([x for x in lines if x.strip()]) - 1

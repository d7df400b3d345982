"""CASTLE rows in blocks and the merge of CASTLE outcomes (no Flink needed)."""

from __future__ import annotations

import io
import itertools
import pickle
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.castle.records import CastleRow, Released
from streamanon.cli.castle import run_castle
from streamanon.data import ashrae
from streamanon.errors import BadRecordError, UnreadableInputError
from streamanon.flink.castle_rows import (
    RULES_END,
    RULES_FILE,
    RULES_LINE,
    CastleChunkParser,
    ColumnRows,
    RulesInbox,
    apply_batch,
    merge_castle_outcomes,
    outcome_items,
    outcome_lines,
    partition_of,
    rows_of,
    rules_report,
    written_outcomes,
)
from streamanon.flink.outcomes import (
    castle_batch_line,
    castle_text_lines,
    note_line,
    read_outcomes,
    text_lines_of,
)
from streamanon.io import OnError
from streamanon.io.rows import RowReader, RowWriter
from streamanon.records import Suppressed

RULES = RuleSet.from_toml(ashrae.rules_toml())
NUMERIC = [r.name for r in RULES.qi_rules if type(r.generalizer).__name__ == "RangeGeneralizer"]


def ashrae_lines(n: int, tmp_path) -> list[str]:
    path = ashrae.write_csv(tmp_path / "a.csv", ashrae.generate(n, seed=5))
    lines = path.read_text().splitlines()
    bad = [",".join(["7", "x"]), "", "," + lines[3].split(",", 1)[1],
           lines[4].replace(lines[4].split(",")[4], "big", 1), lines[5] + "\r"]
    return lines[:6] + bad + lines[6:]


def parse_in_blocks(parser: CastleChunkParser, lines: list[str], cuts: list[int]
                    ) -> tuple[list[str], list[tuple[int, int, dict]]]:
    """Feed ``lines`` cut before the given line indexes; meta lines and (partition, seq,
    values) of every row."""
    meta: list[str] = []
    rows: list[tuple[int, int, dict]] = []
    bounds = [0, *sorted(c for c in set(cuts) if 0 < c < len(lines)), len(lines)]
    for lo, hi in itertools.pairwise(bounds):
        m, batches = parser.feed("\n".join(lines[lo:hi]).encode())
        meta += m
        for part, batch in batches:
            rows += [(part, seq, values) for seq, values in rows_of(batch)]
    return meta, rows


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 320), max_size=6))
def test_chunks_read_what_the_row_reader_reads(tmp_path_factory, cuts):
    lines = ashrae_lines(300, tmp_path_factory.mktemp("rows"))
    meta, rows = parse_in_blocks(CastleChunkParser("csv", RULES.id_field, NUMERIC, 3), lines,
                                 cuts)
    rejects: list = []
    reader = RowReader(io.StringIO("\n".join(lines) + "\n"), "csv", on_error=OnError.skip,
                       rejects=rejects.append, numeric=NUMERIC, required=[RULES.id_field])
    expected = [(r.line, dict(r.values)) for r in reader]
    assert sorted((seq, values) for _, seq, values in rows) == expected
    refused = [int(m.split("\t")[0]) for m in meta if "\tR\t" in m]
    assert refused == [r.line for r in rejects] and len(refused) >= 3
    # one outcome per line: rows, refusals, the header and the blank line
    seqs = sorted([seq for _, seq, _ in rows] + [int(m.split("\t")[0]) for m in meta])
    assert seqs == list(range(1, len(lines) + 1))


def test_partitions_keep_each_individual_together_and_spread(tmp_path):
    _, rows = parse_in_blocks(CastleChunkParser("csv", RULES.id_field, NUMERIC, 4),
                              ashrae_lines(890, tmp_path), [100, 400])
    seen: dict[str, set[int]] = {}
    for part, _, values in rows:
        seen.setdefault(values[RULES.id_field], set()).add(part)
        assert part == partition_of(values[RULES.id_field], 4)
    assert all(len(p) == 1 for p in seen.values())
    assert len(Counter(next(iter(p)) for p in seen.values())) == 4


def test_merge_of_batched_outcomes_equals_run_castle(tmp_path):
    lines = ashrae_lines(1200, tmp_path)
    src = tmp_path / "in.csv"
    src.write_text("\n".join(lines) + "\n")
    params = {"k": 4, "l": 2, "delta": 60, "beta": 50, "mu": 10, "zeta": 10}
    run_castle(src, tmp_path / "pure.csv", CastleAnonymizer(RuleSet.from_toml(
        ashrae.rules_toml()), **params), on_error=OnError.skip)
    parser = CastleChunkParser("csv", RULES.id_field, NUMERIC, 1)
    op = CastleAnonymizer(RuleSet.from_toml(ashrae.rules_toml()), **params)
    outcomes: list[str] = []
    for lo in range(0, len(lines), 250):
        meta, batches = parser.feed("\n".join(lines[lo:lo + 250]).encode())
        outcomes += meta
        for _, batch in batches:
            for seq, values in rows_of(batch):
                outcomes += outcome_lines(op.process(CastleRow(values, seq)))
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
    assert result.stats.released + result.stats.suppressed + result.stats.rejected == \
        result.stats.read == len([x for x in lines if x.strip()]) - 1


def test_batch_lines_merge_as_their_text_lines(tmp_path):
    """The job writes a batch's outcomes as one pickled ``&`` line: expanded, it is exactly
    the text lines of the same outcomes, and merged it gives the same file and counts."""
    lines = ashrae_lines(900, tmp_path)
    params = {"k": 3, "l": 2, "delta": 50, "beta": 50, "mu": 10, "zeta": 10}
    parser = CastleChunkParser("csv", RULES.id_field, NUMERIC, 1)
    op = CastleAnonymizer(RuleSet.from_toml(ashrae.rules_toml()), **params)
    text, batched = [], []
    for lo in range(0, len(lines), 200):
        meta, batches = parser.feed("\n".join(lines[lo:lo + 200]).encode())
        text += meta
        batched += meta
        for _, batch in batches:
            out = [x for seq, values in rows_of(batch) for x in op.process(CastleRow(values, seq))]
            line = castle_batch_line(outcome_items(out))
            assert castle_text_lines(line) == outcome_lines(out)  # the per-row text format
            text += castle_text_lines(line)
            batched.append(line)
    flushed = outcome_items(op.flush())
    text += castle_text_lines(castle_batch_line(flushed))
    batched.append(castle_batch_line(flushed))
    assert text_lines_of(batched) == text and len(batched) < len(text) / 20
    results = {}
    for name, content in (("text", text), ("batched", batched)):
        folder = tmp_path / name / "bucket"
        folder.mkdir(parents=True)
        (folder / "part-0").write_text("".join(x + "\n" for x in content))
        results[name] = merge_castle_outcomes(tmp_path / name, tmp_path / f"{name}.csv",
                                              on_error=OnError.skip,
                                              rejects_path=tmp_path / f"{name}.rej")
    assert (tmp_path / "text.csv").read_text() == (tmp_path / "batched.csv").read_text()
    assert (tmp_path / "text.rej").read_text() == (tmp_path / "batched.rej").read_text()
    t, b = results["text"], results["batched"]
    assert t.stats == b.stats and t.stats.released > 0 and t.stats.rejected >= 3
    assert t.suppressed_by_reason == b.suppressed_by_reason
    assert t.mean_cluster_loss == b.mean_cluster_loss > 0


PARAMS = {"k": 4, "l": 2, "delta": 60, "beta": 50, "mu": 10, "zeta": 10}
V2 = ashrae.rules_toml().replace('name = "square_feet"\ngeneralizer = "range"',
                                 'name = "square_feet"\ngeneralizer = "reduction"')


def live(inbox: RulesInbox, text: str, end: bool = True) -> list:
    """Feed ``text`` as lines of the live connection (ended by the end line)."""
    out: list = []
    for line in [*text.splitlines(), *([RULES_END] if end else [])]:
        out += inbox.feed(RULES_LINE, line)
    return out


def test_rules_inbox_numbers_good_rule_sets_and_refuses_bad_ones_whole():
    inbox = RulesInbox(1, RULES.id_field, PARAMS, columns=ashrae.COLUMNS)
    # a live rule set that completes before the --rules file waits for it (file = version 1)
    assert live(inbox, V2) == []
    judged = inbox.feed(RULES_FILE, ashrae.rules_toml())
    assert [(n["event"], n.get("version"), n["from"]) for n, _ in judged] == [
        ("accepted", 1, "--rules"), ("accepted", 2, "--rules-from")]
    assert judged[1][1] is not None and "reduction" in judged[1][1]
    bad = [live(inbox, V2.replace('id = "building_id"', 'id = "site_id"')),
           live(inbox, V2.replace("sensitive = true", 'generalizer = "range"')),
           live(inbox, "id = [\n"),
           live(inbox, V2.replace('"wind_speed"', '"wind_gust"'))]
    reasons = [n["reason"] for ((n, text),) in bad if text is None]
    assert len(reasons) == 4 and "cannot change" in reasons[0] and "sensitive" in reasons[1]
    assert "not valid TOML" in reasons[2] and "wind_gust" in reasons[3]
    state = inbox.state()
    assert live(inbox, V2, end=False) == []
    again = RulesInbox(1, RULES.id_field, PARAMS)
    again.restore(state)  # what Flink state holds: the half-received rule set is not in it
    assert again.finish() == [] and inbox.version == 2
    ((note, text),) = inbox.finish()
    assert text is None and "incomplete" in note["reason"] and note["message"] == 7


def test_the_rules_stream_carries_parameters_and_refuses_bad_ones_whole():
    inbox = RulesInbox(1, RULES.id_field, PARAMS, columns=ashrae.COLUMNS)
    inbox.feed(RULES_FILE, ashrae.rules_toml())
    table = "\n[parameters]\nk = 9\ndelta = 30\n"
    ((note, text),) = live(inbox, V2 + table)
    assert note["event"] == "accepted" and text is not None, note
    assert RuleSet.from_toml(text).parameters == {"k": 9, "delta": 30}
    bad = [live(inbox, V2 + table.replace("k = 9", "k = 0")),
           live(inbox, V2 + table.replace("k = 9", "mu = 3"))]
    reasons = [n["reason"] for ((n, text),) in bad if text is None]
    assert len(reasons) == 2 and "k must be an integer >= 1" in reasons[0]
    assert "unknown key(s) in parameters: mu" in reasons[1]


def test_notes_are_not_outcomes_and_report_the_fate_of_each_rule_set(tmp_path):
    folder = tmp_path / "parts" / "b"
    folder.mkdir(parents=True)
    notes = [{"event": "accepted", "message": 1, "from": "--rules", "version": 1},
             {"event": "installed", "version": 1, "subtask": 1},
             {"event": "installed", "version": 1, "subtask": 0},
             {"event": "refused", "message": 2, "from": "--rules-from", "reason": "x"}]
    (folder / "part-0").write_text("".join(note_line(n) + "\n" for n in notes)
                                   + "1\tH\t[\"u\"]\n2\tB\n")
    seen: list[dict] = []
    assert [seq for seq, _ in read_outcomes(tmp_path / "parts", seen).lines] == [1, 2]
    assert seen == notes
    report = rules_report(seen)
    assert [(n["message"], n.get("installed_by")) for n in report] == [(1, [0, 1]), (2, None)]


@pytest.mark.parametrize("lane", ["C", "Arrow"])
@pytest.mark.parametrize("end", [b"\n", b"\r\n"])
def test_split_blocks_of_a_clean_file_take_a_fast_lane(tmp_path, monkeypatch, end, lane):
    """Guard: the Flink job's reading step (splits of the file cut into blocks, each fed to
    the chunk parser) reads a clean CSV file through a fast lane, LF or CRLF alike: the C
    parser's where it was built, else Arrow's."""
    from streamanon.flink.splits import line_blocks, read_split, split_count
    from streamanon.io import _native, fastcsv
    from streamanon.io import lane as lane_module
    from streamanon.io import rows as rows_module

    if lane == "C" and _native.load() is None:
        pytest.skip(f"no C build: {_native.unavailable}")
    path = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(3000, seed=3))
    path.write_bytes(path.read_bytes().replace(b"\n", end))
    calls: list[bool] = []
    module, name = ((rows_module, "parse_native_rows") if lane == "C"
                    else (fastcsv, "parse_clean_rows"))
    real = getattr(module, name)

    def spy(*args: object, **kw: object) -> object:
        got = real(*args, **kw)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(module, name, spy)
    if lane == "Arrow":
        monkeypatch.setattr(lane_module, "_NATIVE", [None])
    parser = CastleChunkParser("csv", RULES.id_field, NUMERIC, 3)
    split_bytes = 64 << 10
    rows = 0
    for index in range(split_count(path, split_bytes)):
        for block in line_blocks(read_split(path, index, split_bytes)):
            rows += sum(len(rows_of(b)) for _, b in parser.feed(block)[1])
    assert rows == 3000
    assert len(calls) > 1 and all(calls)


BLOCK_LINES = st.sampled_from([
    "1,1451606400,0,Office,1000,1990,2,1.5,0,2,0,1000,10,2,4.5", "2,x,0,Office",
    "3,1451606400,0,Office,1000,1990,2,1.5,0,2,0,1000,10,2,4.5\r",
    "4,1451606400,0,Nowhere,10,1990,2,1.5,0,2,0,1000,10,2,1\r\r", "", "  ",
    "5,1451606400,0,Office,1e999,1990,2,1.5,0,2,0,1000,10,2,4.5", "\ufeff6,1",
    "7,1451606400,0,Office,1000,1990,2,1.5,0,2,0,1000,10,2,\xe9", "\udcff8,1",
    '9,1451606400,0,"Office",1000,1990,2,1.5,0,2,0,1000,10,2,4.5', "10,1\r,2"])


@pytest.mark.parametrize("as_text", [False, True])
@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(BLOCK_LINES, max_size=8), min_size=1, max_size=4),
       st.booleans())
def test_blocks_read_by_the_block_reader_as_line_by_line(as_text, blocks, header_first):
    """The chunk parser's block reader (Arrow's lane for clean blocks) gives the outcome of
    its line by line path: meta lines (header, refusals, blanks) and batches, block by block;
    CR LF ends, stray carriage returns, undecodable bytes, a byte order mark; for blocks of
    bytes (a file's splits) and of text (a Kafka job's message chunks)."""
    from streamanon.flink import castle_rows

    columns = ("building_id,timestamp,site_id,primary_use,square_feet,year_built,floor_count,"
               "air_temperature,cloud_coverage,dew_temperature,precip_depth_1_hr,"
               "sea_level_pressure,wind_direction,wind_speed,meter_reading")
    data = [[columns, *b] if i == 0 and header_first else b for i, b in enumerate(blocks)]
    raw: list[bytes | str] = ["\n".join(b).encode("utf-8", "surrogateescape") for b in data]
    if as_text:
        raw = [b.decode("utf-8", "surrogateescape") for b in raw]  # type: ignore[union-attr]

    def feed_all() -> list:
        parser = CastleChunkParser("csv", RULES.id_field, NUMERIC, 2)
        got = []
        for block in raw:
            try:
                m, b = parser.feed(block)
            except UnreadableInputError as exc:  # a bad header: the same error either way
                got.append((type(exc).__name__, str(exc)))
                break
            got.append((m, [(part, rows_of(x)) for part, x in b]))
        return got

    fast = feed_all()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(castle_rows, "_block_lane_fits", lambda block: False)
        slow = feed_all()
    assert fast == slow
def test_merge_of_outcomes_with_missing_values_equals_run_castle(tmp_path):
    """Empty quasi-identifiers under --missing suppress and star: the job's path (chunks,
    outcome lines, the merge) gives what `streamanon castle` gives, counts included."""
    lines = ashrae_lines(900, tmp_path)
    del lines[6:11]  # the bad lines: each row here is good but for its empty value
    for i in range(20, len(lines), 9):  # square_feet (a range) or primary_use (a hierarchy)
        cells = lines[i].split(",")
        cells[4 if i % 2 else 3] = ""
        lines[i] = ",".join(cells)
    src = tmp_path / "in.csv"
    src.write_text("\n".join(lines) + "\n")
    for missing in ("suppress", "star"):
        params = {"k": 4, "l": 2, "delta": 60, "beta": 50, "mu": 10, "zeta": 10,
                  "missing": missing}
        pure_stats = run_castle(src, tmp_path / "pure.csv", CastleAnonymizer(
            RuleSet.from_toml(ashrae.rules_toml()), **params), on_error=OnError.fail)
        parser = CastleChunkParser("csv", RULES.id_field, NUMERIC, 1)
        op = CastleAnonymizer(RuleSet.from_toml(ashrae.rules_toml()), **params)
        outcomes: list[str] = []
        meta, batches = parser.feed("\n".join(lines).encode())
        outcomes += meta
        for _, batch in batches:
            for seq, values in rows_of(batch):
                outcomes += outcome_lines(op.process(CastleRow(values, seq)))
        outcomes += outcome_lines(op.flush())
        folder = tmp_path / missing / "bucket"
        folder.mkdir(parents=True)
        (folder / "part-a").write_text("".join(x + "\n" for x in outcomes))
        result = merge_castle_outcomes(tmp_path / missing, tmp_path / "merged.csv",
                                       on_error=OnError.fail)
        pure = (tmp_path / "pure.csv").read_text().splitlines()
        merged = (tmp_path / "merged.csv").read_text().splitlines()
        assert merged[0] == pure[0] and Counter(merged[1:]) == Counter(pure[1:])
        assert result.stats.rejected == pure_stats.rejected == 0
        assert result.stats.suppressed == pure_stats.suppressed
        blank = len(range(20, len(lines), 9))
        assert result.suppressed_by_reason.get("missing value", 0) == (
            blank if missing == "suppress" else 0)
        if missing == "star":
            assert sum(",*," in x for x in merged) >= blank // 3


def test_check_rules_takes_static_attributes_as_an_operator_parameter():
    """``flink castle --static`` reaches every partition's operator as its ``static``
    parameter: a rule set is checked with it (a name the rules lack is refused whole)."""
    from streamanon.errors import ConfigError
    from streamanon.flink.castle_rows import check_rules

    text = ashrae.rules_toml()
    params = {"k": 4, "l": 2, "delta": 60, "static": ["square_feet", "primary_use"],
              "static_ttl": 3600.0, "static_max": 100}
    rules = check_rules(text, "building_id", params)
    op = CastleAnonymizer(rules, **params)
    assert [a.name for a in op.rules.qi_rules if a.static] == ["square_feet", "primary_use"]
    with pytest.raises(ConfigError, match="no attribute"):
        check_rules(text, "building_id", {**params, "static": ["nope"]})


@pytest.mark.parametrize(("partitions", "split"), [(1, "window"), (3, "window"), (3, "prink")])
def test_column_batches_release_what_their_rows_release_one_by_one(tmp_path, partitions, split):
    """A clean block travels as columns (:class:`ColumnRows`) and goes through the operator's
    block entry point (:func:`apply_batch`): per partition, the same releases, suppressions
    and refusals (a category the hierarchy lacks, in the middle of a clean block) as its rows
    one by one; and written as a Kafka job's messages (:func:`written_outcomes`), the bytes
    a row writer writes for each released and suppressed row."""
    lines = ashrae_lines(1500, tmp_path)
    for at in (300, 301, 900):  # clean lines the operator refuses
        fields = lines[at].split(",")
        fields[3] = "Nowhere"
        lines[at] = ",".join(fields)
    params = {"k": 4, "l": 2, "delta": 60, "beta": 50, "mu": 10, "zeta": 10, "split": split}
    parser = CastleChunkParser("csv", RULES.id_field, NUMERIC, partitions)
    by_block: dict[int, CastleAnonymizer] = {}
    by_row: dict[int, CastleAnonymizer] = {}
    columns = columns_seen = 0
    got: list = []
    want: list = []
    refused: list = []
    refused_one_by_one: list = []
    for lo in range(0, len(lines), 400):
        _, batches, seqs = parser.feed_seqs("\n".join(lines[lo:lo + 400]).encode())
        for (part, batch), batch_seqs in zip(batches, seqs, strict=True):
            columns += sum(type(p) is ColumnRows for p in pickle.loads(batch))
            block = by_block.setdefault(part, CastleAnonymizer(RuleSet.from_toml(
                ashrae.rules_toml()), **params))
            one = by_row.setdefault(part, CastleAnonymizer(RuleSet.from_toml(
                ashrae.rules_toml()), **params))
            done = apply_batch(block, batch)
            assert batch_seqs.tolist() == [seq for seq, _ in rows_of(batch)]
            assert done.rows == len(rows_of(batch))
            columns_seen += done.header is not None
            got += done.items
            refused += done.refused
            for seq, values in rows_of(batch):
                try:
                    want += one.process(CastleRow(values, seq))
                except BadRecordError as exc:
                    refused_one_by_one.append((seq, values, str(exc)))
    for part in by_block:
        got += by_block[part].flush()
        want += by_row[part].flush()
    assert columns >= partitions and columns_seen
    assert got == want and len(got) > 1000
    assert refused == refused_one_by_one
    assert sorted(r[0] for r in refused) == [301, 302, 901]  # line numbers count from 1
    header = parser._columns()
    written = written_outcomes(got, header, "csv", "loss", suppressed_format="csv")
    released = [x for x in got if not isinstance(x, Suppressed)]
    suppressed = [x for x in got if isinstance(x, Suppressed)]
    assert released and (suppressed or split == "window")  # (the window suppresses none)
    for rows, cols, text in ((released, [*header, "loss"], written.released_text),
                             (suppressed, [*header, "loss", "reason"], written.suppressed_text)):
        buf = io.StringIO()
        writer = RowWriter(buf, "csv", cols)
        for x in rows:
            writer.write(x.values if isinstance(x, Released) else
                         {**x.record.values, "reason": x.reason})
        assert text.decode() == buf.getvalue().split("\n", 1)[1]  # (the writer's header first)
    assert list(written.released) == [x.line for x in released]
    assert list(written.suppressed) == [x.record.line for x in suppressed]
    assert written.reasons == [x.reason for x in suppressed]

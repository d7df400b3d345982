"""The merge of a job's part files (pure Python, no Flink): order, accounting, gap checks."""

from __future__ import annotations

import json

import pytest

from streamanon.flink.outcomes import (
    BLANK,
    HEADER,
    OutcomeGap,
    marker_line,
    merge_outcomes,
    published_line,
    rejected_line,
    suppressed_line,
)
from streamanon.io import OnError, read_records
from streamanon.records import Rejected


def write_parts(root, parts):
    folder = root / "parts" / "2026-01-01--00"
    folder.mkdir(parents=True)
    for i, lines in enumerate(parts):
        (folder / f"outcomes-{i}-0.tsv").write_text("".join(x + "\n" for x in lines))
    return root / "parts"


def sample_parts(tmp_path, extra=()):
    # two subtasks, interleaved line numbers, one value with a tab and a comma
    return write_parts(tmp_path, [
        [marker_line(1, HEADER), published_line(3, 1, False, "2", "bob", "EU*FR"),
         suppressed_line(5, True)],
        [published_line(2, 0, False, "1", "al\tice", "EU,x"), marker_line(4, BLANK),
         rejected_line(Rejected(6, "oops", "expected 3 comma-separated fields, got 1")),
         published_line(7, 2, True, "3.0", "carol", "EU*FR*Lyon"), *extra],
    ])


def test_merge_writes_published_rows_in_input_order_with_accounting(tmp_path):
    parts = sample_parts(tmp_path)
    out = tmp_path / "out.csv"
    rejects = tmp_path / "rejects.jsonl"
    result = merge_outcomes(parts, out, on_error=OnError.skip, rejects_path=rejects)
    rows = [(r.t, r.u, r.a) for r in read_records(out, monotone=False)]
    assert rows == [(1.0, "al\tice", "EU,x"), (2.0, "bob", "EU*FR"), (3.0, "carol", "EU*FR*Lyon")]
    stats = result.stats
    assert (stats.read, stats.released, stats.suppressed, stats.rejected) == (5, 3, 1, 1)
    assert stats.balanced
    assert result.published_per_level == [1, 1, 1]
    assert result.restamped == 2
    logged = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert [(x["line"], x["text"]) for x in logged] == [(6, "oops")]


def test_merge_under_fail_stops_at_the_first_rejected_line(tmp_path):
    out = tmp_path / "out.csv"
    result = merge_outcomes(sample_parts(tmp_path), out, on_error=OnError.fail)
    assert result.first_error is not None and result.first_error.rejected.line == 6
    assert [r.u for r in read_records(out, monotone=False)] == ["al\tice", "bob"]


def test_hidden_in_progress_files_are_not_read(tmp_path):
    parts = sample_parts(tmp_path)
    hidden = parts / "2026-01-01--00" / ".outcomes-9-0.tsv.inprogress.abc"
    hidden.write_text(suppressed_line(8, False) + "\n")
    result = merge_outcomes(parts, tmp_path / "out.csv", on_error=OnError.skip)
    assert result.stats.read == 5


@pytest.mark.parametrize(("extra", "what"), [
    ((suppressed_line(3, False),), "duplicate outcome at input line 3"),
    ((suppressed_line(9, False),), "missing outcome at input line 8"),
])
def test_a_duplicate_or_a_loss_is_an_error_not_deduplicated(tmp_path, extra, what):
    with pytest.raises(OutcomeGap, match=what):
        merge_outcomes(sample_parts(tmp_path, extra), tmp_path / "out.csv")


def outcome_batch(rows: list[dict]) -> str:
    import pyarrow as pa

    from streamanon.flink.outcomes import OUTCOMES, outcome_batch_line

    return outcome_batch_line(pa.RecordBatch.from_pylist(rows, schema=OUTCOMES))


def published(seq: int, level: int, t: str, u: str, a: str, restamped: bool = False) -> dict:
    return {"seq": seq, "level": level, "restamped": restamped, "t_text": t, "u": u, "a": a}


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_outcome_batches_and_lines_merge_as_the_writer_writes(tmp_path, fmt):
    """Batches of two key groups and text lines interleave by line number; a value that
    needs CSV quoting is quoted exactly as ``streamanon z``'s writer quotes it."""
    from streamanon.io import RecordWriter
    from streamanon.records import Record

    parts = write_parts(tmp_path, [
        [marker_line(1, HEADER), outcome_batch([
            published(2, 0, "1", "al,ice", "EU"), {"seq": 4, "level": -1, "restamped": True},
            published(6, 1, "4", "bob", 'EU*"FR"')])],
        [outcome_batch([published(3, 2, "2", "carol", "EU*FR*Lyon")]),
         rejected_line(Rejected(5, "oops", "bad")), suppressed_line(7, False)],
    ])
    out = tmp_path / f"out.{fmt}"
    result = merge_outcomes(parts, out, out_format=fmt, on_error=OnError.skip)
    expected = tmp_path / f"expected.{fmt}"
    with RecordWriter(expected, fmt) as writer:
        for t, u, a in [("1", "al,ice", "EU"), ("2", "carol", "EU*FR*Lyon"),
                        ("4", "bob", 'EU*"FR"')]:
            writer.write(Record(float(t), u, a, t))
    assert out.read_bytes() == expected.read_bytes()
    stats = result.stats
    assert (stats.read, stats.released, stats.suppressed, stats.rejected) == (6, 3, 2, 1)
    assert result.published_per_level == [1, 1, 1] and result.restamped == 1


def test_a_line_in_a_batch_and_in_a_text_line_is_a_duplicate(tmp_path):
    parts = write_parts(tmp_path, [
        [marker_line(1, HEADER), outcome_batch([published(2, 0, "1", "al", "EU")])],
        [suppressed_line(2, False)]])
    with pytest.raises(OutcomeGap, match="duplicate outcome at input line 2"):
        merge_outcomes(parts, tmp_path / "out.csv")

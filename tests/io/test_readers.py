"""Readers: every line ends as a record or a named rejection; times are monotone afterwards."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamanon.io import InputError, RecordWriter, RejectLog, iter_batches, read_records
from streamanon.records import Record


def read(text: str, fmt: str = "csv", **kw):
    log = RejectLog()
    rejected = []

    def sink(r):
        rejected.append(r)
        log(r)

    records = list(read_records(io.StringIO(text), fmt, rejects=sink, **kw))
    return records, rejected


def test_csv_with_header_and_iso_times():
    recs, bad = read("t,u,a\n2016-01-01T00:00:00Z,alice,x\n1451606401,bob,y*z\n")
    assert bad == []
    assert [(r.t, r.u, r.a, r.line) for r in recs] == [
        (1451606400.0, "alice", "x", 2), (1451606401.0, "bob", "y*z", 3)]
    assert recs[0].t_text == "2016-01-01T00:00:00Z"


def test_header_in_any_order_and_headerless():
    recs, _ = read("a,u,t\nx,alice,5\n")
    assert (recs[0].t, recs[0].u, recs[0].a) == (5.0, "alice", "x")
    recs, _ = read("5,alice,x\n6,bob,y\n")
    assert [r.u for r in recs] == ["alice", "bob"]


def test_missing_header_is_a_clear_error():
    with pytest.raises(InputError, match="header naming columns t,u,a"):
        read("when,who,what\n1,a,b\n")


BAD_LINES = {
    "1,alice": "expected 3 comma-separated fields, got 2",
    "1,alice,x,extra": "expected 3 comma-separated fields, got 4",
    "1,,x": "missing field u",
    "1,alice,": "missing field a",
    "nan,alice,x": "time is not a finite number",
    "inf,alice,x": "time is not a finite number",
    "yesterday,alice,x": "time is neither seconds nor ISO 8601",
    "1," + "a" * 5000 + ",x": "field u is 5000 characters long (limit 4096)",
}


@pytest.mark.parametrize("line,reason", BAD_LINES.items())
def test_bad_line_fails_with_its_line_number(line, reason):
    text = f"t,u,a\n0,bob,x\n{line}\n2,carol,x\n"
    with pytest.raises(InputError) as exc:
        read(text)
    assert f":3: {reason}" in str(exc.value)


@pytest.mark.parametrize("line,reason", BAD_LINES.items())
def test_bad_line_skipped_and_accounted(line, reason):
    recs, bad = read(f"t,u,a\n0,bob,x\n{line}\n2,carol,x\n", on_error="skip")
    assert [r.u for r in recs] == ["bob", "carol"]
    assert [(b.line, b.reason) for b in bad] == [(3, reason)]


def test_fail_yields_the_records_before_the_bad_line():
    seen = []
    with pytest.raises(InputError):
        for batch in iter_batches(io.StringIO("t,u,a\n0,a,x\n1,b,y\noops\n"), "csv"):
            seen.extend(batch.u)
    assert seen == ["a", "b"]


def test_time_going_backwards():
    text = "t,u,a\n10,a,x\n9.5,b,x\n5,c,x\n11,d,x\n"
    with pytest.raises(InputError, match=r":3: time goes backwards"):
        read(text)
    recs, bad = read(text, on_error="skip", time_tolerance=1)
    assert [(r.u, r.t) for r in recs] == [("a", 10.0), ("b", 10.0), ("d", 11.0)]
    assert [(b.line, b.reason.split(":")[0]) for b in bad] == [(4, "time goes backwards")]


def test_blank_lines_and_crlf():
    recs, bad = read("t,u,a\r\n1,a,x\r\n\r\n2,b,y\r\n")
    assert [(r.u, r.a, r.line) for r in recs] == [("a", "x", 2), ("b", "y", 4)]
    assert bad == []


def test_quoted_csv_fields():
    recs, _ = read('t,u,a\n1,"smith, j",x\n')
    assert recs[0].u == "smith, j"


def test_jsonl():
    lines = [
        json.dumps({"t": 1, "u": "a", "a": "x"}),
        "{not json",
        json.dumps({"t": 2, "u": "b"}),
        json.dumps({"t": "2016-01-01T00:00:00", "u": 7, "a": "y"}),
        json.dumps([1, 2]),
    ]
    recs, bad = read("\n".join(lines) + "\n", "jsonl", on_error="skip")
    assert [(r.u, r.a) for r in recs] == [("a", "x"), ("7", "y")]
    assert [(b.line, b.reason.split(" (")[0]) for b in bad] == [
        (2, "invalid JSON"), (3, "missing field a"), (5, "expected a JSON object with t, u, a")]


@given(st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False),
                          st.text("abc ,\"xyz", min_size=1, max_size=6),
                          st.text("ab*c,\"", min_size=1, max_size=6)), max_size=30),
       st.sampled_from(["csv", "jsonl"]))
def test_writer_reader_round_trip(rows, fmt):
    rows = sorted(rows)
    rows = [(t, u.strip(), a.strip()) for t, u, a in rows]
    rows = [(t, u, a) for t, u, a in rows if u and a]
    buf = io.StringIO()
    with RecordWriter(buf, fmt) as w:
        for t, u, a in rows:
            w.write(Record(t, u, a))
    back = list(read_records(io.StringIO(buf.getvalue()), fmt))
    assert [(r.t, r.u, r.a) for r in back] == rows


def test_chunk_boundaries_keep_line_numbers(monkeypatch):
    import streamanon.io.readers as readers

    monkeypatch.setattr(readers, "_CHUNK_CHARS", 7)
    text = "t,u,a\n" + "".join(f"{i},u{i},v{i}\n" for i in range(50)) + "x\n"
    recs, bad = read(text, on_error="skip")
    assert [r.line for r in recs] == list(range(2, 52))
    assert [b.line for b in bad] == [52]


def test_rejected_lines_are_echoed_as_written_and_never_merged() -> None:
    """Rejected lines are echoed as written, not rebuilt, and an unclosed quote does not
    swallow the next line: each bad line is reported by its number with its own text, and the
    next line is read on its own."""
    text = 't,u,a\n1, alice ,x\nlater, bob ,x\n2,carol,"open\n3,dave,x\n'
    rejects: list = []
    batches = list(iter_batches(io.StringIO(text), "csv", on_error="skip",
                                rejects=rejects.append))
    rows = [(r.line, r.u) for b in batches for r in b.records()]
    assert rows == [(2, "alice"), (5, "dave")]
    assert [(r.line, r.text) for r in rejects] == [(3, "later, bob ,x"), (4, '2,carol,"open')]


def test_undecodable_lines_are_rejected_one_by_one(tmp_path) -> None:
    src = tmp_path / "latin.csv"
    src.write_bytes("t,u,a\n1,a,x\n2,b,caf\xe9\n3,c,x\n".encode("latin-1"))
    rejects: list = []
    rows = [r.u for b in iter_batches(src, on_error="skip", rejects=rejects.append)
            for r in b.records()]
    assert rows == ["a", "c"]
    assert [r.line for r in rejects] == [3] and "not UTF-8" in rejects[0].reason

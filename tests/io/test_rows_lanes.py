"""CSV files are read by the block, clean blocks through a fast lane (the C parser's, else
Arrow's): the rows, line numbers,
rejections (text and reason), accounting and errors are exactly those of reading the same bytes
as a text stream, line by line (the rules' own path), whatever the block boundaries."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamanon.io import InputError
from streamanon.io import rows as rows_module
from streamanon.io.rows import RowReader

HEADER = b"id,age,h,note"
NUMBERS = st.sampled_from([b"1", b"-2.5", b" 3 ", b"1_000", b"1e999", b"nan", b"inf", b"abc",
                           b"", b"  ", b"+4", b".5", b"NA", b"1e308", b"9" * 30, b"-0",
                           b"4.0e-3"])
TEXT = st.sampled_from([b"a", b"b c", b"", b" ", b"x" * 45, "été".encode(), b"1.5", b"\xff",
                        b"\xc3", b'"q,uoted"', b'"open', b" pad ", b"\t", b"\xc2\xa0"])
ENDS = st.sampled_from([b"\n", b"\n", b"\n", b"\r\n", b"\r\r\n"])


@st.composite
def csv_bytes(draw: st.DrawFn) -> bytes:
    head = draw(st.sampled_from([b"", b"\xef\xbb\xbf", b"\n", b" \n\xef\xbb\xbf"]))
    out = [head + draw(st.sampled_from([HEADER, HEADER + b" ", b"id,id", b"age,h"]))
           + draw(ENDS)]
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.integers(0, 19))
        if kind == 0:
            line = b""
        elif kind == 1:
            line = b"   "
        elif kind == 2:
            line = b"y," * draw(st.integers(0, 60))  # long, and a wrong field count
        else:
            fields = [draw(TEXT), draw(NUMBERS), draw(NUMBERS), draw(TEXT)]
            if kind == 3:
                fields.pop()
            if kind > 9:  # mostly clean rows, so that whole blocks take the fast lane
                fields = [b"p%d" % kind, b"%d" % draw(st.integers(-5, 99)), b"7.25",
                          draw(st.sampled_from([b"ok", b"b c", "é".encode()]))]
            line = b",".join(fields)
        out.append(line + draw(ENDS))
    data = b"".join(out)
    return data[:-1] if draw(st.booleans()) else data  # with or without a final newline


def outcome(source: object, numeric: list[str], on_error: str) -> tuple:
    rd = RowReader(source, "csv", numeric=numeric, required=["id"],  # type: ignore[arg-type]
                   max_value_len=40, on_error=on_error, source_name="in.csv")
    got = []
    try:
        for r in rd:
            got.append((r.line, r.values, [type(v) for v in r.values.values()]))
            if r.line and r.line % 5 == 0:  # a later stage refuses some rows
                rd.refuse_row(r, "refused downstream")
    except InputError as exc:
        got.append((type(exc).__name__, str(exc)))
    return (got, [(x.line, x.text, x.reason) for x in rd.rejected], rd.read, rd.n_rejected,
            rd.columns)


@settings(max_examples=250, deadline=None)
@given(csv_bytes(), st.sampled_from([["age", "h"], ["h"], []]),
       st.sampled_from(["skip", "fail"]), st.integers(1, 400), st.integers(20, 60))
# found by this test: a clean line longer than a line may be (but not than a value may be)
# took Arrow's lane and was read, where the text path refuses it
@example(data=b"id,age,h,note\n\n\np10,0,7.25,ok\n\n\na,1," + b"9" * 30 + b",a\n",
         numeric=["age", "h"], on_error="skip", block=1, max_chars=20)
def test_file_lanes_read_exactly_like_the_text_path(tmp_path_factory, data: bytes,
                                                    numeric: list[str], on_error: str,
                                                    block: int, max_chars: int) -> None:
    path: Path = tmp_path_factory.mktemp("lanes") / "in.csv"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rows_module, "_BLOCK", block)
        mp.setattr(rows_module, "MAX_LINE_CHARS", max_chars)
        mp.setattr(rows_module, "_LONG_BYTES", 4 * max_chars + 4)
        from_file = outcome(path, numeric, on_error)
        text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig",
                                errors="surrogateescape", newline="\n")
        from_text = outcome(text, numeric, on_error)
    assert from_file == from_text


@pytest.mark.parametrize("lane", ["C", "Arrow"])
def test_clean_blocks_take_the_fast_lane(tmp_path, monkeypatch, lane: str) -> None:
    """Not only equal: a clean file is really parsed by a fast lane (one call per block), the
    C parser's where it was built, else Arrow's."""
    from streamanon.io import _native, fastcsv
    from streamanon.io import lane as lane_module

    if lane == "C" and _native.load() is None:
        pytest.skip(f"no C build: {_native.unavailable}")
    calls = []
    module, name = ((rows_module, "parse_native_rows") if lane == "C"
                    else (fastcsv, "parse_clean_rows"))
    real = getattr(module, name)

    def spy(*args: object, **kw: object) -> object:
        got = real(*args, **kw)  # type: ignore[operator]
        calls.append(got is not None)
        return got

    monkeypatch.setattr(module, name, spy)
    if lane == "Arrow":
        monkeypatch.setattr(lane_module, "_NATIVE", [None])
    monkeypatch.setattr(rows_module, "_BLOCK", 64)
    path = tmp_path / "in.csv"
    path.write_text("id,age,note\n" + "".join(f"p{i},{i}.5,x y\n" for i in range(40)))
    rows = list(RowReader(path, numeric=["age"], required=["id"]))
    assert [(r.line, r.values["age"]) for r in rows] == [(i + 2, i + 0.5) for i in range(40)]
    assert len(calls) > 5 and all(calls)


def test_a_line_too_long_to_hold_is_refused_by_number_and_skipped(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(rows_module, "_BLOCK", 16)
    monkeypatch.setattr(rows_module, "MAX_LINE_CHARS", 10)
    monkeypatch.setattr(rows_module, "_LONG_BYTES", 44)
    path = tmp_path / "in.csv"
    path.write_bytes(b"id,n\na,1\n" + b"z" * 500 + b"\nb,2\n")
    rd = RowReader(path, numeric=["n"], on_error="skip")
    assert [(r.line, r.values["id"]) for r in rd] == [(2, "a"), (4, "b")]
    assert [(x.line, x.reason) for x in rd.rejected] == [(3, "line longer than 10 characters")]


def _chunks(data: bytes, cuts: list[int]) -> list[tuple[int, bytes]]:
    """``data`` as a line source gives it: whole lines, ``\\r\\n`` as ``\\n``, cut into chunks
    after the lines numbered ``cuts`` (the first line numbered 1)."""
    lines = data.removeprefix(b"\xef\xbb\xbf").replace(b"\r\n", b"\n").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out, first = [], 1
    for cut in [*sorted(set(cuts)), len(lines)]:
        if cut >= first:
            out.append((first, b"\n".join(lines[first - 1:cut])))
            first = cut + 1
    return out


def chunk_outcome(chunks: list[tuple[int, bytes]], numeric: list[str], repeated: bool,
                  blocks: bool) -> tuple:
    """The rows and rejections of the chunks as a stage reads them: by the block
    (``parse_block``) or line by line (``parse_lines`` over the decoded lines)."""
    found: list = []
    rd = RowReader(io.StringIO(""), "csv", numeric=numeric, required=["id"], max_value_len=40,
                   on_error="skip", rejects=found.append, source_name="in.csv",
                   repeated_header=repeated)
    got: list = []
    try:
        for first, data in chunks:
            rows = rd.parse_block(first, data) if blocks else rd.parse_lines(
                enumerate(data.decode("utf-8", "surrogateescape").split("\n"), first))
            for r in rows:  # rows and rejections interleaved, as the stage sees them
                got.append(("rejected", [(x.line, x.text, x.reason) for x in found]))
                found.clear()
                got.append((r.line, r.values, [type(v) for v in r.values.values()]))
    except InputError as exc:
        got.append((type(exc).__name__, str(exc)))
    got.append(("rejected", [(x.line, x.text, x.reason) for x in found]))
    return got, rd.read, rd.n_rejected, rd.columns, rd.headers_skipped


@settings(max_examples=250, deadline=None)
@given(csv_bytes(), st.sampled_from([["age", "h"], ["h"], []]), st.booleans(),
       st.lists(st.integers(0, 35), max_size=4), st.integers(1, 400), st.integers(20, 60))
def test_chunks_by_the_block_read_exactly_like_line_by_line(
        data: bytes, numeric: list[str], repeated: bool, cuts: list[int], block: int,
        max_chars: int) -> None:
    """What a stage does with a chunk of a file: the same as reading its lines one by one."""
    if repeated:  # a producer's header again, among the rows
        data += b"id,age,h,note\n" + b"p1,2,7.25,ok\n" * 3
    chunks = _chunks(data, cuts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rows_module, "_BLOCK", block)
        mp.setattr(rows_module, "MAX_LINE_CHARS", max_chars)
        assert chunk_outcome(chunks, numeric, repeated, True) == chunk_outcome(
            chunks, numeric, repeated, False)


RULES = """id = "id"

[[attribute]]
name = "age"
generalizer = "range"

[[attribute]]
name = "h"
generalizer = "range"
"""


def command_outcome(source: object, tmp: Path, on_error: str) -> tuple:
    """What ``streamanon castle`` writes for the source (published rows, rejects, summary)."""
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.pipeline import run_castle

    out, rej = tmp / "out.csv", tmp / "rej.jsonl"
    op = CastleAnonymizer(RuleSet.from_toml(RULES), k=2, l=1, delta=4, beta=3)
    try:
        stats = run_castle(source, out, op, in_format="csv", on_error=on_error,  # type: ignore[arg-type]
                           rejects_path=rej, rejects_name="in.csv")
        summary: object = (stats.read, stats.rejected, stats.released, stats.suppressed)
    except Exception as exc:
        summary = (type(exc).__name__, str(exc).replace(str(source), "input"))
    name = json.dumps(str(source)).encode()
    return (summary, out.read_bytes() if out.exists() else None,
            rej.read_bytes().replace(name, b'"input"') if rej.exists() else None)


@settings(max_examples=150, deadline=None)
@given(csv_bytes(), st.sampled_from(["skip", "fail"]), st.integers(1, 400))
def test_the_castle_command_reads_files_exactly_like_text_streams(
        tmp_path_factory, data: bytes, on_error: str, block: int) -> None:
    """A file (bytes: by the block, Arrow's lane for clean blocks) against the same bytes as
    a text stream (line by line): the same output, rejects, accounting and errors."""
    tmp: Path = tmp_path_factory.mktemp("command")
    path = tmp / "in.csv"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rows_module, "_BLOCK", block)
        (tmp / "file").mkdir()
        (tmp / "text").mkdir()
        from_file = command_outcome(path, tmp / "file", on_error)
        text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8",
                                errors="surrogateescape", newline="")
        from_text = command_outcome(text, tmp / "text", on_error)
    assert from_file == from_text

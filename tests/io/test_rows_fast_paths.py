"""The row reader's and writer's fast paths (all-text rows) decide and write exactly what the
field-by-field code does: each random input is read (or written) twice, once with the fast
path switched off, and the results must be equal."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.io import rows as rows_module
from streamanon.io.rows import RowReader, RowWriter

NUMBERS = st.sampled_from(["1", "-2.5", " 3 ", "1_000", "1e999", "-1e999", "nan", "inf",
                           "abc", "", "  ", "0x10", "1e308", "9" * 50, "4.0e-3"])
TEXT = st.sampled_from(["a", "b c", "", " ", "x" * 45, "\u00e9t\u00e9", "1.5"])


@st.composite
def csv_texts(draw: st.DrawFn) -> str:
    lines = ["id,age,h,note"]
    for _ in range(draw(st.integers(0, 12))):
        fields = [draw(TEXT), draw(NUMBERS), draw(NUMBERS), draw(TEXT)]
        if draw(st.integers(0, 9)) == 0:
            fields.pop()  # a wrong field count
        lines.append(",".join(fields))
    return "\n".join(lines) + "\n"


def read(text: str, numeric: list[str]) -> tuple[list, list]:
    rd = RowReader(io.StringIO(text), "csv", numeric=numeric, required=["id"],
                   max_value_len=40, on_error="skip")
    got = [(r.line, r.values) for r in rd]
    return got, [(x.line, x.text, x.reason) for x in rd.rejected]


NUMERIC = st.sampled_from([["age", "h"], ["h"], [], ["age", "h", "not-a-column"]])


@settings(max_examples=300, deadline=None)
@given(csv_texts(), NUMERIC)
def test_reader_fast_path_changes_nothing(text: str, numeric: list[str]) -> None:
    fast = read(text, numeric)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RowReader, "_valid_text_row", lambda self, values: False)
        slow = read(text, numeric)
    assert fast == slow
    # values keep their types exactly (a float stays a float, text stays text)
    assert [[type(v) for v in row.values()] for _, row in fast[0]] == [
        [type(v) for v in row.values()] for _, row in slow[0]]


CELLS = st.one_of(st.none(), TEXT, st.floats(allow_nan=True), st.integers(-10, 10),
                  st.booleans(), st.lists(st.integers(0, 3), max_size=2))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({"a": CELLS, "b": CELLS}), max_size=6))
def test_writer_fast_path_writes_the_same_bytes(rows: list[dict]) -> None:
    def write() -> str:
        buf = io.StringIO()
        w = RowWriter(buf, "csv", ["a", "b", "absent"])
        for r in rows:
            w.write(r)
        return buf.getvalue()

    fast = write()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rows_module, "_TEXT_OR_NONE", set())
        mp.setattr(RowWriter, "_write_plain", lambda self, row, line: False)
        slow = write()
    assert fast == slow


SPECIAL = st.one_of(st.none(), st.text(st.sampled_from('ab ,"\r\n\té'), max_size=5),
                    st.sampled_from(["[1,2]", "[-0.5,3]", "", " ", "a,b,c"]))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4).flatmap(
    lambda n: st.lists(st.lists(SPECIAL, min_size=n, max_size=n), max_size=8)))
def test_writer_writes_text_rows_as_the_csv_module_does(rows: list[list]) -> None:
    """The plain-text path (fields with commas quoted) against the csv module itself, on
    fields with commas, quotes, line breaks, blanks and None; twice, for the quoting cache."""
    import csv

    columns = [f"c{i}" for i in range(len(rows[0]))] if rows else ["c0"]
    got, want = io.StringIO(), io.StringIO()
    w = RowWriter(got, "csv", columns)
    ref = csv.writer(want, lineterminator="\n")
    ref.writerow(columns)
    for r in rows + rows:
        w.write(dict(zip(columns, r, strict=True)))
        ref.writerow(r)
    assert got.getvalue() == want.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4).flatmap(lambda n: st.lists(
    st.tuples(st.lists(SPECIAL | CELLS, min_size=n, max_size=n),
              st.lists(st.lists(SPECIAL, min_size=n, max_size=n), min_size=1, max_size=5),
              st.lists(st.booleans(), min_size=n, max_size=n)), max_size=6)))
def test_writer_writes_groups_as_write_writes_each_row(groups: list[tuple]) -> None:
    """Groups of rows that share some columns (a released cluster's generalized values),
    written column by column, give the bytes of writing each row by itself: constant
    columns with commas, quotes, line breaks, None and non-text values, varying columns with
    the same, groups of one row."""
    n = len(groups[0][0]) if groups else 1
    columns = [f"c{i}" for i in range(n)]
    rows = [[dict(zip(columns, [c if keep else v for c, v, keep in zip(common, r, same,
                                                                         strict=True)],
                      strict=True)) for r in varying]
            for common, varying, same in groups]
    got, want = io.StringIO(), io.StringIO()
    w, ref = RowWriter(got, "csv", columns), RowWriter(want, "csv", columns)
    w.write_groups(rows + rows)
    for group in rows + rows:
        for r in group:
            ref.write(r)
    assert got.getvalue() == want.getvalue()
    assert w.count == ref.count


def test_a_released_cluster_is_written_without_a_row_by_row_pass(monkeypatch) -> None:
    columns = ["id", "age", "city", "dx"]
    group = [{"id": f"p{i}", "age": "[30,34]", "city": "EU", "dx": d}
             for i, d in enumerate(["flu", "cold", "flu"])]
    by_row: list[object] = []
    monkeypatch.setattr(RowWriter, "write_many",
                        lambda self, rows: by_row.append(rows))  # the fallback
    buf, want = io.StringIO(), io.StringIO()
    RowWriter(buf, "csv", columns).write_groups([group])
    assert not by_row
    ref = RowWriter(want, "csv", columns)
    for r in group:
        ref.write(r)
    assert buf.getvalue() == want.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 5).flatmap(lambda n: st.tuples(
    st.lists(SPECIAL | CELLS, min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n),
    st.lists(st.lists(SPECIAL | CELLS, min_size=n, max_size=n), min_size=1, max_size=6),
    st.booleans())))
def test_writer_writes_a_class_from_its_fields_as_from_its_values(case: tuple) -> None:
    """A released class given as its template and each row's fields
    (:class:`~streamanon.castle.records.ReleasedFields`) is written with the bytes of
    writing each row's values by itself: generalized and passed-through columns with commas,
    quotes, line breaks, None and non-text values, a column only the class has (its loss),
    classes of one row."""
    from streamanon.castle.records import ReleasedFields

    common, generalized, fields, with_loss = case
    header = [f"c{i}" for i in range(len(common))]
    template = dict.fromkeys(header)
    template.update({h: c for h, c, g in zip(header, common, generalized, strict=True) if g})
    if with_loss:
        template["loss"] = 0.25
    slots = tuple(-1 if g else i for i, g in enumerate(generalized))
    rows = [ReleasedFields.of(template, slots, tuple(f), 0.25, 3, i + 2)
            for i, f in enumerate(fields)]
    columns = list(template)
    got, want = io.StringIO(), io.StringIO()
    w, ref = RowWriter(got, "csv", columns), RowWriter(want, "csv", columns)
    w.write_class(rows)
    for r in rows:
        ref.write(r.values)
    assert got.getvalue() == want.getvalue()
    assert w.count == ref.count

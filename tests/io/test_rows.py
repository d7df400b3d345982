"""Row reader/writer: every bad line is named and accounted for, under fail and skip."""

from __future__ import annotations

import io
import json

import pytest

from streamanon.io import InputError, RejectLog
from streamanon.io.rows import RowReader, RowWriter, read_rows

CSV = (
    "id,age,city\n"
    "a,30,Paris\n"
    "b,thirty,Paris\n"      # 3: not a number
    "c,31\n"                # 4: field count
    ",32,Lyon\n"            # 5: missing id
    "d,nan,Lyon\n"          # 6: not finite
    "\n"
    "e,33," + "x" * 50 + "\n"   # 8: oversized
    "f,-4.5,\"Saint-Denis, FR\"\n"
)


def reader(text: str, fmt: str = "csv", **kw) -> RowReader:
    return RowReader(io.StringIO(text), fmt, numeric=["age"], required=["id"],
                     max_value_len=40, **kw)


def test_skip_names_each_bad_line_and_accounting_adds_up(tmp_path) -> None:
    log = RejectLog(tmp_path / "rej.jsonl", "in.csv")
    rd = reader(CSV, on_error="skip", rejects=log)
    rows = list(rd)
    log.close()
    assert [(r.line, r.values["id"]) for r in rows] == [(2, "a"), (9, "f")]
    assert rows[1].values == {"id": "f", "age": -4.5, "city": "Saint-Denis, FR"}
    reasons = {r.line: r.reason for r in rd.rejected}
    assert set(reasons) == {3, 4, 5, 6, 8}
    assert "not a number" in reasons[3] and "fields" in reasons[4]
    assert "missing field id" in reasons[5] and "finite" in reasons[6]
    assert "longer" in reasons[8]
    assert rd.read == len(rows) + rd.n_rejected
    logged = [json.loads(x) for x in (tmp_path / "rej.jsonl").read_text().splitlines()]
    assert [x["line"] for x in logged] == [3, 4, 5, 6, 8]


def test_fail_stops_at_the_first_bad_line_with_its_number() -> None:
    rd = reader(CSV)
    it = iter(rd)
    assert next(it).values["id"] == "a"
    with pytest.raises(InputError, match=r"input:3: field age is not a number"):
        next(it)


def test_jsonl_rows_keep_types_and_refuse_bad_lines() -> None:
    text = ('{"id": "a", "age": 3, "city": ["Paris", "FR"]}\n{"id": "b", "age": NaN}\n'
            'not json\n[1, 2]\n{"age": 4}\n{"id": 7, "age": "5"}\n')
    rd = reader(text, "jsonl", on_error="skip")
    rows = list(rd)
    assert [r.values for r in rows] == [{"id": "a", "age": 3.0, "city": ["Paris", "FR"]},
                                        {"id": 7, "age": 5.0}]
    assert [r.line for r in rd.rejected] == [2, 3, 4, 5]
    assert rd.read == 6


def test_downstream_refusals_use_the_same_policy() -> None:
    rd = reader("id,age,city\na,1,Rome\n", on_error="skip")
    row = next(iter(rd))
    rd.refuse_row(row, "unknown category 'Rome'")
    assert rd.rejected[0].line == 2 and rd.rejected[0].text == "a,1,Rome"  # as in the file
    strict = reader("id,age,city\na,1,Rome\n")
    row = next(iter(strict))
    with pytest.raises(InputError, match="input:2: unknown category"):
        strict.refuse_row(row, "unknown category 'Rome'")


def test_header_problems_stop_the_run() -> None:
    with pytest.raises(InputError, match="lacks column"):
        list(reader("name,age\nx,1\n"))
    with pytest.raises(InputError, match="repeated"):
        list(reader("id,id\nx,1\n"))


def test_writer_round_trip_csv_and_jsonl() -> None:
    rows = [{"id": "a", "age": "[1,2]", "city": "Saint-Denis, FR", "n": 2.0, "x": None}]
    for fmt in ("csv", "jsonl"):
        buf = io.StringIO()
        with RowWriter(buf, fmt, ["id", "age", "city", "n", "x"]) as w:
            for r in rows:
                w.write(r)
        back = read_rows(io.StringIO(buf.getvalue()), fmt)
        assert back[0]["city"] == "Saint-Denis, FR" and back[0]["age"] == "[1,2]"
        assert back[0]["x"] is None


def test_a_row_with_several_bad_numbers_names_the_first_given_in_every_run() -> None:
    """The numeric columns are checked in the order given (not a set's, which changes with the
    hash seed from one process to the next)."""
    import subprocess
    import sys

    code = ("import io; from streamanon.io.rows import RowReader; "
            "rd = RowReader(io.StringIO('id,a,b,c\\nx,1,p,q\\n'), 'csv', numeric=['c', 'b', 'a'],"
            " on_error='skip'); list(rd); print(rd.rejected[0].reason)")
    reasons = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env={"PYTHONHASHSEED": str(seed)}).stdout.strip()
               for seed in range(6)}
    assert reasons == {"field c is not a number: 'q'"}

"""The C parser's lane (:mod:`streamanon.io.lane`) against the Python reader and Arrow's lane:
it accepts only what the reader accepts, reads it identically (times bit for bit as
``float``), gives the same columns as Arrow's lane wherever both take a chunk, and its writer
writes what Arrow's writes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.io import _native, lane
from streamanon.io.fastcsv import parse_clean_chunk, parse_clean_rows, published_csv
from streamanon.zanon.operator import hierarchy_levels
from tests.io.test_fastcsv import via_python

pytestmark = pytest.mark.skipif(_native.load() is None,
                                reason=f"no C build: {_native.unavailable}")

FIELD = st.text("abcxyz*_.-0123456789éü日 \t", min_size=0, max_size=6)
DIGITS = st.text("0123456789", min_size=1, max_size=24)
TIME = st.one_of(
    st.floats(-1e10, 1e10, allow_nan=False).map(repr),
    st.integers(-10**9, 10**9).map(str),
    st.tuples(st.sampled_from(["", "-"]), DIGITS, st.sampled_from(["", "."]),
              st.text("0123456789", max_size=26)).map("".join),
    st.sampled_from(["nan", "inf", "-1", "1e3", "2016-01-01T00:00:00", "x", "", ".5", "5.",
                     "-.5", "-", ".", "+5", "1_0", "0x10", "١٢"]),
)
LINE = st.one_of(
    st.tuples(TIME, FIELD, FIELD).map(",".join),
    st.sampled_from(["", "1,a", "1,a,b,c", '1,"a,b",c', " 1,a,b", "1,a\tb,c", "1,a,b\r"]),
)


def rows_of(cols) -> list[tuple]:
    return list(zip(cols.t.tolist(), cols.t_texts(), cols.users(), cols.values(),
                    strict=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, min_size=1, max_size=25))
def test_the_c_lane_accepts_only_what_python_accepts_identically(lines):
    text = "\n".join(lines)
    cols = lane.parse_native_chunk(text.encode(), -np.inf, 4096)
    if cols is None:
        return
    python = via_python("t,u,a\n" + text + "\n")
    got = [(*row, line) for row, line in zip(rows_of(cols), range(2, 2 + len(cols.t)),
                                             strict=True)]
    assert got == python
    assert all(a.hex() == b.hex() for a, b in zip(cols.t.tolist(),
                                                     (r[0] for r in python), strict=True))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(TIME, FIELD, FIELD), min_size=1, max_size=25),
       st.sampled_from([",", ";", "\t"]))
def test_where_both_lanes_take_a_chunk_they_give_the_same_columns(rows, delimiter):
    data = "\n".join(delimiter.join(r) for r in rows).encode()
    native = lane.parse_native_chunk(data, -np.inf, 4096, delimiter)
    arrow = parse_clean_chunk(data, -np.inf, 4096, delimiter)
    if native is None or arrow is None:
        # the C parser takes a subset: times of its strict form; Arrow takes the others
        assert native is None or arrow is not None
        return
    assert rows_of(native) == rows_of(arrow)
    assert np.array_equal(native.t, arrow.t)
    (nu, nun, na, nan_), (au, aun, aa, aan) = native.codes(), arrow.codes()
    assert (nun, nan_) == (aun, aan) and np.array_equal(nu, au) and np.array_equal(na, aa)
    assert rows_of(native.as_arrow()) == rows_of(arrow)


@settings(max_examples=500, deadline=None)
@given(st.tuples(st.sampled_from(["", "-"]), DIGITS, st.sampled_from(["", "."]),
                 st.text("0123456789", max_size=30)).map("".join))
def test_a_time_is_float_of_its_text_bit_for_bit(text):
    """Up to 15 significant digits and 22 decimals the parser divides in IEEE arithmetic;
    beyond it asks Python's own parser: either way ``float(text)``."""
    cols = lane.parse_native_chunk(f"{text},u,a".encode(), -np.inf, 4096)
    assert cols is not None
    assert cols.t[0].hex() == float(text).hex()


@pytest.mark.parametrize("data", [
    b"1,a,x\n2.5,bb", b"1,a,x,\n2,b,x", b"1e5,a,x", b"1,,x", b"1,a,", b",a,x", b"-,a,x",
    b"1", b"1,a", b"1,a,x\n", b"1,a\n,x", b"1,\xff,x", b"1,aaaaa,x", b"+1,a,x", b"1, a,x",
    b"1,a,x \n2,a,x", b'1,"a",x', b"1,a,x\r\n2,a,x", b"nan,a,x", b"2,a,x\n1,a,x", b"",
    b"1\t,a,x", b"1,a,x\n\n2,a,x",
])
def test_what_the_c_lane_does_not_take(data):
    """Not clean (the readers then refuse or strip, line by line), or not of the C parser's
    strict form (Arrow's lane may still take it): ``None``."""
    assert lane.parse_native_chunk(data, -np.inf, 4) is None


def test_a_time_before_the_readers_clock_is_not_taken():
    assert lane.parse_native_chunk(b"5,a,x", 6.0, 4) is None
    assert lane.parse_native_chunk(b"5,a,x", 5.0, 4) is not None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.text("abcé日", min_size=1, max_size=4),
                          st.lists(st.text("xyzö", min_size=0, max_size=3), min_size=1,
                                   max_size=3).map("*".join).filter(bool)),
                min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_the_c_writer_writes_what_arrows_writes(rows, rnd):
    """Chosen rows, each with its own value or one of its value's coarser levels."""
    rows.sort()
    data = "\n".join(f"{t},{u},{a}" for t, u, a in rows).encode()
    native = lane.parse_native_chunk(data, -np.inf, 4096)
    arrow = parse_clean_chunk(data, -np.inf, 4096)
    assert native is not None and arrow is not None
    idx = np.array(sorted(rnd.sample(range(len(rows)), rnd.randint(0, len(rows)))),
                   dtype=np.int64)
    own = native.codes()[2][idx].astype(np.int64)
    assert bytes(native.published_csv(idx, own, None)) == bytes(
        published_csv(arrow, idx, own, None))
    vocab = sorted({lv for _, _, a in rows for lv in hierarchy_levels(a)})
    levels = [rnd.choice(hierarchy_levels(rows[i][2])) for i in idx.tolist()]
    codes = np.array([vocab.index(x) for x in levels], dtype=np.int64)
    assert bytes(native.published_csv(idx, codes, vocab)) == bytes(
        published_csv(arrow, idx, codes, vocab))


def test_other_delimiters_are_written_by_arrows_writer():
    native = lane.parse_native_chunk(b"1;a;x\n2;b;y", -np.inf, 8, ";")
    assert native is not None
    assert bytes(native.published_csv(np.array([1]), np.array([0]), ["EU"])) == b"2,b,EU\n"


def test_turned_off_the_c_lane_takes_nothing(monkeypatch):
    monkeypatch.setenv("STREAMANON_NATIVE", "0")
    monkeypatch.setattr(lane, "_NATIVE", [])
    assert lane.parse_native_chunk(b"1,a,x", -np.inf, 8) is None
    assert _native.unavailable == "STREAMANON_NATIVE=0"


NUMBER = st.one_of(st.floats(-1e9, 1e9, allow_nan=False).map(repr), st.integers().map(str),
                   st.sampled_from(["", " 1", "1e5", "+2", ".5", "5.", "-0", "nan", "inf",
                                    "1_0", "x"]))
TEXT = st.text("ab é日\t*.-0123", max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TEXT, NUMBER, TEXT, NUMBER), min_size=1, max_size=25),
       st.sampled_from([",", ";"]), st.integers(4, 60),
       st.sampled_from([["n1", "n2"], ["n2"], []]))
def test_where_both_lanes_take_a_block_of_rows_they_read_it_alike(rows, delimiter, max_len,
                                                                   numeric):
    header = ["t1", "n1", "t2", "n2"]
    data = "\n".join(delimiter.join(r) for r in rows).encode()
    native = lane.parse_native_rows(data, header, set(numeric), max_len, delimiter)
    arrow = parse_clean_rows(data, header, set(numeric), max_len, delimiter)
    if native is None:
        return  # not clean, or a number not of the C parser's form: Arrow decides
    assert arrow is not None  # the C parser takes no block Arrow's lane refuses
    assert (native.n, native.texts) == (arrow.n, arrow.texts)
    assert native.numbers.keys() == arrow.numbers.keys()
    for name, values in native.numbers.items():
        assert [x.hex() for x in values] == [x.hex() for x in arrow.numbers[name]]
    assert native.starts.tolist() == arrow.starts.tolist()


@pytest.mark.parametrize("data", [b"a,1\nb", b"a,1,\nb,2", b"a,\nb,2", b"a,1\n\nb,2",
                                  b"a,1e3", b"a,1\n", b"\xff,1", b"a,1" + b"0" * 40, b"a,nan"])
def test_what_the_c_lane_does_not_take_as_rows(data):
    assert lane.parse_native_rows(data, ["t", "n"], {"n"}, 20) is None


def test_the_c_writer_refuses_rows_and_codes_out_of_range():
    """Offsets it is given are checked before any byte is copied (no read past a buffer)."""
    m = _native.load()
    data, ls, vs = b"1,a,x", np.array([0], np.int32), np.array([4], np.int32)
    ok = m.write_rows(data, ls, vs, np.array([0]), np.array([0]), b"xy", np.array([0, 2]))
    assert ok == b"1,a,xy\n"
    for idx, codes, offsets in [([1], [0], [0, 2]), ([0], [1], [0, 2]), ([0], [0], [0, 3]),
                                ([0], [0], [2, 1]), ([-1], [0], [0, 2])]:
        with pytest.raises(ValueError, match=r"out of range|inconsistent"):
            m.write_rows(data, ls, vs, np.array(idx), np.array(codes), b"xy",
                         np.array(offsets))
    with pytest.raises(ValueError, match="out of range"):
        m.write_rows(data, ls, np.array([9], np.int32), np.array([0]), np.array([0]), b"xy",
                     np.array([0, 2]))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 127), st.integers(-1, 300),
       st.binary(min_size=1, max_size=6))
def test_the_c_parsers_take_any_bytes_without_harm(data, delimiter, max_len, kinds):
    """Arbitrary bytes, delimiters and limits: an answer or ``None``, never a crash."""
    m = _native.load()
    got = m.parse_tua(data, delimiter, max_len)
    assert got is None or len(got[0]) == data.count(b"\n") + 1
    rows = m.parse_rows(data, delimiter, kinds, max_len)
    assert rows is None or len(rows[0]) == data.count(b"\n") + 1


PLAIN = st.text("abcxyz*_.-0123456789 []", max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(PLAIN, min_size=4, max_size=4), min_size=1, max_size=8),
       st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True),
       st.lists(PLAIN | st.just('"[1,3]"'), min_size=5, max_size=5))
def test_the_c_class_writer_writes_the_joined_lines(rows, picks, consts):
    """A released class's lines from the C writer: per row its picked fields between the
    class's pieces, as joining them in Python gives."""
    pieces = [("," if i else "") + consts[i] + ("," if i < len(picks) else "")
              for i in range(len(picks) + 1)]
    fields = [tuple(r) for r in rows]
    want = "".join("".join(p + (f[k] if j < len(picks) else "")
                           for j, (p, k) in enumerate(zip(pieces, [*picks, 0], strict=True)))
                   + "\n" for f in fields)
    assert lane.class_lines(fields, picks, pieces) == want


@pytest.mark.parametrize("field", ["a,b", 'a"b', "a\nb", "a\rb", "é", None, 1.5])
def test_the_c_class_writer_leaves_a_field_that_may_need_quoting(field):
    """A field that is not plain ASCII text (it may need quoting, or is not text) sends the
    class back to the Python writer: the C writer answers None."""
    assert lane.class_lines([("1", "x"), ("2", field)], [0, 1], ["", ",", ""]) is None
    assert lane.class_lines([("1", "x")], [0, 1], ["", ",é,", ""]) is None  # a piece
    assert lane.class_lines([("1", "x")], [0, 1], ["", ",ok,", ""]) == "1,ok,x\n"

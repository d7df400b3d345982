"""The Arrow lane and the Python reader agree on every chunk the lane accepts."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streamanon.io import iter_batches
from streamanon.io.fastcsv import parse_clean_chunk

FIELD = st.text("abcxyz*_.-0123456789é", min_size=0, max_size=6)
TIME = st.one_of(st.floats(0, 1e10, allow_nan=False).map(repr),
                 st.integers(0, 10**9).map(str),
                 st.sampled_from(["nan", "inf", "-1", "1e3", "2016-01-01T00:00:00", "x", ""]))
LINE = st.one_of(
    st.tuples(TIME, FIELD, FIELD).map(",".join),
    st.sampled_from(["", "1,a", "1,a,b,c", '1,"a,b",c', " 1,a,b", "1,a\tb,c"]),
)


def via_python(text: str):
    out = []
    for batch in iter_batches(io.StringIO(text), "csv", on_error="skip"):
        out.extend(zip(batch.t.tolist(), batch.t_text, batch.u, batch.a, batch.line,
                       strict=True))
    return out


@given(st.lists(LINE, min_size=1, max_size=25))
def test_lane_accepts_only_what_python_accepts_identically(lines):
    text = "\n".join(lines)
    cols = parse_clean_chunk(text.encode(), -np.inf, 4096)
    python = via_python("t,u,a\n" + text + "\n")
    if cols is None:
        return
    u = cols.u.dictionary.take(cols.u.indices).to_pylist()
    a = cols.a.dictionary.take(cols.a.indices).to_pylist()
    fast = list(zip(cols.t.tolist(), cols.t_text.to_pylist(), u, a, range(2, 2 + len(u)),
                    strict=True))
    assert fast == python  # the lane never accepts a line the reader would reject or alter


@given(st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False), FIELD.filter(bool),
                          FIELD.filter(bool)), min_size=1, max_size=40))
def test_file_reading_takes_the_lane_and_matches(tmp_path_factory, rows):
    rows.sort()
    text = "t,u,a\n" + "".join(f"{t!r},{u},{a}\n" for t, u, a in rows)
    path = tmp_path_factory.mktemp("lane") / "in.csv"
    path.write_text(text, encoding="utf-8")
    batches = list(iter_batches(path))
    assert all(b.lane is not None for b in batches)  # clean input: the fast lane
    got = [(t, tt, u, a, ln) for b in batches
           for t, tt, u, a, ln in zip(b.t.tolist(), b.t_text, b.u, b.a, b.line, strict=True)]
    assert got == via_python(text)


@given(st.lists(LINE, min_size=1, max_size=60), st.integers(8, 200))
def test_mixed_clean_and_dirty_chunks_read_like_text(tmp_path_factory, lines, chunk):
    """Files are read in byte chunks, some through the lane and some not: same result."""
    import pytest

    import streamanon.io.readers as readers

    text = "t,u,a\n" + "\n".join(lines) + "\n"
    path = tmp_path_factory.mktemp("mixed") / "in.csv"
    path.write_bytes(text.encode())
    mp = pytest.MonkeyPatch()
    mp.setattr(readers, "_CHUNK_CHARS", chunk)
    try:
        got, rejected = [], []
        for b in iter_batches(path, on_error="skip", rejects=rejected.append):
            got.extend(zip(b.t.tolist(), b.t_text, b.u, b.a, b.line, strict=True))
    finally:
        mp.undo()
    want_rejected = []
    want = []
    for b in iter_batches(io.StringIO(text), "csv", on_error="skip",
                          rejects=want_rejected.append):
        want.extend(zip(b.t.tolist(), b.t_text, b.u, b.a, b.line, strict=True))
    assert got == want
    assert [(r.line, r.reason) for r in rejected] == [(r.line, r.reason) for r in want_rejected]


def test_a_signal_during_an_arrow_read_goes_to_pythons_handler() -> None:
    """With the lane loaded, Arrow leaves SIGINT to Python: the read is not cancelled and the
    handler runs once (pyarrow's own handler passes the signal to a thread of its own, and
    drops it when the call ends before that thread runs)."""
    import os
    import signal

    import pyarrow as pa
    import pyarrow.csv as pacsv

    calls: list[int] = []

    class Source(io.RawIOBase):
        """Lines to read; the first read sends this process a SIGINT."""

        def __init__(self) -> None:
            self.data = io.BytesIO(b"1,a,x\n" * 1000)
            self.sent = False

        def readable(self) -> bool:
            return True

        def readinto(self, buf) -> int:  # type: ignore[no-untyped-def]
            if not self.sent:
                self.sent = True
                os.kill(os.getpid(), signal.SIGINT)
            return self.data.readinto(buf)

    old = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    try:
        table = pacsv.read_csv(Source(), read_options=pacsv.ReadOptions(
            column_names=["t", "u", "a"], use_threads=False))
        for _ in range(100):  # the handler runs in the main thread, at its next instruction
            if calls:
                break
    finally:
        signal.signal(signal.SIGINT, old)
    assert isinstance(table, pa.Table) and table.num_rows == 1000
    assert calls == [signal.SIGINT]

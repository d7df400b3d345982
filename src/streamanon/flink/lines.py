"""Line-at-a-time validation and z outcomes, shared by the Flink functions and the benchmark's
pure-Python socket operator (no PyFlink here).

:class:`LineValidator` numbers lines and validates each with streamanon's own reader
(:mod:`streamanon.io.readers`), so a line-at-a-time path rejects and re-stamps exactly what
``streamanon z`` does on a file. Its whole state is :meth:`LineValidator.state` (a small tuple)
so that a Flink function can keep it in Flink state.

>>> v = LineValidator("csv")
>>> v.feed("t,u,a")
(['1\\tH'], None)
>>> v.feed("5,alice,EU*FR")
([], ('EU', 2, 5.0, '5', 'alice', 'EU*FR', False))
>>> v.feed("oops")[0]
['3\\tR\\t["oops", "expected 3 comma-separated fields, got 1"]']
"""

from __future__ import annotations

import math

from streamanon.flink.outcomes import (
    BLANK,
    HEADER,
    marker_line,
    published_line,
    rejected_line,
    suppressed_line,
)
from streamanon.io.policy import OnError
from streamanon.io.readers import DEFAULT_MAX_VALUE_LEN, _Reader
from streamanon.records import Record, Suppressed
from streamanon.zanon.operator import SEPARATOR, ZAnonymizer

#: a valid record on its way to the z operator: (key, seq, t, t_text, u, a, restamped)
ZInput = tuple[str, int, float, str, str, str, bool]

_PLAIN_NUMBER = frozenset("0123456789.-+eE")


class LineValidator:
    """Number lines and validate them; meta outcome lines aside, valid records out."""

    def __init__(
        self,
        fmt: str = "csv",
        *,
        time_tolerance: float = 0.0,
        max_value_len: int = DEFAULT_MAX_VALUE_LEN,
        separator: str = SEPARATOR,
        source_name: str = "input",
    ) -> None:
        self.fmt = fmt
        self.separator = separator
        self.max_value_len = max_value_len
        self.fast = True
        self.line = 0
        # on_error=skip here: the policy is applied at the merge, which sees every rejection
        self.reader = _Reader(fmt, OnError.skip, None, time_tolerance, max_value_len,
                              source_name)

    def state(self) -> tuple:
        r = self.reader
        return self.line, r.clock, r.header, r.ncols

    def restore(self, state: tuple) -> None:
        r = self.reader
        self.line, r.clock, r.header, r.ncols = state

    def feed(self, text: str) -> tuple[list[str], ZInput | None]:
        """Outcome lines that need no operator (header, blank, rejected), and the record."""
        reader = self.reader
        self.line += 1
        seq = self.line
        text = text.removesuffix("\r")  # as the file reader reads CRLF line ends
        if not text.strip():
            return [marker_line(seq, BLANK)], None
        if self.fmt == "csv" and reader.header is None and not reader.take_header(seq, text)[1]:
            return [marker_line(seq, HEADER)], None
        if self.fast and self.fmt == "csv":
            record = self._plain_csv(seq, text)
            if record is not None:
                return [], record
        cols = reader.csv_chunk(seq, text) if self.fmt == "csv" else reader.jsonl_chunk(seq,
                                                                                         text)
        batch, rejects = reader.finish(cols)
        meta = [rejected_line(r) for r in rejects]
        if not len(batch):
            return meta, None
        a = batch.a[0]
        return meta, (a.split(self.separator, 1)[0], seq, float(batch.t[0]), batch.t_text[0],
                      batch.u[0], a, batch.restamped > 0)


    def _plain_csv(self, seq: int, text: str) -> ZInput | None:
        """The common case without the reader's machinery: ``t,u,a`` with a plain number for
        ``t``, no quoting or padding, nothing late, empty or oversized. None: let the reader
        decide (it accepts or rejects exactly as on a file; tested to agree)."""
        reader = self.reader
        if reader.header != (0, 1, 2) or reader.ncols != 3 or text.count(",") != 2 or any(
                c in text for c in '" \t\r'):
            return None
        t_text, u, a = text.split(",")
        if not (t_text and u and a) or not _PLAIN_NUMBER.issuperset(t_text):
            return None
        if len(u) > self.max_value_len or len(a) > self.max_value_len:
            return None
        try:
            t = float(t_text)
        except ValueError:
            return None
        if not (math.isfinite(t) and t >= reader.clock):
            return None
        reader.clock = t
        return a.split(self.separator, 1)[0], seq, t, t_text, u, a, False


def z_outcome(op: ZAnonymizer, record: ZInput) -> str:
    """Apply the z rule (the operator itself) to one record; its outcome line."""
    _, seq, t, t_text, u, a, restamped = record
    out = op.process_one(Record(t, u, a, t_text))
    if isinstance(out, Suppressed):
        return suppressed_line(seq, restamped)
    return published_line(seq, out.a.count(op.separator), restamped, t_text, u, out.a)

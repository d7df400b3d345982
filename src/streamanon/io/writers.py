"""Write published ``(t, u, a)`` records as CSV (header ``t,u,a``) or JSON Lines.

Timestamps are written as the input wrote them, so an output row can be matched to its input
line by anyone.

>>> import io
>>> buf = io.StringIO()
>>> with RecordWriter(buf, "csv") as w:
...     w.write(Record(1.0, "alice", "x", "1"))
...     w.write_columns(["2"], ["bob,jr"], ["x*y"])
>>> print(buf.getvalue(), end="")
t,u,a
1,alice,x
2,"bob,jr",x*y
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self, TextIO

import numpy as np

from streamanon.errors import ConfigError
from streamanon.io.readers import RecordBatch
from streamanon.records import Record

_SPECIAL = (",", '"', "\n", "\r")


def _needs_quoting(values: Sequence[str]) -> bool:
    joined = "".join(values)
    return any(ch in joined for ch in _SPECIAL)


def open_text(target: str | Path | TextIO) -> tuple[TextIO, bool]:
    """The text stream to write ``target`` to, and whether the caller owns (closes) it: a path
    is created (UTF-8, newlines untranslated), ``-`` is stdout, an open stream is used as is."""
    if not isinstance(target, str | Path):
        return target, False
    if str(target) == "-":
        return sys.stdout, False
    return open(target, "w", encoding="utf-8", newline=""), True


class TextSink:
    """An output text stream: a path (created), ``-`` (stdout) or an open stream (not closed).

    The base of every writer, so that opening, flushing and closing live in one place.
    """

    def __init__(self, target: str | Path | TextIO, fmt: str) -> None:
        if fmt not in ("csv", "jsonl"):
            raise ConfigError(f"unknown format {fmt!r} (use csv or jsonl)")
        self.fmt = fmt
        self.count = 0
        self._fh, self._own = open_text(target)
        self._csv = csv.writer(self._fh, lineterminator="\n")

    def _binary(self) -> BinaryIO | None:
        """The byte stream under the text stream, when bytes written there are exactly what
        writing their UTF-8 text would write (no newline translation, UTF-8 encoding); the
        text written so far is flushed first. ``None`` otherwise (a ``StringIO``, say)."""
        raw = getattr(self._fh, "buffer", None)
        encoding = getattr(self._fh, "encoding", None)
        if raw is None or not encoding or codecs.lookup(encoding).name != "utf-8":
            return None
        if not self._own and os.linesep != "\n":  # pragma: no cover - Windows consoles
            return None
        self._fh.flush()
        return raw  # type: ignore[no-any-return]

    def write_bytes(self, data: bytes | memoryview) -> None:
        """Write UTF-8 encoded text as it is (the fast lanes' output), without decoding it
        when the stream allows (:meth:`_binary`)."""
        raw = self._binary()
        if raw is not None:
            raw.write(data)
        else:
            self._fh.write(bytes(data).decode("utf-8"))

    def close(self) -> None:
        if self._own:
            self._fh.close()
        else:
            self._fh.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class RecordWriter(TextSink):
    """A sink for published ``(t, u, a)`` records."""

    def __init__(self, target: str | Path | TextIO, fmt: str = "csv") -> None:
        super().__init__(target, fmt)
        if fmt == "csv":
            self._fh.write("t,u,a\n")

    def write(self, record: Record) -> None:
        self.write_columns([record.time_text()], [record.u], [record.a])

    def write_columns(self, t_text: Sequence[str], u: Sequence[str], a: Sequence[str]) -> None:
        """Write many rows at once (the fast path for batch processing)."""
        if not u:
            return
        self.count += len(u)
        if self.fmt == "jsonl":
            for tt, uu, aa in zip(t_text, u, a, strict=True):
                self._fh.write(json.dumps({"t": _json_time(tt), "u": uu, "a": aa}) + "\n")
        elif _needs_quoting(u) or _needs_quoting(a) or _needs_quoting(t_text):
            self._csv.writerows(zip(t_text, u, a, strict=True))
        else:
            self._fh.write("\n".join(map(",".join, zip(t_text, u, a, strict=True))))
            self._fh.write("\n")

    def write_selected(
        self, batch: RecordBatch, idx: np.ndarray, a_codes: np.ndarray, a_names: Sequence[str]
    ) -> None:
        """Write rows ``idx`` of ``batch`` with values ``a_names[a_codes]`` (batch fast path)."""
        if self.fmt == "csv" and batch.lane is not None:
            self.count += len(idx)
            self.write_bytes(memoryview(_published_csv(batch, idx, a_codes, a_names)))
            return
        rows = idx.tolist()
        t_text, u = batch.t_text, batch.u
        self.write_columns([t_text[i] for i in rows], [u[i] for i in rows],
                           [a_names[c] for c in a_codes.tolist()])


def _published_csv(batch: RecordBatch, idx: np.ndarray, a_codes: np.ndarray,
                   a_names: Sequence[str]) -> memoryview:
    """The fast lane's CSV bytes of rows ``idx`` (values not generalized reuse the chunk's
    own names)."""
    assert batch.lane is not None
    own = a_names is batch.codes()[3]
    return memoryview(batch.lane.published_csv(idx, a_codes, None if own else a_names))


def selected_text(batch: RecordBatch, idx: np.ndarray, a_codes: np.ndarray,
                  a_names: Sequence[str], fmt: str = "csv") -> str:
    """The lines :meth:`RecordWriter.write_selected` writes (no header), each ending in a
    newline: for sinks that take text per batch (files, Kafka messages).

    Args:
        batch: the batch the records are taken from.
        idx: the indices in ``batch`` of the records written.
        a_codes: per written record, the code of its published value into ``a_names``.
        a_names: the published values the codes index.
        fmt: the output format (``csv`` or ``jsonl``).

    >>> import io
    >>> from streamanon.io.readers import RecordParser
    >>> batch, _ = RecordParser(header=(0, 1, 2)).parse(1, "1,alice,x\\n2,bob,y")
    >>> selected_text(batch, np.array([1]), np.array([0]), ["EU"], "jsonl")
    '{"t": 2, "u": "bob", "a": "EU"}\\n'
    """
    if fmt == "csv" and batch.lane is not None:
        return bytes(_published_csv(batch, idx, a_codes, a_names)).decode("utf-8")
    buf = io.StringIO()
    writer = RecordWriter(buf, fmt)
    if fmt == "csv":
        buf.seek(0)
        buf.truncate()
    writer.write_selected(batch, idx, a_codes, a_names)
    return buf.getvalue()


def selected_data(batch: RecordBatch, idx: np.ndarray, a_codes: np.ndarray,
                  a_names: Sequence[str], fmt: str = "csv") -> str | memoryview:
    """:func:`selected_text`, except that the fast lane's CSV stays the UTF-8 bytes its writer
    wrote: a file sink writes them as they are, without decoding 40 MB of output to a string
    and encoding it back (the pipeline's sinks take either).

    Args:
        batch: the batch the records are taken from.
        idx: the indices in ``batch`` of the records written.
        a_codes: per written record, the code of its published value into ``a_names``.
        a_names: the published values the codes index.
        fmt: the output format (``csv`` or ``jsonl``).

    >>> from streamanon.io.readers import RecordParser
    >>> batch, _ = RecordParser(header=(0, 1, 2)).parse(1, "1,alice,x\\n2,bob,y")
    >>> selected_data(batch, np.array([1]), np.array([0]), ["EU"])
    '2,bob,EU\\n'
    """
    if fmt == "csv" and batch.lane is not None:
        return _published_csv(batch, idx, a_codes, a_names)
    return selected_text(batch, idx, a_codes, a_names, fmt)


def _json_time(text: str) -> float | int | str:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text

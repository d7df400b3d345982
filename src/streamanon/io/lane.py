"""The fast lane for clean ``t,u,a`` chunks: its rules, and the C parser's columns.

A chunk of ``t,u,a`` lines takes the fast lane when it is provably clean (see
docs/design/pipeline.md): first the C parser of :mod:`streamanon.io._native`, which needs
neither pyarrow nor its import (about a fifth of a short run's CPU), then Arrow's reader
(:mod:`streamanon.io.fastcsv`) for a chunk the C parser does not take (a time in another
form, a delimiter of more than one byte, no C compiler). Either way the chunk must pass the
same rules (:mod:`streamanon.io.clean`), and comes out as *lane columns*
(:class:`LaneColumns`: :class:`NativeColumns` here, ``fastcsv.ArrowColumns`` there) that
give the same times, codes, lists and CSV bytes.

Design: docs/design/pipeline.md
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from streamanon.io.clean import RowColumns, clean_names, clean_times, encoded


class LaneColumns(Protocol):
    """A clean chunk's columns, as the readers, writers and Flink jobs use them."""

    t: np.ndarray

    def codes(self) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
        """``(u_codes, u_names, a_codes, a_names)``: users and values as codes."""

    def t_texts(self) -> list[str]:
        """The times as written in the input."""

    def users(self) -> list[str]:
        """The users, one per row."""

    def values(self) -> list[str]:
        """The values, one per row."""

    def published_csv(self, idx: np.ndarray, a_codes: np.ndarray,
                      a_names: Sequence[str] | None) -> bytes | memoryview:
        """CSV bytes (``t,u,a\\n`` per row) of rows ``idx`` with values ``a_names[a_codes]``
        (``None``: the chunk's own values, ``a_codes`` their codes)."""

    def as_arrow(self) -> Any:
        """The same columns as ``fastcsv.ArrowColumns`` (Arrow arrays)."""


#: the C parser (:mod:`streamanon.io._native`), once looked for: ``[module]``, ``[None]``
#: when it is unavailable (Arrow's reader serves)
_NATIVE: list[Any] = []


def _parser() -> Any:
    if not _NATIVE:
        from streamanon.io import _native

        _NATIVE.append(_native.load())
    return _NATIVE[0]


class NativeColumns:
    """A clean chunk as the C parser reads it: times, time texts, users and values as codes
    into their distinct names and, with commas, the chunk's bytes and where each line and
    its value start (a published row is then its line up to the value, then the published
    value: :meth:`published_csv`)."""

    __slots__ = ("_a", "_a_names", "_line_starts", "_source", "_t_chars", "_t_offsets", "_u",
                 "_u_names", "_value_starts", "t")

    def __init__(self, parsed: tuple[Any, ...], source: bytes | None) -> None:
        (self.t, self._t_offsets, self._t_chars, self._u, self._u_names, self._a,
         self._a_names, line_starts, value_starts) = parsed
        self._source = source
        self._line_starts = None if source is None else line_starts
        self._value_starts = None if source is None else value_starts

    def codes(self) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
        return self._u, self._u_names, self._a, self._a_names

    def t_texts(self) -> list[str]:
        cuts = self._t_offsets.tolist()
        text = self._t_chars.decode("ascii")  # times are digits, '-' and '.'
        return list(map(text.__getitem__, map(slice, cuts[:-1], cuts[1:])))

    def users(self) -> list[str]:
        return list(map(self._u_names.__getitem__, self._u.tolist()))

    def values(self) -> list[str]:
        return list(map(self._a_names.__getitem__, self._a.tolist()))

    def published_csv(self, idx: np.ndarray, a_codes: np.ndarray,
                      a_names: Sequence[str] | None) -> bytes | memoryview:
        if self._source is None:  # fields not separated by commas: Arrow's writer
            from streamanon.io.fastcsv import published_csv

            return published_csv(self.as_arrow(), idx, a_codes,
                                 None if a_names is None else list(a_names))
        blob, offsets = encoded(self._a_names if a_names is None else a_names)
        return _parser().write_rows(  # type: ignore[no-any-return]
            self._source, self._line_starts, self._value_starts,
            np.ascontiguousarray(idx, dtype=np.int64),
            np.ascontiguousarray(a_codes, dtype=np.int64), blob, offsets)

    def as_arrow(self) -> Any:
        from streamanon.io.fastcsv import arrow_columns

        return arrow_columns(self.t, self._t_offsets, self._t_chars, self._u, self._u_names,
                             self._a, self._a_names)


def parse_native_chunk(data: bytes, clock: float, max_len: int, delimiter: str = ","
                       ) -> NativeColumns | None:
    """``data`` (whole lines ``t,u,a`` without the final newline, fields separated by
    ``delimiter``) by the C parser, or ``None``: not clean by the lane's rules, or not of the
    C parser's strict form, or no C parser (then Arrow's reader tries)."""
    parser = _parser()
    if (parser is None or not data or data.endswith(b"\n") or b'"' in data or b"\r" in data
            or len(delimiter.encode()) != 1):
        return None
    parsed = parser.parse_tua(data, ord(delimiter), max_len)
    if parsed is None:
        return None
    cols = NativeColumns(parsed, data if delimiter == "," else None)
    if not (clean_names(parsed[4], max_len) and clean_names(parsed[6], max_len)
            and clean_times(cols.t, clock)):
        return None
    return cols


def class_lines(fields: list[tuple[Any, ...]], picks: Sequence[int], pieces: Sequence[str]
                ) -> str | None:
    """Rows of one released class as CSV lines by the C writer: per row, ``pieces[0]``,
    ``row[picks[0]]``, ``pieces[1]``, ..., ``pieces[k]`` and a newline (the pieces hold the
    class's values and the commas); ``None`` when a picked field is not plain ASCII text
    (no comma, quote nor line break: it may need quoting), a piece is not ASCII, or there is
    no C writer (then the caller writes the rows in Python, with the same bytes).

    >>> class_lines([("7", 1.5, "x"), ("8", 2.5, "y")], [0, 2], ["", ',"[1,3]",', ""])
    '7,"[1,3]",x\\n8,"[1,3]",y\\n'
    >>> class_lines([("7", 1.5, "a,b")], [0, 2], ["", ",", ""]) is None  # needs quoting
    True
    """
    writer = _parser()
    if writer is None:
        return None
    return writer.class_lines(fields, tuple(picks), tuple(pieces))  # type: ignore[no-any-return]


def parse_native_rows(data: bytes, header: Sequence[str], numeric: set[str], max_len: int,
                      delimiter: str = ",") -> RowColumns | None:
    """``data`` (whole lines, header excluded, without the final newline) as rows of
    ``header``'s columns by the C parser, as ``fastcsv.parse_clean_rows`` reads them, or
    ``None`` (not clean, or a number not of the C parser's strict form, or no C parser: then
    Arrow's reader tries). Lines longer than ``max_len`` bytes are not clean.

    Args:
        data: whole lines of the block, without the header and the final newline.
        header: the input's column names.
        numeric: the columns that must be finite numbers.
        max_len: the longest line accepted, in bytes.
        delimiter: the field delimiter (one character of one byte).
    """
    parser = _parser()
    if (parser is None or not data or len(header) < 2 or b'"' in data or b"\r" in data
            or len(delimiter.encode()) != 1):
        return None
    kinds = bytes(name in numeric for name in header)
    parsed = parser.parse_rows(data, ord(delimiter), kinds, max_len)
    if parsed is None:
        return None
    starts, columns = parsed
    numbers: dict[str, list[float]] = {}
    texts: dict[str, tuple[list[str], list[int]]] = {}
    for name, col in zip(header, columns, strict=True):
        if name in numeric:
            if not bool(np.isfinite(col).all()):
                return None
            numbers[name] = col.tolist()
        else:
            codes, names = col
            texts[name] = (names, codes.tolist())
    return RowColumns(len(starts), numbers, texts, starts)

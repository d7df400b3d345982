"""The fast lanes for clean CSV chunks: Apache Arrow's C++ parser and writer.

Design: docs/design/pipeline.md
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from streamanon.errors import ProtocolError
from streamanon.io.clean import RowColumns, clean_names, clean_times, encoded

try:  # the kernels without pyarrow.compute's generated wrappers (see the module docstring)
    from pyarrow._compute import CastOptions, call_function
except ImportError:  # pragma: no cover - a pyarrow without the private module
    from pyarrow.compute import CastOptions, call_function

# Python's own SIGINT and SIGTERM handlers stay in place during Arrow's calls: pyarrow's would
# hand the signal through a pipe to a thread of its own, and a call that ends before that
# thread runs (a loaded machine) drops it, so a Ctrl-C during a parse would be lost. A parse
# takes at most a chunk's time; the signal is raised as soon as it returns.
pa.enable_signal_handlers(False)

_NAMES = ["t", "u", "a"]
_TEXT = pa.dictionary(pa.int32(), pa.string())
_PARSE = pacsv.ParseOptions(quote_char=False, double_quote=False, escape_char=False,
                            newlines_in_values=False, ignore_empty_lines=False)
_PARSE_BY: dict[str, pacsv.ParseOptions] = {",": _PARSE}


def _parse_options(delimiter: str) -> pacsv.ParseOptions:
    """The parse options for a field delimiter (made once per delimiter)."""
    if delimiter not in _PARSE_BY:
        _PARSE_BY[delimiter] = pacsv.ParseOptions(
            delimiter=delimiter, quote_char=False, double_quote=False, escape_char=False,
            newlines_in_values=False, ignore_empty_lines=False)
    return _PARSE_BY[delimiter]


_CONVERT = pacsv.ConvertOptions(column_types={"t": pa.string(), "u": _TEXT, "a": _TEXT},
                                strings_can_be_null=False, quoted_strings_can_be_null=False)
_TO_FLOAT = CastOptions.safe(pa.float64())
_WRITE = pacsv.WriteOptions(include_header=False, quoting_style="none")


@dataclass
class ArrowColumns:
    """A clean chunk: times, the timestamp text, and dictionary-encoded users and values (the
    lane columns of :mod:`streamanon.io.lane`, as Arrow arrays)."""

    t: np.ndarray
    t_text: pa.Array
    u: pa.DictionaryArray
    a: pa.DictionaryArray

    def codes(self) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
        return (*codes_of(self.u), *codes_of(self.a))

    def t_texts(self) -> list[str]:
        return self.t_text.to_pylist()  # type: ignore[no-any-return]

    def users(self) -> list[str]:
        return self.u.dictionary.take(self.u.indices).to_pylist()  # type: ignore[no-any-return]

    def values(self) -> list[str]:
        return self.a.dictionary.take(self.a.indices).to_pylist()  # type: ignore[no-any-return]

    def published_csv(self, idx: np.ndarray, a_codes: np.ndarray,
                      a_names: Sequence[str] | None) -> pa.Buffer:
        return published_csv(self, idx, a_codes, None if a_names is None else list(a_names))

    def as_arrow(self) -> ArrowColumns:
        return self


#: Lines of a chunk taking the Arrow lane are shorter than twice this: pyarrow 16's CSV parser
#: crashes the process (segmentation fault) on a single row of some 300,000 fields, so a chunk
#: with a long line goes to the Python reader, which refuses the line by number.
_LONG_LINE = 1 << 16


def has_long_line(data: bytes) -> bool:
    """True when some line of ``data`` may be ``2 * _LONG_LINE`` bytes or longer.

    One ``find`` per 64 KiB window (microseconds per chunk): a window without a newline means a
    line at least that long.

    >>> has_long_line(b"1,a,x\\n" * 100_000), has_long_line(b"1," * 100_000)
    (False, True)
    """
    end = len(data) - _LONG_LINE
    return any(data.find(b"\n", pos, pos + _LONG_LINE) < 0 for pos in range(0, end, _LONG_LINE))


_DTYPES = {pa.float64(): np.dtype(np.float64), pa.int32(): np.dtype(np.int32),
           pa.int64(): np.dtype(np.int64)}


def _numpy(arr: pa.Array) -> np.ndarray:
    """A numpy view of a primitive Arrow array without nulls (``Array.to_numpy`` imports
    pandas, 0.2 s, on its first call)."""
    if arr.null_count:  # pragma: no cover - callers check
        raise ProtocolError("an array with nulls has no numpy view")
    dtype = _DTYPES[arr.type]
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr),
                         offset=arr.offset * dtype.itemsize)


def _pylist(arr: pa.Array) -> list[str]:
    """The values of a string array without nulls as Python strings.

    ``to_pylist`` makes an Arrow scalar per value; here the data buffer is decoded once and
    sliced at character offsets (counted in numpy: the bytes that start a UTF-8 character).

    >>> _pylist(_strings(["a", "été", "", "xyz"]).cast(pa.string()))
    ['a', 'été', '', 'xyz']
    """
    n = len(arr)
    if arr.null_count or arr.type != pa.string():  # pragma: no cover - callers read strings
        return arr.to_pylist()  # type: ignore[no-any-return]
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    lo, hi = int(offsets[0]), int(offsets[-1])
    raw = np.frombuffer(arr.buffers()[2], dtype=np.uint8, count=hi - lo, offset=lo) if hi > lo \
        else np.empty(0, dtype=np.uint8)
    text = raw.tobytes().decode("utf-8")
    if len(text) == len(raw):  # ASCII: byte offsets are character offsets
        cuts = (offsets - lo).tolist()
    else:
        starts = np.zeros(len(raw) + 1, dtype=np.int64)
        np.cumsum((raw & 0xC0) != 0x80, out=starts[1:])
        cuts = starts[offsets - lo].tolist()
    return list(map(text.__getitem__, map(slice, cuts[:-1], cuts[1:])))


def _read(data: bytes, names: list[str], convert: pacsv.ConvertOptions, delimiter: str = ","
          ) -> pa.Table | None:
    """``data`` parsed as one block (so that every column is one chunk), or ``None``."""
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False,
                                           block_size=len(data) + 1),
            parse_options=_parse_options(delimiter), convert_options=convert)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return None
    if any(col.num_chunks != 1 for col in table.columns):  # pragma: no cover - one block
        return None
    return table


def _int32(values: np.ndarray) -> pa.Array:
    """An int32 Arrow array over a numpy array."""
    return pa.Array.from_buffers(pa.int32(), len(values), [None, pa.py_buffer(values)])


def _dictionary(names: list[str]) -> pa.Array:
    """A string (int32 offsets) Arrow array of ``names``, as the lane's dictionaries are."""
    blob, offsets = encoded(names, np.int32)
    return pa.Array.from_buffers(pa.string(), len(names),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(blob)])


def arrow_columns(t: np.ndarray, t_offsets: np.ndarray, t_chars: bytes, u: np.ndarray,
                  u_names: list[str], a: np.ndarray, a_names: list[str]) -> ArrowColumns:
    """:class:`ArrowColumns` of the C parser's columns (:class:`streamanon.io.lane.
    NativeColumns`): time texts as offsets into their characters, users and values as int32
    codes into their names.

    Args:
        t: the times.
        t_offsets: where each time text starts in ``t_chars`` (and the end), int32.
        t_chars: the time texts, one after another.
        u: the users' codes into ``u_names`` (int32).
        u_names: the distinct users.
        a: the values' codes into ``a_names`` (int32).
        a_names: the distinct values.
    """
    n = len(u)
    t_text = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(t_offsets),
                                                    pa.py_buffer(t_chars)])
    return ArrowColumns(t, t_text, pa.DictionaryArray.from_arrays(_int32(u), _dictionary(u_names)),
                        pa.DictionaryArray.from_arrays(_int32(a), _dictionary(a_names)))


def parse_clean_chunk(data: bytes, clock: float, max_len: int, delimiter: str = ","
                      ) -> ArrowColumns | None:
    """Parse ``data`` (whole lines ``t,u,a`` without the final newline, fields separated by
    ``delimiter``) with Arrow's reader, or return ``None`` (not clean by the lane's rules,
    :mod:`streamanon.io.lane`)."""
    if not data or data.endswith(b"\n") or b'"' in data or b"\r" in data or has_long_line(data):
        return None
    table = _read(data, _NAMES, _CONVERT, delimiter)
    # one row per line (not counted: counting costs time per chunk): the parser breaks rows only
    # at newlines here, and a blank line is a row of empty fields, refused below with them; a
    # newline at the very end (a blank last line) would be taken as the last row's end, so
    # such data was refused above
    if table is None:
        return None
    t_text, u, a = (table.column(x).chunk(0) for x in _NAMES)
    if not (clean_names(_pylist(u.dictionary), max_len)
            and clean_names(_pylist(a.dictionary), max_len)):
        return None
    try:
        t = _numpy(call_function("cast", [t_text], _TO_FLOAT))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if not clean_times(t, clock):
        return None
    return ArrowColumns(t, t_text, u, a)


def codes_of(col: pa.DictionaryArray) -> tuple[np.ndarray, list[str]]:
    """Integer codes and the names they index."""
    return _numpy(col.indices), _pylist(col.dictionary)


def _indices(values: np.ndarray) -> pa.Array:
    """An int64 Arrow array over a numpy array (``pa.array`` would first import pandas)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def _strings(names: list[str]) -> pa.Array:
    """A string Arrow array from Python strings, built from buffers (no pandas import)."""
    blob, offsets = encoded(names)
    return pa.Array.from_buffers(pa.large_string(), len(names),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(blob)])


def published_csv(
    cols: ArrowColumns, idx: np.ndarray, a_codes: np.ndarray, a_names: list[str] | None
) -> pa.Buffer:
    """CSV bytes (``t,u,a\\n`` per row) of published rows ``idx`` with values
    ``a_names[a_codes]`` (``None``: the chunk's own value dictionary, ``a_codes`` its codes).

    Written by Arrow's CSV writer without quoting: the lane's fields never need it (no comma,
    quote or line break), nor do the levels of its values. Nothing is converted to Python
    strings; the users and values are taken from their dictionaries first (the writer writes
    plain string columns faster than dictionary ones).
    """
    take = _indices(idx)
    names = cols.a.dictionary if a_names is None else _strings(a_names)
    users = call_function("take", [cols.u.dictionary, call_function("take", [cols.u.indices,
                                                                              take])])
    table = pa.Table.from_arrays([call_function("take", [cols.t_text, take]), users,
                                  call_function("take", [names, _indices(a_codes)])],
                                 names=_NAMES)
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, write_options=_WRITE)
    return sink.getvalue()


# -- general rows (CASTLE) -------------------------------------------------------------------
def parse_clean_rows(data: bytes, header: list[str], numeric: set[str], max_len: int,
                     delimiter: str = ",") -> RowColumns | None:
    """Parse ``data`` (whole lines, header excluded, without the final newline, fields
    separated by ``delimiter``) as rows of ``header``'s columns, or return ``None`` when the
    chunk is not provably clean (see the module docstring); numeric columns must all be
    finite numbers.

    Args:
        data: whole lines of the block, without the header and the final newline.
        header: the input's column names.
        numeric: the columns that must be finite numbers.
        max_len: the longest value accepted, in bytes (a longer one: not clean).
        delimiter: the field delimiter (one character).
    """
    if not data or len(header) < 2 or b'"' in data or b"\r" in data:
        return None
    nl = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    starts = np.empty(len(nl) + 1, dtype=np.int64)
    starts[0] = 0
    starts[1:] = nl + 1
    lengths = np.diff(starts, append=len(data) + 1) - 1
    # no blank line, and no field can be longer than the limit
    if int(lengths.min()) == 0 or int(lengths.max()) > max_len:
        return None
    types: dict[str, Any] = {c: pa.float64() if c in numeric else _TEXT for c in header}
    table = _read(data, header, pacsv.ConvertOptions(
        column_types=types, null_values=[""], strings_can_be_null=False,
        quoted_strings_can_be_null=False), delimiter)
    if table is None or table.num_rows != len(starts):
        return None
    numbers: dict[str, list[float]] = {}
    texts: dict[str, tuple[list[str], list[int]]] = {}
    for name, col in zip(header, table.columns, strict=True):
        chunk = col.chunk(0)
        if name in numeric:
            if chunk.null_count:
                return None
            x = _numpy(chunk)
            if not bool(np.isfinite(x).all()):
                return None
            numbers[name] = x.tolist()
        else:
            texts[name] = (_pylist(chunk.dictionary), _numpy(chunk.indices).tolist())
    return RowColumns(len(starts), numbers, texts, starts)

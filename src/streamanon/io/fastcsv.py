"""The fast lane for clean CSV chunks: Apache Arrow's C++ parser, dictionary-encoded columns.

A chunk takes this lane only when it is provably clean — exactly three comma-separated fields
per line, no quotes, no blank lines, no whitespace to strip, every time a finite float that
never goes backwards, no empty or oversized field. Anything else returns ``None`` and the chunk
goes through the Python reader, which owns every rule and every error message; so the lane
accelerates the rules without restating them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

_NAMES = ["t", "u", "a"]
_READ = dict(column_names=_NAMES, use_threads=False)
_PARSE = pacsv.ParseOptions(quote_char=False, double_quote=False, escape_char=False,
                            newlines_in_values=False, ignore_empty_lines=False)
_CONVERT = pacsv.ConvertOptions(column_types={n: pa.string() for n in _NAMES},
                                strings_can_be_null=False, quoted_strings_can_be_null=False)


@dataclass
class ArrowColumns:
    """A clean chunk: times, the timestamp text, and dictionary-encoded users and values."""

    t: np.ndarray
    t_text: pa.Array
    u: pa.DictionaryArray
    a: pa.DictionaryArray


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


def parse_clean_chunk(data: bytes, clock: float, max_len: int) -> ArrowColumns | None:
    """Parse ``data`` (whole lines ``t,u,a`` without the final newline) or return ``None``."""
    # arrow itself refuses a line without exactly three fields (a blank line included)
    if not data or any(x in data for x in (b'"', b"\r", b" ", b"\t", b"\n\n")):
        return None
    if has_long_line(data):
        return None
    n = data.count(b"\n") + 1
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(block_size=1 << 24, **_READ),
            parse_options=_PARSE,
            convert_options=_CONVERT,
        )
        if table.num_rows != n:
            return None
        t_text, u, a = (table.column(x).combine_chunks() for x in _NAMES)
        u, a = pc.dictionary_encode(u), pc.dictionary_encode(a)
        for col in (u, a):  # empty or oversized fields: checked once per distinct value
            lengths = pc.utf8_length(col.dictionary)
            if pc.min(lengths).as_py() == 0 or pc.max(lengths).as_py() > max_len:
                return None
        t = _numpy(pc.cast(t_text, pa.float64()), np.float64)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return None
    if not (bool(np.all(np.isfinite(t))) and t[0] >= clock and bool(np.all(t[1:] >= t[:-1]))):
        return None
    return ArrowColumns(t, t_text, u, a)


def codes_of(col: pa.DictionaryArray) -> tuple[np.ndarray, list[str]]:
    """Integer codes and the names they index."""
    return _numpy(col.indices, np.int64), col.dictionary.to_pylist()


def _numpy(arr: pa.Array, dtype: type) -> np.ndarray:
    """A null-free numeric Arrow array as numpy (``Array.to_numpy`` imports pandas: 0.5 s)."""
    width = arr.type.bit_width // 8
    kind = "f" if pa.types.is_floating(arr.type) else "i"
    raw = np.frombuffer(arr.buffers()[1], dtype=f"<{kind}{width}", count=len(arr),
                        offset=arr.offset * width)
    return raw.astype(dtype, copy=False)


def csv_lines(t_text: pa.Array, u: pa.Array, a: pa.Array) -> str:
    """``t,u,a\\n`` for every row, joined in C++ (fields are known to need no quoting)."""
    lines = pc.binary_join_element_wise(
        pc.binary_join_element_wise(t_text, u, a, ","), pa.scalar(""), "\n")
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    if len(lines) == 0:
        return ""
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
    lo, hi = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    return memoryview(lines.buffers()[2])[lo:hi].tobytes().decode("utf-8")


def _indices(values: np.ndarray) -> pa.Array:
    """An int64 Arrow array over a numpy array (``pa.array`` would first import pandas)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def _strings(names: list[str]) -> pa.Array:
    """A string Arrow array from Python strings, built from buffers (no pandas import)."""
    encoded = [x.encode("utf-8") for x in names]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    return pa.Array.from_buffers(pa.large_string(), len(names),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def take_published(
    cols: ArrowColumns, idx: np.ndarray, a_codes: np.ndarray, a_names: list[str] | None
) -> str:
    """CSV text of published rows ``idx`` with values ``a_names[a_codes]`` (``None``: the
    chunk's own value dictionary)."""
    take = _indices(idx)
    u = cols.u.dictionary.take(cols.u.indices.take(take))
    names = cols.a.dictionary if a_names is None else _strings(a_names)
    a = names.take(_indices(a_codes)).cast(pa.string())
    return csv_lines(cols.t_text.take(take), u, a)

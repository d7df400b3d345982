"""What a clean chunk is, whichever fast lane read it: its rules, and a block of rows' columns.

A clean ``t,u,a`` chunk's users and values need no stripping and fit the length limit, and its
times are finite and in order: then the fast lanes (:mod:`streamanon.io.lane`, the C parser,
and :mod:`streamanon.io.fastcsv`, Arrow's reader) give exactly what the Python reader would.
A clean block of general rows (CASTLE's) comes out of either as :class:`RowColumns`.

Design: docs/design/pipeline.md
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def clean_names(names: Sequence[str], max_len: int) -> bool:
    """No name empty, longer than ``max_len`` or with surrounding whitespace (as ``strip``
    sees it: the Python reader would strip such a user or value, or refuse it)."""
    return bool(names) and min(map(len, names)) > 0 and max(map(len, names)) <= max_len and \
        not any(map(str.__ne__, names, map(str.strip, names)))


def clean_times(t: np.ndarray, clock: float) -> bool:
    """Finite times, none before ``clock`` (the reader's), never going backwards."""
    return bool(np.all(np.isfinite(t))) and t[0] >= clock and bool(np.all(t[1:] >= t[:-1]))


@dataclass
class RowColumns:
    """A clean chunk of general rows: per column, the values of its rows in order (numeric
    columns as Python floats, text columns as their distinct values and codes into them), and
    where each line starts in the chunk."""

    n: int
    numbers: dict[str, list[float]]
    texts: dict[str, tuple[list[str], list[int]]]
    starts: np.ndarray

    def fields(self, header: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        """Each row's fields as a tuple in ``header``'s order (the values of row ``i`` are
        ``dict(zip(header, fields))``), without a dict per row.

        >>> cols = RowColumns(2, {"age": [30.0, 41.0]}, {"id": (["a", "b"], [1, 0])},
        ...                   np.array([0, 7]))
        >>> list(cols.fields(["id", "age"]))
        [('b', 30.0), ('a', 41.0)]
        """
        columns = [self.numbers[h] if h in self.numbers else
                   list(map(self.texts[h][0].__getitem__, self.texts[h][1])) for h in header]
        return zip(*columns, strict=True)

    def take(self, rows: np.ndarray) -> RowColumns:
        """The rows ``rows`` (indices, ascending) as columns of their own (a partition's
        share of a block; no line starts: they are the block's).

        >>> cols = RowColumns(3, {"age": [30.0, 41.0, 52.0]}, {"id": (["a", "b"], [1, 0, 1])},
        ...                   np.array([0, 7, 14]))
        >>> part = cols.take(np.array([0, 2]))
        >>> part.n, part.numbers, list(part.fields(["id", "age"]))
        (2, {'age': [30.0, 52.0]}, [('b', 30.0), ('b', 52.0)])
        """
        at = rows.tolist()
        return RowColumns(
            len(at), {name: list(map(values.__getitem__, at))
                      for name, values in self.numbers.items()},
            {name: (names, list(map(codes.__getitem__, at)))
             for name, (names, codes) in self.texts.items()},
            np.empty(0, np.int64))


def encoded(names: Sequence[str], dtype: type = np.int64) -> tuple[bytes, np.ndarray]:
    """``names`` as UTF-8 one after another, and where each starts (and the end): the
    buffers of an Arrow string array, or of the C writer's published values.

    >>> encoded(["a", "été"])
    (b'a\\xc3\\xa9t\\xc3\\xa9', array([0, 1, 6]))
    """
    parts = [x.encode("utf-8") for x in names]
    offsets = np.zeros(len(parts) + 1, dtype=dtype)
    np.cumsum(np.fromiter(map(len, parts), dtype, len(parts)), out=offsets[1:])
    return b"".join(parts), offsets

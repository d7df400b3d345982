"""What both checkers need to read files, written once and apart from :mod:`streamanon.io`.

A source is a path, ``"-"`` (standard input), ``kafka://HOST:PORT/TOPIC`` (every message up to
the end, one a line: :mod:`streamanon.verify._kafka`) or an open text stream. Nothing here
knows the operators' readers: the checkers restate the input contract themselves.

>>> guess_format("out.jsonl"), guess_format("out.csv"), guess_format("-")
('jsonl', 'csv', 'csv')
>>> [(n, obj, why) for n, _, obj, why in json_objects(['{"t": 1}', "", "[1]", "{"])]
[(1, {'t': 1}, None), (3, None, 'not a JSON object'), (4, None, 'not valid JSON')]
>>> seconds("60"), seconds("1970-01-01T00:01:00"), seconds("soon")
(60.0, 60.0, nan)
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from streamanon.errors import ConfigError

Source = str | Path | TextIO

#: Topics read in this process: a topic is read once (format guess, then the rows).
_TOPICS: dict[str, bytes] = {}


#: Names ``--delimiter`` accepts for the usual field delimiters (the checkers' own list).
_DELIMITERS = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}


def field_delimiter(spec: str | None) -> str:
    """The CSV field delimiter a ``--delimiter`` value names: one character (no quote, line
    break, space, letter or digit), or tab, ``\\t``, comma, semicolon, pipe.

    >>> field_delimiter(None), field_delimiter(";"), field_delimiter("tab")
    (',', ';', '\\t')
    """
    if spec is None:
        return ","
    d = _DELIMITERS.get(spec.lower(), spec)
    if len(d) != 1 or d in "\"\r\n " or d.isalnum():
        raise ConfigError(f"--delimiter {spec!r}: give one character other than a quote, a "
                          "space, a letter or a digit (or tab, comma, semicolon, pipe)")
    return d


def is_topic(source: Source) -> bool:
    """A ``kafka://`` source."""
    return isinstance(source, str) and source.startswith("kafka://")


def _topic(url: str) -> bytes:
    if url not in _TOPICS:
        from streamanon.verify._kafka import topic_bytes

        _TOPICS[url] = topic_bytes(url)
    return _TOPICS[url]


def source_name(source: Source, name: str | None = None) -> str:
    """How messages name ``source``: ``name`` if given, ``stdin``, the path, or ``input``."""
    return name or ("stdin" if str(source) == "-" else str(source) if isinstance(
        source, str | Path) else "input")


def guess_format(source: Source) -> str:
    """``jsonl`` for a path ending in ``.jsonl``, ``.ndjson`` or ``.json`` or a topic whose
    first message is a JSON object, else ``csv``."""
    if is_topic(source):
        return "jsonl" if _topic(str(source)).lstrip().startswith(b"{") else "csv"
    text_name = str(source) if isinstance(source, str | Path) else ""
    return "jsonl" if text_name.lower().endswith((".jsonl", ".ndjson", ".json")) else "csv"


def read_bytes(source: Source) -> bytes:
    """The whole source as UTF-8 bytes, ``\\r\\n`` as ``\\n``, without a byte order mark."""
    if is_topic(source):
        data = _topic(str(source))
    elif isinstance(source, str | Path):
        if str(source) == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(source, "rb") as fh:
                data = fh.read()
    else:
        data = source.read().encode("utf-8")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    return data


def read_text(source: Source) -> str:
    """The whole source as text (UTF-8, bad bytes replaced, line ends as written)."""
    if is_topic(source):
        return _topic(str(source)).decode("utf-8", errors="replace").removeprefix("\ufeff")
    if isinstance(source, str | Path):
        if str(source) == "-":
            return sys.stdin.read()
        with open(source, encoding="utf-8-sig", errors="replace", newline="") as fh:
            return fh.read()
    return source.read()


def json_objects(lines: Iterable[str]
                 ) -> Iterator[tuple[int, str, dict[str, Any] | None, str | None]]:
    """``(line number, raw line, object, None)`` per JSON object line, ``(number, raw, None,
    reason)`` per line that is not one; blank lines are skipped."""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            yield number, raw, None, "not valid JSON"
            continue
        if not isinstance(obj, dict):
            yield number, raw, None, "not a JSON object"
            continue
        yield number, raw, obj, None


def seconds(text: str) -> float:
    """Seconds since the epoch: a number, or ISO 8601 (naive = UTC); NaN when neither."""
    s = text.strip()
    try:
        return float(s)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(s)
    except ValueError:
        return math.nan
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


# -- Arrow, for both checkers' column readers ---------------------------------------------
def _compute() -> Any:
    """Arrow's compute registry: its private module where it is (importing
    ``pyarrow.compute``, a wrapper and docstring made per function, costs more than a check
    of a small file), the public one where a pyarrow release has moved it."""
    try:
        import pyarrow._compute as registry
    except ImportError:  # pragma: no cover - a pyarrow without the private module
        import pyarrow.compute as registry
    return registry


def _arrow(function: str, *args: Any, options: Any = None) -> Any:
    """Arrow's compute ``function`` on ``args``, called through its registry."""
    return _compute().call_function(function, list(args), options)


def _numbers(column: Any, dtype: Any) -> np.ndarray:
    """The values of an Arrow array of numbers without nulls, as numpy's (a view of its
    buffer; ``to_numpy`` would import pandas)."""
    return np.frombuffer(column.buffers()[1], dtype=dtype, count=len(column),
                         offset=column.offset * np.dtype(dtype).itemsize)

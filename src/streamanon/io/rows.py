"""Read and write general rows (dicts of columns) for CASTLE: CSV with a header, or JSON Lines.

The bad-input policy is the one of :mod:`streamanon.io.policy`: every non-blank line ends as a
:class:`~streamanon.castle.CastleRow` or as a :class:`~streamanon.records.Rejected` naming its line
(malformed line, wrong field count, missing field, value that is not a finite number where one
is needed, oversized value); ``fail`` stops with :class:`~streamanon.io.InputError`, ``skip``
hands it to the reject log and goes on. Problems found later (an unknown category, found by the
operator) go through the same policy with :meth:`RowReader.refuse`, so the accounting adds up:
``read == rows yielded + rejected``.

>>> import io
>>> rd = RowReader(io.StringIO("id,age,dx\\na,30,flu\\nb,x,flu\\n"), "csv", numeric=["age"],
...                on_error="skip")
>>> [(r.line, r.values) for r in rd]
[(2, {'id': 'a', 'age': 30.0, 'dx': 'flu'})]
>>> rd.rejected[0].reason
"field age is not a number: 'x'"
"""

from __future__ import annotations

import io
import json
import math
import operator
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice, repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from streamanon.castle.records import CastleRow, ReleasedFields
from streamanon.errors import UnreadableInputError
from streamanon.io.lane import class_lines, parse_native_rows
from streamanon.io.policy import InputError, OnError
from streamanon.io.readers import (
    DEFAULT_MAX_VALUE_LEN,
    MAX_LINE_CHARS,
    check_text_head,
    detect_format,
    separated,
    split_csv_line,
)
from streamanon.io.writers import TextSink
from streamanon.records import Rejected

if TYPE_CHECKING:
    import numpy as np

    from streamanon.io.clean import RowColumns

_SURROGATE = re.compile("[\udc80-\udcff]")
#: Bytes read at a time from a CSV file or stdin (``read1``: a pipe yields what it has).
_BLOCK = 1 << 20
_BOM = b"\xef\xbb\xbf"
#: A line of more bytes than this has more than MAX_LINE_CHARS characters (UTF-8: <= 4 each).
_LONG_BYTES = 4 * MAX_LINE_CHARS + 4

Lines = Iterable[tuple[int, "str | None"]]


def _shown(text: str | None) -> str:
    """A line as it can be shown: undecodable bytes as U+FFFD, an over-long line cut."""
    if text is None:
        return ""
    if _SURROGATE.search(text):
        return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    return text


@dataclass(frozen=True, slots=True)
class CleanBlock:
    """A block of lines that Arrow's lane read (:meth:`RowReader.parse_parts`): its first line
    number and its columns."""

    first: int
    columns: RowColumns


class RowReader:
    """Iterate validated rows of a CSV (header first) or JSON Lines source.

    ``numeric`` columns are converted to float (a non-number or non-finite value is refused);
    ``required`` columns must be present and non-empty. Empty CSV fields read as ``None``.

    A CSV file (or stdin) is read in blocks of whole lines; a block that is provably clean
    takes Arrow's parser (:func:`streamanon.io.fastcsv.parse_clean_rows`), any other goes line
    by line through the rules below, which own every decision and message: both give the same
    rows, line numbers and rejections (tested on random inputs against text streams, which
    always go line by line).

    Args:
        source: a file, ``-`` (stdin) or an open text stream.
        fmt: the input format (``csv`` or ``jsonl``; ``None``: from the name).
        on_error: ``fail`` raises at the first bad row; ``skip`` rejects it and goes on.
        rejects: called with each rejected row (``None``: they are kept in :attr:`rejected`).
        numeric: the columns converted to float.
        required: the columns that must be present and non-empty.
        max_value_len: the longest value accepted, in characters.
        source_name: the input's name in messages (``None``: from ``source``).
        progress: called with the size in bytes of each block read (``None``: none).
        columns: the CSV header, when the input has none (``None``: the first line).
        repeated_header: skip (and count) a line that repeats the header.
        delimiter: the CSV field delimiter (one character; ``\\t`` for TSV).
    """

    #: the CSV field delimiter (a class default: states pickled before it existed read commas)
    delimiter = ","

    def __init__(
        self,
        source: str | Path | TextIO,
        fmt: str | None = None,
        *,
        on_error: OnError | str = OnError.fail,
        rejects: Callable[[Rejected], None] | None = None,
        numeric: Iterable[str] = (),
        required: Iterable[str] = (),
        max_value_len: int = DEFAULT_MAX_VALUE_LEN,
        source_name: str | None = None,
        progress: Callable[[int], None] | None = None,
        columns: Iterable[str] | None = None,
        repeated_header: bool = False,
        delimiter: str = ",",
    ) -> None:
        path = source if isinstance(source, str | Path) else None
        self.fmt = detect_format(path, fmt)
        self.source = source
        self.name = source_name or ("stdin" if str(source) == "-" else str(path or "input"))
        self.on_error = OnError(on_error)
        self.rejects = rejects
        # checked in the order given, so that a row with several bad numbers is refused with
        # the same message in every run (a set's order changes with the hash seed)
        self._numeric = list(dict.fromkeys(numeric))
        self.numeric = set(self._numeric)
        self.required = list(required)
        self.max_len = max_value_len
        self.columns: list[str] = []
        self.read = 0
        self.rejected: list[Rejected] = []
        self.n_rejected = 0
        self.progress = progress
        self._pending = 0
        self._last: tuple[int, str] = (0, "")
        self._num_get: tuple[list[str], Callable[[Mapping[str, Any]], Any]] | None = None
        # the CSV header: given (``columns``, e.g. for messages that carry none) or found first
        self._header: list[str] | None = list(columns) if columns else None
        if self._header is not None:
            self.columns = list(self._header)
        self.repeated_header = repeated_header
        self.headers_skipped = 0
        if delimiter != ",":
            self.delimiter = delimiter
        # the block that the fast lane read last: its first line number, bytes, line starts
        self._block: tuple[int, bytes, np.ndarray] | None = None

    # -- policy ------------------------------------------------------------------------------
    def refuse(self, line: int, text: str, reason: str) -> None:
        """Apply the policy to a bad line: raise under ``fail``, log and count under ``skip``."""
        rej = Rejected(line, text, reason)
        if self.on_error is OnError.fail:
            raise InputError(rej, self.name)
        self.n_rejected += 1
        if len(self.rejected) < 100:
            self.rejected.append(rej)
        if self.rejects is not None:
            self.rejects(rej)

    def refuse_row(self, row: CastleRow, reason: str) -> None:
        """Refuse a row that parsed but that a later stage (the operator) cannot take."""
        self.refuse(row.line or 0, self.text_of_row(row), reason)

    def text_of_row(self, row: CastleRow) -> str:
        """The row's line as it was in the input (the row just read, or one of the block the
        fast lane read last), else rebuilt from its values."""
        line, text = self._last
        if line == row.line:
            return text
        if self._block is not None and row.line is not None:
            first, data, starts = self._block
            i = row.line - first
            if 0 <= i < len(starts):
                end = int(starts[i + 1]) - 1 if i + 1 < len(starts) else len(data)
                return data[int(starts[i]):end].decode("utf-8").removesuffix("\r")
        return self.text_of(row.values)

    def text_of(self, values: Mapping[str, Any]) -> str:
        if self.fmt == "jsonl":
            return json.dumps(dict(values), default=str)
        return self.delimiter.join("" if values.get(c) is None else str(values.get(c))
                                   for c in self.columns)

    # -- reading -----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[CastleRow]:
        if isinstance(self.source, str | Path):
            if str(self.source) == "-":
                yield from self._iter_binary(sys.stdin.buffer)
            else:
                with open(self.source, "rb") as raw:
                    yield from self._iter_binary(raw)
        else:
            yield from self._iter(self.source)

    def _iter_binary(self, raw: BinaryIO) -> Iterator[CastleRow]:
        if self.fmt != "csv":
            yield from self._iter(self._text_of_binary(raw))
            return
        buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type]
        check_text_head(buffered.peek(8192)[:8192], self.name)
        for first, data in self._blocks(buffered):
            if data is None:  # a line too long to hold: refused by number
                yield from self._checked(self._csv([(first, None)]))
                continue
            pos = 0
            while self._header is None and pos <= len(data):  # the header, line by line
                end = data.find(b"\n", pos)
                end = len(data) if end < 0 else end
                yield from self._checked(self._csv(_byte_lines(first, data[pos:end])))
                first, pos = first + 1, end + 1
            if pos:
                data = data[pos:]
            if not data:
                continue
            cols = self._clean_block(data)
            if cols is None:
                yield from self._checked(self._csv(_byte_lines(first, data)))
                continue
            self._block = (first, data, cols.starts)
            for row in self._rows_of(first, cols):
                self.read += 1
                yield row
        self._end_of_input()

    def _blocks(self, raw: io.BufferedReader) -> Iterator[tuple[int, bytes | None]]:
        """``(first line number, whole lines)`` without the byte order mark and without the
        last line's newline; ``None`` for a line too long to hold (then skipped to its end)."""
        line = 1
        rest = b""
        skipping = False
        block = raw.read1(_BLOCK)
        while block and len(block) < len(_BOM) and _BOM.startswith(block):  # a pipe, bytewise
            more = raw.read1(_BLOCK)
            if not more:
                break
            block += more
        if self.progress is not None:
            self.progress(len(block))
        block = block.removeprefix(_BOM)
        while True:
            if not block:
                block = raw.read1(_BLOCK)
                if not block:
                    break
                if self.progress is not None:
                    self.progress(len(block))
            if skipping:
                end = block.find(b"\n")
                if end < 0:
                    block = b""
                    continue
                block, skipping, line = block[end + 1:], False, line + 1
            data = rest + block if rest else block
            block = b""
            cut = data.rfind(b"\n")
            if cut < 0:
                if len(data) > _LONG_BYTES:
                    yield line, None
                    rest, skipping = b"", True
                else:
                    rest = data
                continue
            yield line, data[:cut]
            line += data.count(b"\n", 0, cut) + 1
            rest = data[cut + 1:]
        if rest and not skipping:
            yield line, rest

    def _clean_block(self, data: bytes) -> RowColumns | None:
        """The block through the C parser (:mod:`streamanon.io.lane`), else Arrow's, when it
        is provably clean; else ``None``."""
        header = self._header
        assert header is not None
        # a clean line is no longer than a value may be, nor than a line may be (the text
        # path refuses a longer line whole, whatever its fields)
        limit = min(self.max_len, MAX_LINE_CHARS)
        cols = parse_native_rows(data, header, self.numeric, limit, self.delimiter)
        if cols is None:
            from streamanon.io.fastcsv import parse_clean_rows  # pyarrow: only here

            cols = parse_clean_rows(data, header, self.numeric, limit, self.delimiter)
        if cols is None:
            return None
        required = set(self.required)
        for name, (names, _) in cols.texts.items():
            # blank fields read as None (as line by line); a blank required field is refused
            # there, with its message
            blank = [v if v.strip() else None for v in names]
            if None in blank:
                if name in required:
                    return None
                names[:] = blank
        return cols

    def _rows_of(self, first: int, cols: RowColumns) -> Iterator[CastleRow]:
        """The block's rows, each built when it is asked for: rows (and their dicts) built a
        block at a time would all be alive at once, and the garbage collector would scan the
        whole block again and again while the operator works through it."""
        return map(CastleRow, self._values_of(cols), range(first, first + cols.n))

    def _values_of(self, cols: RowColumns) -> Iterator[dict[str, Any]]:
        header = self._header
        assert header is not None
        return map(dict, map(zip, repeat(header), self._fields_of(cols)))

    def _fields_of(self, cols: RowColumns) -> Iterator[tuple[Any, ...]]:
        header = self._header
        assert header is not None
        return cols.fields(header)

    def _text_of_binary(self, raw: BinaryIO) -> TextIO:
        """Check the head (:func:`check_text_head`), then read as UTF-8 without the byte order
        mark; undecodable bytes survive as surrogates so that their line can be refused."""
        buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type]
        check_text_head(buffered.peek(8192)[:8192], self.name)
        return io.TextIOWrapper(buffered, encoding="utf-8-sig", errors="surrogateescape",
                                newline="\n")

    def _lines(self, fh: TextIO) -> Iterator[tuple[int, str | None]]:
        """Physical lines without their end; ``None`` for a line over MAX_LINE_CHARS (skipped
        without being held in memory)."""
        line_no = 0
        while True:
            text = fh.readline(MAX_LINE_CHARS + 1)
            if not text:
                return
            line_no += 1
            if len(text) > MAX_LINE_CHARS and not text.endswith("\n"):
                while text and not text.endswith("\n"):
                    text = fh.readline(MAX_LINE_CHARS)
                yield line_no, None
                continue
            if self.progress is not None:
                self._pending += len(text)
                if self._pending >= 1 << 16:
                    self.progress(self._pending)
                    self._pending = 0
            yield line_no, text.rstrip("\r\n") if text.endswith("\n") else text.rstrip("\r")

    def _iter(self, fh: TextIO) -> Iterator[CastleRow]:
        lines = self._lines(fh)
        yield from self._checked(self._csv(lines) if self.fmt == "csv" else self._jsonl(lines))
        self._end_of_input()

    def parse_lines(self, lines: Iterable[tuple[int, str | None]]) -> Iterator[CastleRow]:
        """Rows of ``(line number, text)`` pairs, continuing the stream of earlier calls.

        The same rules and policy as iterating over a file (the CSV header found or given is
        kept between calls), for sources that deliver lines themselves: chunks of a file,
        Kafka messages. ``text`` is a line without its end (surrogate escapes for undecodable
        bytes), or ``None`` for a line longer than :data:`MAX_LINE_CHARS`.
        """
        lines = ((n, None if t is not None and len(t) > MAX_LINE_CHARS else t) for n, t in lines)
        return self._checked(self._csv(lines) if self.fmt == "csv" else self._jsonl(lines))

    def parse_block(self, first: int, data: bytes | str) -> Iterator[CastleRow]:
        """Rows of a chunk of whole lines (``\\n``-separated, no final newline), the first
        numbered ``first``, continuing the stream of earlier calls: what
        :meth:`parse_lines` gives for ``enumerate(data.split("\\n"), first)`` (bytes decoded
        as UTF-8, undecodable ones as surrogate escapes), the same rows, line numbers and
        rejections.

        CSV bytes after the header go in blocks of about a MiB through Arrow's parser when a
        block is provably clean (:meth:`_clean_block`), else line by line; text, JSON Lines
        and the header always go line by line. With ``repeated_header`` a block that may hold
        the header again (it holds every column name) goes line by line, which skips it.
        """
        for part in self.parse_parts(first, data):
            if type(part) is CastleRow:
                yield part
            else:
                assert isinstance(part, CleanBlock)
                yield from self.rows_of(part)

    def parse_parts(self, first: int, data: bytes | str) -> Iterator[CastleRow | CleanBlock]:
        """:meth:`parse_block`, with each block that Arrow's lane read given whole, as its
        columns (:class:`CleanBlock`; its rows: :meth:`rows_of`), and the rows of the other
        lines one by one. A block's rows count as read when it is given."""
        if self.fmt != "csv" or isinstance(data, str):
            text = data if isinstance(data, str) else data.decode("utf-8", "surrogateescape")
            yield from self.parse_lines(enumerate(text.split("\n"), first))
            return
        pos = 0
        while self._header is None and pos <= len(data):  # the header, line by line
            end = data.find(b"\n", pos)
            end = len(data) if end < 0 else end
            yield from self.parse_lines([(first, data[pos:end].decode("utf-8",
                                                                     "surrogateescape"))])
            first, pos = first + 1, end + 1
        size = len(data)
        while pos < size:
            end = data.find(b"\n", min(pos + _BLOCK, size)) if pos + _BLOCK < size else -1
            end = size if end < 0 else end
            block = data[pos:end]
            yield from self._block_parts(first, block)
            first += block.count(b"\n") + 1
            pos = end + 1

    def _block_parts(self, first: int, block: bytes) -> Iterator[CastleRow | CleanBlock]:
        header = self._header
        assert header is not None
        cols = None
        if not (self.repeated_header and all(h.encode() in block for h in header)):
            cols = self._clean_block(block)
        if cols is None:
            self._block = None
            yield from self.parse_lines(enumerate(
                block.decode("utf-8", "surrogateescape").split("\n"), first))
            return
        self._block = (first, block, cols.starts)
        self.read += cols.n
        yield CleanBlock(first, cols)

    def rows_of(self, block: CleanBlock, start: int = 0) -> Iterator[CastleRow]:
        """The rows of a block from :meth:`parse_parts`, from its row ``start`` on."""
        rows = self._rows_of(block.first, block.columns)
        return islice(rows, start, None) if start else rows

    def values_of(self, block: CleanBlock) -> Iterator[dict[str, Any]]:
        """The values of each row of :meth:`rows_of` (row ``i`` on line ``block.first + i``),
        without the records: for a consumer that builds one only when it needs it."""
        return self._values_of(block.columns)

    def fields_of(self, block: CleanBlock) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
        """The header and the fields of each row of :meth:`values_of` as a tuple in the
        header's order, without a dict: for a consumer that builds one only when it needs
        it (``dict(zip(header, fields))`` are the values)."""
        header = self._header
        assert header is not None
        return header, self._fields_of(block.columns)

    def check_header_seen(self) -> None:
        """At the end of the input: a CSV source without a header is unreadable."""
        if self.fmt == "csv" and self._header is None and self.required:
            raise UnreadableInputError(Rejected(1, "", "empty input: expected a CSV header"),
                                       self.name)

    def _end_of_input(self) -> None:
        self.check_header_seen()
        if self.progress is not None and self._pending:
            self.progress(self._pending)
            self._pending = 0

    def _checked(self, lines: Iterator[tuple[int, str, dict[str, Any] | str]]
                 ) -> Iterator[CastleRow]:
        for line, text, values in lines:
            self.read += 1
            if isinstance(values, str):
                self.refuse(line, text, values)
                continue
            reason = self._validate(values)
            if reason:
                self.refuse(line, text, reason)
                continue
            self._last = (line, text)
            yield CastleRow(values, line)

    @staticmethod
    def _line_problem(text: str | None) -> str | None:
        if text is None:
            return f"line longer than {MAX_LINE_CHARS:,} characters"
        if _SURROGATE.search(text):
            return ("not UTF-8 text; convert the file to UTF-8, e.g. "
                    "iconv -f latin1 -t utf-8")
        return None

    def _csv(self, lines: Lines) -> Iterator[tuple[int, str, dict[str, Any] | str]]:
        header = self._header
        for line, text in lines:
            problem = self._line_problem(text)
            if text is not None and not text.strip():
                continue
            shown = _shown(text)
            if header is None:
                shown = shown.removeprefix("\ufeff")  # a text stream may keep the BOM
                fields = split_csv_line(shown, self.delimiter) if problem is None else problem
                if isinstance(fields, str):
                    raise UnreadableInputError(Rejected(line, shown, f"cannot read the CSV "
                                                        f"header: {fields}"), self.name)
                header = [f.strip() for f in fields]
                dup = {h for h in header if header.count(h) > 1}
                if dup or "" in header:
                    raise UnreadableInputError(Rejected(
                        line, shown, "CSV header has empty or repeated column names"), self.name)
                missing = [c for c in self.required if c not in header]
                if missing:
                    hint = (" (for JSON Lines give --input-format jsonl)"
                            if shown.lstrip().startswith("{") else "")
                    raise UnreadableInputError(Rejected(
                        line, shown, f"CSV header lacks column(s) {', '.join(missing)}{hint}"),
                        self.name)
                self.columns = self._header = header
                continue
            if problem is not None:
                yield line, shown, problem
                continue
            fields = split_csv_line(shown, self.delimiter)
            if isinstance(fields, str):
                yield line, shown, fields
                continue
            if self.repeated_header and [f.strip() for f in fields] == header:
                self.headers_skipped += 1  # a producer's header again (one per partition)
                continue
            if len(fields) != len(header):
                yield line, shown, (f"expected {len(header)} {separated(self.delimiter)} fields, "
                                    f"got {len(fields)}")
                continue
            yield line, shown, {h: (v if v.strip() else None)
                                for h, v in zip(header, fields, strict=True)}

    def _jsonl(self, lines: Lines) -> Iterator[tuple[int, str, dict[str, Any] | str]]:
        for line, text in lines:
            problem = self._line_problem(text)
            if text is not None and not text.strip():
                continue
            shown = _shown(text).removeprefix("\ufeff")
            if problem is not None:
                yield line, shown, problem
                continue
            try:
                obj = json.loads(shown)
            except json.JSONDecodeError as exc:
                yield line, shown, f"invalid JSON ({exc.msg})"
                continue
            if not isinstance(obj, dict):
                yield line, shown, "expected a JSON object"
                continue
            for key in obj:
                if key not in self.columns:
                    self.columns.append(key)
            yield line, shown, obj

    def _validate(self, values: dict[str, Any]) -> str | None:
        if self._valid_text_row(values):
            return None
        for c in self.required:
            v = values.get(c)
            if v is None or (isinstance(v, str) and not v.strip()):
                return f"missing field {c}"
        for c, v in values.items():
            if isinstance(v, str):
                if len(v) > self.max_len:
                    return f"field {c} is longer than {self.max_len} characters"
            elif isinstance(v, float) and not math.isfinite(v):
                return f"field {c} is not a finite number"
            elif isinstance(v, list | dict) and len(json.dumps(v)) > self.max_len:
                return f"field {c} is longer than {self.max_len} characters"
        for c in self._numeric:
            v = values.get(c)
            if v is None or (isinstance(v, int | float) and not isinstance(v, bool)):
                if isinstance(v, int | float):
                    values[c] = float(v)
                continue
            if isinstance(v, bool) or not isinstance(v, str):
                return f"field {c} is not a number: {v!r}"
            try:
                x = float(v)
            except ValueError:
                return f"field {c} is not a number: {v!r}"
            if not math.isfinite(x):
                return f"field {c} is not a finite number: {v!r}"
            values[c] = x
        return None

    def _valid_text_row(self, values: dict[str, Any]) -> bool:
        """The common case of :meth:`_validate` at once: every field text, none too long,
        required ones present, numeric ones numbers (converted here). False leaves ``values``
        unchanged for the field-by-field checks, which name the problem."""
        fields = values.values()
        if set(map(type, fields)) != _TEXT or len("".join(fields)) > self.max_len:
            return False
        for c in self.required:
            v = values.get(c)
            if v is None or not v.strip():
                return False
        if not self.numeric:
            return True
        if self._num_get is None:
            names = sorted(self.numeric)
            self._num_get = (names, operator.itemgetter(*names))
        names, get = self._num_get
        try:
            raw = get(values)
            x = list(map(float, raw)) if len(names) > 1 else [float(raw)]
        except (KeyError, ValueError):
            return False
        if not math.isfinite(sum(x)):
            return False
        values.update(zip(names, x, strict=True))
        return True


_TEXT = {str}


def _byte_lines(first: int, data: bytes) -> Iterator[tuple[int, str | None]]:
    """The lines of ``data`` as :meth:`RowReader._lines` gives them from a text stream:
    decoded (undecodable bytes as surrogates), without the line end, ``None`` when longer
    than MAX_LINE_CHARS characters (counting a carriage return, as reading text does)."""
    for i, raw in enumerate(data.split(b"\n")):
        text = raw.decode("utf-8", errors="surrogateescape")
        yield first + i, None if len(text) > MAX_LINE_CHARS else text.rstrip("\r")


class RowWriter(TextSink):
    """Write rows as CSV (header = ``columns``) or JSON Lines (every key); ``-`` is stdout."""

    def __init__(self, target: str | Path | TextIO, fmt: str, columns: list[str]) -> None:
        super().__init__(target, fmt)
        self.columns = list(columns)
        self._commas = len(self.columns) - 1
        self._quoted: dict[str, str] = {}  # recent fields with a comma, as the csv module quotes
        if fmt == "csv":
            self._csv.writerow(self.columns)

    def write(self, values: Mapping[str, Any]) -> None:
        self.count += 1
        if self.fmt == "jsonl":
            self._fh.write(json.dumps(dict(values), default=str) + "\n")
            return
        row = list(map(values.get, self.columns))
        if self._commas:  # two fields or more (the csv module quotes a lone empty field)
            try:
                line = ",".join(row)
            except TypeError:  # None (written as empty) or a value that is not text
                text = ["" if v is None else v for v in row]
                line = ",".join(text) if set(map(type, text)) == _TEXT else None
                row = text
            if line is not None and self._write_plain(row, line):
                return
        if set(map(type, row)) <= _TEXT_OR_NONE:  # written as they are (None as empty)
            self._csv.writerow(row)
        else:
            self._csv.writerow(list(map(_cell, row)))

    def write_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Write ``rows`` as :meth:`write` writes each, in order: the rows of plain text (no
        quote, no line break, not None) joined and written at once (a released cluster)."""
        if self.fmt != "csv" or not self._commas:
            for values in rows:
                self.write(values)
            return
        columns, commas, quoted = self.columns, self._commas, self._quoted
        lines: list[str] = []
        for values in rows:
            row = list(map(values.get, columns))
            try:
                line = ",".join(row)
            except TypeError:
                line = '"'  # not all text: as write() does
            if '"' in line or "\n" in line or "\r" in line:
                if lines:
                    self._fh.write("\n".join(lines) + "\n")
                    lines.clear()
                self.write(values)
                continue
            if line.count(",") != commas:  # some field has a comma: quote those fields
                if len(quoted) > 4096:
                    quoted.clear()
                for v in row:
                    if "," in v and v not in quoted:
                        quoted[v] = f'"{v}"'
                line = ",".join(map(quoted.get, row, row))
            lines.append(line)
            self.count += 1
        if lines:
            self._fh.write("\n".join(lines) + "\n")

    def write_class(self, rows: Sequence[ReleasedFields]) -> None:
        """Write the released rows of one class, each given as its fields and the class's
        template and slots (:class:`~streamanon.castle.records.ReleasedFields`, the same for
        every row): the bytes :meth:`write_groups` writes for the rows' values, without
        building them."""
        n = len(rows)
        template, slots = rows[0].template, rows[0].slots
        names = list(template)
        if self.fmt == "csv" and self._commas and names == self.columns:
            text = _class_text(rows, names, slots, self._commas)
            if text is None:  # a field to quote, or not text: column by column
                by_field = list(zip(*(r.fields for r in rows), strict=True))
                at = [*slots, *(-1 for _ in range(len(names) - len(slots)))]
                text = _columns_text([(template[name],) * n if i < 0 else by_field[i]
                                      for name, i in zip(names, at, strict=True)], n,
                                     self._commas)
            if text is not None:
                self._fh.write(text)
                self.count += n
                return
        self.write_groups([[r.values for r in rows]])

    def write_groups(self, groups: Iterable[Sequence[Mapping[str, Any]]]) -> None:
        """Write the rows of ``groups`` in order, as :meth:`write` writes each; a group is
        rows that share most of their values (a released cluster: its generalized
        quasi-identifiers), written column by column when it can be.

        A column whose value is the same in every row of the group is quoted (or found to
        need the csv module) once; the other columns' values must be plain text (no comma,
        quote or line break): the group's text is checked by counting those characters, and a
        group that fails the count is written row by row (:meth:`write_many`).
        """
        if self.fmt != "csv" or not self._commas:
            for group in groups:
                self.write_many(group)
            return
        columns, commas = self.columns, self._commas
        getter = operator.itemgetter(*columns)  # >= 2 columns: a tuple per row
        out: list[str] = []
        for group in groups:
            text = _group_text(group, getter, commas) if len(group) > 1 else None
            if text is None:
                if out:
                    self._fh.write("".join(out))
                    out.clear()
                self.write_many(group)
                continue
            out.append(text)
            self.count += len(group)
        if out:
            self._fh.write("".join(out))

    def _write_plain(self, row: list[str], line: str) -> bool:
        """Write a row of text of at least two fields (``line``: joined by commas) as the csv
        module would, when no field holds a quote or a line break (True); else leave it to the
        module (False).

        Then the module's minimal quoting is simple: a field with a comma is quoted, the others
        are written as they are.
        """
        if '"' in line or "\n" in line or "\r" in line:
            return False
        if line.count(",") != self._commas:  # some field has a comma: quote those fields
            quoted = self._quoted
            if len(quoted) > 4096:
                quoted.clear()
            for v in row:
                if "," in v and v not in quoted:  # type: ignore[operator]
                    quoted[v] = f'"{v}"'  # type: ignore[index]
            line = ",".join(map(quoted.get, row, row))  # type: ignore[arg-type]
        self._fh.write(line + "\n")
        return True


_TEXT_OR_NONE = {str, type(None)}
_FIELDS = operator.attrgetter("fields")


def _group_text(group: Sequence[Mapping[str, Any]],
                getter: Callable[[Mapping[str, Any]], tuple[Any, ...]], commas: int
                ) -> str | None:
    """The CSV lines of ``group`` (each ending in a newline) as :meth:`RowWriter.write`
    writes them, or ``None`` when some value is not plain text where the count below could
    not tell, or a row lacks a column (then the rows go one by one). ``getter``: a row's
    values in the order of the columns (an ``itemgetter`` of two or more)."""
    try:
        rows = list(map(getter, group))
    except KeyError:  # a missing column is written empty: row by row
        return None
    return _columns_text(list(zip(*rows, strict=True)), len(group), commas)


def _class_text(rows: Sequence[ReleasedFields], names: Sequence[str], slots: Sequence[int],
                commas: int) -> str | None:
    """The CSV lines of a class's rows (:meth:`RowWriter.write_class`) row by row, each its
    fields with the class's values put in (text once, quoted once): the common case, where no
    field needs quoting; ``None`` when one may (then :func:`_columns_text` decides)."""
    template = rows[0].template
    width = len(rows[0].fields)
    order: list[int] = []
    consts: list[str] = []
    cells: list[str] = []  # the line with "\0" for each row's own field (the C lane)
    for name, at in zip(names, [*slots, *(-1 for _ in range(len(names) - len(slots)))],
                        strict=True):
        if at >= 0:
            order.append(at)
            cells.append("\0")
            continue
        value = _constant_cell(template[name])
        if value is None:
            return None
        order.append(width + len(consts))
        consts.append(value)
        cells.append(value)
    pieces = ",".join(cells).split("\0")
    if len(pieces) == len(order) - len(consts) + 1:  # (no class value holds a NUL)
        text = class_lines(list(map(_FIELDS, rows)), [i for i in order if i < width], pieces)
        if text is not None:
            return text
    pick, extra, n = operator.itemgetter(*order), tuple(consts), len(rows)
    try:
        text = "\n".join([",".join(pick(r.fields + extra)) for r in rows]) + "\n"
    except TypeError:  # a field that is not text
        return None
    return text if _plain_lines(text, n, commas, consts) else None


def _columns_text(columns: Sequence[Sequence[Any]], n: int, commas: int) -> str | None:
    """The CSV lines of ``n`` rows given column by column (:func:`_group_text`)."""
    fields: list[Any] = []
    consts: list[str] = []
    for col in columns:
        first = col[0]
        if col.count(first) == n:  # one value in every row: quoted once when it needs it
            cell = _constant_cell(first)
            if cell is None:
                return None
            consts.append(cell)
            fields.append(repeat(cell, n))
        else:
            fields.append(col)
    try:
        text = "\n".join(map(",".join, zip(*fields, strict=True))) + "\n"
    except TypeError:  # None or a value that is not text
        return None
    return text if _plain_lines(text, n, commas, consts) else None


def _constant_cell(value: Any) -> str | None:
    """A value every row of a group shares, as its CSV cell (quoted once when it holds a
    comma), or ``None`` when it is not text or holds a quote or line break (the csv module
    decides then)."""
    if type(value) is not str or '"' in value or "\n" in value or "\r" in value:
        return None
    return f'"{value}"' if "," in value else value


def _plain_lines(text: str, n: int, commas: int, consts: Sequence[str]) -> bool:
    """Whether ``n`` lines joined from the group's cells need no more quoting: each line's
    commas and quotes are exactly its ``commas`` separators and those of the constant cells
    ``consts`` (so no varying field holds a comma, quote or line break), and it has one
    line break."""
    inner = sum(c.count(",") for c in consts)
    quotes = sum(c.count('"') for c in consts)
    return (text.count(",") == n * (commas + inner) and text.count('"') == n * quotes
            and text.count("\n") == n and "\r" not in text)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
    if isinstance(v, list | dict):
        return json.dumps(v)
    return str(v)


def read_rows(source: str | Path | TextIO, fmt: str | None = None, **options: Any
              ) -> list[dict[str, Any]]:
    """All rows of a source as dicts (for checkers and tests); options as :class:`RowReader`."""
    return [dict(r.values) for r in RowReader(source, fmt, **options)]


__all__ = ["CleanBlock", "RowReader", "RowWriter", "read_rows"]

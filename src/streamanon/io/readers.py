"""Read ``(t, u, a)`` streams from CSV (header ``t,u,a``) or JSON Lines, files or stdin.

>>> import io
>>> batches = list(iter_batches(io.StringIO("t,u,a\\n1,alice,x\\n2,bob,x*y\\n"), fmt="csv"))
>>> [(r.t, r.u, r.a) for r in batches[0].records()]
[(1.0, 'alice', 'x'), (2.0, 'bob', 'x*y')]

Design: docs/design/pipeline.md
"""

from __future__ import annotations

import csv
import json
import math
import os
import select
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from itertools import repeat
from pathlib import Path
from typing import BinaryIO, TextIO

import numpy as np

from streamanon.errors import ConfigError, UnreadableInputError
from streamanon.io.lane import LaneColumns, parse_native_chunk
from streamanon.io.policy import InputError, OnError
from streamanon.records import Record, Rejected
from streamanon.timefmt import parse_time

DEFAULT_MAX_VALUE_LEN = 4096
#: A line longer than this is refused without being parsed (memory stays bounded).
MAX_LINE_CHARS = 1 << 20
_CHUNK_CHARS = 1 << 24
_BOM = b"\xef\xbb\xbf"
_MAGIC = (
    (b"\x1f\x8b", "gzip-compressed data: decompress it first, e.g. "
                  "gunzip -c {name} | streamanon ... -"),
    (b"BZh", "bzip2-compressed data: decompress it first, e.g. bunzip2 -c {name} | "
             "streamanon ... -"),
    (b"\xfd7zXZ\x00", "xz-compressed data: decompress it first, e.g. xz -dc {name} | "
                       "streamanon ... -"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data: decompress it first, e.g. zstd -dc {name} | "
                          "streamanon ... -"),
    (b"PK\x03\x04", "a ZIP archive (or a spreadsheet workbook): extract or export the CSV "
                    "first"),
    (b"\xd0\xcf\x11\xe0", "a spreadsheet workbook (OLE file): export it as CSV first"),
    (b"PAR1", "a Parquet file: export it as CSV or JSON Lines first"),
)


def check_text_head(head: bytes, source: str) -> None:
    """Refuse, as a whole, a file whose first bytes show it is not CSV or JSON Lines text.

    Compressed files and archives are named with the command that unpacks them; other binary
    data (NUL bytes, many control characters) is called what it is.

    >>> check_text_head(b"t,u,a\\n1,alice,x\\n", "in.csv")
    >>> check_text_head(b"\\x1f\\x8b\\x08\\x00", "in.csv.gz")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    streamanon.errors.UnreadableInputError: in.csv.gz:1: gzip-compressed data: ...
    """
    head = head.removeprefix(_BOM)
    reason = None
    for magic, hint in _MAGIC:
        if head.startswith(magic):
            reason = hint.format(name=source)
            break
    else:
        sample = head[:8192]
        controls = sum(sample.count(bytes([c])) for c in (*range(9), *range(14, 32)))
        if b"\x00" in sample or controls > max(2, len(sample) // 100):
            reason = "binary data, not CSV or JSON Lines text"
    if reason is not None:
        raise UnreadableInputError(Rejected(1, head[:16].decode("latin-1"), reason), source)


class RecordBatch:
    """Valid records in columns; ``t`` is non-decreasing across all batches of one reader.

    Columns are Python lists, or the fast lane's columns when the chunk took it
    (:mod:`streamanon.io.lane`: the C parser's or Arrow's); the list views are then built
    only when asked for.

    Args:
        t: the times, in seconds.
        t_text: the times as written in the input (``None``: in ``lane``).
        u: the users (``None``: in ``lane``).
        a: the values (``None``: in ``lane``).
        line: each record's input line number.
        restamped: how many of the records had their time re-stamped.
        lane: the fast lane's columns (``None``: the lists hold the columns).
    """

    def __init__(
        self,
        t: np.ndarray,
        t_text: list[str] | None,
        u: list[str] | None,
        a: list[str] | None,
        line: list[int] | range,
        restamped: int = 0,
        lane: LaneColumns | None = None,
    ) -> None:
        self.t = t
        self._t_text, self._u, self._a = t_text, u, a
        self.line = line
        self.restamped = restamped
        self.lane = lane
        self._codes: tuple[np.ndarray, list[str], np.ndarray, list[str]] | None = None

    def __len__(self) -> int:
        return len(self.t)

    @property
    def t_text(self) -> list[str]:
        if self._t_text is None:
            assert self.lane is not None
            self._t_text = self.lane.t_texts()
        return self._t_text

    @property
    def u(self) -> list[str]:
        if self._u is None:
            assert self.lane is not None
            self._u = self.lane.users()
        return self._u

    @property
    def a(self) -> list[str]:
        if self._a is None:
            assert self.lane is not None
            self._a = self.lane.values()
        return self._a

    def codes(self) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
        """``(u_codes, u_names, a_codes, a_names)``: the columns as categorical codes."""
        if self._codes is None:
            if self.lane is not None:
                self._codes = self.lane.codes()
            else:
                out: list = []
                for col in (self.u, self.a):
                    names = list(dict.fromkeys(col))
                    index = {x: i for i, x in enumerate(names)}
                    out += [np.fromiter(map(index.__getitem__, col), np.int64, len(col)), names]
                self._codes = tuple(out)  # type: ignore[assignment]
        return self._codes  # type: ignore[return-value]

    def records(self) -> Iterator[Record]:
        for t, tt, u, a, ln in zip(self.t.tolist(), self.t_text, self.u, self.a, self.line,
                                   strict=True):
            yield Record(t, u, a, tt, ln)


def detect_format(path: str | Path | None, fmt: str | None = None) -> str:
    """``csv`` or ``jsonl``: explicit ``fmt`` wins, else the file extension, else CSV."""
    if fmt:
        fmt = fmt.lower()
        if fmt not in ("csv", "jsonl"):
            raise ConfigError(f"unknown format {fmt!r} (use csv or jsonl)")
        return fmt
    if path is not None and str(path).lower().endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    return "csv"


@contextmanager
def _open_source(source: str | Path | TextIO | BinaryIO) -> Iterator[TextIO | BinaryIO]:
    """Files and stdin are read as bytes (the fast lane needs them); text streams as text."""
    if isinstance(source, str | Path):
        if str(source) == "-":
            yield sys.stdin.buffer
            return
        with open(source, "rb") as fh:
            yield fh
    else:
        yield source


def _is_live(fh: TextIO | BinaryIO) -> bool:
    """True for a pipe, socket or terminal: data arrives while we read."""
    try:
        return not stat.S_ISREG(os.fstat(fh.fileno()).st_mode) and hasattr(fh, "read1")
    except (OSError, ValueError, AttributeError):  # io.StringIO and friends have no file
        return False


def _read_available(fh: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes: waits for the first, then takes only what is already there.

    A live stream (``tail -f ... | streamanon z -``) is processed as it arrives instead of
    16 MiB at a time, while a fast pipe still fills large chunks.
    """
    first = fh.read1(size)  # type: ignore[attr-defined]
    parts, n = [first], len(first)
    while first and n < size and select.select([fh], [], [], 0)[0]:
        more = fh.read1(size - n)  # type: ignore[attr-defined]
        if not more:
            break
        parts.append(more)
        n += len(more)
    return b"".join(parts) if len(parts) > 1 else first


def line_chunks(
    fh: TextIO | BinaryIO,
    progress: Callable[[int], None] | None = None,
    source_name: str = "input",
    chunk_chars: int = _CHUNK_CHARS,
) -> Iterator[tuple[int, str | bytes]]:
    """Yield ``(first_line_number, chunk)``: whole lines in large chunks, ``\\n``-separated,
    without the final newline and with ``\\r\\n`` turned into ``\\n``. ``progress`` is told
    how many bytes (or characters) each read consumed; ``chunk_chars``: the size of a read.

    The first block is checked by :func:`check_text_head` (bytes only) and loses its byte order
    mark. A single line longer than :data:`MAX_LINE_CHARS` characters (and 16 Mi more, the
    read size) stops the reading with :class:`InputError`: the file is not line-oriented.
    A pipe or terminal is read as data arrives (the chunks are then what was there).
    """
    line_no = 1
    rest = None
    first = True
    live = _is_live(fh)
    while True:
        block = _read_available(fh, chunk_chars) if live else fh.read(chunk_chars)  # type: ignore[arg-type]
        if not block:
            break
        if progress is not None:
            progress(len(block))
        if first:
            first = False
            if isinstance(block, bytes):
                check_text_head(block, source_name)
                block = block.removeprefix(_BOM)
            else:
                block = block.removeprefix("\ufeff")
        nl, cr = ("\n", "\r") if isinstance(block, str) else (b"\n", b"\r")
        block = rest + block if rest else block
        cut = block.rfind(nl)
        if cut < 0:
            rest = block
            if len(rest) > MAX_LINE_CHARS + chunk_chars:
                raise UnreadableInputError(Rejected(line_no, _text(rest[:80]), (
                    f"a line longer than {len(rest):,} characters: this is not a CSV or "
                    "JSON Lines file")), source_name)
            continue
        rest = block[cut + 1:]
        text = block[:cut]
        if cr in text:
            text = block[: cut + 1].replace(cr + nl, nl)[:-1]
        yield line_no, text
        line_no += _newlines(text) + 1
    if rest:
        yield line_no, rest.rstrip("\r" if isinstance(rest, str) else b"\r")


def _newlines(text: str | bytes) -> int:
    """How many newlines ``text`` holds (bytes counted by numpy: ``bytes.count`` takes some
    ten times longer on a 16 MiB chunk).

    >>> _newlines(b"1,a,x\\n2,b,y"), _newlines("1,a,x\\n2,b,y\\n")
    (1, 2)
    """
    if isinstance(text, str):
        return text.count("\n")
    return int(np.count_nonzero(np.frombuffer(text, dtype=np.uint8) == 10))


def _text(data: str | bytes) -> str:
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def _decode_lines(first: int, data: bytes) -> tuple[str, list[Rejected]]:
    """Decode a chunk as UTF-8; a line that is not UTF-8 is rejected and left blank."""
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError:
        pass
    lines: list[str] = []
    bad: list[Rejected] = []
    for i, raw in enumerate(data.split(b"\n")):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            lines.append("")
            bad.append(Rejected(first + i, raw.decode("utf-8", errors="replace"),
                                f"not UTF-8 text (byte {exc.start + 1} of the line); convert "
                                "the file to UTF-8, e.g. iconv -f latin1 -t utf-8"))
    return "\n".join(lines), bad


#: What ``--delimiter`` accepts besides a single character: names of the usual ones.
DELIMITER_NAMES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}


def delimiter_of(spec: str) -> str:
    """The field delimiter ``--delimiter`` names: one character (not a quote, a line break or
    a space), ``tab`` or ``\\t``, ``comma``, ``semicolon``, ``pipe``.

    >>> delimiter_of(";"), delimiter_of("tab"), delimiter_of("\\t")
    (';', '\\t', '\\t')
    """
    d = DELIMITER_NAMES.get(spec.lower(), spec)
    if len(d) != 1 or d in "\"\r\n " or d.isalnum():
        raise ConfigError(f"--delimiter {spec!r}: give one character other than a quote, a "
                          "space, a letter or a digit (or tab, comma, semicolon, pipe)")
    return d


def separated(delimiter: str) -> str:
    """How a message names the fields' separation: ``comma-separated`` for a comma."""
    return "comma-separated" if delimiter == "," else (
        "tab-separated" if delimiter == "\t" else f"{delimiter!r}-separated")


def split_csv_line(line: str, delimiter: str = ",") -> list[str] | str:
    """The fields of one CSV line, or the reason it cannot be parsed.

    A record is one line: a quote left open is an error here, it never takes the next line in.

    >>> split_csv_line('1,"Doe, J.",x')
    ['1', 'Doe, J.', 'x']
    >>> split_csv_line('1,"open,x')
    'unclosed quote (a record must be on one line)'
    >>> split_csv_line('1;"Doe; J.";x', ";")
    ['1', 'Doe; J.', 'x']
    """
    if '"' not in line:
        return line.split(delimiter)
    if len(line) > MAX_LINE_CHARS:
        return f"line is {len(line):,} characters long (limit {MAX_LINE_CHARS:,})"
    try:
        return next(csv.reader([line], strict=True, delimiter=delimiter))
    except csv.Error as exc:
        msg = str(exc)
        if "unexpected end of data" in msg:
            return "unclosed quote (a record must be on one line)"
        if "field larger" in msg:
            return f"a field longer than {csv.field_size_limit():,} characters"
        return f"malformed CSV quoting ({msg})"


class _Columns:
    """Rows of one chunk on their way to a batch: text columns plus per-row rejections."""

    def __init__(self) -> None:
        self.t_text: list[str] = []
        self.u: list[str] = []
        self.a: list[str] = []
        self.line: list[int] = []
        self.raw: list[str] = []  # each row's line as it was in the file (for rejections)
        self.rejects: list[Rejected] = []


class _Reader:
    """The engine behind :class:`RecordParser` (the Flink jobs drive it line by line)."""

    #: the CSV field delimiter (a class default: states pickled before it existed read commas)
    delim = ","

    def __init__(
        self,
        fmt: str,
        on_error: OnError,
        rejects: Callable[[Rejected], None] | None,
        time_tolerance: float,
        max_value_len: int,
        source_name: str,
        monotone: bool = True,
    ) -> None:
        self.monotone = monotone
        if not time_tolerance >= 0:
            raise ConfigError("time_tolerance must be >= 0")
        self.fmt = fmt
        self.on_error = OnError(on_error)
        self.rejects = rejects
        self.tol = float(time_tolerance)
        self.max_len = max_value_len
        self.source = source_name
        self.clock = -math.inf
        self.header: tuple[int, int, int] | None = None  # indices of t, u, a
        self.ncols = 3

    # -- CSV -----------------------------------------------------------------------------
    def _csv_header(self, fields: list[str], line: int, text: str) -> bool:
        """Set column positions; True when this line was a header (else it is data)."""
        names = [f.strip().lower() for f in fields]
        if {"t", "u", "a"} <= set(names):
            self.header = (names.index("t"), names.index("u"), names.index("a"))
            self.ncols = len(names)
            return True
        if len(fields) == 3:
            try:
                parse_time(fields[0])
            except ValueError:
                pass
            else:
                self.header = (0, 1, 2)
                return False
        reason = "expected a CSV header naming columns t,u,a"
        if self.source.lower().endswith((".json", ".jsonl", ".ndjson")) or text.startswith("{"):
            reason += " (for JSON Lines give --input-format jsonl)"
        raise UnreadableInputError(Rejected(line, text, reason), self.source)

    def take_header(self, first: int, chunk: str | bytes) -> tuple[int, str | bytes]:
        """Consume leading blank lines and the CSV header (if the file has one)."""
        nl = "\n" if isinstance(chunk, str) else b"\n"
        while self.header is None and chunk:
            head, _, rest = chunk.partition(nl)  # type: ignore[arg-type]
            if head.strip():
                text = _text(head)
                fields = split_csv_line(text, self.delim)
                if isinstance(fields, str):
                    raise UnreadableInputError(Rejected(
                        first, text, f"expected a CSV header naming columns t,u,a ({fields})"),
                        self.source)
                if self._csv_header(fields, first, text):
                    return first + 1, rest
                return first, chunk
            first, chunk = first + 1, rest
        return first, chunk

    def fast_csv_chunk(self, first: int, data: bytes) -> RecordBatch | None:
        """The fast lane for a clean chunk (see :mod:`streamanon.io.lane`): the C parser,
        else Arrow's reader; ``None`` when the chunk is not clean."""
        if self.header != (0, 1, 2) or self.ncols != 3 or not self.monotone:
            return None
        cols: LaneColumns | None = parse_native_chunk(data, self.clock, self.max_len,
                                                      self.delim)
        if cols is None:
            from streamanon.io.fastcsv import parse_clean_chunk  # pyarrow: only here

            cols = parse_clean_chunk(data, self.clock, self.max_len, self.delim)
        if cols is None:
            return None
        self.clock = float(cols.t[-1])
        return RecordBatch(cols.t, None, None, None, range(first, first + len(cols.t)),
                           lane=cols)

    def csv_chunk(self, first: int, text: str) -> _Columns:
        cols = _Columns()
        if not text:
            return cols
        lines = text.split("\n")
        quoted = '"' in text
        d = self.delim
        if (
            not quoted
            and self.header == (0, 1, 2)
            and self.ncols == 3
            and "" not in lines
            and bool(np.all(np.fromiter(map(str.count, lines, repeat(d)), np.int64,
                                        len(lines)) == 2))
        ):
            # fast path: every line has exactly three fields
            flat = text.replace("\n", d).split(d)
            t_text, u, a = flat[0::3], flat[1::3], flat[2::3]
            if " " in text or "\t" in text:
                u = [x.strip() for x in u]
                a = [x.strip() for x in a]
            cols.t_text, cols.u, cols.a, cols.raw = t_text, u, a, lines
            cols.line = list(range(first, first + len(lines)))
            return cols
        numbers: range | list[int] = range(first, first + len(lines))
        if "" in lines or any(not ln.strip() for ln in lines):
            keep = [i for i, ln in enumerate(lines) if ln.strip()]
            lines = [lines[i] for i in keep]
            numbers = [first + i for i in keep]
        if not lines:
            return cols
        rows: list[list[str] | str] = (
            [split_csv_line(ln, d) for ln in lines] if quoted else [ln.split(d) for ln in lines])
        ti, ui, ai = self.header  # type: ignore[misc]
        n = self.ncols
        good_rows: list[list[str]] = []
        good_numbers: list[int] = []
        good_raw: list[str] = []
        for r, ln, raw in zip(rows, numbers, lines, strict=True):
            if isinstance(r, str):
                cols.rejects.append(Rejected(ln, raw, r))
            elif len(r) != n:
                cols.rejects.append(
                    Rejected(ln, raw, f"expected {n} {separated(d)} fields, got {len(r)}"))
            else:
                good_rows.append(r)
                good_numbers.append(ln)
                good_raw.append(raw)
        if not good_rows:
            return cols
        if (ti, ui, ai) == (0, 1, 2) and n == 3:
            t_text, u, a = (list(c) for c in zip(*good_rows, strict=True))
        else:
            t_text = [r[ti] for r in good_rows]
            u = [r[ui] for r in good_rows]
            a = [r[ai] for r in good_rows]
        if " " in text or "\t" in text:
            u = [x.strip() for x in u]
            a = [x.strip() for x in a]
        cols.t_text, cols.u, cols.a, cols.line = t_text, u, a, good_numbers
        cols.raw = good_raw
        return cols

    # -- JSON Lines ----------------------------------------------------------------------
    def jsonl_chunk(self, first: int, block: str) -> _Columns:
        cols = _Columns()
        for i, text in enumerate(block.split("\n")):
            if not text.strip():
                continue
            ln = first + i
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                cols.rejects.append(Rejected(ln, text, f"invalid JSON ({exc.msg})"))
                continue
            if not isinstance(obj, dict):
                cols.rejects.append(Rejected(ln, text, "expected a JSON object with t, u, a"))
                continue
            missing = [k for k in ("t", "u", "a") if obj.get(k) is None]
            if missing:
                cols.rejects.append(Rejected(ln, text, f"missing field {', '.join(missing)}"))
                continue
            t, u, a = obj["t"], obj["u"], obj["a"]
            if isinstance(t, bool) or not isinstance(t, int | float | str):
                cols.rejects.append(Rejected(ln, text, "field t must be a number or a string"))
                continue
            if not isinstance(u, str | int) or not isinstance(a, str | int | float):
                cols.rejects.append(Rejected(ln, text, "field u must be a string or an integer, "
                                             "field a a string or a number"))
                continue
            cols.t_text.append(t if isinstance(t, str) else repr(t))
            cols.u.append(str(u).strip())
            cols.a.append(str(a).strip())
            cols.line.append(ln)
            cols.raw.append(text)
        return cols

    # -- shared validation -----------------------------------------------------------------
    def finish(self, cols: _Columns) -> tuple[RecordBatch, list[Rejected]]:
        """Validate fields and times; returns the valid batch and this chunk's rejects."""
        rejects = cols.rejects
        t_text, u, a, line, raw = cols.t_text, cols.u, cols.a, cols.line, cols.raw
        bad: dict[int, str] = {}
        if "" in u or "" in a:
            for i, (uu, aa) in enumerate(zip(u, a, strict=True)):
                if not uu:
                    bad[i] = "missing field u"
                elif not aa:
                    bad[i] = "missing field a"
        if u and (max(map(len, a)) > self.max_len or max(map(len, u)) > self.max_len):
            for i, (uu, aa) in enumerate(zip(u, a, strict=True)):
                for name, value in (("u", uu), ("a", aa)):
                    if len(value) > self.max_len:
                        bad.setdefault(i, f"field {name} is {len(value)} characters long "
                                          f"(limit {self.max_len})")
        try:
            t = np.array(t_text, dtype=np.float64)
        except ValueError:
            t = np.empty(len(t_text), dtype=np.float64)
            for i, s in enumerate(t_text):
                try:
                    t[i] = parse_time(s)
                except ValueError as exc:
                    t[i] = np.nan
                    bad.setdefault(i, str(exc))
        finite = np.isfinite(t)
        if not finite.all():
            for i in np.flatnonzero(~finite).tolist():
                bad.setdefault(i, "time is not a finite number")
        if bad:
            t[list(bad)] = -np.inf
        # the clock: running max of valid times, starting from the previous chunk's clock
        restamped = 0
        if self.monotone:
            prev = np.maximum.accumulate(np.concatenate(([self.clock], t)))[:-1]
            late = t < prev
        if self.monotone and late.any():
            for i in np.flatnonzero(late).tolist():
                if i in bad:
                    continue
                if prev[i] - t[i] > self.tol:
                    bad[i] = (
                        f"time goes backwards: {t_text[i]} is {prev[i] - t[i]:g} s before the "
                        f"latest time seen (tolerance {self.tol:g} s)"
                    )
                else:
                    t[i] = prev[i]
                    t_text[i] = repr(float(prev[i]))
                    restamped += 1
        if len(t):
            self.clock = max(self.clock, float(np.max(t)))
        if bad:
            for i in sorted(bad):
                rejects.append(Rejected(line[i], raw[i], bad[i]))
            keep = np.ones(len(t), dtype=bool)
            keep[list(bad)] = False
            idx = np.flatnonzero(keep).tolist()
            t = t[keep]
            t_text = [t_text[i] for i in idx]
            u = [u[i] for i in idx]
            a = [a[i] for i in idx]
            line = [line[i] for i in idx]
        rejects.sort(key=lambda r: r.line)
        return RecordBatch(t, t_text, u, a, line, restamped), rejects


class RecordParser:
    """The readers' rules for ``(t, u, a)`` lines, applied chunk by chunk.

    One parser per stream: it keeps the CSV header it found and the clock (the latest valid
    time, for the re-stamping rule), so consecutive chunks are judged as one stream. Files
    (:func:`iter_batches`), Kafka messages (:mod:`streamanon.pipeline`) and anything else
    that has lines use it, so every source obeys the same rules with the same messages.

    ``header``: ``None`` finds the CSV header in the first lines (files: a header naming
    t,u,a in any order, or none when the first line is data); ``(0, 1, 2)`` fixes the columns
    (messages carry no header). State survives pickling (checkpoints).

    Args:
        fmt: the input format (``csv`` or ``jsonl``).
        time_tolerance: seconds a time may go backwards before a record is refused.
        max_value_len: the longest value accepted, in characters.
        source_name: the input's name in messages.
        monotone: apply the clock rule (a time behind the clock is re-stamped or refused).
        header: the CSV column of t, u and a (``None``: found in the first lines).
        delimiter: the CSV field delimiter (one character; ``\\t`` for TSV).

    >>> p = RecordParser("csv", header=(0, 1, 2), time_tolerance=1)
    >>> batch, rejected = p.parse(1, b"5,alice,x\\n4.5,bob,y\\n1,carol,z")
    >>> batch.t.tolist(), [(r.line, r.reason.split(":")[0]) for r in rejected]
    ([5.0, 5.0], [(3, 'time goes backwards')])
    """

    def __init__(
        self,
        fmt: str = "csv",
        *,
        time_tolerance: float = 0.0,
        max_value_len: int = DEFAULT_MAX_VALUE_LEN,
        source_name: str = "input",
        monotone: bool = True,
        header: tuple[int, int, int] | None = None,
        delimiter: str = ",",
    ) -> None:
        self._reader = _Reader(detect_format(None, fmt), OnError.skip, None, time_tolerance,
                               max_value_len, source_name, monotone)
        self._reader.header = header
        if delimiter != ",":
            self._reader.delim = delimiter

    @property
    def fmt(self) -> str:
        return self._reader.fmt

    @property
    def clock(self) -> float:
        """The latest valid time seen (``-inf`` before the first record)."""
        return self._reader.clock

    def parse(
        self, first: int, chunk: str | bytes, rejected: Iterable[Rejected] = ()
    ) -> tuple[RecordBatch | None, list[Rejected]]:
        """Parse whole lines (``\\n``-separated, no final newline), the first numbered ``first``.

        Returns the valid records (``None`` when the chunk held only the CSV header or blank
        lines before it) and the rejected lines in line order; ``rejected`` adds lines refused
        before parsing (they must be blank in ``chunk``). Bytes take the Arrow fast lane when
        clean (:mod:`streamanon.io.lane`) and are decoded line by line otherwise.
        """
        reader = self._reader
        extra = list(rejected)
        if reader.fmt == "csv" and reader.header is None:
            first, chunk = reader.take_header(first, chunk)
            if not chunk:
                return None, sorted(extra, key=lambda r: r.line)
        if reader.fmt == "csv" and isinstance(chunk, bytes) and not extra:
            fast = reader.fast_csv_chunk(first, chunk)
            if fast is not None:
                return fast, []
        undecodable: list[Rejected] = []
        if isinstance(chunk, bytes):
            text, undecodable = _decode_lines(first, chunk)
        else:
            text = chunk
        cols = reader.csv_chunk(first, text) if reader.fmt == "csv" else reader.jsonl_chunk(
            first, text)
        cols.rejects += undecodable + extra
        return reader.finish(cols)

    @staticmethod
    def good_prefix(batch: RecordBatch, before_line: int) -> RecordBatch:
        """The records of ``batch`` on lines before ``before_line`` (``--on-error fail``)."""
        n = int(np.searchsorted(np.asarray(batch.line, dtype=np.int64), before_line))
        if n == len(batch):
            return batch
        return RecordBatch(batch.t[:n], batch.t_text[:n], batch.u[:n], batch.a[:n],
                           batch.line[:n], batch.restamped)


def iter_batches(
    source: str | Path | TextIO | BinaryIO,
    fmt: str | None = None,
    *,
    on_error: OnError | str = OnError.fail,
    rejects: Callable[[Rejected], None] | None = None,
    time_tolerance: float = 0.0,
    max_value_len: int = DEFAULT_MAX_VALUE_LEN,
    source_name: str | None = None,
    monotone: bool = True,
    progress: Callable[[int], None] | None = None,
    delimiter: str = ",",
) -> Iterator[RecordBatch]:
    """Yield validated :class:`RecordBatch` es from ``source`` (a path, ``-`` or a text stream).

    Under ``on_error="fail"`` the valid records before the first bad line are yielded, then
    :class:`InputError` is raised; under ``"skip"`` each bad line goes to ``rejects``.
    ``monotone=False`` accepts times in any order (for reading outputs that are not streams);
    ``progress`` is called with the number of bytes consumed by each read.

    Args:
        source: a path, ``-`` (stdin) or an open text or binary stream.
        fmt: ``csv`` or ``jsonl`` (``None``: from the file name, else CSV).
        on_error: ``fail`` raises at the first bad line; ``skip`` sends each to ``rejects``.
        rejects: called with each rejected line under ``skip``.
        time_tolerance: seconds a time may go back; within it a record is re-stamped, beyond it
            rejected.
        max_value_len: the longest value accepted, in characters.
        source_name: the name of the source in messages.
        monotone: ``False`` accepts times in any order (outputs that are not streams).
        progress: called with the number of bytes consumed by each read.
        delimiter: the CSV field delimiter (one character; ``\\t`` for TSV).
    """
    path = source if isinstance(source, str | Path) else None
    kind = detect_format(path, fmt)
    name = source_name or ("stdin" if str(source) == "-" else str(path or "input"))
    parser = RecordParser(kind, time_tolerance=time_tolerance, max_value_len=max_value_len,
                          source_name=name, monotone=monotone, delimiter=delimiter)
    fail = OnError(on_error) is OnError.fail
    with _open_source(source) as fh:
        for first, chunk in line_chunks(fh, progress, name):
            batch, bad = parser.parse(first, chunk)
            if batch is None:
                continue
            if bad and fail:
                head = parser.good_prefix(batch, bad[0].line)
                if len(head):
                    yield head
                raise InputError(bad[0], name)
            if rejects is not None:
                for r in bad:
                    rejects(r)
            yield batch


def read_records(
    source: str | Path | TextIO,
    fmt: str | None = None,
    **options: object,
) -> Iterator[Record]:
    """One :class:`~streamanon.records.Record` at a time; options as :func:`iter_batches`."""
    for batch in iter_batches(source, fmt, **options):  # type: ignore[arg-type]
        yield from batch.records()

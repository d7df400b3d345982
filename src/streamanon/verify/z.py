"""Independent checker for z-anonymity: recomputes the guarantee from the input alone.

>>> from streamanon.records import Record
>>> inp = [Record(0, "a", "x"), Record(1, "b", "x"), Record(2, "c", "y")]
>>> check_z(inp, [Record(1, "b", "x")], z=2, delta_t=10).ok
True
>>> report = check_z(inp, [Record(2, "c", "y")], z=2, delta_t=10)
>>> report.ok, report.privacy_violations
(False, 1)

Design: docs/design/verify.md
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import count, repeat
from pathlib import Path
from typing import Any, ClassVar, TextIO

import numpy as np

from streamanon.errors import ConfigError, InputError
from streamanon.records import Rejected
from streamanon.verify._read import (
    _arrow,
    _compute,
    _numbers,
    guess_format,
    json_objects,
    read_bytes,
    seconds,
    source_name,
)

MAX_FIELD = 4096
_OTHER_SPACE = re.compile(r"[^\S\n]")


# -- the tuples, as columns ----------------------------------------------------------------------
class _Texts(Sequence[str]):
    """A column of texts read by Arrow: a list only when a value is asked for one by one
    (messages, the slow paths); the checks take its codes and compare it as a column."""

    def __init__(self, column: Any) -> None:
        self.column = column  # a pyarrow string array, or dictionary codes of strings
        self._list: list[str] | None = None

    def __len__(self) -> int:
        return len(self.column)

    def encoded(self) -> bool:
        """The column is dictionary codes (else plain strings)."""
        return hasattr(self.column, "dictionary")

    def _values(self) -> list[str]:
        if self._list is None:
            self._list = self.column.to_pylist()
        return self._list

    def __getitem__(self, i: Any) -> Any:
        return self._values()[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __eq__(self, other: object) -> bool:
        return self._values() == (other._values() if isinstance(other, _Texts) else other)

    __hash__ = None  # type: ignore[assignment]

    def codes(self) -> tuple[np.ndarray, list[str], dict[str, int]]:
        """As :func:`_codes`: codes in order of first appearance (Arrow's hash encoding; a
        column read as codes already has them)."""
        enc = self.column if self.encoded() else _arrow("dictionary_encode", self.column)
        names = enc.dictionary.to_pylist()
        codes = _numbers(enc.indices, np.int32).astype(np.int64)
        return codes, names, {name: i for i, name in enumerate(names)}


def _text_bytes(column: Any) -> Any:
    """The UTF-8 of an Arrow string array's texts, one after the other (a buffer slice)."""
    if not len(column):
        return memoryview(b"")
    wide = str(column.type) == "large_string"
    ends = np.frombuffer(column.buffers()[1], dtype=np.int64 if wide else np.int32,
                         count=len(column) + 1, offset=column.offset * (8 if wide else 4))
    return column.buffers()[2][int(ends[0]): int(ends[-1])]


@dataclass
class _Table:
    """Tuples as columns: times, categorical users and values, where each came from."""

    t: np.ndarray
    t_text: Sequence[str]
    u: Sequence[str]
    a: Sequence[str]
    line: Sequence[int | None]
    rejected: int = 0
    restamped: int = 0
    first_rejected: str | None = None

    def __len__(self) -> int:
        return len(self.t)


def _codes(column: Sequence[str]) -> tuple[np.ndarray, list[str], dict[str, int]]:
    """Per item the code of its text (codes in order of first appearance), the texts by code,
    and the code of each text: one pass, a new text numbered by the dict's default."""
    if isinstance(column, _Texts):
        return column.codes()
    index: defaultdict[str, int] = defaultdict(count().__next__)
    codes = np.fromiter(map(index.__getitem__, column), np.int64, len(column))
    index.default_factory = None
    return codes, list(index), index


def _table_of(records: Iterable[Any]) -> _Table:
    """Columns of record objects (anything with ``t``, ``u``, ``a``; optional ``line``)."""
    t, tt, u, a, ln = [], [], [], [], []
    for r in records:
        t.append(float(r.t))
        text = getattr(r, "t_text", None)
        tt.append(text if text is not None else repr(r.t))
        u.append(str(r.u))
        a.append(str(r.a))
        ln.append(getattr(r, "line", None))
    return _Table(np.asarray(t, dtype=np.float64), tt, u, a, ln)


# -- reading files ---------------------------------------------------------------------------
def _has_space(text: str) -> bool:
    """Whitespace other than line breaks anywhere in ``text``."""
    if any(c in text for c in " \t\x0b\x0c\x1c\x1d\x1e\x1f"):
        return True
    return not text.isascii() and bool(_OTHER_SPACE.search(text))


def _format_of(source: str | Path | TextIO, fmt: str | None) -> str:
    if fmt:
        if fmt.lower() not in ("csv", "jsonl"):
            raise ConfigError(f"unknown format {fmt!r} (use csv or jsonl)")
        return fmt.lower()
    return guess_format(source)


#: The bytes of a time that both Arrow's cast and ``float`` read, as the same (correctly
#: rounded) number, when Arrow reads it at all: digits, point, exponent, signs.
_NUMBER_BYTES = b"0123456789.eE+-"


def _arrow_table(data: bytes, sep: str, in_stream_order: bool) -> _Table | None:
    """The tuples of a CSV file's bytes whose every line is a clean tuple (no quote, blank
    line, space, empty or over-long field, time other than a finite decimal number, time
    behind the stream; UTF-8), as Arrow columns; ``None`` when any line is not (the text
    path reads it then, with its line numbers and reasons)."""
    # one byte searched at a time (memchr); a blank line reads as a row of empty fields,
    # refused below with them
    import pyarrow as pa

    if not data or any(c in data for c in (b'"', b"\r", b" ", b"\t", b"\x0b", b"\x0c",
                                           b"\x1c", b"\x1d", b"\x1e", b"\x1f")):
        return None
    if data.startswith(b"\n") or (not data.isascii() and _has_space(
            data.decode("utf-8", errors="replace"))):
        return None
    end = data.find(b"\n")
    head = (data[:end] if end >= 0 else data).decode("utf-8", errors="replace").split(sep)
    names = [h.lower() for h in head]
    if {"t", "u", "a"} <= set(names):
        cols, skip = (names.index("t"), names.index("u"), names.index("a")), 1
    elif len(head) == 3 and not math.isnan(seconds(head[0])):
        cols, skip = (0, 1, 2), 0
    else:
        return None
    import pyarrow.csv as pacsv

    pa.enable_signal_handlers(False)  # a Ctrl-C during the read stays Python's (design/pipeline.md)

    coded = pa.dictionary(pa.int32(), pa.string())
    width = len(names)
    labels = [f"c{i}" for i in range(width)]
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(column_names=labels, skip_rows=skip,
                                           use_threads=False, block_size=1 << 22),
            parse_options=pacsv.ParseOptions(delimiter=sep, quote_char=False,
                                             ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(
                column_types={labels[cols[0]]: pa.string(), labels[cols[1]]: coded,
                              labels[cols[2]]: coded},  # users and values as codes
                include_columns=[labels[c] for c in cols], strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowException):  # a line of other width, not UTF-8
        return None
    # the blocks' dictionaries made one (the first block's, then each later one's new texts)
    table = table.unify_dictionaries()
    t_text, u, a = (table.column(labels[c]).combine_chunks() for c in cols)
    n = len(t_text)
    if not n or data.count(b"\n") + (not data.endswith(b"\n")) != n + skip:
        return None
    for column in (u, a):
        size = _arrow("min_max", _arrow("binary_length", column.dictionary)).as_py()
        if size["min"] == 0 or size["max"] > MAX_FIELD:
            return None
    if bytes(_text_bytes(t_text)).translate(None, _NUMBER_BYTES):  # any other byte
        return None
    try:
        cast = _compute().CastOptions.safe(pa.float64())
        t = _numbers(_arrow("cast", t_text, options=cast), np.float64)
    except (pa.ArrowInvalid, pa.ArrowException):  # not a number as Arrow reads one
        return None
    if not np.isfinite(t).all() or (in_stream_order and not bool(np.all(t[1:] >= t[:-1]))):
        return None
    return _Table(t, _Texts(t_text), _Texts(u), _Texts(a), range(skip + 1, skip + 1 + n))


_BLANK_LINE = re.compile(r"(?:^|\n)[^\S\n]*(?:\n|$)")


def _csv_fields(data: bytes, text: str, spaced: bool, name: str, sep: str = ","
                ) -> tuple[list[str], list[str], list[str], Sequence[int],
                           list[tuple[int, str, str]]]:
    """``t``, ``u``, ``a`` text columns of a CSV text, their line numbers, and bad lines.

    ``data`` is ``text`` as bytes: line breaks and commas are counted there with numpy
    (UTF-8 never uses their bytes inside another character).
    """
    bad: list[tuple[int, str, str]] = []
    pos, number = 0, 1
    while True:  # the first non-blank line: a header, or the first row without one
        nl = text.find("\n", pos)
        line = text[pos: nl if nl >= 0 else len(text)]
        if line.strip():
            break
        if nl < 0:
            return [], [], [], [], bad
        pos, number = nl + 1, number + 1
    head = next(csv.reader([line], delimiter=sep))
    names = [h.strip().lower() for h in head]
    if {"t", "u", "a"} <= set(names):
        cols = (names.index("t"), names.index("u"), names.index("a"))
        width, body_pos, body_no = len(names), (nl + 1 if nl >= 0 else len(text)), number + 1
    elif len(head) == 3 and not math.isnan(seconds(head[0])):
        cols, width, body_pos, body_no = (0, 1, 2), 3, pos, number
    else:
        raise InputError(Rejected(number, line, "expected a CSV header naming columns t,u,a "
                                  "(or three columns t,u,a without a header)"), name)
    body = text[body_pos:]
    if body.endswith("\n"):
        body = body[:-1]
    if not body:
        return [], [], [], [], bad
    if '"' not in body and not (_BLANK_LINE.search(body) if spaced else (
            "\n\n" in body or body.startswith("\n"))):
        raw = np.frombuffer(data, dtype=np.uint8)
        breaks = np.flatnonzero(raw == 10)
        body_byte = int(breaks[body_no - 2]) + 1 if body_no >= 2 else 0
        ends = breaks[breaks >= body_byte]
        if not len(raw) or raw[-1] != 10:
            ends = np.append(ends, len(raw))
        commas = np.flatnonzero(raw[body_byte:] == ord(sep)) + body_byte
        per_line = np.diff(np.searchsorted(commas, ends), prepend=0)
        if bool(np.all(per_line == width - 1)):  # the common case: one split for all
            flat = body.replace("\n", sep).split(sep)
            fields = [flat[c::width] for c in cols]
            return fields[0], fields[1], fields[2], range(body_no, body_no + len(ends)), bad
    lines = body.split("\n")
    numbers = range(body_no, body_no + len(lines))
    keep = [i for i, ln in enumerate(lines) if ln.strip()]
    rows = list(csv.reader((lines[i] for i in keep), delimiter=sep)) if '"' in body else [
        lines[i].split(sep) for i in keep]
    tcol, ucol, acol, kept = [], [], [], []
    ti, ui, ai = cols
    for i, row in zip(keep, rows, strict=True):
        if len(row) != width:
            bad.append((numbers[i], lines[i], f"expected {width} fields, got {len(row)}"))
            continue
        tcol.append(row[ti])
        ucol.append(row[ui])
        acol.append(row[ai])
        kept.append(numbers[i])
    return tcol, ucol, acol, kept, bad


def _jsonl_fields(text: str) -> tuple[list[str], list[str], list[str], list[int],
                                      list[tuple[int, str, str]]]:
    tcol, ucol, acol, kept = [], [], [], []
    bad: list[tuple[int, str, str]] = []
    for number, raw, obj, why in json_objects(text.split("\n")):
        if obj is None:
            bad.append((number, raw, str(why)))
            continue
        t, u, a = obj.get("t"), obj.get("u"), obj.get("a")
        if isinstance(t, bool) or not isinstance(t, int | float | str):
            bad.append((number, raw, "t must be a number or a string"))
            continue
        if isinstance(u, bool) or not isinstance(u, str | int) or isinstance(
                a, bool) or not isinstance(a, str | int | float):
            bad.append((number, raw, "u and a must be text"))
            continue
        tcol.append(t if isinstance(t, str) else repr(t))
        ucol.append(str(u))
        acol.append(str(a))
        kept.append(number)
    return tcol, ucol, acol, kept, bad


def read_tuples(
    source: str | Path | TextIO,
    fmt: str | None = None,
    *,
    time_tolerance: float = 0.0,
    in_stream_order: bool = True,
    strict: bool = False,
    name: str | None = None,
    delimiter: str = ",",
) -> _Table:
    """The accepted tuples of ``source`` under the input contract of the module docstring.

    ``in_stream_order=False`` reads an output (times in any order, nothing re-stamped);
    ``strict`` raises :class:`~streamanon.errors.InputError` at the first bad line instead of
    skipping and counting it.

    Args:
        source: a path, ``-`` or an open text stream.
        fmt: ``csv`` or ``jsonl`` (``None``: from the name).
        time_tolerance: seconds a time may go back before the line is refused.
        in_stream_order: ``False`` reads an output (times in any order, nothing re-stamped).
        strict: raise at the first bad line instead of skipping and counting it.
        name: the source's name in messages.
        delimiter: the CSV field delimiter of ``source``.
    """
    name = source_name(source, name)
    kind = _format_of(source, fmt)
    data = read_bytes(source)
    if kind == "csv" and (fast := _arrow_table(data, delimiter, in_stream_order)) is not None:
        return fast
    text = data.decode("utf-8", errors="replace")
    spaced = _has_space(text)
    tcol, ucol, acol, numbers, bad = (_csv_fields(data, text, spaced, name, delimiter)
                                      if kind == "csv"
                                      else _jsonl_fields(text))
    if spaced:
        ucol = [x.strip() for x in ucol]
        acol = [x.strip() for x in acol]
    n = len(tcol)
    try:
        t = np.array(tcol, dtype=np.float64)
    except ValueError:
        t = np.fromiter(map(seconds, tcol), np.float64, n)
    why: dict[int, str] = {}
    if n and (not all(ucol) or not all(acol)):
        for i in range(n):
            if not ucol[i] or not acol[i]:
                why[i] = f"missing field {'u' if not ucol[i] else 'a'}"
    longest = int(np.diff(np.flatnonzero(np.frombuffer(data, np.uint8) == 10), prepend=-1,
                          append=len(data)).max(initial=0))
    if n and longest > MAX_FIELD and max(max(map(len, ucol)), max(map(len, acol))) > MAX_FIELD:
        for i in range(n):
            if len(ucol[i]) > MAX_FIELD or len(acol[i]) > MAX_FIELD:
                why.setdefault(i, f"a field is longer than {MAX_FIELD} characters")
    finite = np.isfinite(t)
    if not finite.all():
        for i in np.flatnonzero(~finite).tolist():
            why.setdefault(i, "time is missing or not a finite number")
    restamped = 0
    if in_stream_order and n:
        usable = t.copy()
        if why:
            usable[list(why)] = -np.inf
        clock = np.maximum.accumulate(np.concatenate(([-np.inf], usable)))[:-1]
        late = (t < clock) & np.isfinite(usable)
        if late.any():
            too_late = late & (clock - t > time_tolerance)
            for i in np.flatnonzero(too_late).tolist():
                why[i] = f"time is {clock[i] - t[i]:g} s behind the stream"
            again = late & ~too_late
            restamped = int(again.sum())
            t = np.where(again, clock, t)
            for i in np.flatnonzero(again).tolist():
                tcol[i] = repr(float(clock[i]))
    problems = sorted([(numbers[i], _raw_line(kind, tcol[i], ucol[i], acol[i]), r)
                       for i, r in why.items()] + bad)
    if strict and problems:
        number, raw, reason = problems[0]
        raise InputError(Rejected(number, raw, reason), name)
    if why:
        keep = np.ones(n, dtype=bool)
        keep[list(why)] = False
        idx = np.flatnonzero(keep).tolist()
        t = t[keep]
        tcol = [tcol[i] for i in idx]
        ucol = [ucol[i] for i in idx]
        acol = [acol[i] for i in idx]
        numbers = [numbers[i] for i in idx]
    first = Rejected(*problems[0]).message(name) if problems else None
    return _Table(t, tcol, ucol, acol, numbers, len(problems), restamped, first)


def _raw_line(kind: str, t: str, u: str, a: str) -> str:
    return f"{t},{u},{a}" if kind == "csv" else json.dumps({"t": t, "u": u, "a": a})


# -- the report ----------------------------------------------------------------------------
@dataclass
class ZCheckReport:
    """What the checker found; ``ok`` when there is no violation and no mismatch."""

    z: int
    delta_t: float
    exact: bool
    input_tuples: int = 0
    output_tuples: int = 0
    expected_published: int | None = None
    privacy_violations: int = 0
    mismatches: int = 0
    unmatched: int = 0
    input_rejected: int = 0
    restamped: int = 0
    first_problem: str | None = None
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.privacy_violations or self.mismatches or self.unmatched)

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": {"z": self.z, "delta_t": self.delta_t, "exact": self.exact},
            "ok": self.ok,
            "input_tuples": self.input_tuples,
            "input_rejected": self.input_rejected,
            "restamped": self.restamped,
            "output_tuples": self.output_tuples,
            "expected_published": self.expected_published,
            "privacy_violations": self.privacy_violations,
            "mismatches": self.mismatches,
            "unmatched": self.unmatched,
            "first_problem": self.first_problem,
        }


class _Problems:
    """Problems by output row; the report shows the most severe, earliest first."""

    SEVERITY: ClassVar[dict[str, int]] = {"privacy": 0, "unmatched": 1, "mismatch": 2}

    def __init__(self) -> None:
        self.items: list[tuple[int, int, str]] = []

    def add(self, kind: str, row: int, text: str) -> None:
        if len(self.items) < 10_000:
            self.items.append((self.SEVERITY[kind], row, text))

    def fill(self, report: ZCheckReport) -> None:
        ordered = sorted(self.items)
        report.details = [text for _, _, text in ordered[:20]]
        report.first_problem = report.details[0] if report.details else None


# -- the algorithm -------------------------------------------------------------------------
class _Levels:
    """Hierarchy levels of the distinct values: ``EU*FR`` -> ``EU``, ``EU*FR``."""

    def __init__(self, names: Sequence[str], sep: str) -> None:
        vocab: dict[str, int] = {}
        flat: list[int] = []
        depth = np.empty(len(names), dtype=np.int64)
        for j, name in enumerate(names):
            parts = name.split(sep)
            depth[j] = len(parts)
            for d in range(len(parts)):
                flat.append(vocab.setdefault(sep.join(parts[: d + 1]), len(vocab)))
        self.vocab = vocab
        self.names = list(vocab)
        self.depth = depth
        self.offset = np.cumsum(depth) - depth
        self.flat = np.asarray(flat, dtype=np.int64)
        self.level_depth = np.zeros(len(vocab), dtype=np.int64)  # 0-based level of a name
        self.level_depth[self.flat] = np.arange(len(flat)) - np.repeat(self.offset, depth)

    def contains(self, value_codes: np.ndarray, level_codes: np.ndarray) -> np.ndarray:
        """Per pair: is level ``level_codes[i]`` one of the levels of value ``value_codes[i]``?"""
        d = self.level_depth[np.maximum(level_codes, 0)]
        inside = (level_codes >= 0) & (d < self.depth[value_codes])
        at = self.offset[value_codes] + np.where(inside, d, 0)
        return inside & (self.flat[at] == level_codes)


def _search(a: np.ndarray, v: np.ndarray, side: str, step: int = 4096) -> np.ndarray:
    """``np.searchsorted(a, v, side)`` for sorted ``a`` and non-decreasing ``v``, a block of
    ``step`` needles at a time in the slice of ``a`` between the answers of the block's first
    needle and the next block's (a slice that stays in the cache).

    >>> a, v = np.array([1, 2, 2, 3, 5, 8, 8, 9]), np.array([0, 2, 2, 4, 8, 10])
    >>> [bool((_search(a, v, s, 2) == np.searchsorted(a, v, s)).all()) for s in ("left", "right")]
    [True, True]
    """
    if len(v) <= 2 * step:
        return np.searchsorted(a, v, side=side)  # type: ignore[call-overload,no-any-return]
    cuts = np.searchsorted(a, v[::step], side=side).tolist()  # type: ignore[call-overload]
    out = np.empty(len(v), dtype=np.int64)
    for i, (lo, hi) in enumerate(zip(cuts, [*cuts[1:], len(a)], strict=True)):
        block = slice(i * step, (i + 1) * step)
        out[block] = np.searchsorted(a[lo:hi], v[block], side=side)  # type: ignore[call-overload]
        out[block] += lo
    return out


def _window_start(t: np.ndarray, at: np.ndarray, dt: float) -> np.ndarray:
    """Per time ``at``: the first position ``j`` of sorted ``t`` with ``at - t[j] <= dt``."""
    ordered = len(at) < 2 or bool(np.all(at[1:] >= at[:-1]))
    lo = _search(t, at - dt, "left") if ordered else np.searchsorted(t, at - dt, side="left")
    n = len(t)
    while True:  # the subtraction, not ``at - dt``, is the rule: fix the rounding
        back = (lo > 0) & (at - t[np.maximum(lo - 1, 0)] <= dt)
        ahead = (lo < n) & (at - t[np.minimum(lo, n - 1)] > dt)
        if not (back.any() or ahead.any()):
            return lo
        lo = lo - back + ahead


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """``argsort(keys, kind="stable")`` for non-negative integers, by 16-bit passes when they
    fit 32 bits (numpy radix-sorts 16-bit keys in linear time)."""
    top = int(keys.max(initial=0))
    if top >= 1 << 32:
        return np.argsort(keys, kind="stable")
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    if top < 1 << 16:
        return low
    return low[np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")]


def _distinct_in_windows(ev_v: np.ndarray, ev_u: np.ndarray, ev_pos: np.ndarray,
                         by_v: np.ndarray, q_v: np.ndarray | None, q_lo: np.ndarray,
                         q_hi: np.ndarray | None, order_q: np.ndarray, n_pos: int
                         ) -> np.ndarray:
    """Distinct users among the exposures of value ``q_v[k]`` at positions ``[q_lo, q_hi]``.

    Exposures are given in position order, ``by_v`` sorts them stably by value. ``order_q``
    sorts the queries by value such that, along each value, windows never move back
    (``q_lo`` and ``q_hi`` both non-decreasing). ``q_v = q_hi = None``: the queries are the
    exposures themselves (each window ends at its own exposure), ``order_q`` is ``by_v``.
    """
    span = n_pos + 2
    n_v = int(ev_v.max(initial=-1)) + 1
    vs = np.repeat(np.arange(n_v, dtype=np.int64), np.bincount(ev_v, minlength=n_v))  # ev_v[by_v]
    pos = ev_pos[by_v]
    base = vs * span
    n_q = len(order_q)
    key_lo = (vs * span + q_lo[order_q]) if q_v is None else (
        q_v[order_q] * span + q_lo[order_q])
    # end[k]: the first window (of k's value) that starts after exposure k: k is out of it
    # and of every later one. The needles increase: searched block by block, in cache.
    end = _search(key_lo, base + pos, "right")
    # the first window that holds k: its own (exposures as queries), else the first window
    # of k's value ending at or after k
    if q_v is None:
        first = np.arange(len(vs), dtype=np.int64)
    else:
        first = np.searchsorted(q_v[order_q] * span + q_hi[order_q], base + pos, side="left")
    # k is its user's first exposure inside a window exactly when the window no longer holds
    # the user's previous exposure of that value: from end[previous] on
    us = ev_u[by_v]
    n_u = int(us.max(initial=0)) + 1
    if n_v * n_u <= 1 << 32:  # one code per (value, user): two 16-bit sorting passes
        key = vs * n_u + us
        pair = _stable_order(key)  # (value, user, position) order
        key = key[pair]
        same = key[1:] == key[:-1]
    else:
        pair = _stable_order(us)
        pair = pair[_stable_order(vs[pair])]  # (value, user, position) order
        same = (vs[pair[1:]] == vs[pair[:-1]]) & (us[pair[1:]] == us[pair[:-1]])
    after_prev = np.zeros(len(vs), dtype=np.int64)
    after_prev[pair[1:][same]] = end[pair[:-1][same]]
    start = np.maximum(first, after_prev)
    if q_v is not None:  # exposures as queries: each is in its own window, start <= end
        run = start < end
        start, end = start[run], end[run]
    diff = np.bincount(start, minlength=n_q + 1) - np.bincount(end, minlength=n_q + 1)
    counts = np.empty(n_q, dtype=np.int64)
    counts[order_q] = np.cumsum(diff)[:n_q]
    return counts


def _where(table: _Table, i: int, what: str) -> str:
    line = table.line[i]
    return f"{what} line {line}" if line is not None else f"{what} tuple {i + 1}"


def check_z(
    inputs: Iterable[Any],
    outputs: Iterable[Any],
    z: int,
    delta_t: float,
    *,
    exact: bool = True,
    separator: str = "*",
) -> ZCheckReport:
    """Check ``outputs`` against the z rule recomputed on ``inputs`` (see module docstring).

    Both are records with ``t``, ``u``, ``a`` (and optionally ``line``); the inputs in stream
    order, as the operator saw them. Values are compared without surrounding whitespace.

    Args:
        inputs: the input records, in stream order.
        outputs: the released records.
        z: distinct users that must have exposed a value within Δt.
        delta_t: the window Δt in seconds.
        exact: the output must be exactly what the rule releases (``False``: privacy only).
        separator: the separator of hierarchical values.
    """
    src, out = _table_of(inputs), _table_of(outputs)
    for table in (src, out):
        table.u = [x.strip() for x in table.u]
        table.a = [x.strip() for x in table.a]
    return _check(src, out, z, delta_t, exact, separator)


def check_z_files(
    source: str | Path | TextIO,
    output: str | Path | TextIO,
    z: int,
    delta_t: float,
    *,
    exact: bool = True,
    separator: str = "*",
    time_tolerance: float = 0.0,
    in_format: str | None = None,
    out_format: str | None = None,
    in_delimiter: str = ",",
) -> ZCheckReport:
    """:func:`check_z` on files, read by this module's own reader (module docstring).

    Bad input lines are skipped and counted (``input_rejected``), as ``--on-error skip``
    would; a bad output line raises :class:`~streamanon.errors.InputError`. In exact mode a
    CSV output whose text is, byte for byte, the rule's output written plainly (header
    ``t,u,a``, times as the input wrote them, three unquoted fields per line) is accepted
    without being parsed; any other output is parsed and compared by value.

    Args:
        source: the input file.
        output: the released tuples' file.
        z: distinct users that must have exposed a value within Δt.
        delta_t: the window Δt in seconds.
        exact: the output must be exactly what the rule releases (``False``: privacy only).
        separator: the separator of hierarchical values.
        time_tolerance: as the run's ``--time-tolerance``.
        in_format: the input's format (``None``: from the name).
        out_format: the output's format (``None``: from the name).
        in_delimiter: the input's CSV field delimiter (outputs are comma CSV).
    """
    src = read_tuples(source, in_format, time_tolerance=time_tolerance,
                      delimiter=in_delimiter)
    as_written: bytes | None = None
    if exact and _format_of(output, out_format) == "csv" and isinstance(output, str | Path):
        as_written = read_bytes(output)

    def load() -> _Table:
        if as_written is not None:
            return read_tuples(io.StringIO(as_written.decode("utf-8", errors="replace")),
                               "csv", in_stream_order=False, strict=True, name=str(output))
        return read_tuples(output, out_format, in_stream_order=False, strict=True)

    report = _check(src, load, z, delta_t, exact, separator, as_written)
    report.input_rejected = src.rejected
    report.restamped = src.restamped
    return report


def _written_bytes(src: _Table, pub: np.ndarray, exp_v: np.ndarray, levels: _Levels
                   ) -> bytes | None:
    """:func:`_written` as UTF-8, made by Arrow from columns read by Arrow (``None`` when
    ``src``'s were not): the lines joined in one buffer, no Python object per tuple."""
    if not isinstance(src.t_text, _Texts) or not isinstance(src.u, _Texts):
        return None
    import pyarrow as pa

    def ints(x: np.ndarray) -> Any:  # pa.array(x) would import pandas
        x = np.ascontiguousarray(x, dtype=np.int64)
        return pa.Array.from_buffers(pa.int64(), len(x), [None, pa.py_buffer(x)])

    def strings(texts: Sequence[str]) -> Any:  # pa.array(texts) would import pandas
        encoded = [text.encode("utf-8") for text in texts]
        ends = np.cumsum([0, *map(len, encoded)], dtype=np.int64)
        kind = pa.string() if ends[-1] < 1 << 31 else pa.large_string()
        return pa.Array.from_buffers(kind, len(encoded), [
            None, pa.py_buffer(ends.astype(np.int32) if kind == pa.string() else ends),
            pa.py_buffer(b"".join(encoded))])

    names = strings(levels.names)
    comma, nothing, newline = strings([",", "", "\n"])  # scalars (pa.scalar: pandas too)

    index = ints(pub)
    users = (_arrow("take", src.u.column.dictionary, _arrow("take", src.u.column.indices, index))
             if src.u.encoded() else _arrow("take", src.u.column, index))
    columns = [_arrow("take", src.t_text.column, index), users,
               _arrow("take", names, ints(exp_v))]
    if not len(pub):
        return b"t,u,a\n"
    import pyarrow.csv as pacsv

    sink = pa.BufferOutputStream()
    sink.write(b"t,u,a\n")
    try:  # Arrow's writer, faster than joining; it refuses a value that would need quotes
        pacsv.write_csv(pa.Table.from_arrays(columns, names=["t", "u", "a"]), sink,
                        write_options=pacsv.WriteOptions(include_header=False,
                                                         quoting_style="none"))
        return sink.getvalue().to_pybytes()
    except pa.ArrowInvalid:
        pass
    lines = _arrow("binary_join_element_wise", *columns, comma)
    lines = _arrow("binary_join_element_wise", lines, nothing, newline)  # each ends with "\n"
    return b"t,u,a\n" + _text_bytes(lines).to_pybytes()


def _written(src: _Table, pub: np.ndarray, values: list[str]) -> str:
    """The CSV the rule's output is when written plainly (``t,u,a``, the times as read)."""
    rows = pub.tolist()
    t_text = list(map(src.t_text.__getitem__, rows))
    users = list(map(src.u.__getitem__, rows))
    body = "\n".join(map(",".join, zip(t_text, users, values, strict=True)))
    return "t,u,a\n" + body + "\n" if rows else "t,u,a\n"


def _check(src: _Table, output: _Table | Callable[[], _Table], z: int, dt: float,
           exact: bool, sep: str, as_written: bytes | None = None) -> ZCheckReport:
    """``output`` may be a loader: the exact check reads it only when its text (given as
    ``as_written``, UTF-8) is not the rule's output written plainly, byte for byte."""
    if int(z) != z or z < 1:
        raise ConfigError(f"z must be a positive integer, got {z!r}")
    if not (dt >= 0 and math.isfinite(dt)):
        raise ConfigError(f"delta_t must be a finite number >= 0, got {dt!r}")
    if not sep:
        raise ConfigError("separator must be a non-empty string")
    report = ZCheckReport(z=int(z), delta_t=float(dt), exact=exact, input_tuples=len(src))
    if len(src) and not bool(np.all(src.t[1:] >= src.t[:-1])):
        if exact:
            i = int(np.flatnonzero(src.t[1:] < src.t[:-1])[0]) + 1
            raise ConfigError(f"inputs are not in time order ({_where(src, i, 'input')}); "
                              "the exact check needs the stream as the operator saw it")
        order = np.argsort(src.t, kind="stable").tolist()
        src = _Table(src.t[order], [src.t_text[i] for i in order], [src.u[i] for i in order],
                     [src.a[i] for i in order], [src.line[i] for i in order])
    u_code, _, u_index = _codes(src.u)
    a_code, a_names, _ = _codes(src.a)
    levels = _Levels(a_names, sep)
    exposures = _Exposures(levels, a_code, u_code)
    problems = _Problems()

    def codes_of(out: _Table) -> tuple[np.ndarray, np.ndarray]:
        report.output_tuples = len(out)
        return (np.fromiter(map(u_index.get, out.u, repeat(-1)), np.int64, len(out)),
                np.fromiter(map(levels.vocab.get, out.a, repeat(-1)), np.int64, len(out)))

    if exact:
        lo = _window_start(src.t, src.t, dt)
        best = np.full(len(src), -1, dtype=np.int64)
        counts = []
        for d, (pos, v, u, by_v) in enumerate(exposures):
            c = _distinct_in_windows(v, u, pos, by_v, None, lo[pos], None, by_v, len(src))
            best[pos[c >= z]] = d  # levels go coarse to fine: the finest reaching z stays
            counts.append(c)
        pub = np.flatnonzero(best >= 0)
        exp_v = levels.flat[levels.offset[a_code[pub]] + best[pub]]
        report.expected_published = len(pub)
        fast = None if as_written is None else _written_bytes(src, pub, exp_v, levels)
        text = None if as_written is None or fast is not None else as_written.decode(
            "utf-8", errors="replace")
        plain = text is not None and '"' not in text and text.count(
            ",") == 2 * (len(pub) + 1)  # three fields per line: the text parses as written
        if (fast is not None and fast == as_written) or (plain and text == _written(
                src, pub, list(map(levels.names.__getitem__, exp_v.tolist())))):
            report.output_tuples = len(pub)  # identical text: identical tuples, nothing to parse
        else:
            out = output() if callable(output) else output
            out_u, out_v = codes_of(out)
            _compare_exact(src, out, z, dt, pub, exp_v, out_u, out_v, u_code, a_code, levels,
                           exposures, counts, report, problems)
    else:
        out = output() if callable(output) else output
        out_u, out_v = codes_of(out)
        _check_privacy(src, out, z, dt, out_u, out_v, u_code, a_code, levels, exposures,
                       report, problems)
    problems.fill(report)
    return report


class _Exposures:
    """The exposures level by level: for level ``d``, the positions of the tuples that have
    it (increasing), their level-``d`` value and user codes, and the order sorting them by
    value (stable, so positions still increase within a value).

    Values of different levels never coincide (a level-``d`` value holds ``d`` separators),
    so every count stays within one level.
    """

    def __init__(self, levels: _Levels, a_code: np.ndarray, u_code: np.ndarray) -> None:
        self.levels, self.a_code, self.u_code = levels, a_code, u_code
        self.depth = levels.depth[a_code]
        self.positions: dict[int, np.ndarray] = {}

    def at(self, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        has = self.depth > d
        every = bool(has.all())
        pos = np.arange(len(has), dtype=np.int64) if every else np.flatnonzero(has)
        self.positions[d] = pos
        v = self.levels.flat[self.levels.offset[self.a_code if every else self.a_code[pos]] + d]
        return pos, v, self.u_code[pos], _stable_order(v)

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        for d in range(int(self.depth.max(initial=0))):
            yield self.at(d)


def _describe(table: _Table, i: int) -> str:
    return f"({table.t_text[i]}, {table.u[i]}, {table.a[i]})"


def _compare_exact(src: _Table, out: _Table, z: int, dt: float, pub: np.ndarray,
                   exp_v: np.ndarray, out_u: np.ndarray, out_v: np.ndarray,
                   u_code: np.ndarray, a_code: np.ndarray, levels: _Levels,
                   exposures: _Exposures, counts: list[np.ndarray],
                   report: ZCheckReport, problems: _Problems) -> None:
    m = min(len(pub), len(out))
    same = ((out.t[:m] == src.t[pub[:m]]) & (out_u[:m] == u_code[pub[:m]])
            & (out_v[:m] == exp_v[:m]))
    wrong = np.flatnonzero(~same).tolist() + list(range(m, max(len(pub), len(out))))
    report.mismatches = len(wrong)
    if not wrong:
        return
    # every output row not where the rule puts it: does it stand for an input, and was it
    # z-anonymous at all?
    by_key: dict[tuple[float, int], list[int]] = defaultdict(list)
    for i in range(len(src)):
        by_key[(float(src.t[i]), int(u_code[i]))].append(i)

    def count(i: int, d: int) -> int:
        pos = exposures.positions[d]
        return int(counts[d][np.searchsorted(pos, i)])

    for j in wrong:
        if j < len(out):
            cands = [i for i in by_key.get((float(out.t[j]), int(out_u[j])), [])
                     if levels.contains(a_code[i:i + 1], out_v[j:j + 1])[0]]
            if not cands:
                report.unmatched += 1
                problems.add("unmatched", j, (
                    f"{_where(out, j, 'output')}: {_describe(out, j)} matches no input tuple "
                    f"of user {out.u[j]} at that time with a value at or below {out.a[j]!r}"))
                continue
            best = max(count(i, int(levels.level_depth[out_v[j]])) for i in cands)
            if best < z:
                report.privacy_violations += 1
                problems.add("privacy", j, (
                    f"{_where(out, j, 'output')}: {_describe(out, j)} published with only "
                    f"{best} distinct user(s) exposing {out.a[j]!r} within Δt={dt:g} (z={z})"))
                continue
        if j >= len(out):
            i = int(pub[j])
            text = (f"{_where(src, i, 'input')}: {_describe(src, i)} should be published as "
                    f"{levels.names[exp_v[j]]!r} but the output ends after {len(out)} "
                    "tuple(s)")
        elif j >= len(pub):
            text = (f"{_where(out, j, 'output')}: {_describe(out, j)} is extra: the rule "
                    f"publishes only {len(pub)} tuple(s)")
        else:
            i = int(pub[j])
            text = (f"output row {j + 1} is {_describe(out, j)} but the rule publishes "
                    f"{_where(src, i, 'input')} {_describe(src, i)} as "
                    f"{levels.names[exp_v[j]]!r} at that position")
        problems.add("mismatch", j, text)


def _check_privacy(src: _Table, out: _Table, z: int, dt: float, out_u: np.ndarray,
                   out_v: np.ndarray, u_code: np.ndarray, a_code: np.ndarray,
                   levels: _Levels, exposures: _Exposures, report: ZCheckReport,
                   problems: _Problems) -> None:
    matched = _match_outputs(src, out, out_u, out_v, u_code, a_code, levels)
    counts = np.zeros(len(out), dtype=np.int64)
    out_level = np.where(out_v >= 0, levels.level_depth[np.maximum(out_v, 0)], -1)
    for d, (pos, v, u, by_v) in enumerate(exposures):
        q = np.flatnonzero(matched & (out_level == d))
        if len(q):
            lo = _window_start(src.t, out.t[q], dt)
            hi = np.searchsorted(src.t, out.t[q], side="right") - 1
            counts[q] = _distinct_in_windows(v, u, pos, by_v, out_v[q], lo, hi,
                                             np.lexsort((out.t[q], out_v[q])), len(src))
    for j in np.flatnonzero(~matched).tolist():
        report.unmatched += 1
        problems.add("unmatched", j, (
            f"{_where(out, j, 'output')}: {_describe(out, j)} matches no unused input tuple of "
            f"user {out.u[j]} at that time with a value at or below {out.a[j]!r}"))
    for j in np.flatnonzero(matched & (counts < z)).tolist():
        report.privacy_violations += 1
        problems.add("privacy", j, (
            f"{_where(out, j, 'output')}: {_describe(out, j)} published with only "
            f"{counts[j]} distinct user(s) exposing {out.a[j]!r} in [t-{dt:g}, t] (z={z})"))


def _match_outputs(src: _Table, out: _Table, out_u: np.ndarray, out_v: np.ndarray,
                   u_code: np.ndarray, a_code: np.ndarray, levels: _Levels) -> np.ndarray:
    """One input tuple per output row: same user and time, value at or below the output's."""
    times = np.unique(src.t)
    rank_in = np.searchsorted(times, src.t)
    rank_out = np.searchsorted(times, out.t)
    found = (rank_out < len(times)) & (times[np.minimum(rank_out, len(times) - 1)] == out.t)
    width = len(times) + 1
    key_in = u_code * width + rank_in
    key_out = np.where(found & (out_u >= 0) & (out_v >= 0), out_u * width + rank_out, -1)
    order_in = np.argsort(key_in, kind="stable")
    sorted_in = key_in[order_in]
    first = np.searchsorted(sorted_in, key_out, side="left")
    size = np.searchsorted(sorted_in, key_out, side="right") - first
    size[key_out < 0] = 0
    _, inverse, per_key = np.unique(key_out, return_inverse=True, return_counts=True)
    alone = (size == 1) & (per_key[inverse] == 1)
    matched = np.zeros(len(out), dtype=bool)
    j = np.flatnonzero(alone)
    matched[j] = levels.contains(a_code[order_in[first[j]]], out_v[j])
    # several inputs or outputs share a user and time: match deepest outputs first (their
    # candidate sets nest, so this greedy choice finds a complete matching when one exists)
    crowded: dict[int, list[int]] = defaultdict(list)
    for jj in np.flatnonzero(~alone & (size > 0)).tolist():
        crowded[int(key_out[jj])].append(jj)
    for rows in crowded.values():
        start = int(first[rows[0]])
        free = order_in[start: start + int(size[rows[0]])].tolist()
        for jj in sorted(rows, key=lambda r: -int(levels.level_depth[out_v[r]])):
            for i in free:
                if levels.contains(a_code[i:i + 1], out_v[jj:jj + 1])[0]:
                    matched[jj] = True
                    free.remove(i)
                    break
    return matched

"""CASTLE rows in batches, their outcome lines and the merge (no PyFlink here).

Design: docs/design/flink.md
"""

from __future__ import annotations

import csv
import io
import json
import logging
import pickle
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice, repeat
from pathlib import Path
from typing import Any

import numpy as np

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.castle.records import CastleRow, Released, canonical
from streamanon.errors import BadRecordError, ConfigError, StreamanonError
from streamanon.flink.outcomes import (
    BLANK,
    HEADER,
    PUBLISHED,
    REJECTED,
    SUPPRESSED,
    CastleOutcome,
    castle_outcome_line,
    marker_line,
    read_outcomes,
    rejected_line,
)
from streamanon.io import InputError, OnError, RejectLog
from streamanon.io.clean import RowColumns
from streamanon.io.rows import CleanBlock, RowReader, RowWriter
from streamanon.records import Rejected, RunStats, Suppressed

log = logging.getLogger(__name__)

#: a parsed row on its way to a CASTLE partition: (partition, seq, values)
CastleInput = tuple[int, int, dict[str, Any]]

#: the line that ends one rule set on a ``--rules-from`` connection (never a TOML line
#: outside a multi-line string, which rules do not use)
RULES_END = "%%"
#: what a rule-set input carries: a whole ``--rules`` file, or one line of the live connection
RULES_FILE, RULES_LINE = 0, 1


def check_rules(text: str, id_field: str, params: dict[str, Any],
                columns: Sequence[str] = ()) -> RuleSet:
    """Parse a replacement rule set and refuse it (:class:`~streamanon.errors.ConfigError`,
    the reason) unless every partition can use it: same individual (the partitioning key),
    accepted by the operator with ``params`` (e.g. l > 1 needs a sensitive attribute), and,
    when the input's columns are known, naming only those columns."""
    rules = RuleSet.from_toml(text)
    if rules.id_field != id_field:
        raise ConfigError(f"the id field is {id_field!r} and cannot change while running "
                         f"(the partitions are keyed by it), got {rules.id_field!r}")
    CastleAnonymizer(rules, **params)
    named = [a.name for a in rules.attributes] + ([rules.time_field] if rules.time_field
                                                  else [])
    missing = [n for n in named if columns and n not in columns]
    if missing:
        raise ConfigError(f"the rules name column(s) {', '.join(missing)} that the input "
                         f"lacks (columns: {', '.join(columns)})")
    return rules


class RulesInbox:
    """Frame, check and number rule sets; the state is plain data (it lives in Flink state).

    The ``files`` ``--rules`` texts become versions 1..files whatever the arrival order;
    live rule sets that complete earlier wait for them. :meth:`feed` returns, per judged
    rule set, ``(note, text)``: ``text`` is the TOML of an accepted version, ``None`` for a
    refused one (the note says why).
    """

    def __init__(self, files: int, id_field: str, params: dict[str, Any],
                 columns: Sequence[str] = ()) -> None:
        self.files, self.id_field, self.params = files, id_field, params
        self.columns = list(columns)
        self.files_seen = self.messages = self.version = 0
        self.lines: list[str] = []
        self.waiting: list[str] = []

    def state(self) -> tuple:
        """A copy of the state (plain data, for a Flink ``ValueState``)."""
        return (self.files_seen, self.messages, self.version, list(self.lines),
                list(self.waiting))

    def restore(self, state: tuple) -> None:
        self.files_seen, self.messages, self.version, lines, waiting = state
        self.lines, self.waiting = list(lines), list(waiting)

    def feed(self, kind: int, payload: str) -> list[tuple[dict, str | None]]:
        out: list[tuple[dict, str | None]] = []
        if kind == RULES_FILE:
            if self.files_seen >= self.files:
                return out  # a rules file sent again by a restored source: judged already
            self.files_seen += 1
            out.append(self._judge(payload, "--rules"))
            if self.files_seen >= self.files:
                out += [self._judge(m, "--rules-from") for m in self.waiting]
                self.waiting = []
        elif payload.removesuffix("\r").strip() == RULES_END:
            text, self.lines = "\n".join(self.lines) + "\n", []
            if self.files_seen < self.files:
                self.waiting.append(text)
            else:
                out.append(self._judge(text, "--rules-from"))
        else:
            self.lines.append(payload.removesuffix("\r"))
        return out

    def finish(self) -> list[tuple[dict, str | None]]:
        """The end of the rule-set inputs: an unterminated rule set is refused, not used."""
        out: list[tuple[dict, str | None]] = [self._judge(m, "--rules-from")
                                              for m in self.waiting]
        self.waiting = []
        if any(line.strip() for line in self.lines):
            self.messages += 1
            out.append(({"event": "refused", "message": self.messages, "from": "--rules-from",
                         "reason": f"incomplete rule set: the connection closed before its "
                                   f"{RULES_END!r} line"}, None))
        self.lines = []
        return out

    def _judge(self, text: str, origin: str) -> tuple[dict, str | None]:
        self.messages += 1
        note: dict[str, Any] = {"message": self.messages, "from": origin}
        try:
            rules = check_rules(text, self.id_field, self.params,
                                self.columns if origin == "--rules-from" else ())
        except StreamanonError as exc:
            return {**note, "event": "refused", "reason": str(exc)}, None
        self.version += 1
        return {**note, "event": "accepted", "version": self.version,
                "rules": rules.describe()}, text


def partition_of(identity: Any, partitions: int) -> int:
    """The partition of an individual: a stable hash of its canonical id, mod ``partitions``.

    >>> partition_of(7, 4) == partition_of("7", 4) or True   # ids compare canonically
    True
    >>> partition_of(7.0, 4) == partition_of(7, 4)
    True
    """
    return zlib.crc32(canonical(identity).encode()) % partitions


class CastleChunkParser:
    """Blocks of input lines in; outcome lines (refused, header, blank) and one batch of rows
    per partition out. Lines are numbered across blocks; the state is :meth:`state`.

    Each block is read by one :class:`~streamanon.io.rows.RowReader` (behind the header for
    CSV), so rows are refused exactly as ``streamanon castle`` refuses them. A batch is the
    pickled list of one partition's rows in input order: the rows of a block the block reader
    found clean as :class:`ColumnRows` (no dict per row), the others as ``(seq, values)``
    (:func:`rows_of` gives them all as ``(seq, values)``; :func:`apply_batch` feeds them to
    an operator).

    Args:
        fmt: the input format (``csv`` or ``jsonl``).
        id_field: the id column (it decides a row's partition).
        numeric: the numeric columns (converted to float; a non-number is refused).
        partitions: the number of partitions (at least 1).
        source_name: the input's name in messages.

    >>> p = CastleChunkParser("csv", "id", ["age"], partitions=1)
    >>> meta, batches = p.feed(b"id,age\\n\\na,30\\nb,x")
    >>> meta
    ['1\\tH\\t["id", "age"]', '2\\tB', '4\\tR\\t["b,x", "field age is not a number: \\'x\\'"]']
    >>> [(part, rows_of(b)) for part, b in batches]
    [(0, [(3, {'id': 'a', 'age': 30.0})])]
    """

    def __init__(self, fmt: str, id_field: str, numeric: Sequence[str], partitions: int,
                 source_name: str = "input") -> None:
        if partitions < 1:
            raise ConfigError("partitions must be >= 1")
        self.fmt, self.id_field, self.numeric = fmt, id_field, list(numeric)
        self.partitions, self.source_name = partitions, source_name
        self.line = 0
        self.header: str | None = None
        self._partitions: dict[Any, int] = {}  # id -> partition (a cache; ids repeat)

    def _columns(self) -> list[str]:
        """The CSV header's column names, as the reader found them (cached per header)."""
        cached = getattr(self, "_cached_columns", None)
        if cached is None or cached[0] != self.header:
            probe = RowReader(io.StringIO(f"{self.header}\n"), "csv",
                              required=[self.id_field], source_name=self.source_name)
            list(probe)
            cached = self._cached_columns = (self.header, probe.columns)
        return list(cached[1])

    def state(self) -> tuple[int, str | None]:
        return self.line, self.header

    def restore(self, state: tuple[int, str | None]) -> None:
        self.line, self.header = state

    def feed(self, block: bytes | str) -> tuple[list[str], list[tuple[int, bytes]]]:
        meta, batches, _ = self.feed_seqs(block)
        return meta, batches

    def feed_seqs(self, block: bytes | str) -> tuple[list[str], list[tuple[int, bytes]],
                                                     list[np.ndarray]]:
        """As :meth:`feed`, and the line numbers of each batch's rows (a Kafka job sends
        each row's input position with its batch: no batch is read back for them)."""
        text = block.decode("utf-8", errors="replace") if isinstance(block, bytes) else block
        lines = text.split("\n")
        first = self.line + 1
        self.line += len(lines)
        meta: list[tuple[int, str]] = []
        body = 0  # index of the first line after the header
        if self.fmt == "csv" and self.header is None:
            for i, line in enumerate(lines):
                if line.strip():
                    # the reader checks the header (names, the id column), raises if bad
                    probe = RowReader(io.StringIO(line + "\n"), "csv", required=[self.id_field],
                                      source_name=self.source_name)
                    list(probe)
                    self.header = line
                    meta.append((first + i, f"{first + i}\t{HEADER}\t"
                                            f"{json.dumps(probe.columns)}"))
                    body = i + 1
                    break
            else:
                body = len(lines)
        covered = np.zeros(len(lines), dtype=bool)
        for seq, _ in meta:  # the header
            covered[seq - first] = True
        rows: list[tuple[int, dict[str, Any]]] = []
        blocks: list[tuple[int, CleanBlock]] = []  # (index in rows, block): rows as columns
        raw = block if isinstance(block, bytes) else _utf8_of(block)  # (a message chunk)
        if body < len(lines) and self.fmt == "csv" and raw is not None and \
                _block_lane_fits(raw):
            refused: list[Rejected] = []
            reader = RowReader(io.StringIO(""), "csv", on_error=OnError.skip,
                               rejects=refused.append, numeric=self.numeric,
                               required=[self.id_field], source_name=self.source_name,
                               columns=self._columns())
            skip = sum(map(len, lines[:body])) + body  # the header's block: characters ...
            data = raw if not skip else raw[len(text[:skip].encode()):]  # ... as bytes
            for part in reader.parse_parts(first + body, data.replace(b"\r\n", b"\n")):
                if type(part) is CleanBlock:
                    blocks.append((len(rows), part))
                    covered[part.first - first:part.first - first + part.columns.n] = True
                else:
                    rows.append((part.line or 0, part.values))
            for r in refused:
                meta.append((r.line, rejected_line(r)))
                covered[r.line - first] = True
            if rows:
                covered[np.fromiter((seq for seq, _ in rows), np.int64, len(rows)) - first] = True
        elif body < len(lines):
            refused = []
            src = "\n".join(lines[body:]) + "\n"
            offset = first + body - 1  # the reader numbers the block's first line 1 ...
            if self.fmt == "csv":
                src = f"{self.header}\n{src}"
                offset -= 1  # ... behind the header
            reader = RowReader(io.StringIO(src), self.fmt, on_error=OnError.skip,
                               rejects=refused.append, numeric=self.numeric,
                               required=[self.id_field], source_name=self.source_name)
            rows = [((r.line or 0) + offset, r.values) for r in reader]
            for r in refused:
                seq = r.line + offset
                meta.append((seq, rejected_line(Rejected(seq, r.text, r.reason))))
                covered[seq - first] = True
            if rows:
                covered[np.fromiter((seq for seq, _ in rows), np.int64, len(rows)) - first] = True
        # the rest is blank (or inside a quoted field that spans lines: not a row of its own)
        meta += [(seq, marker_line(seq, BLANK))
                 for seq in (np.flatnonzero(~covered) + first).tolist()]
        meta.sort(key=lambda m: m[0])
        parts: dict[int, list[Any]] = {}
        header = self._columns() if blocks else []
        at = 0  # the rows before the next block
        for index, clean in [*blocks, (len(rows), None)]:
            for row in rows[at:index]:
                parts.setdefault(self._partition_of(row[1][self.id_field]), []).append(row)
            at = index
            if clean is None:
                continue
            seqs = np.arange(clean.first, clean.first + clean.columns.n, dtype=np.int64)
            if self.partitions == 1:
                parts.setdefault(0, []).append(ColumnRows(seqs, header, clean.columns))
                continue
            of_row = self._partitions_of(clean.columns)
            for part in np.unique(of_row).tolist():
                sel = np.flatnonzero(of_row == part)
                parts.setdefault(part, []).append(
                    ColumnRows(seqs[sel], header, clean.columns.take(sel)))
        batches = sorted(parts.items())
        return [m[1] for m in meta], [
            (part, pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL))
            for part, batch in batches], [_seqs_of(batch) for _, batch in batches]

    def _partition_of(self, identity: Any) -> int:
        """:func:`partition_of`, remembered for text ids (they repeat)."""
        part_of = self._partitions
        cacheable = type(identity) is str  # (1, 1.0 and True are one dict key)
        part = part_of.get(identity, -1) if cacheable else -1
        if part < 0:
            part = partition_of(identity, self.partitions)
            if cacheable and len(part_of) < 1 << 16:
                part_of[identity] = part
        return part

    def _partitions_of(self, cols: RowColumns) -> np.ndarray:
        """The partition of each row of a clean block (a text id column: once per id)."""
        if self.id_field in cols.texts:
            names, codes = cols.texts[self.id_field]
            per_name = np.fromiter(map(self._partition_of, names), np.int64, len(names))
            return per_name[np.asarray(codes, dtype=np.int64)]  # type: ignore[no-any-return]
        ids = cols.numbers[self.id_field]
        return np.fromiter(map(self._partition_of, ids), np.int64, len(ids))


def _utf8_of(text: str) -> bytes | None:
    """``text`` as UTF-8 bytes for the block reader (None: it holds a lone surrogate, which
    only the text path reads as it is)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _block_lane_fits(block: bytes) -> bool:
    """Whether the block reader reads ``block`` (its CR LF line ends made LF) as reading its
    text line by line does: UTF-8 (the text path here replaces undecodable bytes) whose
    carriage returns all end a line (a line's end is stripped of every carriage return)."""
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            return False
    cr = block.count(b"\r")
    return not cr or cr == block.count(b"\r\n")


@dataclass
class ColumnRows:
    """Rows of a batch given as columns (a clean block's rows, or a partition's share of
    them): line ``seqs[i]`` has the fields of row ``i`` of ``columns`` in ``header``'s order.
    What :meth:`~streamanon.castle.CastleAnonymizer.process_block` takes: a dict is built only
    for a row that needs one."""

    seqs: np.ndarray
    header: list[str]
    columns: RowColumns


def rows_of(batch: bytes) -> list[tuple[int, dict[str, Any]]]:
    """The rows of a :class:`CastleChunkParser` batch: ``(seq, values)`` in input order.

    A batch is a pickled list of rows ``(seq, values)`` and :class:`ColumnRows`, in input
    order (the user's operator, :class:`~streamanon.flink.operator.CastleRecords`, sends
    rows only)."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for piece in pickle.loads(batch):
        if type(piece) is ColumnRows:
            header = piece.header
            rows += zip(piece.seqs.tolist(),
                        map(dict, map(zip, repeat(header), piece.columns.fields(header))),
                        strict=True)
        else:
            rows.append(piece)
    return rows


def _seqs_of(pieces: list[Any]) -> np.ndarray:
    """The line numbers of a batch's rows (its pieces: rows and :class:`ColumnRows`)."""
    return np.concatenate([piece.seqs if type(piece) is ColumnRows
                           else np.array([piece[0]], np.int64) for piece in pieces]
                          or [np.empty(0, np.int64)]).astype(np.int64, copy=False)


@dataclass
class BatchResult:
    """What a batch did to a partition's operator (:func:`apply_batch`)."""

    #: what the operator released and suppressed, in order
    items: list[Any]
    #: the rows the operator refused: ``(seq, values, reason)``
    refused: list[tuple[int, dict[str, Any], str]]
    #: the rows of the batch
    rows: int
    #: the input's columns, when the batch came as columns (``None``: not known from it)
    header: list[str] | None


def apply_batch(op: CastleAnonymizer, batch: bytes, lines: np.ndarray | None = None
                ) -> BatchResult:
    """Feed a :class:`CastleChunkParser` batch to a partition's operator: rows one by one
    (:meth:`~streamanon.castle.CastleAnonymizer.process`), :class:`ColumnRows` through the
    block entry point (:meth:`~streamanon.castle.CastleAnonymizer.process_block`), which
    gives the same outcomes. A refused row (``BadRecordError``) is reported and skipped, as
    ``streamanon castle`` skips it.

    Args:
        op: the partition's operator.
        batch: the batch.
        lines: row ``i``'s line for the operator (a Kafka job: its message's input position,
            as the pure command numbers a message's row); ``None``: the batch's line numbers.
    """
    result = BatchResult([], [], 0, None)
    items, refused = result.items, result.refused
    at = 0  # the rows before the piece
    for piece in pickle.loads(batch):
        if type(piece) is not ColumnRows:
            seq, values = piece
            if lines is not None:
                seq = int(lines[at])
            at += 1
            result.rows += 1
            try:
                items += op.process(CastleRow(values, seq))
            except BadRecordError as exc:
                refused.append((seq, values, str(exc)))
            continue
        cols, header = piece.columns, piece.header
        result.header = header
        result.rows += cols.n
        seqs = (piece.seqs if lines is None else lines[at:at + cols.n]).tolist()
        at += cols.n
        fields = cols.fields(header)
        start = 0
        while start < cols.n:
            out, taken, error = op.process_block(
                fields, n=cols.n, numbers=cols.numbers, texts=cols.texts, start=start,
                lines=seqs, header=header)
            items += out
            if error is None:
                break
            bad = start + taken  # (its fields were taken from ``fields``: the rest follow)
            values = dict(zip(header, next(islice(cols.fields(header), bad, None)),
                              strict=True))
            refused.append((seqs[bad], values, str(error)))
            start = bad + 1
    return result


def outcome_items(out: Iterable[Any]) -> list[CastleOutcome]:
    """What a :class:`~streamanon.castle.CastleAnonymizer` call returned, as outcome tuples
    (for one :func:`~streamanon.flink.outcomes.castle_batch_line` per batch)."""
    items: list[CastleOutcome] = []
    for x in out:
        if isinstance(x, Suppressed):
            # the row's values too: a Kafka output writes suppressed rows (--suppressed)
            items.append((x.record.line, SUPPRESSED, x.reason, x.record.values))
        else:
            assert isinstance(x, Released)
            items.append((x.line, PUBLISHED, x.loss, x.values))
    return items


@dataclass
class WrittenOutcomes:
    """What a CASTLE call returned, written as ``streamanon castle`` writes it
    (:func:`written_outcomes`): text of one output line per row, and each row's line."""

    #: the released rows' lines (a Kafka job: their input positions), in output order
    released: np.ndarray
    #: their output lines
    released_text: bytes
    #: the suppressed rows' lines, in output order
    suppressed: np.ndarray
    #: their lines for ``--suppressed`` (``b""``: not written)
    suppressed_text: bytes
    #: each suppressed row's reason
    reasons: list[str]


def written_outcomes(out: list[Any], columns: Sequence[str] | None, fmt: str,
                     loss_field: str | None = None, suppressed_format: str | None = None
                     ) -> WrittenOutcomes:
    """What a CASTLE call returned, written as ``streamanon castle`` writes it: the released
    rows in ``fmt`` (the input's ``columns``, then the loss field;
    :func:`~streamanon.pipeline.stages.write_released`, a class at a time), the suppressed
    ones in ``suppressed_format`` (their input values, the loss field and the reason).

    Args:
        out: what the operator returned, in order.
        columns: the input's columns (``None``: the first row's, as a CSV reader made them).
        fmt: the released rows' format (``csv`` or ``jsonl``).
        loss_field: the column of each row's class loss (``None``: none).
        suppressed_format: the suppressed rows' format (``None``: not written).

    >>> from streamanon.castle.records import Released
    >>> w = written_outcomes([Released({"id": "a", "age": "[30-40]"}, 0.5, 1, 7),
    ...                       Suppressed(CastleRow({"id": "b", "age": 33.0}, 8), "too few")],
    ...                      None, "csv", suppressed_format="csv")
    >>> w.released, w.released_text, w.suppressed, w.suppressed_text, w.reasons
    (array([7]), b'a,[30-40]\\n', array([8]), b'b,33,too few\\n', ['too few'])
    """
    from streamanon.pipeline.stages import write_released

    released = [x for x in out if not isinstance(x, Suppressed)]
    suppressed = [x for x in out if isinstance(x, Suppressed)]
    if columns is None:
        first = released[0].values if released else (
            suppressed[0].record.values if suppressed else {})
        columns = [c for c in first if c != loss_field]
    cols = [*columns, *([loss_field] if loss_field and loss_field not in columns else [])]
    text = _written(fmt, cols, lambda writer: write_released(writer, released))
    sup_text = b""
    if suppressed_format is not None and suppressed:
        sup_text = _written(suppressed_format, [*cols, "reason"], lambda writer: writer.write_many(
            [{**x.record.values, "reason": x.reason} for x in suppressed]))
    return WrittenOutcomes(
        np.fromiter((x.line for x in released), np.int64, len(released)), text,
        np.fromiter((x.record.line for x in suppressed), np.int64, len(suppressed)), sup_text,
        [x.reason for x in suppressed])


def _written(fmt: str, columns: list[str], write: Callable[[RowWriter], None]) -> bytes:
    """What ``write`` writes with a row writer of ``columns`` in ``fmt`` (no header line)."""
    from streamanon.pipeline.stages import row_writer

    (buf, writer), _ = row_writer(fmt, columns)
    write(writer)
    return buf.getvalue().encode("utf-8")


def outcome_lines(out: Iterable[Any]) -> list[str]:
    """Text outcome lines of what a :class:`~streamanon.castle.CastleAnonymizer` call
    returned (as :func:`~streamanon.flink.outcomes.castle_text_lines` expands a batch)."""
    return [castle_outcome_line(o) for o in outcome_items(out)]


def refused_row(seq: int, values: dict[str, Any], fmt: str, columns: Sequence[str],
                reason: str) -> Rejected:
    """A row the operator refused (ValueError), as the pure path's rejects file writes it
    (as JSON when the CSV columns are unknown, e.g. for a socket source).

    Args:
        seq: the row's input line number (a Kafka job: its input position).
        values: the row's values.
        fmt: the input format (``csv`` or ``jsonl``).
        columns: the input's CSV columns (empty when not known).
        reason: why the operator refused the row.
    """
    if fmt == "jsonl" or not columns:
        text = json.dumps(values, default=str)
    else:
        text = ",".join("" if values.get(c) is None else str(values.get(c)) for c in columns)
    return Rejected(seq, text, reason)


@dataclass
class CastleMergeResult:
    stats: RunStats
    suppressed_by_reason: dict[str, int] = field(default_factory=dict)
    mean_cluster_loss: float = 0.0
    first_error: InputError | None = None
    #: rule sets accepted (with the partitions that installed them) and refused, in order
    rules: list[dict] = field(default_factory=list)


def merge_castle_outcomes(
    out_dir: str | Path,
    output: str | Path,
    *,
    out_format: str = "csv",
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    rejects_name: str | None = None,
    source: str = "input",
) -> CastleMergeResult:
    """Released rows in input order into ``output`` (the columns of ``streamanon castle``).

    Checks one outcome per input line (:func:`~streamanon.flink.outcomes.read_outcomes`).

    Args:
        out_dir: the folder of the job's outcome part files.
        output: the file of the released rows (``-``: stdout).
        out_format: the output format (``csv`` or ``jsonl``).
        on_error: ``fail`` stops at the first rejected row (the result carries its error);
            ``skip`` writes it to ``rejects_path``.
        rejects_path: where rejected rows go (``None``: nowhere).
        rejects_name: the rejects file's name in messages (when ``rejects_path`` is temporary).
        source: the input's name in messages.
    """
    notes: list[dict] = []
    rows = read_outcomes(out_dir, notes).lines
    stats = RunStats()
    result = CastleMergeResult(stats, rules=rules_report(notes))
    rejects = RejectLog(rejects_path, source, rejects_name)
    writer: RowWriter | None = None
    columns: list[str] = []
    loss_sum = 0.0
    try:
        for _, line in rows:
            # an outcome of a batch line is a tuple already; a text line is parsed
            parts: Sequence[Any] = line if isinstance(line, tuple) else line.split("\t", 3)
            kind = parts[1]
            text_line = isinstance(line, str)
            if kind == HEADER:
                columns = json.loads(parts[2])
            elif kind == PUBLISHED:
                values = json.loads(parts[3]) if text_line else parts[3]
                if writer is None:
                    writer = RowWriter(output, out_format, columns or list(values))
                writer.write(values)
                loss_sum += float(parts[2])
                stats.count_released()
            elif kind == SUPPRESSED:
                reason = json.loads(parts[2]) if text_line else parts[2]
                result.suppressed_by_reason[reason] = result.suppressed_by_reason.get(
                    reason, 0) + 1
                stats.count_suppressed()
            elif kind == REJECTED:
                text, reason = json.loads(parts[2])
                rejected = Rejected(int(parts[0]), text, reason)
                if OnError(on_error) is OnError.fail:
                    result.first_error = InputError(rejected, source)
                    break
                rejects(rejected)
                stats.count_rejected()
            if kind in (PUBLISHED, SUPPRESSED, REJECTED):
                stats.count_read()
        if writer is None:
            writer = RowWriter(output, out_format, columns)
    finally:
        if writer is not None:
            writer.close()
        rejects.close()
        rejects.warn_summary()
    result.mean_cluster_loss = loss_sum / max(1, stats.released)
    return result


def rules_report(notes: Iterable[dict]) -> list[dict]:
    """The fate of every rule set from the notes: accepted and refused ones in order, an
    accepted one with ``installed_by``, the partitions' subtasks that installed it."""
    notes = list(notes)
    report = sorted((dict(n) for n in notes if n.get("event") in ("accepted", "refused")),
                    key=lambda n: n["message"])
    for n in report:
        if n["event"] == "accepted":
            n["installed_by"] = sorted({m["subtask"] for m in notes if m.get("event") ==
                                        "installed" and m["version"] == n["version"]})
    return report


def header_columns(path: str | Path) -> list[str]:
    """The column names of a CSV file's header (for the client's early checks)."""
    with open(path, encoding="utf-8", newline="") as fh:
        for fields in csv.reader(fh):
            if fields and any(f.strip() for f in fields):
                return [f.strip() for f in fields]
    return []

"""The outcome lines the Flink jobs write, and their merge into one ``streamanon z`` file.

Design: docs/design/flink.md
"""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamanon.errors import OutcomeGap
from streamanon.io import InputError, OnError, RecordBatch, RecordWriter, RejectLog
from streamanon.io.fastcsv import ArrowColumns
from streamanon.records import Rejected, RunStats

PUBLISHED, SUPPRESSED, REJECTED, HEADER, BLANK = "P", "S", "R", "H", "B"
NOTE = "#"  # first field of a note line: about the job (rule sets), not about an input line
BATCH = "@"  # first field of a line holding a whole outcome batch
CASTLE_BATCH = "&"  # first field of a line holding a batch of CASTLE outcomes

#: one CASTLE outcome: ``(seq, "P", loss, values)`` released (generalized values) or
#: ``(seq, "S", reason, values)`` suppressed (the input values, for ``--suppressed``)
CastleOutcome = tuple[int, str, "float | str", dict]

#: the columns of an outcome batch: ``level`` -1 = suppressed; ``t_text``, ``u`` and ``a``
#: (the published, possibly generalized value) are null for suppressed rows
OUTCOMES = pa.schema([("seq", pa.int64()), ("level", pa.int8()), ("restamped", pa.bool_()),
                      ("t_text", pa.string()), ("u", pa.string()),
                      ("a", pa.dictionary(pa.int32(), pa.string()))])
_PLAIN = pa.schema([f if f.name != "a" else pa.field("a", pa.string()) for f in OUTCOMES])
_WRITE_ROWS = 1 << 17  # rows per write while merging (bounds the Python lists)


def published_line(seq: int, level: int, restamped: bool, t_text: str, u: str, a: str) -> str:
    """The outcome line of a published record.

    Args:
        seq: the record's input line number.
        level: the hierarchy level at which the value was published.
        restamped: whether the record's time was re-stamped.
        t_text: the time as written in the input.
        u: the user.
        a: the published value.
    """
    return f"{seq}\t{PUBLISHED}\t{level}\t{int(restamped)}\t{json.dumps([t_text, u, a])}"


def suppressed_line(seq: int, restamped: bool) -> str:
    return f"{seq}\t{SUPPRESSED}\t{int(restamped)}"


def rejected_line(rejected: Rejected) -> str:
    return f"{rejected.line}\t{REJECTED}\t{json.dumps([rejected.text, rejected.reason])}"


def marker_line(seq: int, kind: str) -> str:
    return f"{seq}\t{kind}"


def note_line(note: dict) -> str:
    """A note in the outcome stream (e.g. a rule set accepted, refused or installed)."""
    return f"{NOTE}\t{json.dumps(note, sort_keys=True)}"


#: Arrow IPC buffer compression of the batches between tasks (fast: the JVM copies every byte
#: a few times on its way, so fewer bytes cost less there than the compression costs here; a
#: 1M-tuple z run moves 60 MB of record batches uncompressed, about 25 MB with LZ4) ...
RECORDS_CODEC = "lz4"
#: ... and of the outcome batches, which are also written to disk and read back by the merge
#: as base64 text (zstd: 40 MB of outcomes become 15 MB)
OUTCOMES_CODEC = "zstd"


def encode_batch(batch: pa.RecordBatch, codec: str | None = None) -> bytes:
    """Arrow IPC stream bytes of ``batch`` (the one serialization a batch goes through),
    its buffers compressed with ``codec`` (``lz4``, ``zstd``) when given."""
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=codec) if codec else None
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def decode_batch(data: bytes) -> pa.RecordBatch:
    """The record batch of :func:`encode_batch` bytes (zero-copy over ``data`` unless it
    was compressed)."""
    return pa.ipc.open_stream(pa.py_buffer(data)).read_next_batch()


def outcome_batch_line(outcomes: pa.RecordBatch) -> str:
    """One part-file line holding a whole outcome batch: ``@ \\t base64(Arrow IPC)``."""
    return f"{BATCH}\t{base64.b64encode(encode_batch(outcomes, OUTCOMES_CODEC)).decode('ascii')}"


def outcome_batch_of(line: str) -> pa.RecordBatch:
    """The outcome batch of an :func:`outcome_batch_line` (the ``@`` field included)."""
    return decode_batch(base64.b64decode(line[len(BATCH) + 1:]))


def outcome_text_lines(outcomes: pa.RecordBatch) -> list[str]:
    """An outcome batch as one outcome line per input line.

    >>> batch = pa.RecordBatch.from_pylist(
    ...     [{"seq": 7, "level": 1, "restamped": False, "t_text": "5", "u": "al", "a": "EU*FR"},
    ...      {"seq": 9, "level": -1, "restamped": True}], schema=OUTCOMES)
    >>> outcome_text_lines(outcome_batch_of(outcome_batch_line(batch)))
    ['7\\tP\\t1\\t0\\t["5", "al", "EU*FR"]', '9\\tS\\t1']
    """
    cols = [outcomes.column(c).to_pylist() for c in ("seq", "level", "restamped", "t_text",
                                                     "u", "a")]
    return [published_line(seq, lvl, rs, tt, u, a) if lvl >= 0 else suppressed_line(seq, rs)
            for seq, lvl, rs, tt, u, a in zip(*cols, strict=True)]


def castle_batch_line(outcomes: list[CastleOutcome]) -> str:
    """One part-file line holding a batch of CASTLE outcomes: ``& \\t base64(pickle)``."""
    data = pickle.dumps(outcomes, protocol=pickle.HIGHEST_PROTOCOL)
    return f"{CASTLE_BATCH}\t{base64.b64encode(data).decode('ascii')}"


def castle_batch_of(line: str) -> list[CastleOutcome]:
    """The outcomes of a :func:`castle_batch_line` (the ``&`` field included)."""
    return pickle.loads(base64.b64decode(line[len(CASTLE_BATCH) + 1:]))


def castle_outcome_line(outcome: CastleOutcome) -> str:
    """The text outcome line of one CASTLE outcome.

    >>> castle_outcome_line((4, "P", 0.25, {"id": "a", "age": "[30-40]"}))
    '4\\tP\\t0.25\\t{"id": "a", "age": "[30-40]"}'
    >>> castle_outcome_line((5, "S", "delta expired", {"id": "b", "age": 31.0}))
    '5\\tS\\t"delta expired"\\t{"id": "b", "age": 31.0}'
    """
    seq, kind, detail, values = outcome
    detail_text = repr(detail) if kind == PUBLISHED else json.dumps(detail)
    return f"{seq}\t{kind}\t{detail_text}\t{json.dumps(values)}"


def castle_text_lines(line: str) -> list[str]:
    """A CASTLE batch line as one text outcome line per input line.

    >>> castle_text_lines(castle_batch_line([(2, "P", 0.5, {"id": "a"}),
    ...                                      (3, "S", "too few", {"id": "b"})]))
    ['2\\tP\\t0.5\\t{"id": "a"}', '3\\tS\\t"too few"\\t{"id": "b"}']
    """
    return [castle_outcome_line(o) for o in castle_batch_of(line)]


def text_lines_of(lines: Iterable[str], *, z_batches: bool = True) -> list[str]:
    """Part-file lines with every outcome batch expanded into outcome lines (z's ``@``
    batches only when ``z_batches``: a reader of their columns keeps them)."""
    out: list[str] = []
    for line in lines:
        if z_batches and line.startswith(BATCH + "\t"):
            out += outcome_text_lines(outcome_batch_of(line))
        elif line.startswith(CASTLE_BATCH + "\t"):
            out += castle_text_lines(line)
        else:
            out.append(line)
    return out


def _plain(batch: pa.RecordBatch) -> pa.RecordBatch:
    """An outcome batch with ``a`` as plain text (batches carry their own dictionaries)."""
    a = batch.column("a").cast(pa.string())
    return pa.RecordBatch.from_arrays([*batch.columns[:5], a], schema=_PLAIN)


def part_files(out_dir: str | Path) -> list[Path]:
    """The committed part files under ``out_dir`` (hidden in-progress files are skipped)."""
    root = Path(out_dir)
    return sorted(
        p for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


@dataclass
class Outcomes:
    """The outcomes of a job's part files: text outcome lines (and CASTLE outcomes, as
    :data:`CastleOutcome` tuples) and the rows of z's outcome batches (:data:`OUTCOMES`,
    ``a`` decoded to text), both sorted by input line."""

    lines: list[tuple[int, str | CastleOutcome]]
    table: pa.Table

    def __len__(self) -> int:
        return len(self.lines) + self.table.num_rows


def read_outcomes(out_dir: str | Path, notes: list[dict] | None = None) -> Outcomes:
    """All outcomes of the committed part files; checks one outcome per input line.

    Note lines are not outcomes: they go to ``notes`` (in file order) when given."""
    rows: list[tuple[int, str | CastleOutcome]] = []
    batches: list[pa.RecordBatch] = []
    for path in part_files(out_dir):
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                line = line.rstrip("\n")
                if line.startswith(BATCH + "\t"):
                    batches.append(_plain(outcome_batch_of(line)))
                elif line.startswith(CASTLE_BATCH + "\t"):
                    rows += [(o[0], o) for o in castle_batch_of(line)]
                elif line.startswith(NOTE + "\t"):
                    if notes is not None:
                        notes.append(json.loads(line[2:]))
                elif line:
                    rows.append((int(line[: line.index("\t")]), line))
    rows.sort(key=lambda r: r[0])
    table = pa.Table.from_batches(batches, schema=_PLAIN).combine_chunks() if batches else \
        _PLAIN.empty_table()
    seq = table.column("seq").to_numpy()
    table = _sorted(table)
    _check_contiguous(np.concatenate((seq, np.fromiter((r[0] for r in rows), np.int64,
                                                       len(rows)))), out_dir)
    return Outcomes(rows, table)


def _check_contiguous(seqs: np.ndarray, out_dir: str | Path) -> None:
    """Line numbers must be exactly 1..n: a duplicate or a gap is an error, never hidden."""
    seqs = np.sort(seqs)
    wrong = np.flatnonzero(seqs != np.arange(1, len(seqs) + 1))
    if len(wrong):
        i = int(wrong[0]) + 1
        seq = int(seqs[i - 1])
        what = "duplicate" if seq < i else "missing"
        raise OutcomeGap(
            f"{what} outcome at input line {min(seq, i)}: the part files under {out_dir} "
            f"do not hold exactly one outcome per line ({len(seqs)} outcomes)"
        )


@dataclass
class MergeResult:
    """What a merge wrote, with the accounting of the run."""

    stats: RunStats
    published_per_level: list[int] = field(default_factory=list)
    restamped: int = 0
    first_error: InputError | None = None


def merge_outcomes(
    out_dir: str | Path,
    output: str | Path,
    *,
    out_format: str = "csv",
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    rejects_name: str | None = None,
    source: str = "input",
) -> MergeResult:
    """Write the published rows of ``out_dir`` in input order to ``output`` (as ``streamanon z``).

    Under ``on_error=fail`` the rows before the first rejected line are written and the result
    carries that line's :class:`~streamanon.io.InputError` (the caller raises it), exactly as
    the pure-Python path stops; under ``skip`` rejected lines go to ``rejects_path``.

    Args:
        out_dir: the folder of the job's outcome part files.
        output: the file of the published rows (``-``: stdout).
        out_format: the output format (``csv`` or ``jsonl``).
        on_error: ``fail`` stops at the first rejected line; ``skip`` writes it to ``rejects_path``.
        rejects_path: where rejected lines go (``None``: nowhere).
        rejects_name: the rejects file's name in messages (when ``rejects_path`` is temporary).
        source: the input's name in messages.
    """
    found = read_outcomes(out_dir)
    return merge_rows((line for _, line in found.lines), output, out_format=out_format,
                      on_error=on_error, rejects_path=rejects_path, rejects_name=rejects_name,
                      source=source, batches=found.table)


def merge_rows(
    lines: Iterable[str],
    output: str | Path,
    *,
    out_format: str = "csv",
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    rejects_name: str | None = None,
    source: str = "input",
    batches: pa.Table | None = None,
) -> MergeResult:
    """:func:`merge_outcomes` on outcome lines in input order (and outcome-batch rows sorted
    by input line, e.g. from :func:`read_outcomes`). ``rejects_name`` is the rejects file's
    name in messages (when ``rejects_path`` is a temporary file).

    Args:
        lines: the outcome lines, in input order.
        output: the file of the published rows (``-``: stdout).
        out_format: the output format (``csv`` or ``jsonl``).
        on_error: ``fail`` stops at the first rejected line; ``skip`` writes it to ``rejects_path``.
        rejects_path: where rejected lines go (``None``: nowhere).
        rejects_name: the rejects file's name in messages (when ``rejects_path`` is temporary).
        source: the input's name in messages.
        batches: the outcome-batch rows, sorted by input line (``None``: none).
    """
    text: dict[str, list] = {c: [] for c in _PLAIN.names}
    rejected: list[Rejected] = []
    for kind, fields in _parse(lines):
        if kind == PUBLISHED:
            t_text, u, a = json.loads(fields[3])
            row = (int(fields[0]), int(fields[1]), bool(int(fields[2])), t_text, u, a)
        elif kind == SUPPRESSED:
            row = (int(fields[0]), -1, bool(int(fields[1])), None, None, None)
        elif kind == REJECTED:
            text_, reason = json.loads(fields[1])
            rejected.append(Rejected(int(fields[0]), text_, reason))
            continue
        else:
            continue
        for name, value in zip(_PLAIN.names, row, strict=True):
            text[name].append(value)
    table = pa.table(text, schema=_PLAIN)
    if batches is not None and batches.num_rows:
        table = _sorted(pa.concat_tables([batches, table]).combine_chunks()) if \
            table.num_rows else batches
    stats = RunStats()
    result = MergeResult(stats)
    first_error = None
    if rejected and OnError(on_error) is OnError.fail:
        first_error = InputError(rejected[0], source)
        seq = table.column("seq").to_numpy()
        table = table.slice(0, int(np.searchsorted(seq, rejected[0].line)))
        rejected = []
    level = table.column("level").to_numpy()
    published = level >= 0
    result.published_per_level = np.bincount(level[published]).tolist() if published.any() \
        else []
    result.restamped = int(np.count_nonzero(table.column("restamped").to_numpy(
        zero_copy_only=False)))
    stats.count_read(table.num_rows + len(rejected))
    stats.count_released(int(published.sum()))
    stats.count_suppressed(table.num_rows - int(published.sum()))
    stats.count_rejected(len(rejected))
    rows = table.filter(pa.array(published)).combine_chunks()
    rejects = RejectLog(rejects_path, source, rejects_name)
    try:
        with RecordWriter(output, out_format) as writer:
            for lo in range(0, rows.num_rows, _WRITE_ROWS):
                _write(writer, rows.slice(lo, _WRITE_ROWS))
        for r in rejected:
            rejects(r)
    finally:
        rejects.close()
        rejects.warn_summary()
    result.first_error = first_error
    return result


def _sorted(table: pa.Table) -> pa.Table:
    return table.take(pa.array(np.argsort(table.column("seq").to_numpy(), kind="stable")))


def _write(writer: RecordWriter, rows: pa.Table) -> None:
    """Published rows as the pure command writes them: a CSV chunk whose values need no
    quoting goes through the writer's Arrow lane (as a fast-lane batch of ``streamanon z``
    does), anything else through its Python lane, which quotes."""
    t_text = rows.column("t_text").combine_chunks()
    u, a = (pc.dictionary_encode(rows.column(c).combine_chunks()) for c in ("u", "a"))
    plain = writer.fmt == "csv" and not any(
        pc.any(pc.match_substring_regex(col, r'[,"\r\n]')).as_py()
        for col in (t_text, u.dictionary, a.dictionary))
    if plain:
        n = rows.num_rows
        batch = RecordBatch(np.zeros(n), None, None, None, range(n),
                            lane=ArrowColumns(np.zeros(n), t_text, u, a))
        a_codes = a.indices.to_numpy(zero_copy_only=False)
        writer.write_selected(batch, np.arange(n), a_codes, batch.codes()[3])
    else:
        writer.write_columns(t_text.to_pylist(), *(c.dictionary.take(c.indices).to_pylist()
                                                   for c in (u, a)))


def _parse(lines: Iterable[str]) -> Iterator[tuple[str, list[str]]]:
    """``(kind, [seq, *fields])`` of each text outcome line."""
    for line in lines:
        seq, kind, *rest = line.split("\t", 4)
        yield kind, [seq, *rest]

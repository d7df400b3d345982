"""z-anonymity in columnar batches: the parsing step, the key groups, the per-group operator and
the outcome batches of the Flink z job (no PyFlink here; pyarrow and numpy only).

>>> parser = ZChunkParser("csv", key_groups=4)
>>> meta, batches = parser.feed(b"t,u,a\\n1,alice,EU*FR\\n\\noops\\n2,bob,EU*DE")
>>> meta
['1\\tH', '3\\tB', '4\\tR\\t["oops", "expected 3 comma-separated fields, got 1"]']
>>> batches   # one key group; few records travel as row tuples (seq, t, t_text, u, a, restamped)
[(0, [(2, 1.0, '1', 'alice', 'EU*FR', False), (5, 2.0, '2', 'bob', 'EU*DE', False)])]
>>> op = ZGroupOperator(z=2, delta_t=10)
>>> op.process(batches[0][1])   # the part-file text of the outcomes, and the rows
('2\\tS\\t0\\n5\\tP\\t0\\t0\\t["2", "bob", "EU"]', 2)

Design: docs/design/flink.md
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamanon.errors import ConfigError
from streamanon.flink.outcomes import (
    BLANK,
    HEADER,
    OUTCOMES,
    RECORDS_CODEC,
    decode_batch,
    encode_batch,
    marker_line,
    outcome_batch_line,
    published_line,
    rejected_line,
    suppressed_line,
)
from streamanon.io.fastcsv import ArrowColumns
from streamanon.io.policy import OnError
from streamanon.io.readers import DEFAULT_MAX_VALUE_LEN, RecordBatch, _Reader
from streamanon.records import Record, Rejected, Suppressed
from streamanon.zanon.operator import SEPARATOR, ZAnonymizer

#: key groups of the z job: fixed, so that state keyed by group survives any rescaling (it is
#: also Flink's default maximum parallelism, the most subtasks a job can use)
Z_KEY_GROUPS = 128

#: a group's batch of at most this many records from the reader's Python lane travels as a
#: list of row tuples ``(seq, t, t_text, u, a, restamped)``, any other as Arrow IPC bytes
#: (:data:`RECORDS`): on a slow stream a batch holds a few records, and Arrow's and the
#: batch engine's fixed costs per call (a few hundred microseconds) would be most of the work
SMALL_BATCH = 32
#: a block of more lines takes the reader's Arrow lane when clean (fewer cost less in its
#: Python lane, which accepts, re-stamps and rejects exactly alike)
ARROW_LINES = 256
#: a batch of records on its way to a z operator: Arrow IPC bytes, or a list of row tuples
Batch = bytes | list
#: the columns of a batch of valid records on its way to a z operator
RECORDS = pa.schema([("seq", pa.int64()), ("t", pa.float64()), ("t_text", pa.string()),
                     ("u", pa.string()), ("a", pa.string()), ("restamped", pa.bool_())])


def key_group_of(coarsest: str, key_groups: int = Z_KEY_GROUPS) -> int:
    """The key group of a coarsest hierarchy level: stable in every process and run.

    >>> key_group_of("EU", 128), key_group_of("EU", 4)
    (68, 0)
    """
    return zlib.crc32(coarsest.encode("utf-8")) % key_groups


class ZChunkParser:
    """Blocks of input lines in; outcome lines (rejected, header, blank) and per-key-group
    record batches out. Lines are numbered across blocks; the whole state is :meth:`state`.

    ``block`` is whole lines joined by ``\\n`` without the last line end (a block of
    :func:`streamanon.flink.splits.line_blocks`, or stream lines joined); bytes take the
    reader's Arrow fast lane when clean.

    Args:
        fmt: the input format (``csv`` or ``jsonl``).
        time_tolerance: seconds a time may go backwards before a record is refused.
        max_value_len: the longest value accepted, in characters.
        separator: the separator of hierarchical values (the coarsest level picks the key group).
        source_name: the input's name in messages.
        key_groups: the number of key groups (at least 1).
        batch_size: the most records in one batch (at least 1).
        codec: the compression of the Arrow batches' buffers (``None``: none; a batch that
            goes only to another task of one machine costs less uncompressed).
    """

    def __init__(
        self,
        fmt: str = "csv",
        *,
        time_tolerance: float = 0.0,
        max_value_len: int = DEFAULT_MAX_VALUE_LEN,
        separator: str = SEPARATOR,
        source_name: str = "input",
        key_groups: int = Z_KEY_GROUPS,
        batch_size: int = 1 << 16,
        codec: str | None = RECORDS_CODEC,
    ) -> None:
        if key_groups < 1 or batch_size < 1:
            raise ConfigError("key_groups and batch_size must be >= 1")
        self.fmt, self.separator = fmt, separator
        self.key_groups, self.batch_size = key_groups, batch_size
        self.codec = codec
        self.line = 0
        # on_error=skip here: the policy is applied at the merge, which sees every rejection
        self.reader = _Reader(fmt, OnError.skip, None, time_tolerance, max_value_len,
                              source_name)
        self._groups: dict[str, int] = {}  # coarsest level -> key group (a bounded cache)

    def state(self) -> tuple:
        r = self.reader
        return self.line, r.clock, r.header, r.ncols

    def restore(self, state: tuple) -> None:
        r = self.reader
        self.line, r.clock, r.header, r.ncols = state

    # -- parsing -----------------------------------------------------------------------------
    def feed(self, block: bytes | str) -> tuple[list[str], list[tuple[int, Batch]]]:
        """Outcome lines that need no operator, and ``(key group, batch)`` pairs."""
        meta, batches, _ = self.feed_seqs(block)
        return meta, batches

    def feed_seqs(self, block: bytes | str) -> tuple[list[str], list[tuple[int, Batch]],
                                                     list[np.ndarray]]:
        """As :meth:`feed`, and the line numbers of each batch's rows (a Kafka job sends
        each row's input position with its batch: no batch is read back for them)."""
        nl = b"\n" if isinstance(block, bytes) else "\n"
        first = self.line + 1
        n = block.count(nl) + 1  # type: ignore[arg-type]
        self.line += n
        reader = self.reader
        start, data = first, block
        header_line = 0
        if self.fmt == "csv" and reader.header is None:
            start, data = reader.take_header(first, block)
            if start > first and reader.header is not None:
                last = block.split(nl, start - first)[start - first - 1]  # type: ignore[arg-type]
                if last.strip():  # the last line consumed is the header, not a blank one
                    header_line = start - 1
        batch: RecordBatch | None = None
        rejects: list[Rejected] = []
        restamped: np.ndarray | None = None
        if data:
            if self.fmt == "csv" and isinstance(data, bytes) and n > ARROW_LINES:
                batch = reader.fast_csv_chunk(start, data)  # (the Arrow lane; a few lines
                # cost less in the Python lane, which decides exactly the same)
            if batch is None:
                text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) \
                    else data
                cols = reader.csv_chunk(start, text) if self.fmt == "csv" else \
                    reader.jsonl_chunk(start, text)
                given = (list(cols.line), list(cols.t_text))  # finish() re-stamps in place
                batch, rejects = reader.finish(cols)
                if batch.restamped:  # re-stamped rows are the ones whose time text changed
                    text_of = dict(zip(*given, strict=True))
                    restamped = np.fromiter((text_of[ln] != tt for ln, tt in
                                             zip(batch.line, batch.t_text, strict=True)),
                                            bool, len(batch))
        meta = self._meta_lines(first, n, header_line, batch, rejects)
        if batch is None or not len(batch):
            return meta, [], []
        if batch.lane is None:
            return (meta, *self._rows_by_group(batch, restamped))
        return (meta, *self._split_by_group(batch, restamped))

    def _group_of(self, value: str) -> int:
        coarsest = value.split(self.separator, 1)[0]
        group = self._groups.get(coarsest)
        if group is None:
            if len(self._groups) > 1 << 16:
                self._groups.clear()
            group = self._groups[coarsest] = key_group_of(coarsest, self.key_groups)
        return group

    def _rows_by_group(self, batch: RecordBatch, restamped: np.ndarray | None
                       ) -> tuple[list[tuple[int, Batch]], list[np.ndarray]]:
        """Records of the Python lane, grouped in Python: row tuples for a small group,
        Arrow for a large one; and each batch's line numbers."""
        flags = restamped.tolist() if restamped is not None else [False] * len(batch)
        groups: dict[int, list[tuple]] = {}
        for row in zip(batch.line, batch.t.tolist(), batch.t_text, batch.u, batch.a, flags,
                       strict=True):
            groups.setdefault(self._group_of(row[4]), []).append(row)
        size = self.batch_size
        out: list[tuple[int, Batch]] = []
        seqs: list[np.ndarray] = []
        for g, rows in sorted(groups.items()):
            for lo in range(0, len(rows), size):
                part = rows[lo:lo + size]
                out.append((g, part if len(rows) <= SMALL_BATCH else
                            arrow_batch(part, self.codec)))
                seqs.append(np.fromiter((r[0] for r in part), np.int64, len(part)))
        return out, seqs

    def _meta_lines(self, first: int, n: int, header_line: int, batch: RecordBatch | None,
                    rejects: list[Rejected]) -> list[str]:
        """Every line of the block that is not a record: rejected, the header, or blank."""
        covered = np.zeros(n, dtype=bool)
        if batch is not None and len(batch):
            lines = batch.line
            if isinstance(lines, range):
                covered[lines.start - first: lines.stop - first] = True
            else:
                covered[np.asarray(lines, dtype=np.int64) - first] = True
        for r in rejects:
            covered[r.line - first] = True
        if header_line:
            covered[header_line - first] = True
        meta = [(r.line, rejected_line(r)) for r in rejects]
        if header_line:
            meta.append((header_line, marker_line(header_line, HEADER)))
        meta += [(seq, marker_line(seq, BLANK))
                 for seq in (np.flatnonzero(~covered) + first).tolist()]
        meta.sort(key=lambda m: m[0])
        return [m[1] for m in meta]

    def _split_by_group(self, batch: RecordBatch, restamped: np.ndarray | None
                        ) -> tuple[list[tuple[int, Batch]], list[np.ndarray]]:
        n = len(batch)
        if batch.lane is not None:
            cols = batch.lane.as_arrow()
            t_text, u, a = cols.t_text, cols.u, cols.a
        else:
            t_text = pa.array(batch.t_text, pa.string())
            u = pa.array(batch.u, pa.string()).dictionary_encode()
            a = pa.array(batch.a, pa.string()).dictionary_encode()
        group_of_value = self._groups_of(a.dictionary)
        groups = group_of_value[a.indices.to_numpy(zero_copy_only=False)]
        order = np.argsort(groups, kind="stable")
        take = pa.array(order)
        lines = batch.line
        seq = np.arange(lines.start, lines.stop, dtype=np.int64) if isinstance(lines, range) \
            else np.asarray(lines, dtype=np.int64)
        flags = restamped if restamped is not None else np.zeros(n, dtype=bool)
        seq = seq[order]
        table = pa.RecordBatch.from_arrays(
            [pa.array(seq), pa.array(batch.t[order]), t_text.take(take),
             u.dictionary.take(u.indices.take(take)), a.dictionary.take(a.indices.take(take)),
             pa.array(flags[order])], schema=RECORDS)
        counts = np.bincount(groups, minlength=self.key_groups)
        out: list[tuple[int, Batch]] = []
        seqs: list[np.ndarray] = []
        pos = 0
        for g in np.flatnonzero(counts).tolist():
            end = pos + int(counts[g])
            for lo in range(pos, end, self.batch_size):
                hi = min(end, lo + self.batch_size)
                out.append((g, encode_batch(table.slice(lo, hi - lo), self.codec)))
                seqs.append(seq[lo:hi])
            pos = end
        return out, seqs

    def _groups_of(self, values: pa.Array) -> np.ndarray:
        """The key group of each distinct value (by its coarsest level)."""
        coarsest = pc.list_element(pc.split_pattern(values, self.separator, max_splits=1), 0)
        distinct = pc.dictionary_encode(coarsest)
        cache = self._groups
        if len(cache) > 1 << 16:
            cache.clear()
        names = distinct.dictionary.to_pylist()
        for name in names:
            if name not in cache:
                cache[name] = key_group_of(name, self.key_groups)
        per_name = np.fromiter((cache[x] for x in names), np.int64, len(names))
        return per_name[distinct.indices.to_numpy(zero_copy_only=False)]


def batch_rows(batch: Batch | pa.RecordBatch) -> list[tuple]:
    """The records of a batch as row tuples ``(seq, t, t_text, u, a, restamped)``."""
    if isinstance(batch, list):
        return batch
    rb = batch if isinstance(batch, pa.RecordBatch) else decode_batch(batch)
    cols = [c.to_pylist() for c in rb.columns]
    return list(zip(*cols, strict=True))


def record_batch(batch: Batch | pa.RecordBatch) -> pa.RecordBatch:
    """A batch as an Arrow record batch of :data:`RECORDS`."""
    if isinstance(batch, pa.RecordBatch):
        return batch
    if not isinstance(batch, list):
        return decode_batch(batch)
    columns = zip(*batch, strict=True) if batch else [[] for _ in RECORDS]
    return pa.RecordBatch.from_arrays(
        [pa.array(list(c), f.type) for c, f in zip(columns, RECORDS, strict=True)],
        schema=RECORDS)


def arrow_batch(batch: Batch, codec: str | None = RECORDS_CODEC) -> bytes:
    """A batch as Arrow IPC bytes of :data:`RECORDS` (a list of rows compressed with
    ``codec``)."""
    return batch if not isinstance(batch, list) else encode_batch(record_batch(batch), codec)


@dataclass
class Selected:
    """What the batch engine published of a batch, as the pure command's writers take it
    (:func:`~streamanon.io.writers.selected_data`): ``records`` (the batch as a reader's
    batch of the Arrow lane), the indexes of its published rows (ascending), each one's
    published value as a code into ``names``."""

    records: RecordBatch
    idx: np.ndarray
    codes: np.ndarray
    names: Sequence[str]

    def plain(self) -> bool:
        """Whether no time text, user or value of the batch needs CSV quoting (a published
        value is a level of the row's own value): the Arrow lane may write them."""
        lane = self.records.lane
        assert isinstance(lane, ArrowColumns)
        return not any(pc.any(pc.match_substring_regex(col, r'[,"\r\n]')).as_py()
                       for col in (lane.t_text, lane.u.dictionary, lane.a.dictionary))


class ZGroupOperator:
    """The z rule for the batches of one key group (one :class:`ZAnonymizer`); picklable, so
    that its state can live in Flink state.

    Two engines, one rule: large batches go through the batch engine
    (:meth:`~streamanon.zanon.ZAnonymizer.process_codes`) and come out as an Arrow outcome
    batch; small ones, record by record through :meth:`~streamanon.zanon.ZAnonymizer.process`,
    as outcome text lines. Both decide exactly alike (the operator's own tests), but switching
    costs a conversion of the live state, so the engine follows the *mean* batch size of the
    group (an exponential average), not each batch: a group switches only when its traffic
    changes.
    """

    def __init__(self, z: int, delta_t: float, separator: str = SEPARATOR) -> None:
        self.op = ZAnonymizer(z=z, delta_t=delta_t, separator=separator)
        self.mean_rows = float(SMALL_BATCH)

    def live_pairs(self) -> int:
        return self.op.live_pairs()

    def snapshot(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    def process(self, batch: Batch | pa.RecordBatch) -> tuple[str, int]:
        """Process one batch; the part-file text of its outcomes and its number of rows."""
        outcomes, rows = self.decide(batch)
        if isinstance(outcomes, list):
            sep = self.op.separator
            return "\n".join(
                suppressed_line(seq, restamped) if a is None else
                published_line(seq, a.count(sep), restamped, t_text, u, a)
                for seq, restamped, t_text, u, a in outcomes), rows
        return outcome_batch_line(outcomes), rows

    def decide(self, batch: Batch | pa.RecordBatch) -> tuple[list[tuple] | pa.RecordBatch, int]:
        """Process one batch; its outcomes and its number of rows. The outcomes are an
        outcome batch (:data:`OUTCOMES`) from the batch engine, or, from the record-at-a-time
        engine, one ``(seq, restamped, t_text, u, published value or None)`` per row: a
        caller that formats them itself (a Kafka job's messages) skips the outcome text."""
        decoded = batch if isinstance(batch, list) else decode_batch(batch)  # decoded once
        rows = len(decoded) if isinstance(decoded, list) else decoded.num_rows
        self.mean_rows = 0.8 * self.mean_rows + 0.2 * rows
        if self.mean_rows <= SMALL_BATCH:
            return self.decide_rows(batch_rows(decoded)), rows
        return self.apply(decoded), rows

    def decide_selected(self, batch: Batch | pa.RecordBatch
                        ) -> tuple[list[tuple] | Selected, int]:
        """As :meth:`decide`, but the batch engine's decisions come as the pure command's
        writers take them (:class:`Selected`), not as an outcome batch: a caller that writes
        the published rows itself (a Kafka job's messages) builds no outcome columns."""
        decoded = batch if isinstance(batch, list) else decode_batch(batch)
        rows = len(decoded) if isinstance(decoded, list) else decoded.num_rows
        self.mean_rows = 0.8 * self.mean_rows + 0.2 * rows
        if self.mean_rows <= SMALL_BATCH:
            return self.decide_rows(batch_rows(decoded)), rows
        rb = record_batch(decoded)
        t = rb.column("t").to_numpy()
        lane = ArrowColumns(t, rb.column("t_text"), pc.dictionary_encode(rb.column("u")),
                            pc.dictionary_encode(rb.column("a")))
        records = RecordBatch(t, None, None, None, range(rows), lane=lane)
        idx, codes, names = self.op.process_codes(t, *records.codes())
        return Selected(records, idx, codes, names), rows

    def apply_rows(self, rows: list[tuple]) -> list[str]:
        """The record-at-a-time engine on row tuples; one outcome line per row."""
        sep = self.op.separator
        return [suppressed_line(seq, restamped) if a is None else
                published_line(seq, a.count(sep), restamped, t_text, u, a)
                for seq, restamped, t_text, u, a in self.decide_rows(rows)]

    def decide_rows(self, rows: list[tuple]) -> list[tuple]:
        """The record-at-a-time engine on row tuples; per row ``(seq, restamped, t_text, u,
        published value or None)``."""
        op = self.op
        out = []
        for seq, t, t_text, u, a, restamped in rows:
            result = op.process_one(Record(t, u, a, t_text))
            out.append((seq, restamped, t_text, u,
                        None if isinstance(result, Suppressed) else result.a))
        return out

    def apply(self, batch: Batch | pa.RecordBatch) -> pa.RecordBatch:
        """The batch engine on one batch; its outcome batch (:data:`OUTCOMES`)."""
        rb = record_batch(batch)
        n = rb.num_rows
        u = pc.dictionary_encode(rb.column("u"))
        a = pc.dictionary_encode(rb.column("a"))
        a_names = a.dictionary.to_pylist()
        idx, codes, names = self.op.process_codes(
            rb.column("t").to_numpy(), u.indices.to_numpy(), u.dictionary.to_pylist(),
            a.indices.to_numpy(), a_names)
        published = np.zeros(n, dtype=bool)
        published[idx] = True
        level = np.full(n, -1, dtype=np.int8)
        index = np.zeros(n, dtype=np.int32)
        if names is a_names:  # nothing generalized: the batch's own values
            dictionary = a.dictionary
            index[idx] = codes
            sep = self.op.separator
            level[idx] = np.fromiter((x.count(sep) for x in a_names), np.int8,
                                     len(a_names))[codes]
        else:
            used, local = np.unique(codes, return_inverse=True)
            chosen = [names[c] for c in used.tolist()]
            dictionary = pa.array(chosen, pa.string())
            index[idx] = local
            sep = self.op.separator
            level[idx] = np.fromiter((x.count(sep) for x in chosen), np.int8, len(chosen))[
                local]
        null = pa.scalar(None, pa.string())
        return pa.RecordBatch.from_arrays(
            [rb.column("seq"), pa.array(level), rb.column("restamped"),
             pc.if_else(published, rb.column("t_text"), null),
             pc.if_else(published, rb.column("u"), null),
             pa.DictionaryArray.from_arrays(pa.array(index, mask=~published), dictionary)],
            schema=OUTCOMES)


__all__ = ["RECORDS", "SMALL_BATCH", "Z_KEY_GROUPS", "Batch", "Selected", "ZChunkParser",
           "ZGroupOperator",
           "arrow_batch", "batch_rows", "key_group_of", "record_batch"]

"""Stages: an operator behind the readers' rules, the same for every source and driver.

:class:`Stage` is the protocol every driver runs; :class:`ZStage` (z-anonymity through the
batch engine) and :class:`CastleStage` (CASTLE, row at a time) implement it. They apply the
readers' rules (:class:`~streamanon.io.readers.RecordParser`,
:class:`~streamanon.io.rows.RowReader`) with the same reasons for every source; Kafka
messages first pass :func:`~streamanon.pipeline.chunks.message_chunk` (empty, oversized, not
UTF-8, several lines).
"""

from __future__ import annotations

import inspect
import io
import itertools
import json
import operator
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from streamanon.errors import (
    BadInputError,
    BadRecordError,
    ConfigError,
    InputError,
    UnreadableInputError,
    UnreadableMessagesError,
)
from streamanon.io.policy import OnError
from streamanon.io.readers import DEFAULT_MAX_VALUE_LEN, RecordBatch, RecordParser
from streamanon.io.writers import selected_data
from streamanon.pipeline.chunks import (
    PUBLISHED,
    REJECTS,
    SUPPRESSED,
    LineChunk,
    Outputs,
    message_chunk,
)
from streamanon.pipeline.kafka.options import DEFAULT_MAX_MESSAGE_BYTES
from streamanon.pipeline.positions import Positions
from streamanon.records import Rejected, RunStats, Suppressed
from streamanon.zanon import AdaptiveZAnonymizer, ZAnonymizer

if TYPE_CHECKING:  # the CASTLE stage loads them when it runs (a z run does not)
    from streamanon.castle import CastleAnonymizer
    from streamanon.castle.records import CastleRow
    from streamanon.io.rows import CleanBlock, RowWriter

BOM = b"\xef\xbb\xbf"

#: What an operator raises for a record it cannot take (only such a record becomes a
#: rejected row; anything else is a bug and propagates).
BAD_RECORD_ERRORS: tuple[type[Exception], ...] = (BadRecordError,)


def reject_lines(rejected: Sequence[Rejected], chunk: LineChunk, positions: Positions
                  ) -> tuple[str, np.ndarray]:
    codes = chunk.code_of([r.line for r in rejected])
    text = "".join(json.dumps({"source": positions.name, **positions.fields(c),
                               "reason": r.reason, "text": r.text}) + "\n"
                   for r, c in zip(rejected, codes.tolist(), strict=True))
    return text, codes


def delimiter_identity(delimiter: str) -> dict[str, str]:
    """The delimiter as a checkpoint identity lists it: only when it is not a comma (so that
    the identities of comma runs, and their checkpoints, stay as they were)."""
    return {} if delimiter == "," else {"delimiter": delimiter}


def missing_details(missing: str, suppressed_by_reason: Mapping[str, int]) -> dict[str, int]:
    """The summary's count of tuples suppressed for an empty quasi-identifier (under
    ``missing="suppress"`` only).

    >>> missing_details("suppress", {"missing value": 3, "outlier": 1})
    {'suppressed_missing': 3}
    """
    from streamanon.castle.defaults import MISSING_REASON

    if missing != "suppress":
        return {}
    return {"suppressed_missing": suppressed_by_reason.get(MISSING_REASON, 0)}


def _as_list(result: Any) -> list[Any]:
    """An operator's outcome as a list (operators return one outcome or a list of them)."""
    return result if isinstance(result, list) else [result]


def seen_up_to(count: int, cap: int) -> dict[str, int]:
    """A distinct count the run keeps only until it reaches ``cap`` (z, k or l: enough to
    tell whether the parameter can be reached, at no cost afterwards), as the summary gives
    it: ``at_least`` is exact when it is below ``counted_up_to``.

    >>> seen_up_to(2000, 5), seen_up_to(3, 5)
    ({'at_least': 5, 'counted_up_to': 5}, {'at_least': 3, 'counted_up_to': 5})
    """
    return {"at_least": min(count, cap), "counted_up_to": cap}


def listed_params(op: Any, *, omit: Collection[str] = ()) -> dict[str, Any]:
    """The parameters of ``op`` as summaries and checkpoint identities list them: its
    keyword-only parameters read back (``op.params()``), in the signature's order, but
    ``omit``; an enum as its value's text.

    >>> from streamanon.zanon import ZAnonymizer
    >>> listed_params(ZAnonymizer(z=3, delta_t=60), omit=Z_UNLISTED)
    {'z': 3, 'delta_t': 60.0}
    """
    return {name: str(value) if isinstance(value, Enum) else value
            for name, value in op.params().items() if name not in omit}


def signature_params(cls: type, arguments: Mapping[str, Any], *,
                     omit: Collection[str] = ()) -> dict[str, Any]:
    """The keyword-only parameters of ``cls`` found in ``arguments`` (e.g. a command's
    options, before any operator exists), in the signature's order, but ``omit``.

    >>> from streamanon.zanon import ZAnonymizer
    >>> signature_params(ZAnonymizer, {"delta_t": 60, "z": 3, "output": "-"})
    {'z': 3, 'delta_t': 60}
    """
    return {name: arguments[name] for name, p in inspect.signature(cls.__init__).parameters.items()
            if p.kind is p.KEYWORD_ONLY and name in arguments and name not in omit}


#: Parameters the summaries and identities of z runs do not list (they never did: the
#: separator of generalized values; the adaptive operator's start and ceiling of z).
Z_UNLISTED = ("separator",)
ADAPTIVE_UNLISTED = ("z0", "z_max", "separator")
#: CASTLE parameters a summary does not list (the checkpoint identity lists every one;
#: ``hierarchy_scope`` is listed when it is not the default).
CASTLE_UNLISTED = ("max_delay", "loss_field", "reference", "t_hierarchy", "dp_rng",
                   "hierarchy_scope")


class Stage(Protocol):
    """An operator behind the readers' rules, as every driver runs it: :func:`run_lines` (a
    file or stdin), :class:`~streamanon.pipeline.kafka.exactly_once.ExactlyOnceRun` (a topic)
    and the Flink jobs. :class:`ZStage` and :class:`CastleStage` are the two.

    A stage is picklable: its state (readers' state, operator state, accounting) is part of
    a Kafka run's checkpoints.
    """

    positions: Positions
    #: compute the input positions of outputs (a Kafka sink needs them); set by the driver
    tagged: bool

    def process(self, chunk: LineChunk) -> tuple[Outputs, InputError | None]:
        """Outputs of a chunk; under ``--on-error fail`` also the error that stops the run
        (the outputs are those of the records before it)."""

    def process_messages(self, values: Sequence[bytes], codes: np.ndarray
                         ) -> tuple[Outputs, InputError | None]:
        """:meth:`process` for Kafka messages (one record per message; ``codes``:
        ``offset << 16 | partition`` per message)."""

    def finish(self) -> Outputs:
        """End of input: whatever the operator still holds, and headers of empty outputs."""

    def stats(self) -> RunStats:
        """The accounting so far."""

    def identity(self) -> dict[str, Any]:
        """What must not change between a checkpoint and its restart (parameters, formats)."""


class _RejectCount:
    """Rejected records: how many, and the first (for the closing warning)."""

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None

    def add(self, rejected: Sequence[Rejected], chunk: LineChunk, positions: Positions) -> None:
        if rejected and self.first is None:
            r = rejected[0]
            snippet = r.text if len(r.text) <= 80 else r.text[:77] + "..."
            self.first = (f"{positions.where(int(chunk.code_of([r.line])[0]))}: {r.reason}: "
                          f"{snippet!r}")
        self.count += len(rejected)


# -- z-anonymity -----------------------------------------------------------------------------------

class ZStage:
    """z-anonymity on ``t,u,a`` lines (CSV or JSON Lines) through the batch engine.

    Files may start with a header naming t, u, a (in any order); messages are ``t,u,a`` in
    that order, and a message that is exactly the header ``t,u,a`` is skipped and counted.
    An :class:`~streamanon.zanon.AdaptiveZAnonymizer` runs record at a time.

    Args:
        operator: the :class:`~streamanon.zanon.ZAnonymizer` or adaptive operator.
        positions: the input positions (file lines or Kafka messages).
        in_format: the input format (``csv``, ``jsonl`` or, for messages, ``auto``).
        out_format: the output format (``csv`` or ``jsonl``).
        on_error: ``fail`` raises at the first bad record; ``skip`` rejects it and goes on.
        time_tolerance: seconds a time may go backwards before a record is refused.
        max_value_len: the longest value accepted, in characters.
        max_message_bytes: the largest message accepted, in bytes.
        delimiter: the CSV input's field delimiter (outputs are always comma CSV).
    """

    #: the CSV input's field delimiter (a class default: states pickled before it existed)
    delimiter = ","

    def __init__(self, operator: ZAnonymizer | AdaptiveZAnonymizer, positions: Positions, *,
                 in_format: str = "csv", out_format: str = "csv",
                 on_error: OnError | str = OnError.fail, time_tolerance: float = 0.0,
                 max_value_len: int = DEFAULT_MAX_VALUE_LEN,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 delimiter: str = ",") -> None:
        if delimiter != ",":
            self.delimiter = delimiter
        self.op = operator
        self.core = operator.core if isinstance(operator, AdaptiveZAnonymizer) else operator
        self.positions = positions
        #: "auto" (messages only): JSON Lines when the first message is a JSON object, else
        #: CSV (decided once, at the first message in merge order, and kept in the state)
        self.auto = in_format == "auto"
        if self.auto and positions.kind != "message":
            in_format = "csv"
        self.in_format, self.out_format = in_format, out_format
        self.on_error = OnError(on_error)
        self.time_tolerance = time_tolerance
        self.max_bytes = max_message_bytes
        self.max_value_len = max_value_len
        self.parser: RecordParser | None = None
        if in_format != "auto":
            self._make_parser(in_format)
        self.records = 0
        self.rejects = _RejectCount()
        self.restamped = 0
        self.headers = 0
        self.users: set[str] = set()
        self._header_sent = False
        self.tagged = True  # compute input positions of outputs (a Kafka sink needs them)

    def _header(self) -> str | None:
        if self._header_sent:
            return None
        self._header_sent = True
        return "t,u,a\n" if self.out_format == "csv" else ""

    def _make_parser(self, in_format: str) -> None:
        self.in_format = in_format
        self.parser = RecordParser(in_format, time_tolerance=self.time_tolerance,
                                   max_value_len=self.max_value_len,
                                   source_name=self.positions.name,
                                   header=(0, 1, 2) if self.positions.kind == "message" else None,
                                   delimiter=self.delimiter)

    def process_messages(self, values: Sequence[bytes], codes: np.ndarray
                         ) -> tuple[Outputs, InputError | None]:
        if self.parser is None:  # "auto": the first message tells
            first = next((v.lstrip() for v in values if v.strip()), b"")
            self._make_parser("jsonl" if first.removeprefix(BOM).startswith(b"{") else "csv")
        starts = np.flatnonzero((np.asarray(codes) >> 16) == 0)  # offset 0 of a partition
        if len(starts):  # a byte order mark there is a producer's file's, not the record's
            values = list(values)
            for i in starts.tolist():
                values[i] = values[i].removeprefix(BOM)
        header = self.delimiter.join("tua").encode() if self.in_format == "csv" else None
        return self.process(message_chunk(values, codes, self.max_bytes, header))

    def process(self, chunk: LineChunk) -> tuple[Outputs, InputError | None]:
        if self.parser is None:
            self._make_parser("csv")
        assert self.parser is not None
        out = Outputs()
        self.headers += chunk.headers
        batch, bad = self.parser.parse(chunk.first, chunk.data, chunk.rejected)
        error: InputError | None = None
        if bad and self.on_error is OnError.fail:
            error = BadInputError(Rejected(int(chunk.code_of([bad[0].line])[0]), bad[0].text,
                                           bad[0].reason), self.positions)
            batch = None if batch is None else self.parser.good_prefix(batch, bad[0].line)
        if batch is not None and len(batch):
            self._anonymize(batch, chunk, out)
        if bad and error is None:
            text, codes = reject_lines(bad, chunk, self.positions)
            out.add(REJECTS, text, codes)
            self.rejects.add(bad, chunk, self.positions)
        return out, error

    def _anonymize(self, batch: RecordBatch, chunk: LineChunk, out: Outputs) -> None:
        self.records += len(batch)
        self.restamped += batch.restamped
        op = self.op
        if isinstance(op, ZAnonymizer):
            u_codes, u_names, a_codes, a_names = batch.codes()
            if len(self.users) < op.z:  # only until z users are seen: no cost after
                self.users.update(u_names)
            idx, codes, names = op.process_codes(batch.t, u_codes, u_names, a_codes, a_names)
            if len(idx) or not self._header_sent:
                text = selected_data(batch, idx, codes, names, self.out_format) if len(
                    idx) else ""
                lines = np.asarray(batch.line, dtype=np.int64)[idx] if self.tagged else idx
                out.add(PUBLISHED, text, chunk.code_of(lines) if self.tagged else lines,
                        self._header())
            return
        buf = io.StringIO()
        from streamanon.io.writers import RecordWriter

        writer = RecordWriter(buf, self.out_format)
        if self.out_format == "csv":
            buf.seek(0)
            buf.truncate()
        lines: list[int] = []
        for record in batch.records():
            for res in _as_list(op.process(record)):
                if not isinstance(res, Suppressed):
                    writer.write(res)
                    lines.append(record.line or 0)
        if lines or not self._header_sent:
            out.add(PUBLISHED, buf.getvalue(), chunk.code_of(lines), self._header())

    def finish(self) -> Outputs:
        out = Outputs()
        if not self._header_sent:
            out.add(PUBLISHED, "", np.empty(0, np.int64), self._header())
        return out

    def stats(self) -> RunStats:
        core = self.core
        stats = RunStats(params={**listed_params(core, omit=Z_UNLISTED),
                                 "input": self.positions.name})
        op = self.op
        if isinstance(op, AdaptiveZAnonymizer):
            stats.params.update(adaptive=True,
                                **listed_params(op, omit=("delta_t", *ADAPTIVE_UNLISTED)))
        stats.count_read(self.records + self.rejects.count)
        stats.count_rejected(self.rejects.count)
        stats.count_released(core.released)
        stats.count_suppressed(core.suppressed)
        stats.details = {
            "released_per_level": {f"level_{i}": n
                                   for i, n in enumerate(core.published_per_level)},
            "publication_ratio": core.released / max(1, self.records),
            "restamped": self.restamped,
        }
        if self.headers:
            stats.details["headers_skipped"] = self.headers
        if isinstance(op, ZAnonymizer):
            stats.details["users_seen"] = seen_up_to(len(self.users), core.z)
        else:
            stats.details["final_z"] = op.z
            stats.details["z_updates"] = len(op.history)
        return stats

    def identity(self) -> dict[str, Any]:
        op = self.op
        return {"operator": "z", **listed_params(self.core, omit=Z_UNLISTED),
                "adaptive": isinstance(op, AdaptiveZAnonymizer),
                "input_format": "csv" if getattr(self, "auto", False) else self.in_format,
                "output_format": self.out_format,
                "on_error": str(self.on_error), "time_tolerance": self.time_tolerance,
                **delimiter_identity(self.delimiter)}


# -- CASTLE ----------------------------------------------------------------------------------------

class CastleStage:
    """CASTLE on rows (CSV under a header, or JSON objects), one row at a time.

    The CSV header is the first line (files), or ``columns`` (Kafka: ``--columns``), or else
    the first message; a message repeating the header is skipped and counted.
    ``suppressed_format`` is the format of the suppressed rows (``None``: not written, only
    counted). ``latency``: measure the mean wall-clock time from feeding a row to its release.

    Args:
        operator: the :class:`~streamanon.castle.CastleAnonymizer` (with its rules).
        positions: the input positions (file lines or Kafka messages).
        in_format: the input format (``csv`` or ``jsonl``).
        out_format: the output format (``csv`` or ``jsonl``).
        suppressed_format: the format of the suppressed rows (``None``: not written, only counted).
        on_error: ``fail`` raises at the first bad row; ``skip`` rejects it and goes on.
        columns: the CSV header, when the input has none (``None``: the first line).
        max_value_len: the longest value accepted, in characters.
        max_message_bytes: the largest message accepted, in bytes.
        latency: measure the mean wall-clock time from feeding a row to its release.
        delimiter: the CSV input's field delimiter (outputs are comma CSV).
    """

    tagged = True  # rows carry their positions whatever the sinks (a class default: not pickled)

    def __init__(self, operator: CastleAnonymizer, positions: Positions, *,
                 in_format: str = "csv", out_format: str = "csv",
                 suppressed_format: str | None = None,
                 on_error: OnError | str = OnError.fail, columns: Sequence[str] | None = None,
                 max_value_len: int = DEFAULT_MAX_VALUE_LEN,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 latency: bool = False, delimiter: str = ",") -> None:
        rules = operator.rules
        if rules is None:
            raise ConfigError("the operator has no rules")
        self.op = operator
        self.positions = positions
        self.in_format, self.out_format = in_format, out_format
        self.suppressed_format = suppressed_format
        self.on_error = OnError(on_error)
        self.max_bytes = max_message_bytes
        self.rules = rules
        numeric = [r.name for r in rules.qi_rules
                   if type(r.generalizer).__name__ == "RangeGeneralizer"]
        from streamanon.io.rows import RowReader

        self._found: list[Rejected] = []
        self.reader = RowReader(io.StringIO(""), in_format, on_error=OnError.skip,
                                rejects=self._found.append, numeric=numeric,
                                required=rules.required_columns,
                                max_value_len=max_value_len,
                                source_name=positions.name, columns=columns,
                                repeated_header=positions.kind == "message",
                                delimiter=delimiter)
        self.extra = [operator.loss_field] if operator.loss_field else []
        self.rejects = _RejectCount()
        self.rows = 0  # rows the operator took
        self._pub: tuple[io.StringIO, RowWriter] | None = None
        self._sup: tuple[io.StringIO, RowWriter] | None = None
        self.ids: set[Any] = set()
        self.sensitive: dict[str, set[Any]] = {name: set() for name in rules.sensitive}
        self._need_ids = True
        self._need_values = operator.parameters.l > 1 and bool(self.sensitive)
        self.latency = latency
        self._fed: dict[int, float] = {}
        self.lat_sum, self.lat_n = 0.0, 0

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_pub", "_sup"):  # writers hold buffers: rebuilt from their columns
            pair = state[key]
            state[key] = None if pair is None else pair[1].columns
        state["_found"] = []
        state["reader"] = self.reader
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._found = []
        self.reader.rejects = self._found.append
        self.reader.source = io.StringIO("")
        for key, fmt in (("_pub", self.out_format), ("_sup", self.suppressed_format)):
            cols = state[key]
            setattr(self, key, None if cols is None else row_writer(fmt or "csv", cols)[0])

    def process_messages(self, values: Sequence[bytes], codes: np.ndarray
                         ) -> tuple[Outputs, InputError | None]:
        return self.process(message_chunk(values, codes, self.max_bytes))

    def process(self, chunk: LineChunk) -> tuple[Outputs, InputError | None]:
        from streamanon.castle.records import CastleRow

        out = Outputs()
        fail = self.on_error is OnError.fail
        reader, found = self.reader, self._found
        rejected: list[Rejected] = list(chunk.rejected)  # in line order once sorted
        # under fail: the first bad line; rows from there on are not processed
        stop = min((r.line for r in rejected), default=None) if fail else None
        released: list[Any] = []
        codes = chunk.codes
        observe = self.latency or self._need_ids or self._need_values
        block_lane = not self.latency  # clean blocks go as columns
        try:
            for part in reader.parse_parts(chunk.first, chunk.data):
                rows: Iterable[CastleRow]
                if type(part) is CastleRow:
                    rows = (part,)
                elif block_lane and stop is None and not found:
                    if self._take_block(part, released, rejected, fail,
                                        None if codes is None else
                                        codes[part.first - chunk.first:]):
                        break
                    continue
                else:
                    rows = reader.rows_of(part)
                for row in rows:
                    line = row.line or 0
                    if found:  # the reader's rejects before this row
                        if fail:
                            stop = min(found[0].line, stop if stop is not None else line)
                        rejected += found
                        found.clear()
                    if stop is not None and stop < line:
                        break
                    code = line if codes is None else int(codes[line - chunk.first])
                    if observe:
                        self._observe(row, code)
                        observe = self.latency or self._need_ids or self._need_values
                    try:  # a file's row is numbered by its line already
                        items = self.op.process(row if codes is None else
                                                CastleRow(row.values, code, row.t))
                    except BAD_RECORD_ERRORS as exc:
                        rejected.append(Rejected(line, reader.text_of_row(row), str(exc)))
                        if fail:
                            break
                        continue
                    self.rows += 1
                    released += _as_list(items)
                else:
                    continue
                break
        except UnreadableInputError as exc:
            if self.positions.kind == "message":
                r = exc.rejected
                raise UnreadableMessagesError(Rejected(int(chunk.code_of([r.line])[0]), r.text,
                                                       r.reason), self.positions) from None
            raise
        rejected += found
        found.clear()
        self._emit(released, out)
        if not rejected:
            return out, None
        rejected.sort(key=lambda r: r.line)
        if fail:
            bad = rejected[0]
            return out, BadInputError(Rejected(int(chunk.code_of([bad.line])[0]), bad.text,
                                               bad.reason), self.positions)
        text_out, codes = reject_lines(rejected, chunk, self.positions)
        out.add(REJECTS, text_out, codes)
        self.rejects.add(rejected, chunk, self.positions)
        return out, None

    def _take_block(self, block: CleanBlock, released: list[Any], rejected: list[Rejected],
                    fail: bool, codes: np.ndarray | None = None) -> bool:
        """A clean block through the operator's block entry point
        (:meth:`~streamanon.castle.CastleAnonymizer.process_block`), its first rows one by
        one while the summary still counts individuals or sensitive values; ``True``: a row
        was refused under ``fail`` (the rows after it are not taken).

        ``codes``: the positions of the block's rows (Kafka messages: a row's record carries
        its message's position, as on the row-by-row path); ``None``: a file's line numbers.
        Rejections are numbered by line either way (the chunk maps them to positions)."""
        from streamanon.castle.records import CastleRow

        reader = self.reader
        cols = block.columns
        header, fields = reader.fields_of(block)  # dicts and records built only where needed
        at: range | list[int] = (range(block.first, block.first + cols.n) if codes is None
                                 else codes[:cols.n].tolist())
        start = 0
        while (self._need_ids or self._need_values) and start < cols.n:
            line = block.first + start
            row = CastleRow(dict(zip(header, next(fields), strict=True)), at[start])
            start += 1
            self._observe(row, row.line or 0)
            try:
                items = self.op.process(row)
            except BAD_RECORD_ERRORS as exc:
                rejected.append(Rejected(line, reader.text_of_row(row), str(exc)))
                if fail:
                    return True
                continue
            self.rows += 1
            released += _as_list(items)
        while start < cols.n:
            items, taken, error = self.op.process_block(
                fields, n=cols.n, numbers=cols.numbers, texts=cols.texts, start=start,
                lines=block.first if codes is None else at, header=header)
            self.rows += taken
            released += items
            if error is None:
                break
            line = block.first + start + taken
            rejected.append(Rejected(line, reader.text_of_row(CastleRow({}, line)), str(error)))
            if fail:
                return True
            start += taken + 1
        return False

    def _observe(self, row: CastleRow, code: int) -> None:
        if self.latency:
            self._fed[code] = time.perf_counter()
        if self._need_ids:
            individual = row.values.get(self.rules.id_field)
            if individual is not None:
                self.ids.add(individual)
                self._need_ids = len(self.ids) < self.op.parameters.k
        if self._need_values:
            for name, seen in self.sensitive.items():
                value = row.values.get(name)
                if len(seen) < self.op.parameters.l and value is not None:
                    seen.add(value)
            need = self.op.parameters.l
            self._need_values = any(len(v) < need for v in self.sensitive.values())

    def _emit(self, items: list[Any], out: Outputs) -> None:
        from streamanon.castle import Released
        from streamanon.castle.records import ReleasedFields

        pub_codes: list[int] = []
        sup_codes: list[int] = []
        pub_header = sup_header = None
        groups: list[list[Any]] = []  # the released rows, a group per cluster, in order
        kinds = set(map(type, items)) if self._pub is not None and not self.latency else None
        released = {Released, ReleasedFields}
        if (kinds is not None and Suppressed in kinds and kinds - {Suppressed} <= released
                and self.suppressed_format is None):
            items = [x for x in items if type(x) is not Suppressed]  # suppressed: counted
            kinds.discard(Suppressed)
        if kinds and kinds <= released:  # the common case, without a loop per row
            pub_codes = list(map(_LINE_OF, items))
            if None in pub_codes:
                pub_codes = [c or 0 for c in pub_codes]
            groups = _cluster_groups(items)
        else:
            now = time.perf_counter() if self.latency else 0.0
            last = None
            for x in items:
                if isinstance(x, Suppressed):
                    if self.suppressed_format is None:
                        continue
                    rec = x.record
                    vals = dict(rec.values)
                    vals["reason"] = x.reason
                    if self._sup is None:
                        self._sup, sup_header = row_writer(
                            self.suppressed_format, [*self.reader.columns, *self.extra,
                                                     "reason"])
                    self._sup[1].write(vals)
                    sup_codes.append(rec.line or 0)
                    continue
                assert isinstance(x, Released)
                if self._pub is None:
                    self._pub, pub_header = row_writer(self.out_format,
                                                         [*self.reader.columns, *self.extra])
                if not groups or x.cluster != last:
                    groups.append([])
                    last = x.cluster
                groups[-1].append(x)
                pub_codes.append(x.line or 0)
                if self.latency and x.line in self._fed:
                    self.lat_sum += now - self._fed.pop(x.line)
                    self.lat_n += 1
        if groups:
            _write_released(self._pub[1], groups)  # type: ignore[index]
        for dest, pair, codes, header in ((PUBLISHED, self._pub, pub_codes, pub_header),
                                          (SUPPRESSED, self._sup, sup_codes, sup_header)):
            if pair is not None and (codes or header is not None):
                buf = pair[0]
                out.add(dest, buf.getvalue(), np.asarray(codes, dtype=np.int64), header)
                buf.seek(0)
                buf.truncate()

    def finish(self) -> Outputs:
        out = Outputs()
        if self.positions.kind == "line":
            self.reader.check_header_seen()
        self._emit(self.op.flush(), out)
        empty = np.empty(0, np.int64)
        if self._pub is None:
            self._pub, header = row_writer(self.out_format, [*self.reader.columns,
                                                               *self.extra])
            out.add(PUBLISHED, "", empty, header)
        if self._sup is None and self.suppressed_format is not None:
            self._sup, header = row_writer(self.suppressed_format,
                                             [*self.reader.columns, *self.extra, "reason"])
            out.add(SUPPRESSED, "", empty, header)
        return out

    def stats(self) -> RunStats:
        op = self.op
        s = op.summary()
        scope = {} if op.hierarchy_scope == "shared" else {"hierarchy_scope": op.hierarchy_scope}
        stats = RunStats(params={**listed_params(op, omit=CASTLE_UNLISTED), **scope,
                                 "input": self.positions.name})
        stats.count_read(self.rows + self.rejects.count)
        stats.count_rejected(self.rejects.count)
        stats.count_released(s["released"])
        stats.count_suppressed(s["suppressed"])
        stats.held = s["held"]
        stats.details = {
            "suppressed_by_reason": s["suppressed_by_reason"],
            **missing_details(op.missing, s["suppressed_by_reason"]),
            "clusters_released": s["clusters_released"],
            "tau": s["tau"],
            "info_loss": s["info_loss"],
            "mean_info_loss": s["mean_info_loss"],
            "best_selection_s": round(op.timing["best_selection"], 4),
            "delay_constraint_s": round(op.timing["delay_constraint"], 4),
            "individuals_seen": seen_up_to(len(self.ids), op.parameters.k),
        }
        if op.parameters.l > 1 and self.sensitive:
            stats.details["sensitive_values_seen"] = {
                name: seen_up_to(len(v), op.parameters.l) for name, v in self.sensitive.items()}
        if s["domains_widened"]:
            stats.details["domains_widened"] = s["domains_widened"]
        if "anchors" in s:  # static attributes: the anchors kept and forgotten
            stats.details["anchors"] = s["anchors"]
        if s["parameters"] != {"k": op.k, "l": op.l, "delta": op.delta, "beta": op.beta}:
            # the rules' [parameters] override the command's: the values in force now
            stats.details["parameters"] = s["parameters"]
        if self.reader.headers_skipped:
            stats.details["headers_skipped"] = self.reader.headers_skipped
        if self.latency:
            stats.details["latency_ms"] = 1000 * self.lat_sum / max(1, self.lat_n)
        return stats

    def identity(self) -> dict[str, Any]:
        op = self.op
        return {"operator": "castle", **listed_params(op),
                # an injected generator by its kind only (its state is in the checkpoint)
                "dp_rng": None if op.dp_rng is None else type(op.dp_rng).__name__,
                "rules": self.rules.describe(),
                "input_format": self.in_format, "output_format": self.out_format,
                "suppressed_format": self.suppressed_format, "on_error": str(self.on_error),
                **delimiter_identity(self.reader.delimiter)}


def row_writer(fmt: str, columns: list[str]) -> tuple[tuple[io.StringIO, RowWriter], str]:
    """A row writer of ``columns`` in ``fmt`` into a buffer, and the header line it wrote,
    taken out of the buffer (a destination gets it once, before its first line)."""
    buf = io.StringIO()
    from streamanon.io.rows import RowWriter

    writer = RowWriter(buf, fmt, columns)
    header = buf.getvalue()
    buf.seek(0)
    buf.truncate()
    return (buf, writer), header


def write_released(writer: Any, items: list[Any]) -> None:
    """Write released rows (:class:`~streamanon.castle.Released`, in output order) as the
    command writes them: a class at a time where the rows come as a class's fields."""
    if items:
        _write_released(writer, _cluster_groups(items))


def _cluster_groups(items: list[Any]) -> list[list[Any]]:
    """Released rows in order, a list per run of one cluster's rows."""
    clusters = np.fromiter(map(_CLUSTER_OF, items), np.int64, len(items))
    cuts = [0, *(np.flatnonzero(clusters[1:] != clusters[:-1]) + 1).tolist(), len(items)]
    return [items[a:b] for a, b in itertools.pairwise(cuts)]


def _write_released(writer: Any, groups: list[list[Any]]) -> None:
    """Write runs of one cluster's released rows in order: a run of rows given as fields of
    one class (:class:`~streamanon.castle.records.ReleasedFields`) from its fields and the
    class's template (``write_class``), the other runs from their values."""
    from streamanon.castle.records import ReleasedFields

    pending: list[list[Any]] = []
    for group in groups:
        # a cluster's rows may come from several releases (a tuple joining a kept class):
        # each run of one template is written as a class (the bytes do not depend on runs)
        start = 0
        for end in range(1, len(group) + 1):
            first = group[start]
            if end < len(group) and (type(group[end]) is type(first)) and (
                    type(first) is not ReleasedFields
                    or group[end].template is first.template):
                continue
            run = group[start:end]
            start = end
            if type(first) is ReleasedFields:
                if pending:
                    writer.write_groups(pending)
                    pending = []
                writer.write_class(run)
            else:
                pending.append(list(map(_VALUES_OF, run)))
    if pending:
        writer.write_groups(pending)


_LINE_OF = operator.attrgetter("line")
_VALUES_OF = operator.attrgetter("values")
_CLUSTER_OF = operator.attrgetter("cluster")


__all__ = ["BAD_RECORD_ERRORS", "CastleStage", "Stage", "ZStage", "listed_params",
           "missing_details", "row_writer", "seen_up_to", "signature_params", "write_released"]

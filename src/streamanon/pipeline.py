"""One pipeline for every operator and every endpoint: source -> stage -> sinks.

A run reads *chunks of lines* from a source; a stage (an operator behind the readers' rules)
turns each chunk into output lines; sinks write them::

    source   file | stdin | kafka://HOST:PORT/TOPIC      ->  LineChunk: lines + positions
    stage    ZStage | CastleStage (the same rules for every source)  ->  Outputs per destination
    sinks    file | stdout | kafka://HOST:PORT/TOPIC      <-  published, suppressed, rejects

:func:`run_z` and :func:`run_castle` drive a whole run, whatever the endpoints, for the CLI
(``streamanon z``, ``streamanon castle``), the demo, the benchmarks and library users alike::

    run_z("trace.csv", "published.csv", ZAnonymizer(z=5, delta_t=3600))
    run_z("kafka://127.0.0.1:9092/readings", "kafka://127.0.0.1:9092/published",
          ZAnonymizer(z=5, delta_t=3600), kafka=KafkaOptions(until_end=True))

*Positions* name where a line came from: a line number (:class:`LinePositions`: files,
stdin) or a partition and offset (:class:`MessagePositions`: Kafka; one int64 per record,
``offset << 16 | partition``). They travel with the records, so a rejected record is named
by its position, and a Kafka output message carries the position of the input record it
stands for in a header (``streamanon-in: PARTITION@OFFSET``, or ``streamanon-in-line:
LINE`` for a file source).

*Delivery*, by source:

* A file or stdin source runs once, start to end (:func:`run_lines`). File outputs are
  written as the run goes; the CLI wraps them in an :class:`~streamanon.io.output.OutputSet`
  (replaced only when the run succeeds). A Kafka output of such a run is produced as the run
  goes and acknowledged before the run returns: a run that dies leaves a prefix of its output
  in the topic, and running it again writes the whole output again (at least once).
* A Kafka source runs exactly once (:class:`~streamanon.io.kafka_eos.ExactlyOnceRun`, whose
  docstring has the design and its assumptions): killed at any moment and run again, every
  output holds exactly what one uninterrupted run writes. Kafka outputs are checked against
  what the killed run left (:class:`KafkaTopicSink`); file outputs are appended as the run
  goes and cut back to the length of the last checkpoint on a restart
  (:class:`JournalFileSink`); standard output cannot be taken back, so after a restart it
  repeats what was printed since the last checkpoint (at least once).

Stages are picklable (their state is part of a Kafka run's checkpoints) and apply the readers'
rules (:class:`~streamanon.io.readers.RecordParser`, :class:`~streamanon.io.rows.RowReader`)
with the same reasons for every source; Kafka messages first pass
:func:`~streamanon.io.kafka.check_messages` (empty, oversized, not UTF-8, several lines).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TextIO

import numpy as np

from streamanon.errors import BadRecordError, EndpointError
from streamanon.io.policy import InputError, OnError
from streamanon.io.readers import (
    DEFAULT_MAX_VALUE_LEN,
    RecordBatch,
    RecordParser,
    UnreadableInputError,
    detect_format,
    line_chunks,
)
from streamanon.io.writers import open_text, selected_data
from streamanon.records import Rejected, RunStats, Suppressed
from streamanon.zanon import AdaptiveZAnonymizer, ZAnonymizer

if TYPE_CHECKING:  # the CASTLE stage loads them when it runs (a z run does not)
    from streamanon.castle import CastleAnonymizer
    from streamanon.castle.records import CastleRow
    from streamanon.io.rows import RowWriter

#: What an operator raises for a record it cannot take (only such a record becomes a
#: rejected row; anything else is a bug and propagates).
BAD_RECORD_ERRORS: tuple[type[Exception], ...] = (BadRecordError,)

HEADER_IN = "streamanon-in"  # PARTITION@OFFSET of the input message an output stands for
HEADER_LINE = "streamanon-in-line"  # the input line (a file source)
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
KAFKA_PREFIX = "kafka://"
PUBLISHED, SUPPRESSED, REJECTS = "published", "suppressed", "rejects"




def is_kafka(spec: object) -> bool:
    """True for a ``kafka://HOST:PORT/TOPIC`` endpoint.

    >>> is_kafka("kafka://127.0.0.1:9092/readings"), is_kafka("trace.csv")
    (True, False)
    """
    return isinstance(spec, str) and spec.startswith(KAFKA_PREFIX)


# -- positions ---------------------------------------------------------------------------------

class LinePositions:
    """Positions in a file or stdin: a line number (tagged ``streamanon-in-line: 12``).

    >>> pos = LinePositions("trace.csv")
    >>> pos.where(12), pos.tags(np.array([12, 13]))
    ('trace.csv:12', [b'12', b'13'])
    """

    kind = "line"
    tag_name = HEADER_LINE

    def __init__(self, name: str) -> None:
        self.name = name

    def where(self, code: int) -> str:
        return f"{self.name}:{code}"

    def fields(self, code: int) -> dict[str, int]:
        return {"line": int(code)}

    def partitions(self, codes: np.ndarray) -> np.ndarray:
        return np.zeros(len(codes), dtype=np.int64)

    def tags(self, codes: np.ndarray) -> list[bytes]:
        return [b"%d" % c for c in codes.tolist()]


class MessagePositions:
    """Positions in a topic: ``offset << 16 | partition`` in one int64 (tagged
    ``streamanon-in: PARTITION@OFFSET``).

    >>> pos = MessagePositions("kafka://h:9092/readings")
    >>> code = pos.code(3, 1234)
    >>> pos.where(code), pos.tags(np.array([code]))
    ('kafka://h:9092/readings[3]@1234', [b'3@1234'])
    """

    kind = "message"
    tag_name = HEADER_IN

    def __init__(self, name: str) -> None:
        self.name = name

    @staticmethod
    def code(partition: int, offset: int) -> int:
        return (offset << 16) | partition

    def where(self, code: int) -> str:
        return f"{self.name}[{code & 0xFFFF}]@{code >> 16}"

    def fields(self, code: int) -> dict[str, int]:
        return {"partition": int(code) & 0xFFFF, "offset": int(code) >> 16}

    def partitions(self, codes: np.ndarray) -> np.ndarray:
        return codes & 0xFFFF

    def tags(self, codes: np.ndarray) -> list[bytes]:
        parts = codes & 0xFFFF
        offs = (codes >> 16).tolist()
        if len(parts) and bool((parts == parts[0]).all()):  # one input partition: one format
            fmt = b"%d@%%d" % int(parts[0])
            return [fmt % o for o in offs]
        return [b"%d@%d" % po for po in zip(parts.tolist(), offs, strict=True)]


Positions = LinePositions | MessagePositions


class BadInputError(InputError):
    """A bad record under ``--on-error fail``, named by its position (line, or partition and
    offset): the run stops after writing what came before it."""

    def __init__(self, rejected: Rejected, positions: Positions) -> None:
        super().__init__(rejected, positions.name)
        self.where = positions.where(rejected.line)
        snippet = rejected.text if len(rejected.text) <= 80 else rejected.text[:77] + "..."
        self.args = (f"{self.where}: {rejected.reason}: {snippet!r}",)


class UnreadableMessagesError(UnreadableInputError):
    """A topic whose messages cannot be read at all (no usable CSV header)."""

    def __init__(self, rejected: Rejected, positions: Positions) -> None:
        super().__init__(rejected, positions.name)
        self.args = (f"{positions.where(rejected.line)}: {rejected.reason}: "
                     f"{rejected.text[:80]!r}",)


# -- chunks and outputs --------------------------------------------------------------------------

@dataclass
class LineChunk:
    """Whole lines (``\\n``-separated, no final newline), the first numbered ``first``.

    ``codes[i]`` is the position of line ``first + i`` (``None``: a line's position is its
    number, as in files). ``rejected`` are lines refused before parsing, by line number;
    they are blank in ``data``. ``headers`` counts lines recognized as repeated headers.
    """

    first: int
    data: bytes | str
    codes: np.ndarray | None = None
    rejected: list[Rejected] = field(default_factory=list)
    headers: int = 0

    def code_of(self, lines: np.ndarray | Sequence[int] | range) -> np.ndarray:
        idx = np.asarray(lines, dtype=np.int64)
        return idx if self.codes is None else self.codes[idx - self.first]


class Lines:
    """Output lines for one destination: ``text`` (each line ends in a newline), their input
    positions (``codes``), and the CSV header a file gets before its first line (when this is
    the first output of the destination).

    The lines may be given as their UTF-8 bytes (the Arrow lane's CSV, as Arrow wrote it):
    sinks take them as they are (:meth:`data`), and ``text`` decodes them only when asked,
    which saves decoding 40 MB of output and encoding it back on a 2,000,000-tuple run.

    >>> lines = Lines(memoryview(b"1,a,x\\n"), np.array([1]))
    >>> bytes(lines.data()), lines.text, len(lines)
    (b'1,a,x\\n', '1,a,x\\n', 1)
    """

    __slots__ = ("_text", "codes", "header")

    def __init__(self, text: str | bytes | memoryview, codes: np.ndarray,
                 header: str | None = None) -> None:
        self._text = text
        self.codes = codes
        self.header = header

    @property
    def text(self) -> str:
        if not isinstance(self._text, str):
            self._text = str(self._text, "utf-8")
        return self._text

    def data(self) -> str | bytes | memoryview:
        """The lines as given: a string, or their UTF-8 bytes."""
        return self._text

    def utf8(self) -> bytes | memoryview:
        """The lines as UTF-8 bytes."""
        return self._text.encode("utf-8") if isinstance(self._text, str) else self._text

    def __len__(self) -> int:
        return len(self.codes)

    def __reduce__(self) -> tuple[Any, ...]:  # bytes views do not pickle: the text does
        return (Lines, (self.text, self.codes, self.header))

    def __repr__(self) -> str:
        return f"Lines({len(self)} lines, header={self.header!r})"


class Outputs(dict[str, list[Lines]]):
    """What one chunk produced, per destination, in order."""

    def add(self, dest: str, text: str | bytes | memoryview, codes: np.ndarray,
            header: str | None = None) -> None:
        if text or header is not None:
            self.setdefault(dest, []).append(Lines(text, codes, header))


def message_chunk(values: Sequence[bytes], codes: np.ndarray, max_bytes: int,
                  header: bytes | None = None) -> LineChunk:
    """Messages as lines: good ones joined, refused ones blank with their reason.

    A message must be one non-empty line of UTF-8 text of at most ``max_bytes`` bytes
    (:func:`streamanon.io.kafka.check_messages`); ``header`` (e.g. ``b"t,u,a"``) is a
    producer's CSV header, skipped and counted. The common case (every message clean) costs
    a join and a few scans of the joined bytes, no Python per message.

    >>> ch = message_chunk([b"1,a,x", b"", b"2,b,y"], np.arange(3), 100)
    >>> ch.data, [(r.line, r.reason) for r in ch.rejected]
    ('1,a,x\\n\\n2,b,y', [(1, 'empty message')])
    """
    from streamanon.io.kafka import check_messages

    blob = b"\n".join(values)
    n = len(values)
    if (n and blob.count(b"\n") == n - 1 and b"\r" not in blob and min(map(len, values))
            and max(map(len, values)) <= max_bytes and (header is None or header not in blob)
            and b" " not in blob and b"\t" not in blob and _utf8(blob)):
        return LineChunk(0, blob, codes)
    good, texts, bad = check_messages(values, max_bytes)
    lines = [""] * n
    headers = 0
    for i, t in zip(good, texts, strict=True):
        if header is not None and t.strip().encode() == header:
            headers += 1
            continue
        lines[i] = t
    rejected = [Rejected(i, text, reason) for i, (text, reason) in sorted(bad.items())]
    return LineChunk(0, "\n".join(lines), codes, rejected, headers)


def _utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _reject_lines(rejected: Sequence[Rejected], chunk: LineChunk, positions: Positions
                  ) -> tuple[str, np.ndarray]:
    codes = chunk.code_of([r.line for r in rejected])
    text = "".join(json.dumps({"source": positions.name, **positions.fields(c),
                               "reason": r.reason, "text": r.text}) + "\n"
                   for r, c in zip(rejected, codes.tolist(), strict=True))
    return text, codes


def _as_list(result: Any) -> list[Any]:
    """An operator's outcome as a list (operators return one outcome or a list of them)."""
    return result if isinstance(result, list) else [result]


class Stage(Protocol):
    """An operator behind the readers' rules, as every driver runs it (picklable)."""

    positions: Positions

    def process(self, chunk: LineChunk) -> tuple[Outputs, InputError | None]:
        """Outputs of a chunk; under ``--on-error fail`` also the error that stops the run
        (the outputs are those of the records before it)."""

    def process_messages(self, values: Sequence[bytes], codes: np.ndarray
                         ) -> tuple[Outputs, InputError | None]:
        """:meth:`process` for Kafka messages (one record per message)."""

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
    """

    def __init__(self, operator: ZAnonymizer | AdaptiveZAnonymizer, positions: Positions, *,
                 in_format: str = "csv", out_format: str = "csv",
                 on_error: OnError | str = OnError.fail, time_tolerance: float = 0.0,
                 max_value_len: int = DEFAULT_MAX_VALUE_LEN,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.op = operator
        self.core = operator.core if isinstance(operator, AdaptiveZAnonymizer) else operator
        self.positions = positions
        self.in_format, self.out_format = in_format, out_format
        self.on_error = OnError(on_error)
        self.time_tolerance = time_tolerance
        self.max_bytes = max_message_bytes
        self.parser = RecordParser(in_format, time_tolerance=time_tolerance,
                                   max_value_len=max_value_len, source_name=positions.name,
                                   header=(0, 1, 2) if positions.kind == "message" else None)
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

    def process_messages(self, values: Sequence[bytes], codes: np.ndarray
                         ) -> tuple[Outputs, InputError | None]:
        header = b"t,u,a" if self.in_format == "csv" else None
        return self.process(message_chunk(values, codes, self.max_bytes, header))

    def process(self, chunk: LineChunk) -> tuple[Outputs, InputError | None]:
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
            text, codes = _reject_lines(bad, chunk, self.positions)
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
        stats = RunStats(params={"z": core.z, "delta_t": core.delta_t,
                                 "input": self.positions.name})
        op = self.op
        if isinstance(op, AdaptiveZAnonymizer):
            stats.params.update(adaptive=True, k=op.k, pk=op.pk, rate=op.rate)
        stats.count_read(self.records + self.rejects.count)
        stats.count_rejected(self.rejects.count)
        stats.count_published(core.published)
        stats.count_suppressed(core.suppressed)
        stats.details = {
            "published_per_level": {f"level_{i}": n
                                    for i, n in enumerate(core.published_per_level)},
            "publication_ratio": core.published / max(1, self.records),
            "restamped": self.restamped,
        }
        if self.headers:
            stats.details["headers_skipped"] = self.headers
        if isinstance(op, ZAnonymizer):
            stats.details["users_seen"] = len(self.users)
        else:
            stats.details["final_z"] = op.z
            stats.details["z_updates"] = len(op.history)
        return stats

    def identity(self) -> dict[str, Any]:
        op = self.op
        return {"operator": "z", "z": self.core.z, "delta_t": self.core.delta_t,
                "adaptive": isinstance(op, AdaptiveZAnonymizer),
                "input_format": self.in_format, "output_format": self.out_format,
                "on_error": str(self.on_error), "time_tolerance": self.time_tolerance}


# -- CASTLE ----------------------------------------------------------------------------------------

class CastleStage:
    """CASTLE on rows (CSV under a header, or JSON objects), one row at a time.

    The CSV header is the first line (files), or ``columns`` (Kafka: ``--columns``), or else
    the first message; a message repeating the header is skipped and counted.
    ``suppressed_format`` is the format of the suppressed rows (``None``: not written, only
    counted). ``latency``: measure the mean wall-clock time from feeding a row to its release.
    """

    def __init__(self, operator: CastleAnonymizer, positions: Positions, *,
                 in_format: str = "csv", out_format: str = "csv",
                 suppressed_format: str | None = None,
                 on_error: OnError | str = OnError.fail, columns: Sequence[str] | None = None,
                 max_value_len: int = DEFAULT_MAX_VALUE_LEN,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 latency: bool = False) -> None:
        rules = operator.rules
        if rules is None:
            raise ValueError("the operator has no rules")
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
                                required=[rules.id_field], max_value_len=max_value_len,
                                source_name=positions.name, columns=columns,
                                repeated_header=positions.kind == "message")
        self.extra = [operator.loss_field] if operator.loss_field else []
        self.rejects = _RejectCount()
        self.rows = 0  # rows the operator took
        self._pub: tuple[io.StringIO, RowWriter] | None = None
        self._sup: tuple[io.StringIO, RowWriter] | None = None
        self.ids: set[Any] = set()
        self.sensitive: dict[str, set[Any]] = {name: set() for name in rules.sensitive}
        self._need_ids = True
        self._need_values = operator.l > 1 and bool(self.sensitive)
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
            setattr(self, key, None if cols is None else self._writer(fmt or "csv", cols)[0])

    @staticmethod
    def _writer(fmt: str, columns: list[str]) -> tuple[tuple[io.StringIO, RowWriter], str]:
        buf = io.StringIO()
        from streamanon.io.rows import RowWriter

        writer = RowWriter(buf, fmt, columns)
        header = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        return (buf, writer), header

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
        try:
            for row in reader.parse_block(chunk.first, chunk.data):
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
                try:
                    items = self.op.process(CastleRow(row.values, code, row.t))
                except BAD_RECORD_ERRORS as exc:
                    rejected.append(Rejected(line, reader.text_of(row.values), str(exc)))
                    if fail:
                        break
                    continue
                self.rows += 1
                released += _as_list(items)
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
        text_out, codes = _reject_lines(rejected, chunk, self.positions)
        out.add(REJECTS, text_out, codes)
        self.rejects.add(rejected, chunk, self.positions)
        return out, None

    def _observe(self, row: CastleRow, code: int) -> None:
        if self.latency:
            self._fed[code] = time.perf_counter()
        if self._need_ids:
            self.ids.add(row.values.get(self.rules.id_field))
            self._need_ids = len(self.ids) < self.op.k
        if self._need_values:
            for name, seen in self.sensitive.items():
                if len(seen) < self.op.l:
                    seen.add(row.values.get(name))
            self._need_values = any(len(v) < self.op.l for v in self.sensitive.values())

    def _emit(self, items: list[Any], out: Outputs) -> None:
        from streamanon.castle import Released

        now = time.perf_counter() if self.latency else 0.0
        pub_codes: list[int] = []
        sup_codes: list[int] = []
        pub_header = sup_header = None
        for x in items:
            if isinstance(x, Suppressed):
                if self.suppressed_format is None:
                    continue
                rec = x.record
                vals = dict(rec.values)
                vals["reason"] = x.reason
                if self._sup is None:
                    self._sup, sup_header = self._writer(
                        self.suppressed_format, [*self.reader.columns, *self.extra, "reason"])
                self._sup[1].write(vals)
                sup_codes.append(rec.line or 0)
                continue
            assert isinstance(x, Released)
            if self._pub is None:
                self._pub, pub_header = self._writer(self.out_format,
                                                     [*self.reader.columns, *self.extra])
            self._pub[1].write(x.values)
            pub_codes.append(x.line or 0)
            if self.latency and x.line in self._fed:
                self.lat_sum += now - self._fed.pop(x.line)
                self.lat_n += 1
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
            self._pub, header = self._writer(self.out_format, [*self.reader.columns,
                                                               *self.extra])
            out.add(PUBLISHED, "", empty, header)
        if self._sup is None and self.suppressed_format is not None:
            self._sup, header = self._writer(self.suppressed_format,
                                             [*self.reader.columns, *self.extra, "reason"])
            out.add(SUPPRESSED, "", empty, header)
        return out

    def stats(self) -> RunStats:
        op = self.op
        s = op.summary()
        stats = RunStats(params={"k": op.k, "l": op.l, "delta": op.delta, "beta": op.beta,
                                 "mu": op.mu, "zeta": op.zeta,
                                 "suppression": str(op.suppression),
                                 "input": self.positions.name})
        stats.count_read(self.rows + self.rejects.count)
        stats.count_rejected(self.rejects.count)
        stats.count_published(s["released"])
        stats.count_suppressed(s["suppressed"])
        stats.held = s["held"]
        stats.details = {
            "suppressed_by_reason": s["suppressed_by_reason"],
            "clusters_released": s["clusters_released"],
            "tau": s["tau"],
            "info_loss": s["info_loss"],
            "mean_info_loss": s["mean_info_loss"],
            "best_selection_s": round(op.timing["best_selection"], 4),
            "delay_constraint_s": round(op.timing["delay_constraint"], 4),
            "individuals_seen": len(self.ids - {None}),
            "sensitive_values_seen": {k: len(v - {None}) for k, v in self.sensitive.items()},
        }
        if self.reader.headers_skipped:
            stats.details["headers_skipped"] = self.reader.headers_skipped
        if self.latency:
            stats.details["latency_ms"] = 1000 * self.lat_sum / max(1, self.lat_n)
        return stats

    def identity(self) -> dict[str, Any]:
        op = self.op
        return {"operator": "castle", "k": op.k, "l": op.l, "delta": op.delta, "beta": op.beta,
                "mu": op.mu, "zeta": op.zeta, "suppression": str(op.suppression),
                "max_delay": op.max_delay, "loss_field": op.loss_field,
                "rules": self.rules.describe(),
                "input_format": self.in_format, "output_format": self.out_format,
                "suppressed_format": self.suppressed_format, "on_error": str(self.on_error)}


# -- sources ---------------------------------------------------------------------------------------

class FileSource:
    """The lines of a file, of stdin (``-``) or of an open stream, in large chunks.

    Files are read 16 MiB at a time; a pipe or terminal as data arrives
    (:func:`~streamanon.io.readers.line_chunks`). ``progress`` is told the bytes read.
    """

    def __init__(self, source: str | Path | TextIO | BinaryIO, name: str | None = None,
                 progress: Callable[[int], None] | None = None) -> None:
        self.source = source
        if name is None:
            name = "stdin" if str(source) == "-" else (
                str(source) if isinstance(source, str | Path) else "input")
        self.positions = LinePositions(name)
        self.progress = progress

    @property
    def name(self) -> str:
        return self.positions.name

    @contextlib.contextmanager
    def _open(self) -> Iterator[TextIO | BinaryIO]:
        src = self.source
        if isinstance(src, str | Path):
            if str(src) == "-":
                yield sys.stdin.buffer
                return
            with open(src, "rb") as fh:
                yield fh
        else:
            yield src

    def chunks(self) -> Iterator[LineChunk]:
        with self._open() as fh:
            for first, data in line_chunks(fh, self.progress, self.name):
                yield LineChunk(first, data)


# -- sinks -----------------------------------------------------------------------------------------


class FileSink:
    """Output lines to a file (created), ``-`` (stdout) or an open text stream (not closed).

    A destination's CSV header arrives with its first :class:`Lines` and is written first.
    The CLI hands it the temporary path of an :class:`~streamanon.io.output.OutputSet`.
    """

    def __init__(self, target: str | Path | TextIO, name: str | None = None) -> None:
        self.name = name or str(target)
        self.ident = self.name
        self.count = 0
        self.reconfirmed = 0
        self._fh, self._own = open_text(target)

    def write(self, lines: Lines) -> None:
        if lines.header:
            self._fh.write(lines.header)
        data = lines.data()
        if data:
            raw = getattr(self._fh, "buffer", None)
            if isinstance(data, str) or raw is None:  # raw is None: a StringIO
                self._fh.write(lines.text)
            else:  # the bytes as they are, after what the text layer holds
                self._fh.flush()
                raw.write(data)
            self.count += len(lines)

    def flush(self) -> None:
        self._fh.flush()

    def close(self) -> None:
        if self._own:
            self._fh.close()
        else:
            self._fh.flush()

    # a Kafka run's standard output: what was printed cannot be taken back
    def start(self) -> None:
        return None

    def position(self) -> Any:
        return None

    def resume(self, position: Any) -> None:
        return None


class JournalFileSink:
    """A file output of a Kafka run: appended as the run goes, exactly once across restarts.

    Each checkpoint records the file's length after an ``fsync``; a restart cuts the file
    back to that length and the replay writes the rest again, so the file ends as one
    uninterrupted run writes it. A fresh run (no checkpoint) refuses a file that exists and
    is not empty: it would have to overwrite it (outputs never destroy data).
    """

    def __init__(self, path: str | Path, option: str = "output") -> None:
        self.path = Path(path)
        self.name = str(path)
        self.ident = str(self.path.resolve())
        self.option = option
        self.count = 0
        self.reconfirmed = 0
        self._fh: BinaryIO | None = None
        folder = self.path.parent
        if self.path.is_dir():
            raise EndpointError(f"{option} {path}: is a folder; give a file name")
        if not folder.is_dir():
            raise EndpointError(f"{option} {path}: the folder {str(folder)!r} does not exist "
                                "(create it first)")

    def start(self) -> None:
        if self.path.exists() and self.path.stat().st_size:
            raise EndpointError(
                f"{self.option} {self.name}: exists and this pipeline has no checkpoint that "
                "wrote it; a Kafka run appends to its file outputs across restarts, so give "
                "a new file (or remove this one)")
        self._fh = open(self.path, "wb")  # noqa: SIM115 - kept open for the run

    def position(self) -> Any:
        assert self._fh is not None
        return {"bytes": self._fh.tell()}

    def resume(self, position: Any) -> None:
        size = int(position["bytes"])
        have = self.path.stat().st_size if self.path.exists() else -1
        if have < size:
            raise EndpointError(
                f"{self.option} {self.name}: holds {max(have, 0):,} bytes but the checkpoint "
                f"says {size:,} were written: the file was changed or replaced since")
        self._fh = open(self.path, "r+b")  # noqa: SIM115 - kept open for the run
        self._fh.truncate(size)
        self._fh.seek(size)

    def write(self, lines: Lines) -> None:
        assert self._fh is not None
        if lines.header:
            self._fh.write(lines.header.encode("utf-8"))
        if lines.data():
            self._fh.write(lines.utf8())
            self.count += len(lines)

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self.flush()
            self._fh.close()
            self._fh = None


class KafkaTopicSink:
    """Output lines to a topic: one message per line, tagged with its input position.

    A record goes to partition ``input partition % partitions`` (a file source: partition
    0), so the order of each input partition is kept. The headers name the input record
    (:attr:`Positions.tag_name`). ``exclusive`` (exactly-once runs): the run is the only
    writer, so the delivery report of each batch's last message must show the offset this
    run's count predicts; else :meth:`flush` stops the run. On a restart, :meth:`resume`
    reads what a killed run wrote after the checkpoint; the replay's messages are then
    checked against it (:class:`~streamanon.io.kafka_eos.OutputGate`) and produced only past
    it.
    """

    def __init__(self, url: str, positions: Positions, *,
                 config: Mapping[str, Any] | None = None, watch: Any = None,
                 exclusive: bool = False) -> None:
        from streamanon.io.kafka import BrokerWatch, KafkaSink, parse_kafka_url

        self.bootstrap, self.topic = parse_kafka_url(url)
        self.name = url
        self.ident = self.topic
        self.positions = positions
        self.tag_name = positions.tag_name
        self.config = dict(config or {})
        self._sink = KafkaSink(self.bootstrap, self.topic, config=config,
                               watch=watch or BrokerWatch(f"output {self.topic}"))
        self.partitions = self._sink.partitions
        self.next: dict[int, int] = {}
        self.reconfirmed = 0
        self._gate: Any = None
        self._misplaced: list[tuple[int, int, int]] = []
        self.exclusive = exclusive  # the only writer: check where each batch lands

    @property
    def count(self) -> int:
        return self._sink.count

    def _ends(self) -> dict[int, int]:
        from streamanon.io.kafka import end_offsets

        return end_offsets(self.bootstrap, self.topic, self.partitions, config=self.config)

    def start(self) -> None:
        self.next = self._ends()

    def position(self) -> Any:
        return {str(q): o for q, o in self.next.items()}

    def resume(self, position: Any) -> None:
        from streamanon.io.kafka_eos import OutputGate, read_tagged

        base = {int(q): int(o) for q, o in position.items()}
        ends = self._ends()
        short = {q: (base.get(q, 0), e) for q, e in ends.items() if e < base.get(q, 0)}
        if short:
            raise EndpointError(f"output {self.name} lost acknowledged messages (partition: "
                                f"(expected at least, found) {short})")
        self.next = {q: base.get(q, 0) for q in self.partitions}
        found = read_tagged(self.bootstrap, self.topic, self.next, ends, self.tag_name,
                            config=self.config)
        self._gate = OutputGate(self.topic, found)
        self.reconfirmed = 0

    def write(self, lines: Lines) -> None:
        if not lines.data():
            return
        values = bytes(lines.utf8()).split(b"\n")
        values.pop()  # the text ends with a newline
        codes = lines.codes
        nq = len(self.partitions)
        if nq == 1 or self.positions.kind == "line":
            groups = [(self.partitions[0], values, codes)]
        else:
            qs = self.positions.partitions(codes) % nq
            groups = []
            for qi in np.unique(qs).tolist():
                sel = np.flatnonzero(qs == qi)
                groups.append((self.partitions[qi], [values[i] for i in sel.tolist()],
                               codes[sel]))
        name = self.tag_name
        for q, vals, cs in groups:
            tags = self.positions.tags(cs)
            gate = self._gate
            if gate:
                skip = gate.skip(q, vals, tags)
                if skip:
                    self.reconfirmed += skip
                    self.next[q] += skip
                    vals, tags = vals[skip:], tags[skip:]
            if not vals:
                continue
            self.next[q] = self.next.get(q, 0) + len(vals)
            self._sink.write(q, vals, [{name: t} for t in tags],
                             on_last=self._expect(q, self.next[q] - 1) if self.exclusive
                             else None)

    def _expect(self, q: int, offset: int) -> Callable[[Any, Any], None]:
        """The delivery report of a batch's last message: it must land at ``offset``."""
        def check(err: Any, msg: Any) -> None:
            if err is None and msg.offset() != offset:
                self._misplaced.append((q, offset, msg.offset()))
        return check

    def flush(self) -> None:
        """Wait for every acknowledgement; a message that did not land where this run's count
        says means another writer (assumption A2) or a broker that lost acknowledged messages
        (A3): the run stops rather than go on with an output it cannot vouch for."""
        self._sink.flush()
        if self._misplaced:
            q, want, got = self._misplaced[0]
            raise EndpointError(
                f"output {self.name}[{q}]: a message of this run landed at offset {got}, "
                f"expected {want}: another writer on the topic, or the broker lost "
                "acknowledged messages; stopping (the last checkpoint's outputs stand)")

    def close(self) -> None:
        self.flush()


Sink = FileSink | JournalFileSink | KafkaTopicSink


# -- Kafka runs ------------------------------------------------------------------------------------

@dataclass
class KafkaOptions:
    """How a run with a ``kafka://`` source reads its topic and keeps its progress.

    ``group``: the consumer group (its committed offsets are what ``start="committed"`` and
    lag monitors read) and the name of the run's progress topic, ``GROUP.progress`` on the
    input's broker; default ``streamanon-COMMAND-OUTPUT`` (the output topic, or the output
    file's name and a hash of its path). ``start``: where a pipeline without a checkpoint
    begins, ``"committed"`` (the group's offsets, else the earliest) or ``"earliest"``; a
    pipeline with a checkpoint always resumes from it. ``until_end``: stop at the end
    offsets found at start (else run until ``stop`` is set: SIGTERM, Ctrl-C).
    ``checkpoint_every``: seconds between checkpoints (what a restart re-reads at most).
    ``config``: librdkafka settings for every client (TLS, SASL, ...).
    ``checkpoint_key``: the file of the key that signs the checkpoints (default:
    ``$STREAMANON_CHECKPOINT_KEY_FILE``, else a per-user file created on first use; see
    :func:`streamanon.io.kafka_eos.checkpoint_key`).
    """

    group: str | None = None
    start: str = "committed"
    until_end: bool = False
    checkpoint_every: float = 5.0
    config: dict[str, Any] = field(default_factory=dict)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    fetch_batch: int = 20_000
    stop: Any = None
    log: Callable[[str], None] | None = None
    after_batch: Callable[[int], None] | None = None
    on_batch: Callable[[int], None] | None = None  # messages per batch (progress displays)
    identity: dict[str, Any] = field(default_factory=dict)  # more that must not change
    checkpoint_key: str | Path | None = None

    def say(self, text: str) -> None:
        (self.log or (lambda s: print(f"streamanon kafka: {s}", file=sys.stderr)))(text)


def default_group(command: str, output: str | Path, source_topic: str = "") -> str:
    """``streamanon-COMMAND-NAME``: NAME is the output topic, or the output file's name and a
    hash of its absolute path, or for standard output the input topic and ``stdout`` (a Kafka
    group and topic name: letters, digits, ``._-``).

    >>> default_group("z", "kafka://127.0.0.1:9092/published")
    'streamanon-z-published'
    >>> default_group("z", "-", "readings")
    'streamanon-z-readings-stdout'
    """
    if is_kafka(output):
        name = str(output).rsplit("/", 1)[1]
    elif str(output) == "-":
        name = f"{source_topic}-stdout" if source_topic else "stdout"
    else:
        path = Path(output).resolve()
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
        name = f"{re.sub(r'[^A-Za-z0-9._-]', '_', path.name)[:80]}-{digest}"
    return f"streamanon-{command}-{name}"


def topic_partitions(url: str, config: Mapping[str, Any] | None = None,
                     timeout: float = 30.0) -> list[int] | None:
    """The partitions of the topic of ``url``; ``None`` when it does not exist.

    Raises :class:`EndpointError` when the broker does not answer within ``timeout``.
    """
    from confluent_kafka import KafkaException

    from streamanon.io import kafka

    bootstrap, topic = kafka.parse_kafka_url(url)
    try:
        return kafka.topic_partitions(bootstrap, topic, config, timeout)
    except KafkaException as exc:
        raise EndpointError(f"{url}: no answer from the broker at {bootstrap} within "
                            f"{timeout:g} s ({exc.args[0].str()}); is it running?") from None


def ensure_topic(url: str, partitions: int, config: Mapping[str, Any] | None = None,
                 say: Callable[[str], None] | None = None) -> list[int]:
    """The partitions of the topic of ``url``, created with ``partitions`` when missing."""
    from streamanon.io.kafka import parse_kafka_url
    from streamanon.io.kafka_broker import create_topics

    have = topic_partitions(url, config)
    if have is not None:
        return have
    bootstrap, topic = parse_kafka_url(url)
    create_topics(bootstrap, {topic: partitions}, client_config=config, exist_ok=True)
    if say is not None:
        say(f"created topic {topic} ({partitions} partition{'s' if partitions > 1 else ''})")
    return topic_partitions(url, config) or list(range(partitions))


def _kafka_sinks(outputs: Mapping[str, tuple[str | Path, str]], positions: Positions,
                 partitions: int, options: KafkaOptions | None, journal: bool,
                 watch: Any = None) -> dict[str, Any]:
    """Sinks by destination from ``{dest: (target, option name)}``."""
    config = options.config if options is not None else {}
    sinks: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for dest, (target, option) in outputs.items():
        if not isinstance(target, str | Path):  # an open stream
            sinks[dest] = FileSink(target, option)
            continue
        key = str(target) if is_kafka(target) or str(target) == "-" else str(
            Path(target).resolve())
        if key in seen and key != "-":
            raise EndpointError(f"{option} {target}: is also the output of {seen[key]}; give "
                                "each output its own name")
        seen[key] = option
        if is_kafka(target):
            ensure_topic(str(target), partitions, config,
                         options.say if options is not None else None)
            sinks[dest] = KafkaTopicSink(str(target), positions, config=config, watch=watch,
                                         exclusive=journal)
        elif journal and str(target) != "-":
            sinks[dest] = JournalFileSink(target, option)
        else:
            sinks[dest] = FileSink(target, option if str(target) == "-" else None)
    return sinks


def run_kafka(source_url: str, make_stage: Callable[[], Any],
              outputs: Mapping[str, tuple[str | Path, str]], options: KafkaOptions,
              command: str, identity: Mapping[str, Any] | None = None) -> tuple[Any, dict]:
    """Run a stage from a topic to its outputs exactly once; returns ``(stage, delivery)``.

    ``outputs`` maps destinations (``published``, ``suppressed``, ``rejects``) to a target
    (``kafka://`` URL, file path, ``-``) and the option that named it (for messages).
    """
    from streamanon.io.kafka import BrokerWatch, KafkaSource, StopFlag, parse_kafka_url
    from streamanon.io.kafka_eos import ExactlyOnceRun, ProgressLog, checkpoint_key

    bootstrap, topic = parse_kafka_url(source_url)
    config = options.config
    parts = topic_partitions(source_url, config)
    if parts is None:
        raise EndpointError(f"{source_url}: no such topic (create it, or check the name)")
    positions = MessagePositions(source_url)
    out_target = outputs[PUBLISHED][0]
    group = options.group or default_group(command, out_target, topic)
    key = checkpoint_key(options.checkpoint_key)  # before any topic is created
    if key.created:
        options.say(f"created the checkpoint key {key.path} (a restart needs it: keep it, "
                    "or give it with --checkpoint-key on another machine)")
    progress_url = f"kafka://{bootstrap}/{group}.progress"
    ensure_topic(progress_url, 1, config, options.say)
    # one watch reports outages for every client of the run; producers first: an idempotent
    # producer needs ~0.5 s for its id, which the rest of the start-up then hides
    watch = BrokerWatch("kafka")
    progress = ProgressLog(bootstrap, f"{group}.progress", config=config, watch=watch,
                           key=key)
    sinks = _kafka_sinks(outputs, positions, len(parts), options, journal=True, watch=watch)
    source = KafkaSource(bootstrap, topic, group=group, start=options.start,
                         until_end=options.until_end, config=config,
                         fetch_batch=options.fetch_batch, watch=watch)
    stop = options.stop if options.stop is not None else StopFlag(install=False)
    runner = ExactlyOnceRun(source, sinks, progress, make_stage,
                            checkpoint_every=options.checkpoint_every, stop=stop,
                            identity={"input": topic, **options.identity,
                                      **(identity or {})},
                            after_batch=options.after_batch, log=options.say,
                            on_batch=options.on_batch)
    try:
        delivery = runner.run()
    finally:
        runner.source.close()
    delivery["group"] = group
    delivery["checkpoint_key"] = key.origin  # where it is, never the key
    return runner.stage, delivery


# -- file runs -------------------------------------------------------------------------------------

def run_lines(source: FileSource, stage: Any, sinks: Mapping[str, Any]) -> None:
    """Run ``stage`` over every chunk of ``source`` once, writing to ``sinks``.

    Raises the stage's :class:`~streamanon.io.InputError` (``--on-error fail``) after writing
    the outputs of the records before the bad one.
    """
    stage.tagged = any(isinstance(s, KafkaTopicSink) for s in sinks.values())
    for sink in sinks.values():
        sink.start()

    def emit(out: Outputs) -> None:
        for dest, blocks in out.items():
            sink = sinks.get(dest)
            if sink is not None:
                for lines in blocks:
                    sink.write(lines)

    for chunk in source.chunks():
        out, error = stage.process(chunk)
        emit(out)
        if error is not None:
            raise error
    emit(stage.finish())


def _warn_rejects(stage: Any, where: str | None) -> None:
    rej = stage.rejects
    if rej.count:
        written = f" (written to {where})" if where else ""
        print(f"warning: {rej.count} record(s) rejected{written}; first: {rej.first}",
              file=sys.stderr)


@contextlib.contextmanager
def lean_gc(young: int = 100_000) -> Iterator[None]:
    """Fewer garbage collections while a run allocates many short-lived objects per batch.

    A Kafka run makes a few objects per message (its value, its header); the cyclic
    collector would run every 700 allocations and, every tenth time, scan everything alive,
    which cost more than the work itself (measured: 1 s of 5 s for 300,000 messages). Here
    the objects that exist at the start are frozen (never scanned) and the young generation
    is collected every ``young`` allocations; both are undone at the end.
    """
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(young, old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def _run(command: str, source: str | Path | TextIO | BinaryIO, make_stage: Callable[[Any], Any],
         outputs: dict[str, tuple[str | Path, str]], rejects_name: str | None,
         progress: Callable[[int], None] | None, kafka: KafkaOptions | None,
         identity: Mapping[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """The common body of :func:`run_z` and :func:`run_castle`."""
    details: dict[str, Any] = {}
    start = time.perf_counter()
    stage: Any = None
    rejects_where = rejects_name or (str(outputs[REJECTS][0]) if REJECTS in outputs else None)
    try:
        with lean_gc():
            if is_kafka(source):
                options = kafka or KafkaOptions()
                stage, delivery = run_kafka(str(source), lambda: make_stage(
                    MessagePositions(str(source))), outputs, options, command, identity)
                details["delivery"] = delivery
            else:
                src = FileSource(source, progress=progress)
                stage = make_stage(src.positions)
                sinks = _kafka_sinks(outputs, src.positions, 1, kafka, journal=False)
                try:
                    run_lines(src, stage, sinks)
                finally:
                    for sink in sinks.values():
                        sink.close()
    finally:
        if stage is not None:
            _warn_rejects(stage, rejects_where)
    elapsed = time.perf_counter() - start
    details["seconds"] = round(elapsed, 3)
    return stage, details


def _formats(source: Any, output: Any, in_format: str | None, out_format: str | None
             ) -> tuple[str, str]:
    """The input and output formats of a run: given, else from a file's suffix (a topic, a
    stream or ``-`` has none to tell)."""
    path = None if is_kafka(source) or not isinstance(source, str | Path) else source
    out_path = None if is_kafka(output) or str(output) == "-" or not isinstance(
        output, str | Path) else output
    return detect_format(path, in_format), detect_format(out_path, out_format)


def run_z(
    source: str | Path | TextIO | BinaryIO,
    output: str | Path | TextIO,
    operator: ZAnonymizer | AdaptiveZAnonymizer,
    *,
    in_format: str | None = None,
    out_format: str | None = None,
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    rejects_name: str | None = None,
    time_tolerance: float = 0.0,
    progress: Callable[[int], None] | None = None,
    kafka: KafkaOptions | None = None,
) -> RunStats:
    """z-anonymize a whole stream from ``source`` to ``output``; returns the accounting.

    ``source``: a file, ``-`` (stdin), an open stream or ``kafka://HOST:PORT/TOPIC``;
    ``output`` and ``rejects_path``: a file, ``-`` (stdout) or ``kafka://`` (module
    docstring: delivery). Raises :class:`~streamanon.io.InputError` under ``on_error=fail``
    after writing what came before the bad record (wrap file outputs in an
    :class:`~streamanon.io.output.OutputSet`, as the CLI does, so that a partial output
    replaces nothing). ``rejects_name`` is the rejects file's name in messages (when
    ``rejects_path`` is a temporary file). ``details["users_seen"]`` counts distinct users up
    to ``z`` (enough to tell whether z could ever be reached) for the batch engine.
    """
    in_fmt, out_fmt = _formats(source, output, in_format, out_format)
    outputs: dict[str, tuple[Any, str]] = {PUBLISHED: (output, "--output")}
    if rejects_path is not None:
        outputs[REJECTS] = (rejects_path, "--rejects")
    max_bytes = kafka.max_message_bytes if kafka is not None else DEFAULT_MAX_MESSAGE_BYTES

    def make_stage(positions: Positions) -> ZStage:
        return ZStage(operator, positions, in_format=in_fmt, out_format=out_fmt,
                      on_error=on_error, time_tolerance=time_tolerance,
                      max_message_bytes=max_bytes)

    stage, details = _run("z", source, make_stage, outputs, rejects_name, progress, kafka)
    stats = stage.stats()
    stats.details.update(details)
    stats.details["tuples_per_second"] = (round(stats.read / details["seconds"])
                                          if details["seconds"] > 0 else None)
    return stats


def run_castle(
    source: str | Path | TextIO | BinaryIO,
    output: str | Path | TextIO,
    operator: CastleAnonymizer,
    *,
    in_format: str | None = None,
    out_format: str | None = None,
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    rejects_name: str | None = None,
    suppressed_path: str | Path | None = None,
    suppressed_format: str | None = None,
    columns: Sequence[str] | None = None,
    latency: bool = False,
    progress: Callable[[int], None] | None = None,
    kafka: KafkaOptions | None = None,
) -> RunStats:
    """k_s-anonymize a whole stream with CASTLE; returns the accounting.

    Endpoints as :func:`run_z`. Suppressed tuples go to ``suppressed_path`` (as the
    suppression strategy leaves them, with a ``reason`` column; a header only when there are
    none) when given, else they are only counted. ``columns``: the CSV header of a
    ``kafka://`` source whose messages carry none (default: the first message is the
    header). With ``latency`` the mean wall-clock time from feeding a tuple to its release is
    measured (``details["latency_ms"]``). ``details["individuals_seen"]`` and
    ``details["sensitive_values_seen"]`` count distinct individuals up to k and distinct
    values of each sensitive attribute up to l: enough to tell whether k and l could be
    reached. On bad input under ``fail`` it raises after writing what came before: wrap the
    call in an :class:`~streamanon.io.output.OutputSet`, as the CLI does.
    """
    if operator.rules is None:
        raise ValueError("the operator has no rules")
    in_fmt, out_fmt = _formats(source, output, in_format, out_format)
    outputs: dict[str, tuple[Any, str]] = {PUBLISHED: (output, "--output")}
    sup_fmt = None
    if suppressed_path is not None:
        outputs[SUPPRESSED] = (suppressed_path, "--suppressed")
        sup_fmt = out_fmt if is_kafka(suppressed_path) else detect_format(
            None if str(suppressed_path) == "-" else suppressed_path, suppressed_format)
    if rejects_path is not None:
        outputs[REJECTS] = (rejects_path, "--rejects")
    max_bytes = kafka.max_message_bytes if kafka is not None else DEFAULT_MAX_MESSAGE_BYTES

    def make_stage(positions: Positions) -> CastleStage:
        return CastleStage(operator, positions, in_format=in_fmt, out_format=out_fmt,
                           suppressed_format=sup_fmt, on_error=on_error,
                           columns=columns if positions.kind == "message" else None,
                           max_message_bytes=max_bytes, latency=latency)

    stage, details = _run("castle", source, make_stage, outputs, rejects_name, progress, kafka)
    stats = stage.stats()
    stats.details.update(details)
    stats.details["tuples_per_second"] = (round(stats.read / details["seconds"])
                                          if details["seconds"] > 0 else None)
    return stats


__all__ = [
    "CastleStage",
    "EndpointError",
    "FileSink",
    "FileSource",
    "JournalFileSink",
    "KafkaOptions",
    "KafkaTopicSink",
    "LineChunk",
    "LinePositions",
    "Lines",
    "MessagePositions",
    "Outputs",
    "ZStage",
    "default_group",
    "ensure_topic",
    "is_kafka",
    "run_castle",
    "run_kafka",
    "run_lines",
    "run_z",
]

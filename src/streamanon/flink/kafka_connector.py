"""``kafka://`` input and output of the Flink jobs, through Flink's own Kafka connector.

Design: docs/design/flink.md
"""

from __future__ import annotations

import io
import json
import pickle
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pyflink.common import Row, Types
from pyflink.datastream import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

from streamanon.errors import BadInputError, ConfigError, JobError, ResumeError
from streamanon.flink.castle_partition import CastlePartition
from streamanon.flink.castle_rows import refused_row, written_outcomes
from streamanon.flink.functions import (
    END_OF_INPUT,
    ZKeyGroups,
    _ChunkStage,
    current_key,
)
from streamanon.flink.outcomes import (
    BLANK,
    HEADER,
    REJECTED,
    rejected_line,
)
from streamanon.flink.runtime import JobOptions, JobRun, RunRecord, batch_rows_type, keyed_rows
from streamanon.io import OnError
from streamanon.io.writers import RecordWriter, selected_data
from streamanon.pipeline.chunks import LineChunk, joined_values, message_block, message_chunk
from streamanon.pipeline.kafka.merge import MergedBatch, PartitionMerge
from streamanon.pipeline.kafka.options import DEFAULT_MAX_MESSAGE_BYTES
from streamanon.pipeline.positions import HEADER_IN, MessagePositions
from streamanon.pipeline.stages import reject_lines
from streamanon.records import Rejected, RunStats

#: the layout of the message steps' Flink state (a message step keyed as the operator, a gate
#: keyed by output partition); a checkpoint of another layout is refused, not misread
STATE_LAYOUT = "keyed-messages-1"
#: ... and of a z job's, whose operator step makes the messages itself (no message step)
Z_STATE_LAYOUT = "z-messages-in-operator-1"
#: ... and of a CASTLE job's, likewise
CASTLE_STATE_LAYOUT = "castle-messages-in-operator-1"
OLD_LAYOUT = ("--restore: the checkpoint was written by an older Kafka job (another layout of "
              "its steps), whose state this job cannot read; start a fresh run (a new "
              "--work-dir), or finish the old run with the streamanon release that started it")
#: milliseconds a partition may stay empty before the reading step's merge goes on without
#: it (a live topic of several partitions), as the pure path's ``idle_ms``
IDLE_MS = 500.0
#: milliseconds a fetch of the job's Kafka source may wait for records (``fetch.max.wait.ms``,
#: as the pure path's reader's ``fetch.wait.max.ms``; ``--kafka-config`` may set another)
FETCH_WAIT_MS = 100


def record_type() -> Any:
    """``Row(0, Row(partition, offset, value, timestamp))`` (TaggedRecords)."""
    return Types.ROW([Types.INT(), Types.ROW([Types.INT(), Types.LONG(),
                                              Types.PRIMITIVE_ARRAY(Types.BYTE()),
                                              Types.LONG()])])


def message_batch_type() -> Any:
    """``Row(topic, partition, codes, text)``: one batch of output messages (TaggedMessages;
    codes: each message's input position, ``offset << 16 | partition``, as little-endian
    int64; text: UTF-8, one line per message). The JVM writes the tags."""
    return Types.ROW([Types.STRING(), Types.INT(), Types.PRIMITIVE_ARRAY(Types.BYTE()),
                      Types.PRIMITIVE_ARRAY(Types.BYTE())])


def gated_type() -> Any:
    """``Row(gate key, Row(topic, partition, codes, text))``: a message batch for the gate."""
    return Types.ROW([Types.INT(), message_batch_type()])


@dataclass
class KafkaInput:
    """A topic read by the job: where it starts, where it stops, how messages are checked."""

    url: str
    start: str = "earliest"  # or "committed" (the group's offsets, else the earliest)
    group: str | None = None
    until_end: bool = False
    end_offsets: dict[int, int] = field(default_factory=dict)  # filled for until_end
    partitions: list[int] = field(default_factory=list)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    columns: list[str] | None = None  # CASTLE CSV: the header (else the first message)
    #: librdkafka settings (``--kafka-config``; the Java clients get them translated); never
    #: shown (not in the repr)
    config: dict[str, str] = field(default_factory=dict, repr=False)
    on_error: str = "fail"  # "skip": bad messages go to the rejects topic

    def __str__(self) -> str:
        return self.url

    @property
    def bootstrap(self) -> str:
        from streamanon.pipeline.kafka.options import parse_kafka_url

        return parse_kafka_url(self.url)[0]

    @property
    def topic(self) -> str:
        from streamanon.pipeline.kafka.options import parse_kafka_url

        return parse_kafka_url(self.url)[1]


@dataclass
class KafkaOutput:
    """The topics a job writes (one broker): published rows, rejects, CASTLE's suppressed."""

    published: str
    rejects: str | None = None
    suppressed: str | None = None
    partitions: dict[str, int] = field(default_factory=dict)  # topic -> partition count
    out_format: str = "csv"
    suppressed_format: str = "csv"
    operator: str = "z"
    columns: list[str] = field(default_factory=list)  # CASTLE: output columns (if known)
    loss_field: str | None = None
    on_error: str = "fail"
    #: exactly once without broker transactions: on a restore the output gate reads its
    #: output partitions past the checkpointed offsets and drops what is already there
    delivery: str = "exactly-once"
    source_name: str = "input"
    stats_path: str | None = None  # the accounting, written at the end of a bounded input
    #: topic -> partition -> its end offset when the run started (a fresh run's first
    #: output offsets; a restore takes them from the checkpoint)
    base: dict[str, dict[int, int]] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict, repr=False)  # as KafkaInput's
    #: the layout of the job's steps and state (a restore of another layout is refused)
    layout: str = STATE_LAYOUT

    @property
    def bootstrap(self) -> str:
        from streamanon.pipeline.kafka.options import parse_kafka_url

        return parse_kafka_url(self.published)[0]

    def topic(self, url: str | None) -> str | None:
        from streamanon.pipeline.kafka.options import parse_kafka_url

        return None if url is None else parse_kafka_url(url)[1]

    def topic_list(self) -> list[str]:
        """The topics written (published, rejects, suppressed: those given), in that order."""
        return [t for t in map(self.topic, (self.published, self.rejects, self.suppressed))
                if t is not None]


# -- the source and the reading step -----------------------------------------------------------

def kafka_source(env: Any, source: KafkaInput, restoring: bool = False, *,
                 parallelism: int = 1) -> Any:
    """The records of ``source`` as ``Row(0, Row(partition, offset, value, timestamp))``, read by
    ``parallelism`` readers (each partition by one reader: its order on one channel)."""
    from pyflink.common import WatermarkStrategy
    from pyflink.datastream.connectors.kafka import KafkaSource as PyKafkaSource
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    kafka = jvm.org.apache.flink.connector.kafka.source
    tp = jvm.org.apache.kafka.common.TopicPartition
    builder = (kafka.KafkaSource.builder().setBootstrapServers(source.bootstrap)
               .setDeserializer(jvm.streamanon.kafka.TaggedRecords()))
    parts = jvm.java.util.HashSet()
    for p in source.partitions:
        parts.add(tp(source.topic, p))
    builder.setPartitions(parts)  # assigned partitions: no group join (slow on some brokers)
    init = kafka.enumerator.initializer.OffsetsInitializer
    reset = jvm.org.apache.kafka.clients.consumer.OffsetResetStrategy.EARLIEST
    if source.start == "committed" or restoring:
        builder.setStartingOffsets(init.committedOffsets(reset))
    else:
        builder.setStartingOffsets(init.earliest())
    if source.group:
        builder.setGroupId(source.group)  # offsets committed at checkpoints, for monitors
    else:
        builder.setProperty("commit.offsets.on.checkpoint", "false")
    builder.setProperty("partition.discovery.interval.ms", "-1")
    # the pure path's fetch wait: a broker may hold a fetch for its whole wait although
    # records came meanwhile (the Java client's default, 500 ms, is then a live record's
    # latency), and a shorter wait can starve a reader of a topic of tiny record batches
    # (docs/design/kafka.md)
    builder.setProperty("fetch.max.wait.ms", str(FETCH_WAIT_MS))
    from streamanon.pipeline.kafka.options import java_kafka_config

    for key, value in java_kafka_config(source.config).items():
        builder.setProperty(key, value)
    if source.until_end:
        from pyflink.util.java_utils import get_java_class

        # (py4j passes a Python int as an Integer; this map boxes the values as Long)
        ends = jvm.org.apache.flink.python.util.HashMapWrapper(None, get_java_class(jvm.Long))
        for p, end in source.end_offsets.items():
            ends.put(tp(source.topic, p), end)
        builder.setBounded(init.offsets(ends.asMap()))
    # a new uid per run: the source's own state (its splits) is never restored, see
    # "Restores" in the module docstring
    return (env.from_source(PyKafkaSource(builder.build()), WatermarkStrategy.no_watermarks(),
                            f"kafka {source.topic}", type_info=record_type())
            .uid(f"kafka-source-{uuid.uuid4().hex}").set_parallelism(parallelism))


class BatchMessages(_ChunkStage):
    """Batches of Kafka records in, gathered in the JVM (``GatherRecords``: ``batch_size``
    records or ``batch_ms`` after the first, per partition) as ``Row(partition, offsets,
    sizes, data, opened, timestamps)``; the partitions are merged into one record order by
    the pure path's rule (:class:`~streamanon.pipeline.kafka.merge.PartitionMerge`: running
    maximum Kafka timestamp, partition, offset; a record is released once no partition can
    still precede it: every other partition has sent a later key, reached its end offset
    (``ends``), or stayed empty for ``idle_ms`` on a live topic); the merged records pass the
    pure path's message checks (:func:`~streamanon.pipeline.message_chunk`: empty, oversized,
    not UTF-8, several lines; a repeated header skipped) and the file job's chunk parser.
    The merge's buffered records are part of this step's Flink state.

    Out: ``Row(Flink key, (group, batch, codes))``, each key group's batch with its rows'
    input positions (``offset << 16 | partition``), and ``Row(first key group's key, (None,
    lines, codes, read time))``, the rejected / header / blank outcome lines with theirs and
    the wall-clock ms at which the JVM took the first record (once), for an operator step
    that makes the messages itself (:class:`ZKeyGroupMessages`, :class:`CastleMessages`).
    This step is the one task of the record path: the merge and the line numbering (with
    the time check's clock) are one order of the whole input, as in the pure command.
    Under ``on_error="fail"`` a bad message fails the job, named by ``partition@offset``
    (:class:`~streamanon.pipeline.BadInputError`).

    Args:
        parser: the chunk parser (its state lives in Flink state).
        routing: the Flink key of each key group.
        source_name: the input's name in messages (its ``kafka://`` URL).
        max_bytes: the largest message value accepted (larger ones are rejected).
        header: the header line a message may repeat (skipped; ``None``: none known).
        header_given: whether ``header`` is fed to the parser before the first message.
        on_error: ``fail`` fails the job at the first bad message; ``skip`` rejects it and goes on.
        partitions: the input topic's partitions (merged).
        ends: each partition's end offset of a bounded input (``None``: a live topic).
        starts: each partition's first offset the source reads (a partition that starts at
            its end is exhausted at once; ``None``: offset 0).
        idle_ms: milliseconds a partition of a live topic may stay empty before the merge
            goes on without it.
        pace: seconds to wait per line read (0: none).
    """

    def __init__(self, parser: Any, routing: list[int], *, source_name: str, max_bytes: int,
                 header: str | None, header_given: bool, on_error: str,
                 partitions: Sequence[int] = (0,), ends: dict[int, int] | None = None,
                 starts: dict[int, int] | None = None, idle_ms: float = IDLE_MS,
                 pace: float = 0.0) -> None:
        super().__init__(parser, routing, pace)
        self.source_name, self.max_bytes = source_name, int(max_bytes)
        self.header, self.header_given = header, header_given
        self.on_error = on_error
        self.partitions = sorted(int(p) for p in partitions) or [0]
        self.ends = None if ends is None else {int(p): int(o) for p, o in ends.items()}
        self.starts = {int(p): int(o) for p, o in (starts or {}).items()}
        self.idle_ms = float(idle_ms)

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self._position: Any = {}  # partition -> the next offset this step takes
        self._read_at_sent = False  # this task's first batch's read time sent on
        self._read_at: int | None = None  # ... taken, not sent yet
        self._merge_state = runtime_context.get_state(
            ValueStateDescriptor("merge", Types.PICKLED_BYTE_ARRAY()))
        self._merge: PartitionMerge | None = None
        self._empty_since: dict[int, float] = {}

    def _load(self) -> Any:
        fresh = self._parser is None
        parser = super()._load()
        if fresh:
            if not isinstance(self._position, dict):
                self._position = {}
            if not self._restored and self.header_given and self.header is not None:
                # the header is known (z: t,u,a; CASTLE: --columns): every message is a record
                parser.feed_header(self.header)
        return parser

    def _load_merge(self) -> PartitionMerge:
        if self._merge is None:
            saved = self._merge_state.value()
            self._merge = (PartitionMerge(self.partitions) if saved is None
                           else PartitionMerge.from_buffers(pickle.loads(saved)))
        return self._merge

    def _save_merge(self) -> None:
        assert self._merge is not None
        self._merge_state.update(pickle.dumps(self._merge.with_buffers(),
                                              protocol=pickle.HIGHEST_PROTOCOL))

    def _exhausted(self, partition: int) -> bool:
        """A bounded input's partition read up to its end offset (the pure path's rule)."""
        return self.ends is not None and (
            self._position.get(partition, self.starts.get(partition, 0))
            >= self.ends.get(partition, 0))

    def _idle(self, partition: int) -> bool:
        """A live topic's partition with nothing buffered for ``idle_ms`` (the pure path's
        rule: the merge goes on without it)."""
        if self._merge is None or self._merge.buffered(partition):
            self._empty_since.pop(partition, None)
            return False
        now = time.monotonic()
        since = self._empty_since.setdefault(partition, now)
        return (now - since) * 1000 >= self.idle_ms

    def process_element(self, batch: Any, ctx: Any):  # type: ignore[override]
        self._load()
        merge = self._load_merge()
        partition = int(batch[0])
        offsets = np.frombuffer(bytes(batch[1]), dtype="<i8")
        sizes = np.frombuffer(bytes(batch[2]), dtype="<i4")
        data = bytes(batch[3])  # the values joined by newlines
        stamps = np.frombuffer(bytes(batch[5]), dtype="<i8")
        skip = int(np.count_nonzero(offsets < self._position.get(partition, 0)))
        if skip:  # (the JVM step drops these already; a restore's guard; offsets ascend)
            data = data[int(sizes[:skip].sum()) + skip:]
            offsets, sizes, stamps = offsets[skip:], sizes[skip:], stamps[skip:]
        if not len(offsets):
            return
        self._position[partition] = int(offsets[-1]) + 1
        if not self._read_at_sent and self._read_at is None and batch[4]:
            self._read_at = int(batch[4])
        if len(self.partitions) == 1 and not merge.buffered(partition):
            # nothing to merge: the batch is released as it came, its values left joined
            merge.pass_on(partition, offsets, stamps)
            self._save_merge()
            codes = (offsets.astype(np.int64) << 16) | partition
            read_at, self._read_at = self._read_at, None
            if read_at is not None:
                self._read_at_sent = True
            yield from self._flush(codes, None, read_at, block=(data, sizes))
            return
        merge.add(partition, offsets.astype(np.int64), stamps.astype(np.int64),
                  joined_values(data, sizes))
        yield from self._release(ctx, merge.take(self._exhausted, self._idle))

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        self._load()
        merge = self._load_merge()
        if timestamp == END_OF_INPUT:  # the input ended: nothing can precede what is held
            yield from self._release(ctx, merge.take(lambda p: True))
        else:
            yield from self._release(ctx, merge.take(self._exhausted, self._idle))

    def _release(self, ctx: Any, batch: MergedBatch | None) -> Any:
        """Pass a merged batch on; while records are held, wake up to look again."""
        merge = self._merge
        assert merge is not None
        if any(merge.buffered(p) for p in self.partitions):
            timers = ctx.timer_service()
            timers.register_event_time_timer(END_OF_INPUT)  # (one: same timestamp)
            if self.ends is None:  # a live topic: an empty partition may turn idle
                timers.register_processing_time_timer(
                    int(timers.current_processing_time() + self.idle_ms))
        self._save_merge()
        if batch is None:
            self._save()
            return
        codes = (batch.offsets.astype(np.int64) << 16) | batch.partitions.astype(np.int64)
        read_at, self._read_at = self._read_at, None
        if read_at is not None:
            self._read_at_sent = True
        yield from self._flush(codes, batch.values, read_at)

    def _flush(self, codes: np.ndarray, values: list[bytes] | None,
               read_at: int | None = None,
               block: tuple[bytes, np.ndarray] | None = None) -> Any:
        """Check, number and parse merged messages: ``values``, or ``block``, the values
        joined by newlines and their sizes."""
        parser = self._parser
        first = parser.line + 1
        meta: list[str] = []
        batches: list[tuple[int, Any]] = []
        seqs: list[np.ndarray] = []  # each batch's line numbers, as the parser gives them

        def feed(data: bytes | str) -> tuple[list[str], list[tuple[int, Any]]]:
            m, b, s = parser.feed_seqs(data)
            seqs.extend(s)
            return m, b

        start = 0
        if parser.header_missing():  # CASTLE CSV without --columns: the first message
            if values is None:
                assert block is not None
                values, block = joined_values(*block), None
            m, b = feed(values[0])
            meta += m
            batches += b
            start = 1
        header = parser.header_bytes()
        n = len(values) if values is not None else len(codes)
        if values is not None:
            chunk = message_chunk(values[start:], codes[start:], self.max_bytes, header)
        else:
            assert block is not None
            chunk = message_block(*block, codes, self.max_bytes, header)
        if n > start:
            m, b = feed(chunk.data)
            refused = {first + start + r.line for r in chunk.rejected}
            # lines the message checks blanked: their rejection, not a blank line
            meta += [line for line in m if int(line.split("\t", 1)[0]) not in refused]
            meta += [rejected_line(Rejected(first + start + r.line, r.text, r.reason))
                     for r in chunk.rejected]
            batches += b
        self._save()
        if self.on_error == OnError.fail.value:
            bad = [line for line in meta if line.split("\t", 2)[1] == REJECTED]
            if bad:
                seq, _, rest = min(bad, key=lambda x: int(x.split("\t", 1)[0])).split("\t", 2)
                text, reason = json.loads(rest)
                raise BadInputError(Rejected(int(codes[int(seq) - first]), text, reason),
                                    MessagePositions(self.source_name))
        yield from self._emit_positions(first, codes, meta, batches, seqs, read_at, n)

    def _emit_positions(self, first: int, codes: np.ndarray, meta: list[str],
                              batches: list[tuple[int, Any]], seqs: list[np.ndarray],
                              read_at: int | None, lines: int) -> Any:
        """The input positions travel with what they belong to, on the main output:
        ``(group, batch, codes)`` to the batch's key, and ``(None, lines, codes, read time)``
        (the lines that need no operator) to the first key group's key
        (:class:`ZKeyGroupMessages`, :class:`CastleMessages`).

        Args:
            first: the line number of the first message.
            codes: the input position of each message, in line order.
            meta: the outcome lines that need no operator.
            batches: the keyed batches.
            seqs: the line numbers of each batch's rows.
            read_at: the wall-clock ms at which the JVM took the first record (once).
            lines: the number of lines (messages).
        """
        if self.pace:
            time.sleep(self.pace * lines)
        routing = self.routing
        if meta or read_at is not None:
            at = np.array([int(line.split("\t", 1)[0]) for line in meta], dtype=np.int64)
            yield Row(routing[0], (None, meta, codes[at - first], read_at))
        for (group, batch), rows in zip(batches, seqs, strict=True):
            yield Row(routing[group], (group, batch, codes[rows - first]))


class KafkaHeaderParser:
    """A file job's chunk parser behind the message rules: the CSV header given or taken
    from the first message (wraps :class:`~streamanon.flink.zbatch.ZChunkParser` or
    :class:`~streamanon.flink.castle_rows.CastleChunkParser`)."""

    def __init__(self, inner: Any, fmt: str) -> None:
        self.inner, self.fmt = inner, fmt

    @property
    def line(self) -> int:
        return self.inner.line

    def state(self) -> Any:
        return self.inner.state()

    def restore(self, state: Any) -> None:
        self.inner.restore(state)

    def _header(self) -> Any:
        inner = self.inner
        if hasattr(inner, "reader"):  # z: the reader's header (column order) once taken
            return inner.reader.header
        return inner.header

    def header_missing(self) -> bool:
        return self.fmt == "csv" and self._header() is None

    def header_bytes(self) -> bytes | None:
        if self.fmt != "csv":
            return None
        inner = self.inner
        if hasattr(inner, "reader"):
            return b"t,u,a"
        return inner.header.encode("utf-8") if inner.header is not None else None

    def feed_header(self, header: str) -> None:
        """Take ``header`` as the CSV header without numbering a line."""
        if self.fmt != "csv":
            return
        inner = self.inner
        if hasattr(inner, "reader"):
            inner.reader.take_header(0, header)
        else:
            inner.header = header

    def feed_seqs(self, block: bytes | str) -> Any:
        """:meth:`feed`, and each batch's line numbers (the parser's ``feed_seqs``)."""
        return self.inner.feed_seqs(block)


def kafka_batches(env: Any, source: KafkaInput, parser: Any, record: RunRecord,
                  options: JobOptions) -> Any:
    """The reading step of a Kafka input (as :func:`streamanon.flink.runtime.batch_source`
    is a file's or a TCP server's).

    Args:
        env: the Flink stream execution environment.
        source: the input topic and how to read it.
        parser: the chunk parser of the operator.
        record: the run's record (its key groups and their routing).
        options: how to run the job (``batch_size`` resolved).
    """
    assert options.batch_size, "resolved by the run functions"
    z = hasattr(parser, "reader")
    header = "t,u,a" if z else (",".join(source.columns) if source.columns else None)
    step = BatchMessages(KafkaHeaderParser(parser, parser.fmt), record.routing,
                         source_name=source.url, max_bytes=source.max_message_bytes,
                         header=header, header_given=header is not None,
                         on_error=source.on_error, partitions=source.partitions,
                         ends=dict(source.end_offsets) if source.until_end else None,
                         starts=(start_offsets(source, options.restore_from is not None)
                                 if source.until_end and len(source.partitions) > 1 else None),
                         pace=options.pace)
    readers = max(1, min(options.parallelism, len(source.partitions) or 1))
    records = kafka_source(env, source, options.restore_from is not None, parallelism=readers)
    batches = gather_records(records, batch_size=options.batch_size, batch_ms=options.batch_ms,
                             parallelism=readers)
    return (keyed_rows(batches, gathered_type())
            .process(step, output_type=batch_rows_type())
            .name("messages to record batches").uid("read").set_parallelism(1))


def start_offsets(source: KafkaInput, restoring: bool) -> dict[int, int]:
    """Where the job's source starts in each partition (as :func:`kafka_source` sets it: the
    group's committed offsets, else the earliest; the earliest on a fresh run from the
    earliest), by the pure path's reader's rule (:class:`~streamanon.pipeline.kafka.client.
    KafkaSource`): a partition that starts at its end offset sends nothing, and the merge must
    not wait for it."""
    from streamanon.pipeline.kafka.client import KafkaSource

    start = "committed" if source.start == "committed" or restoring else "earliest"
    probe = KafkaSource(source.bootstrap, source.topic, group=source.group or "streamanon-probe",
                        start=start, config=source.config or None)
    try:
        probe.open()
        return dict(probe.positions)
    finally:
        probe.close()


def gathered_type() -> Any:
    """``Row(partition, offsets, sizes, data, opened, timestamps)`` (GatherRecords:
    little-endian int64 offsets, int32 sizes, the values joined by newlines, the wall-clock ms
    of the batch's first record, the records' Kafka timestamps as little-endian int64 ms)."""
    return Types.ROW([Types.INT(), Types.PRIMITIVE_ARRAY(Types.BYTE()),
                      Types.PRIMITIVE_ARRAY(Types.BYTE()), Types.PRIMITIVE_ARRAY(Types.BYTE()),
                      Types.LONG(), Types.PRIMITIVE_ARRAY(Types.BYTE())])


def gather_records(records: Any, *, batch_size: int, batch_ms: float, parallelism: int,
                   key_by_partition: bool = False) -> Any:
    """Records of each partition gathered in the JVM (``GatherRecords``, chained to the source:
    each reader gathers its own partitions): one element per batch of ``batch_size`` records
    or ``batch_ms`` after its first.

    Args:
        records: the Kafka source's stream of tagged records.
        batch_size: records per batch at most.
        batch_ms: milliseconds after a batch's first record at which it is due (a backlog
            may keep a due batch open up to 1 s, so that it arrives in large batches).
        parallelism: the gathering tasks (as many as the source's readers).
        key_by_partition: key each batch by its partition for the next step.
    """
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    kafka = jvm.streamanon.kafka
    j = (records._j_data_stream
         .transform(f"gather records (≤ {batch_size}, ≤ {batch_ms:g} ms)",
                    kafka.GatherRecords.producedType(),
                    kafka.GatherRecords(int(batch_size), int(max(0, round(batch_ms))),
                                        key_by_partition))
         .uid("gather-records-chained").setParallelism(parallelism))
    return DataStream(j)


# -- outcomes to messages ------------------------------------------------------------------------

def message_rows(out: KafkaOutput, positions: MessagePositions, url: str | None,
                 text: str | bytes, codes: np.ndarray) -> list[Row]:
    """The output messages ``text`` (one line each) of the input records ``codes``, as one
    ``Row(gate key, Row(topic, partition, codes, text))`` per output partition (input
    partition modulo the topic's partitions, as the pure path places them).

    Args:
        out: the job's outputs (topics, their partitions).
        positions: the input positions (partition and offset of each record's code).
        url: the destination (``None``: not written).
        text: the messages, one line each, in the order of ``codes`` (or their UTF-8 bytes).
        codes: each message's input record.
    """
    topic = out.topic(url)
    if topic is None or not len(codes):
        return []
    n = out.partitions.get(topic, 1)
    target = positions.partitions(codes) % n
    index = out.topic_list().index(topic)
    data = text.encode("utf-8") if isinstance(text, str) else text
    if (target == target[0]).all():
        lines = data.count(b"\n")
        if lines != len(codes) or not data.endswith(b"\n"):
            raise JobError(f"{lines} output lines for {len(codes)} records")
        q = int(target[0])
        return [Row(gate_key(index, q), Row(topic, q, code_bytes(codes), data))]
    each = [line + b"\n" for line in data.split(b"\n")[:-1]]  # as TaggedMessages splits
    if len(each) != len(codes) or not data.endswith(b"\n"):
        raise JobError(f"{len(each)} output lines for {len(codes)} records")
    rows = []
    for part in np.unique(target).tolist():
        sel = np.flatnonzero(target == part)
        rows.append(Row(gate_key(index, part), Row(
            topic, part, code_bytes(codes[sel]), b"".join(each[i] for i in sel.tolist()))))
    return rows


def code_bytes(codes: np.ndarray) -> bytes:
    """Input positions as a message batch carries them: little-endian int64."""
    return np.ascontiguousarray(codes, dtype="<i8").tobytes()


def empty_counts() -> dict[str, Any]:
    """An operator step's share of the accounting before its first record."""
    return {"read": 0, "published": 0, "suppressed": 0, "rejected": 0, "headers": 0,
            "blank": 0, "suppressed_by_reason": {}}


class _AccountingShare:
    """The share of a Kafka job's accounting that an operator step keeps per Flink key, in
    Flink state; written to ``stats_path`` plus ``.m<key>`` at the end of a bounded input
    (:func:`kafka_counts` adds the shares up)."""

    out: KafkaOutput

    def _open_counts(self, runtime_context: Any) -> None:
        self._counts_state = runtime_context.get_state(
            ValueStateDescriptor("counts", Types.PICKLED_BYTE_ARRAY()))
        self._counts: dict[int, dict[str, Any]] = {}
        self._positions = MessagePositions(self.out.source_name)

    def _counts_of(self, ctx: Any) -> dict[str, Any]:
        key = current_key(ctx)
        counts = self._counts.get(key)
        if counts is None:
            saved = self._counts_state.value()
            counts = pickle.loads(saved) if saved is not None else empty_counts()
            self._counts[key] = counts
            ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        return counts

    def _save_counts(self, counts: dict[str, Any]) -> None:
        self._counts_state.update(pickle.dumps(counts, protocol=pickle.HIGHEST_PROTOCOL))

    def _write_share(self, ctx: Any, counts: dict[str, Any]) -> None:
        if self.out.stats_path:
            write_share(f"{self.out.stats_path}.m{current_key(ctx)}", counts)


def meta_messages(out: KafkaOutput, positions: MessagePositions, value: tuple,
                  counts: dict[str, Any]) -> list[Row]:
    """The lines that need no operator (``(None, lines, codes, read time)`` from
    :class:`BatchMessages`): counted (the read time too: the job's first record read); the
    rejected ones as messages of the rejects topic, as the pure command writes them."""
    _, lines, codes, read_at = value
    if read_at is not None:
        seen = counts.get("first_read_ms")
        counts["first_read_ms"] = read_at if seen is None else min(seen, read_at)
    rejected: list[Rejected] = []
    for line, code in zip(lines, codes.tolist(), strict=True):
        _, kind, *rest = line.split("\t", 2)
        if kind == HEADER:
            counts["headers"] += 1
        elif kind == BLANK:
            counts["blank"] += 1
        elif kind == REJECTED:
            text, reason = json.loads(rest[0])
            rejected.append(Rejected(code, text, reason))
    return rejected_messages(out, positions, rejected, counts)


def rejected_messages(out: KafkaOutput, positions: MessagePositions,
                      rejected: list[Rejected], counts: dict[str, Any]) -> list[Row]:
    """Rejected records, each numbered by its input position (``line``: ``offset << 16 |
    partition``), counted and written as messages of the rejects topic, as the pure command
    writes them."""
    if not rejected:
        return []
    counts["read"] += len(rejected)
    counts["rejected"] += len(rejected)
    out_text, out_codes = reject_lines(rejected, LineChunk(0, ""), positions)
    return message_rows(out, positions, out.rejects, out_text, out_codes)


class ZKeyGroupMessages(_AccountingShare, ZKeyGroups):
    """z-anonymity per key group, its outcomes made into output messages in the same step
    (a Kafka job; no message step of its own, no outcome text in between): the operator of
    :class:`~streamanon.flink.functions.ZKeyGroups`, with the pure command's writers applied
    to what it decides.

    In (from :class:`BatchMessages`): ``(group, batch, codes)``, a key
    group's batch and each row's input position (``offset << 16 | partition``), and
    ``(None, lines, codes, read time)``, the lines that need no operator (rejected, header,
    blank) with theirs, on the first key group's key. Out: ``Row(gate key, Row(topic,
    partition, codes, text))`` per output partition, for :class:`KafkaGate`.

    State: the operator's (snapshot plus redo log of batches, as ``ZKeyGroups``), and per
    key its share of the accounting (:class:`_AccountingShare`).

    Args:
        z: the z of z-anonymity.
        delta_t: the window Δt in seconds.
        separator: the separator of hierarchical values.
        snapshot_every: the fewest rows between snapshots of a key group's state.
        out: the output topics and how to write them.
    """

    def __init__(self, z: int, delta_t: float, separator: str, snapshot_every: int,
                 out: KafkaOutput) -> None:
        super().__init__(z, delta_t, separator, snapshot_every)
        self.out = out

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self._open_counts(runtime_context)

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        counts = self._counts_of(ctx)
        if value[0] is None:
            rows = meta_messages(self.out, self._positions, value, counts)
        else:
            group, batch, codes = value
            rows = self._batch(group, batch, codes, counts)
        self._save_counts(counts)
        yield from rows

    def _batch(self, group: int, batch: Any, codes: np.ndarray,
               counts: dict[str, Any]) -> list[Row]:
        live = self._group(group)
        outcomes, n = live.op.decide_selected(batch)
        self._keep(live, batch, n)
        counts["read"] += n
        fmt = self.out.out_format
        if isinstance(outcomes, list):  # the record-at-a-time engine: few rows
            keep = [i for i, o in enumerate(outcomes) if o[4] is not None]
            counts["suppressed"] += n - len(keep)
            if not keep:
                return []
            buf = io.StringIO()
            writer = RecordWriter(buf, fmt)
            buf.seek(0)
            buf.truncate()
            writer.write_columns([outcomes[i][2] for i in keep], [outcomes[i][3] for i in keep],
                                 [outcomes[i][4] for i in keep])
            counts["published"] += len(keep)
            return message_rows(self.out, self._positions, self.out.published, buf.getvalue(),
                                codes[keep])
        idx = outcomes.idx
        counts["suppressed"] += n - len(idx)
        if not len(idx):
            return []
        counts["published"] += len(idx)
        records = outcomes.records
        if fmt == "csv" and outcomes.plain():  # as the pure command's fast lane writes them
            text: str | bytes = bytes(selected_data(records, idx, outcomes.codes,
                                                    outcomes.names, fmt))
        else:  # the writer's Python lane, which quotes (or writes JSON lines)
            buf = io.StringIO()
            writer = RecordWriter(buf, fmt)
            buf.seek(0)
            buf.truncate()
            names = outcomes.names
            rows = idx.tolist()
            t_text, users = records.t_text, records.u
            writer.write_columns([t_text[i] for i in rows], [users[i] for i in rows],
                                 [names[c] for c in outcomes.codes.tolist()])
            text = buf.getvalue()
        return message_rows(self.out, self._positions, self.out.published, text, codes[idx])

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        self._write_share(ctx, self._counts_of(ctx))
        yield from ()


class CastleMessages(_AccountingShare, CastlePartition):
    """CASTLE per partition, its outcomes made into output messages in the same step (a
    Kafka job; no message step of its own): the operator step of
    :class:`~streamanon.flink.castle_partition.CastlePartition`, each row numbered by its
    input position as the pure command numbers a message's row, and what the operator
    releases and suppresses written with the pure command's writers
    (:func:`~streamanon.flink.castle_rows.written_outcomes`).

    In (from :class:`BatchMessages`): ``(group, batch, codes)``, a partition's batch and each
    row's input position, and ``(None, lines, codes, read time)``, the lines that need no
    operator, on the first key's; the rule sets on the broadcast side (their notes are not
    messages). Out: ``Row(gate key, Row(topic, partition, codes, text))`` per output
    partition, for :class:`KafkaGate`.

    State: the operator's (snapshot plus redo log of batches, with their positions), and per
    key its share of the accounting (:class:`_AccountingShare`).

    Args:
        params: the CASTLE parameters (k, l, delta, ...).
        fmt: the input format (``csv`` or ``jsonl``).
        columns: the input's columns (empty when not known: then a batch's).
        snapshot_every: rows between snapshots of a partition's state (``None``: the default).
        out: the output topics and how to write them.
    """

    def __init__(self, params: dict[str, Any], fmt: str, columns: list[str],
                 snapshot_every: int | None, out: KafkaOutput) -> None:
        super().__init__(params, fmt, columns, snapshot_every)
        self.out = out

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self._open_counts(runtime_context)

    def process_broadcast_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        for _ in super().process_broadcast_element(value, ctx):  # (its note: not a message)
            pass
        return iter(())

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        counts = self._counts_of(ctx)
        if value[0] is None:
            rows = meta_messages(self.out, self._positions, value, counts)
        else:
            _, batch, codes = value
            live = self._partition(ctx)
            out, refused = self._take_batch(live, ctx, batch, codes)
            rows = self._messages(live, out, counts)
            rows += rejected_messages(
                self.out, self._positions,
                [refused_row(code, values, self.fmt, self.columns, reason)
                 for code, values, reason in refused], counts)
        self._save_counts(counts)
        yield from rows

    def _messages(self, live: Any, out: list[Any], counts: dict[str, Any]) -> list[Row]:
        """What the operator released (to the published topic) and suppressed (counted by
        reason; to ``--suppressed``), as messages."""
        if not out:
            return []
        o = self.out
        w = written_outcomes(out, live.header or self.columns or None, o.out_format,
                             live.op.loss_field,
                             o.suppressed_format if o.suppressed is not None else None)
        counts["read"] += len(out)
        counts["published"] += len(w.released)
        counts["suppressed"] += len(w.suppressed)
        by = counts["suppressed_by_reason"]
        for reason in w.reasons:
            by[reason] = by.get(reason, 0) + 1
        rows = message_rows(o, self._positions, o.published, w.released_text, w.released)
        if w.suppressed_text:
            rows += message_rows(o, self._positions, o.suppressed, w.suppressed_text,
                                 w.suppressed)
        return rows

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        counts = self._counts_of(ctx)
        rows = self._messages(live := self._partition(ctx), self._finish(live, ctx), counts)
        self._save_counts(counts)
        self._write_share(ctx, counts)
        yield from rows


def gate_key(topic_index: int, partition: int) -> int:
    """The Flink key of output partition ``partition`` of the job's ``topic_index``-th topic
    (:meth:`KafkaOutput.topic_list`)."""
    return (topic_index << 20) | partition


def write_share(path: str, counts: dict[str, Any]) -> None:
    """One keyed step's share of the accounting, replaced whole."""
    part = Path(path + ".part")
    part.write_text(json.dumps(counts) + "\n")
    part.replace(path)


class KafkaGate(KeyedProcessFunction):
    """The output gate, keyed by output topic partition (:func:`gate_key`): message batches
    ``Row(topic, partition, codes, text)`` in; the ones not in the partition yet out.

    State (one ``ValueState`` per output partition): the offset after the last message this
    step has let through (the job is the partition's only writer and the sink flushes at each
    checkpoint, so at a checkpoint it is the partition's end offset), and the messages a
    killed run wrote past a restored checkpoint that the replay has not produced again yet.

    Exactly once without broker transactions: when a task (re)starts, the first batch of a
    partition makes the step read the partition from its checkpointed offset (none
    checkpointed: the fresh run's start offset, ``out.base``) to its end
    (:func:`~streamanon.pipeline.kafka.tail.read_tagged`, the pure path's reader), and drop
    each replayed message whose input-position tag is found there, checking that it is the
    same message in the same partition (else :class:`~streamanon.errors.ForeignOutputError`).
    The match is by tag, not by order: the key groups' outcomes reach this step in an order
    that varies between runs (one user's records keep theirs), and each input record stands
    for at most one message per topic. The step's share of the accounting (``reconfirmed``,
    ``pending``, the last output time) goes to ``stats_path`` plus ``.g<key>``.
    """

    def __init__(self, out: KafkaOutput) -> None:
        self.out = out

    def open(self, runtime_context: Any) -> None:
        self._state = runtime_context.get_state(
            ValueStateDescriptor("gate", Types.PICKLED_BYTE_ARRAY()))
        self._keys: dict[int, dict[str, Any]] = {}
        self._positions = MessagePositions(self.out.source_name)

    def _load(self, ctx: Any, topic: str, partition: int) -> dict[str, Any]:
        key = current_key(ctx)
        s = self._keys.get(key)
        if s is None:
            saved = self._state.value()
            if saved is None:
                s = {"layout": STATE_LAYOUT, "topic": topic, "partition": partition,
                     "next": self.out.base.get(topic, {}).get(partition, 0),
                     "pending": {}, "reconfirmed": 0}
            else:
                s = pickle.loads(saved)
                if s.get("layout") != STATE_LAYOUT:
                    raise ResumeError(OLD_LAYOUT)
            self._open_gate(s)
            self._keys[key] = s
            ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        return s

    def _open_gate(self, s: dict[str, Any]) -> None:
        """Take what a killed run wrote past the checkpointed offset as pending (the replay
        produces it again; :meth:`_drop_written` drops it then)."""
        from streamanon.errors import EndpointError, ForeignOutputError
        from streamanon.pipeline.kafka.client import end_offsets
        from streamanon.pipeline.kafka.tail import read_tagged

        topic, q, base = s["topic"], s["partition"], s["next"]
        config = self.out.config or None
        end = end_offsets(self.out.bootstrap, topic, [q], config=config).get(q, 0)
        if end < base:
            raise EndpointError(f"output {topic} lost acknowledged messages (partition {q}: "
                                f"expected at least {base}, found {end})")
        if end == base:
            return
        found = read_tagged(self.out.bootstrap, topic, {q: base}, {q: end}, HEADER_IN,
                            config=config)
        pending = s["pending"]
        for value, tag in found.get(q, ()):
            if tag in pending:
                raise ForeignOutputError(
                    f"{topic}[{q}] holds two messages for input {tag.decode()} past "
                    "the checkpoint: another writer, or a changed pipeline")
            pending[tag] = value
        s["next"] = end

    def process_element(self, value: Any, ctx: Any):  # type: ignore[override]
        topic, partition, code_data, text = value[0], int(value[1]), value[2], value[3]
        s = self._load(ctx, topic, partition)
        if not s["pending"]:  # nothing of a killed run left to match: the batch as it came
            n = len(code_data) // 8
            if n:
                s["next"] += n
                s["last_output_ms"] = int(time.time() * 1000)
                yield value
            self._state.update(pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL))
            return
        codes = np.frombuffer(bytes(code_data), dtype="<i8")
        tags = self._positions.tags(codes)
        values = bytes(text).split(b"\n")[:-1]  # as TaggedMessages splits
        keep = self._drop_written(s, tags, values)
        if keep:
            s["next"] += len(keep)
            s["last_output_ms"] = int(time.time() * 1000)
            yield Row(topic, partition, code_bytes(codes[keep]),
                      b"".join(values[i] + b"\n" for i in keep))
        self._state.update(pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL))

    def _drop_written(self, s: dict[str, Any], tags: Sequence[bytes],
                      values: Sequence[bytes]) -> list[int]:
        """The indexes of the messages not in the output yet; those found there (by their
        tag) are checked to be the same message."""
        from streamanon.errors import ForeignOutputError

        pending = s["pending"]
        keep = []
        for i, tag in enumerate(tags):
            found = pending.pop(tag, None)
            if found is None:
                keep.append(i)
                continue
            value = values[i]
            if found != value:
                raise ForeignOutputError(
                    f"{s['topic']}[{s['partition']}] holds a message this pipeline would not "
                    f"write there (found input {tag.decode()} {found[:60]!r}, expected "
                    f"{value[:60]!r}): another writer, or a changed pipeline (operator "
                    "parameters, input)")
        s["reconfirmed"] += len(tags) - len(keep)
        return keep

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        s = self._keys.get(current_key(ctx))
        if s is not None and self.out.stats_path:
            write_share(f"{self.out.stats_path}.g{current_key(ctx)}",
                        {"reconfirmed": s["reconfirmed"], "pending": len(s["pending"]),
                         "last_output_ms": s.get("last_output_ms")})
        yield from ()


def kafka_message_sink(batches: Any, out: KafkaOutput, options: JobOptions | None = None) -> None:
    """Message batches for the gate (``Row(gate key, Row(topic, partition, codes, text))``)
    -> :class:`KafkaGate` -> messages split in the JVM -> KafkaSink, every step at the job's
    parallelism."""
    from pyflink.datastream import DataStream
    from pyflink.datastream.connectors.kafka import KafkaSink as PyKafkaSink
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    p = options.parallelism if options is not None else 1
    gated = (keyed_rows(batches, message_batch_type())
             .process(KafkaGate(out), output_type=message_batch_type())
             .name("output gate (per output partition)").uid("kafka-gate").set_parallelism(p))
    messages = DataStream(gated._j_data_stream.flatMap(
        jvm.streamanon.kafka.TaggedMessages())).name("split messages").set_parallelism(p)
    guarantee = jvm.org.apache.flink.connector.base.DeliveryGuarantee
    builder = (jvm.org.apache.flink.connector.kafka.sink.KafkaSink.builder()
               .setBootstrapServers(out.bootstrap)
               .setRecordSerializer(jvm.streamanon.kafka.TaggedSerializer(HEADER_IN)))
    # flushed at each checkpoint (the offsets KafkaGate checkpoints are then the
    # partitions' ends); the repeats after a restore are dropped by KafkaGate
    builder.setDeliveryGuarantee(guarantee.AT_LEAST_ONCE)
    builder.setProperty("enable.idempotence", "true")
    # few large record batches, as the pure path's producer writes them: a topic of many
    # tiny batches can stall its readers (a broker behaviour: docs/design/kafka.md)
    builder.setProperty("linger.ms", "5")
    builder.setProperty("batch.size", str(1 << 20))
    from streamanon.pipeline.kafka.options import java_kafka_config

    for key, value in java_kafka_config(out.config).items():
        builder.setProperty(key, value)
    messages.sink_to(PyKafkaSink(builder.build())).name("kafka sink").uid(
        "kafka-sink").set_parallelism(p)


# -- runs ------------------------------------------------------------------------------------------

def prepare_endpoints(source: KafkaInput, out: KafkaOutput) -> None:
    """Check the input topic, learn its partitions (and end offsets for ``until_end``),
    create missing output topics with the input's partition count (as the pure path does)."""
    from streamanon.errors import EndpointError
    from streamanon.pipeline.kafka.admin import ensure_topic, topic_partitions
    from streamanon.pipeline.kafka.client import end_offsets
    from streamanon.pipeline.kafka.options import parse_kafka_url

    parts = topic_partitions(source.url, source.config or None)
    if parts is None:
        raise EndpointError(f"{source.url}: no such topic (create it first, e.g. with "
                            "`streamanon kafka produce`)")
    source.partitions = parts
    if source.until_end:
        source.end_offsets = end_offsets(source.bootstrap, source.topic, parts,
                                         config=source.config or None)
    bootstraps = {parse_kafka_url(u)[0] for u in (out.published, out.rejects, out.suppressed)
                  if u is not None}
    if len(bootstraps) > 1:
        raise EndpointError("the Flink job writes all its topics through one broker: give "
                            f"-o, --rejects and --suppressed on one broker (got {bootstraps})")
    for url in (out.published, out.rejects, out.suppressed):
        if url is not None:
            topic = parse_kafka_url(url)[1]
            have = ensure_topic(url, len(parts), out.config or None)
            out.partitions[topic] = len(have)
            # where this run's messages start (a restore takes its checkpoint's offsets)
            out.base[topic] = end_offsets(out.bootstrap, topic, have,
                                          config=out.config or None)
    out.source_name = source.url


def settle_output_base(work: Path, out: KafkaOutput, restoring: bool) -> None:
    """The output partitions' offsets where the run's messages start: a fresh run's are the
    end offsets now (kept in ``WORK/kafka-output.json`` with the state layout), a restore
    takes the kept ones (the gate of a partition the checkpoint has no state for reads the
    killed run's messages from there; an earlier run's shares of the accounting are
    removed). A work folder of another layout is refused."""
    path = work / "kafka-output.json"
    if restoring and (work / "job.json").is_file():
        kept = json.loads(path.read_text()) if path.is_file() else {}
        if kept.get("layout") != out.layout:
            raise ResumeError(OLD_LAYOUT)
        out.base = {t: {int(q): int(o) for q, o in b.items()} for t, b in kept["base"].items()}
        return
    work.mkdir(parents=True, exist_ok=True)
    for share in work.glob("kafka-stats.json.*"):  # an earlier run's shares of the accounting
        share.unlink()
    path.write_text(json.dumps({"layout": out.layout, "base": out.base}) + "\n")


def kafka_counts(path: Path) -> dict[str, Any]:
    """The accounting of a Kafka job: the keyed operator and gate steps' shares
    (``PATH.m<key>``, ``PATH.g<key>``) added up (times: the earliest read, the last output)."""
    counts: dict[str, Any] = {}
    by_reason: dict[str, int] = {}
    for share in sorted(path.parent.glob(path.name + ".[mg]*")):
        if share.name.endswith(".part"):
            continue
        for key, value in json.loads(share.read_text()).items():
            if value is None:
                continue
            if key == "suppressed_by_reason":
                for reason, n in value.items():
                    by_reason[reason] = by_reason.get(reason, 0) + n
            elif key == "first_read_ms":
                counts[key] = min(counts.get(key, value), value)
            elif key == "last_output_ms":
                counts[key] = max(counts.get(key, value), value)
            else:
                counts[key] = counts.get(key, 0) + value
    if by_reason:
        counts["suppressed_by_reason"] = by_reason
    return counts


@dataclass
class KafkaRunResult:
    """The accounting of a Kafka job (what its operator steps counted) and its run time."""

    stats: RunStats
    seconds: float
    wall_seconds: float


def kafka_record(work: Path, operator: str, source: KafkaInput, groups: int,
                 options: JobOptions) -> RunRecord:
    """The :class:`~streamanon.flink.runtime.RunRecord` of a run from a topic (``groups``
    key groups; the stored one for a restore).

    Args:
        work: the run's folder.
        operator: the operator's name (``z`` or ``castle``).
        source: the input topic.
        groups: the number of key groups of a fresh run.
        options: how to run the job (its parallelism, whether it restores).
    """
    fresh = RunRecord(operator, source.url, key_groups=groups,
                      max_parallelism=max(128, options.parallelism))
    return RunRecord.settle(work, fresh, options.restore_from is not None)


def kafka_env(work: Path, record: RunRecord, options: JobOptions) -> Any:
    """The job's environment, with the connector's jars (fetched and built when missing)."""
    from streamanon.flink.env import make_env
    from streamanon.flink.kafka_jars import ensure_jars, jar_urls

    if options.unaligned_checkpoints:
        # seen here: a job restored from an unaligned checkpoint got the in-flight Kafka
        # records of its reading step back as rows of None (TypeError in BatchMessages)
        raise ConfigError("--unaligned-checkpoints is not supported with a kafka:// input "
                         "(its restored in-flight records arrive empty)")

    env = make_env(**options.env_settings(work, record), ignore_unclaimed_state=True)
    env.add_jars(*jar_urls(ensure_jars()))
    # a message the JVM splits off a batch goes to the sink chained after it as it is, not
    # as a copy: no step here keeps a record it has passed on
    env.get_config().enable_object_reuse()
    return env


def write_plan(env: Any, work: Path) -> None:
    """The job's plan (Flink's JSON execution plan: every step with its parallelism) as
    ``WORK/plan.json``, for a look at how the job was laid out."""
    (work / "plan.json").write_text(env.get_execution_plan() + "\n")


def kafka_result(stats: RunStats, work: Path, run: JobRun) -> KafkaRunResult:
    """The accounting the operator steps wrote at the end of a bounded input, in ``stats``."""
    counts = kafka_counts(work / "kafka-stats.json")
    stats.count_read(counts.get("read", 0))
    stats.count_released(counts.get("published", 0))  # the state's key (checkpoints keep it)
    stats.count_suppressed(counts.get("suppressed", 0))
    stats.count_rejected(counts.get("rejected", 0))
    stats.details = {"headers_skipped": counts.get("headers", 0),
                     **run.details(counts.get("read", 0))}
    if counts.get("first_read_ms") and counts.get("last_output_ms"):
        # the job's own stream time: its first record taken in the JVM to its last output
        # message handed to the sink (Flink's net runtime adds start-up and shut-down)
        streamed = max(0.001, (counts["last_output_ms"] - counts["first_read_ms"]) / 1000)
        stats.details["stream_seconds"] = round(streamed, 3)
        stats.details["stream_tuples_per_second"] = round(counts.get("read", 0) / streamed)
        stats.details["first_read_at"] = counts["first_read_ms"] / 1000
    if counts.get("suppressed_by_reason"):
        stats.details["suppressed_by_reason"] = counts["suppressed_by_reason"]
    if counts.get("reconfirmed"):
        stats.details["reconfirmed_outputs"] = counts["reconfirmed"]
    if counts.get("pending"):
        from streamanon.errors import ForeignOutputError

        raise ForeignOutputError(
            f"{counts['pending']} message(s) a killed run wrote past the restored checkpoint "
            "were not produced again by the replay: another writer, or a changed pipeline")
    return KafkaRunResult(stats, run.net_seconds, run.wall_seconds)


__all__ = [
    "BatchMessages",
    "CastleMessages",
    "KafkaHeaderParser",
    "KafkaInput",
    "KafkaOutput",
    "KafkaRunResult",
    "ZKeyGroupMessages",
    "kafka_batches",
    "kafka_env",
    "kafka_message_sink",
    "kafka_record",
    "kafka_result",
    "kafka_source",
    "message_rows",
    "meta_messages",
    "prepare_endpoints",
    "rejected_messages",
    "settle_output_base",
    "start_offsets",
    "write_plan",
]



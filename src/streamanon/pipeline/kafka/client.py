"""``kafka://`` endpoints: a source of raw messages and a sink of text messages.

Design: docs/design/kafka.md
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamanon.errors import BrokerError, BrokerTimeout, ConfigError, EndpointError
from streamanon.pipeline.kafka.admin import partitions_of
from streamanon.pipeline.kafka.connection import BrokerWatch, client_config
from streamanon.pipeline.kafka.options import DEFAULT_MAX_MESSAGE_BYTES


def end_offsets(bootstrap: str, topic: str, partitions: Iterable[int] | None = None, *,
                config: Mapping[str, Any] | None = None,
                timeout: float = 60.0) -> dict[int, int]:
    """The offset after the last message of each partition, from Fetch high watermarks.

    Args:
        bootstrap: the broker list (``host:port,...``).
        topic: the topic.
        partitions: the partitions asked about (``None``: all of the topic's).
        config: librdkafka settings (TLS, SASL, ...).
        timeout: seconds to wait for each answer.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    parts = list(partitions) if partitions is not None else partitions_of(
        bootstrap, topic, config)
    c = Consumer({**client_config(bootstrap, None, config), "group.id": "streamanon-probe",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "auto.offset.reset": "error", "fetch.wait.max.ms": 10})
    try:
        start = {}
        for p in parts:
            lo, hi = watermarks(c, topic, p, timeout)
            start[p] = max(lo, hi - 1, 0)
        return _fetch_ends(c, topic, start, timeout, KafkaError, TopicPartition)
    finally:
        c.close()


def watermarks(consumer: Any, topic: str, partition: int, timeout: float) -> tuple[int, int]:
    """A partition's low and high watermarks; a broker that does not answer (in an outage,
    or while it restarts) is a :class:`~streamanon.errors.BrokerTimeout` and any other
    refusal a :class:`~streamanon.errors.BrokerError`, never librdkafka's own exception,
    which the callers (e.g. a run's outage check) would not know."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    try:
        lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                timeout=timeout)
    except KafkaException as exc:
        err = exc.args[0]
        where = f"the offsets of {topic}[{partition}]"
        if err.code() in (KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                          KafkaError._TRANSPORT):
            raise BrokerTimeout(f"{where}: no answer within {timeout:g} s ({err.str()})"
                                ) from None
        raise BrokerError(f"{where}: {err.str()}") from None
    return int(lo), int(hi)


def _fetch_ends(c: Any, topic: str, start: dict[int, int], timeout: float,
                kafka_error: Any, tp: Any) -> dict[int, int]:
    ends: dict[int, int] = {}
    c.assign([tp(topic, p, o) for p, o in start.items()])
    deadline = time.monotonic() + timeout
    # a broker may answer nothing to a fetch that starts inside an old record batch (seen
    # after a restart: docs/design/kafka.md): when the short cut stays silent, read such
    # partitions from the start
    fallback = time.monotonic() + 3.0
    while len(ends) < len(start):
        if fallback and time.monotonic() > fallback:
            fallback = 0.0
            for p in start:
                if p not in ends:
                    start[p] = watermarks(c, topic, p, timeout)[0]
            c.assign([tp(topic, q, start[q]) for q in start if q not in ends])
        if time.monotonic() > deadline:
            raise BrokerTimeout(f"no end offset for {topic} partitions "
                                f"{sorted(set(start) - set(ends))} within {timeout:g} s")
        m = c.poll(0.05)
        if m is None:
            continue
        err = m.error()
        if err is None:
            continue
        if err.code() == kafka_error._PARTITION_EOF:
            ends[m.partition()] = m.offset()
        elif err.code() == kafka_error._AUTO_OFFSET_RESET:
            # the listed end overshot: start that partition at its low watermark instead
            p = m.partition()
            lo, _ = watermarks(c, topic, p, timeout)
            if start[p] <= lo:  # out of range at its very start: the partition is empty
                ends[p] = lo
            else:
                start[p] = lo
            c.assign([tp(topic, q, start[q]) for q in start if q not in ends])
        elif not err.retriable() and err.code() != kafka_error._TRANSPORT:
            raise BrokerError(f"reading the end of {topic}[{m.partition()}]: {err.str()}")
    return ends


def flush_producer(producer: Any, bootstrap: str, topic: str, timeout: float = 1.0) -> int:
    """``producer.flush(timeout)`` (the messages still queued), with an idempotent producer
    the broker has forgotten said as an :class:`EndpointError` instead of librdkafka's fatal
    error: the broker restarted without its data (memory storage), so nothing more can be
    written exactly once. One rule for every producer of a run (outputs, progress log)."""
    from confluent_kafka import KafkaException

    try:
        return int(producer.flush(timeout))
    except KafkaException as exc:
        raise forgotten_producer(exc, bootstrap, topic) from None


def forgotten_producer(exc: Exception, bootstrap: str, topic: str) -> Exception:
    """What to raise for librdkafka's ``exc``: an :class:`EndpointError` saying so when the
    broker no longer knows the run's idempotent producer, else ``exc`` itself."""
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError) or err.code() != KafkaError.UNKNOWN_PRODUCER_ID:
        return exc
    return EndpointError(
        f"the broker at {bootstrap} no longer knows this run's producer for {topic} "
        f"({err.str()}): it restarted and lost what it held (memory storage), the input "
        "topic, the outputs and the checkpoints included; nothing more was written. "
        "Recreate the topics and start again")


@dataclass
class MessageChunk:
    """Consecutive messages of one partition: ``offsets[i]`` holds ``values[i]``.

    ``timestamps`` are the messages' Kafka timestamps in milliseconds (CreateTime as set by
    the producer), the key by which partitions are merged.
    """

    topic: str
    partition: int
    offsets: np.ndarray
    timestamps: np.ndarray
    values: list[bytes]

    def __len__(self) -> int:
        return len(self.values)


class KafkaSource:
    """Raw messages of a topic's partitions, read with assign() (no group join).

    ``start``: ``"earliest"`` (every partition from its first message) or ``"committed"``
    (the group's committed offsets, falling back to earliest for a partition without one);
    :meth:`seek` overrides both (a checkpoint knows better). ``until_end``: stop at the end
    offsets found by :meth:`open` (then :attr:`done`). Message values larger than
    ``max_message_bytes`` are still delivered (the broker may not enforce a limit): the
    pipeline rejects them by the rules of :func:`check_messages`.

    Args:
        bootstrap: the broker list (``host:port,...``).
        topic: the input topic.
        group: the consumer group (its committed offsets).
        start: ``earliest`` or ``committed``.
        until_end: stop at the end offsets found by :meth:`open`.
        config: librdkafka settings of the user (TLS, SASL, ...).
        watch: the run's broker watch (``None``: one of its own).
        fetch_batch: the most messages taken per fetch.
    """

    def __init__(self, bootstrap: str, topic: str, *, group: str, start: str = "committed",
                 until_end: bool = False, config: Mapping[str, Any] | None = None,
                 watch: BrokerWatch | None = None, fetch_batch: int = 20_000) -> None:
        if start not in ("earliest", "committed"):
            raise ConfigError("start must be 'earliest' or 'committed'")
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.start, self.until_end = start, until_end
        self.config = dict(config or {})
        self.watch = watch or BrokerWatch(f"source {topic}")
        self.fetch_batch = fetch_batch
        self.partitions: list[int] = []
        self.positions: dict[int, int] = {}
        self.ends: dict[int, int] | None = None
        self._consumer: Any = None

    def open(self) -> None:
        """Connect, learn the partitions, the start positions and (``until_end``) the ends."""
        from confluent_kafka import Consumer, TopicPartition

        self.partitions = partitions_of(self.bootstrap, self.topic, self.config)
        self._consumer = Consumer({
            # tuning defaults first: the user's settings (``config``) win
            "fetch.wait.max.ms": 100, "fetch.min.bytes": 1,
            "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20,
            "queued.min.messages": 200_000, "queued.max.messages.kbytes": 256 << 10,
            **client_config(self.bootstrap, self.watch, self.config),
            # what the pipeline's correctness relies on: not overridable
            "group.id": self.group, "enable.auto.commit": False,
            "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
        })
        if not self.positions:
            self.positions = {p: 0 for p in self.partitions}
            if self.start == "committed":
                got = self._consumer.committed(
                    [TopicPartition(self.topic, p) for p in self.partitions], timeout=30)
                for tp in got:
                    if tp.offset >= 0:
                        self.positions[tp.partition] = tp.offset
            for p in self.partitions:
                lo, _ = watermarks(self._consumer, self.topic, p, 30)
                self.positions[p] = max(self.positions[p], lo)
        if self.until_end:
            self.ends = end_offsets(self.bootstrap, self.topic, self.partitions,
                                    config=self.config)
        self._assign()

    def seek(self, positions: Mapping[int, int]) -> None:
        """Start each partition at ``positions[p]`` (before or after :meth:`open`)."""
        self.positions = {int(p): int(o) for p, o in positions.items()}
        if self._consumer is not None:
            self._assign()

    def _assign(self) -> None:
        from confluent_kafka import TopicPartition

        live = [p for p in self.partitions
                if self.ends is None or self.positions.get(p, 0) < self.ends[p]]
        self._consumer.assign([TopicPartition(self.topic, p, self.positions.get(p, 0))
                               for p in live])

    def exhausted(self, partition: int) -> bool:
        """True when ``until_end`` and the partition reached its end offset."""
        return self.ends is not None and self.positions.get(partition, 0) >= self.ends[partition]

    @property
    def done(self) -> bool:
        return self.ends is not None and all(self.exhausted(p) for p in self.partitions)

    def poll(self, timeout: float = 0.5) -> list[MessageChunk]:
        """The next messages, as one chunk per partition in offset order (maybe none).

        No Python work per message beyond taking its value (and, with several partitions,
        its partition, offset and timestamp): offsets of a gap-free run are a range.
        """
        if self.done:
            return []
        want = self.fetch_batch
        if self.ends is not None:  # ask for no more than remains: consume() returns at once
            want = max(1, min(want, sum(max(0, e - self.positions.get(p, 0))
                                        for p, e in self.ends.items())))
        msgs = self._take(want, timeout)
        if not msgs:
            if self.ends is not None:  # messages are due
                self.watch.stalled(f"reading {self.topic}")
            else:
                self.watch.idle(f"reading {self.topic}")
            return []
        from confluent_kafka import Message

        if any(map(Message.error, msgs)):  # an error is a KafkaError, None otherwise
            for m in msgs:
                err = m.error()
                if err is not None and (err.fatal() or not (err.retriable() or err.code() < 0)):
                    raise BrokerError(f"reading {self.topic}: {err.str()}")
            msgs = [m for m in msgs if m.error() is None]
            if not msgs:
                return []
        self.watch.alive()
        if len(self.partitions) == 1:
            groups = {self.partitions[0]: msgs}
        else:
            groups = {}
            for m in msgs:
                groups.setdefault(m.partition(), []).append(m)
        chunks = []
        ended = False
        for p, ms in sorted(groups.items()):
            lo, hi = ms[0].offset(), ms[-1].offset()
            if lo < self.positions.get(p, 0):
                raise EndpointError(
                    f"{self.topic}[{p}]: the broker delivered offset {lo} after this run had "
                    f"read up to {self.positions.get(p, 0)}: the input topic was deleted and "
                    "created again (or a broker with memory storage restarted, losing it); "
                    "stopping (a pipeline's positions mean nothing in a new topic: start a new "
                    "pipeline with another --group and outputs)")
            if hi - lo + 1 == len(ms):
                offs = np.arange(lo, hi + 1, dtype=np.int64)
            else:  # gaps (transaction markers, compaction)
                offs = np.fromiter([m.offset() for m in ms], np.int64, len(ms))
            if self.ends is not None and hi >= self.ends[p]:
                n = int(np.searchsorted(offs, self.ends[p]))
                ms, offs = ms[:n], offs[:n]
                if not n:
                    continue
            ts = (np.fromiter([m.timestamp()[1] for m in ms], np.int64, len(ms))
                  if len(self.partitions) > 1 else np.zeros(len(ms), np.int64))
            self.positions[p] = int(offs[-1]) + 1
            values = list(map(Message.value, ms))
            if None in values:  # a message without a value is an empty one
                values = [v or b"" for v in values]
            chunks.append(MessageChunk(self.topic, p, offs, ts, values))
            ended = ended or self.exhausted(p)
        if ended:  # stop fetching partitions that reached their end
            self._assign()
        return chunks

    def _take(self, want: int, timeout: float) -> list[Any]:
        """Up to ``want`` messages: those already fetched, else the first to arrive within
        ``timeout`` and whatever came with it. ``consume(want, timeout)`` alone waits the
        whole ``timeout`` unless ``want`` messages arrive, which a live topic's trickle
        never does: every message would wait for it."""
        consumer = self._consumer
        msgs = consumer.consume(want, 0)
        if msgs:
            return list(msgs)
        first = consumer.poll(timeout)
        if first is None:
            return []
        return [first, *consumer.consume(want - 1, 0)] if want > 1 else [first]

    def commit(self, positions: Mapping[int, int]) -> None:
        """Store ``positions`` as the group's committed offsets (informational for EOS)."""
        from confluent_kafka import KafkaException, TopicPartition

        # the checkpoint is authoritative; a lost commit only makes the group's offsets lag
        with contextlib.suppress(KafkaException):
            self._consumer.commit(offsets=[TopicPartition(self.topic, p, o)
                                           for p, o in positions.items()], asynchronous=True)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


# -- message rules ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class MessageReject:
    """A message refused before or while parsing, named by its partition and offset."""

    partition: int
    offset: int
    text: str
    reason: str

    def message(self, source: str) -> str:
        snippet = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return f"{source}[{self.partition}]@{self.offset}: {self.reason}: {snippet!r}"

    def to_json(self, source: str) -> dict[str, Any]:
        return {"source": source, "partition": self.partition, "offset": self.offset,
                "reason": self.reason, "text": self.text}


def check_messages(values: Sequence[bytes], max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
                   ) -> tuple[list[int], list[str], dict[int, tuple[str, str]]]:
    """Split messages into good lines and rejects: ``(good_index, good_text, bad)``.

    ``bad`` maps a message index to ``(text, reason)``. A message must be one non-empty line
    of UTF-8 text of at most ``max_bytes`` bytes; what it says is the readers' business.

    >>> good, text, bad = check_messages([b"1,a,x", b"", b"\\xff", b"1,a\\n2,b"])
    >>> good
    [0]
    >>> [reason for _, reason in bad.values()]  # doctest: +NORMALIZE_WHITESPACE
    ['empty message', 'message is not UTF-8 text',
     'a message must hold one record on one line']
    """
    good_i: list[int] = []
    good_t: list[str] = []
    bad: dict[int, tuple[str, str]] = {}
    for i, v in enumerate(values):
        if not v or not v.strip():
            bad[i] = (v.decode("utf-8", "replace"), "empty message")
            continue
        if len(v) > max_bytes:
            bad[i] = (v[:200].decode("utf-8", "replace"),
                      f"message is {len(v)} bytes (limit {max_bytes})")
            continue
        try:
            text = v.decode("utf-8")
        except UnicodeDecodeError:
            bad[i] = (repr(v[:200]), "message is not UTF-8 text")
            continue
        if "\n" in text or "\r" in text:
            bad[i] = (text.replace("\n", "\\n").replace("\r", "\\r"),
                      "a message must hold one record on one line")
            continue
        good_i.append(i)
        good_t.append(text)
    return good_i, good_t, bad


# -- sink ------------------------------------------------------------------------------------

class KafkaSink:
    """Text messages to a topic's partitions, in order, with optional headers per message.

    One writer per output partition is assumed (exactly-once relies on it: see
    :mod:`streamanon.pipeline.kafka.exactly_once`). The producer is idempotent (no duplicates
    from its own retries, order kept per partition) and never times a message out.

    Args:
        bootstrap: the broker list (``host:port,...``).
        topic: the output topic (it must exist).
        config: librdkafka settings of the user (TLS, SASL, ...); they win over the sink's
            own batching settings, never over idempotence and the infinite message timeout.
        watch: the run's broker watch (one per run reports outages once).
        on_delivery: called by librdkafka with ``(error, message)`` per acknowledged message.
    """

    def __init__(self, bootstrap: str, topic: str, *, config: Mapping[str, Any] | None = None,
                 watch: BrokerWatch | None = None,
                 on_delivery: Callable[[Any, Any], None] | None = None) -> None:
        from confluent_kafka import Producer

        self.bootstrap, self.topic = bootstrap, topic
        self.config = dict(config or {})
        self.watch = watch or BrokerWatch(f"sink {topic}")
        self.partitions = partitions_of(bootstrap, topic, config)
        self.count = 0
        self._producer = Producer({
            "linger.ms": 5, "batch.size": 1 << 20, "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1 << 20, "message.max.bytes": 32 << 20,
            **client_config(bootstrap, self.watch, config),  # the user's settings win...
            "enable.idempotence": True, "message.timeout.ms": 0,  # ...but not over these
            **({"on_delivery": on_delivery} if on_delivery is not None else {}),
        })

    def write(self, partition: int, values: Sequence[bytes],
              headers: Sequence[Any] | None = None,
              timestamps: Sequence[int] | None = None,
              on_last: Callable[[Any, Any], None] | None = None) -> None:
        """Produce ``values`` to ``partition`` in order (``headers[i]`` with ``values[i]``;
        ``timestamps[i]``: its Kafka timestamp in ms, else the time of producing).

        ``on_last(err, msg)`` is the delivery report of the last message (one callback per
        call, not per message: its offset tells whether the partition grew as expected).

        Args:
            partition: the output partition.
            values: the messages' values, in order.
            headers: each message's headers (``None``: none).
            timestamps: each message's Kafka timestamp in ms (``None``: the time of producing).
            on_last: the delivery report of the last message, ``on_last(err, msg)`` (``None``:
                none).
        """
        n = len(values)
        if not n:
            return
        if on_last is not None:
            if n > 1:
                self.write(partition, values[:-1], None if headers is None else headers[:-1],
                           None if timestamps is None else timestamps[:-1])
            self._produce_one(partition, values[-1],
                              None if headers is None else headers[-1],
                              None if timestamps is None else timestamps[-1], on_last)
            return
        from confluent_kafka import KafkaException

        try:
            self._write(partition, values, headers, timestamps)
        except KafkaException as exc:
            raise forgotten_producer(exc, self.bootstrap, self.topic) from None
        self._producer.poll(0)
        self.count += n

    def _write(self, partition: int, values: Sequence[bytes], headers: Any,
               timestamps: Sequence[int] | None) -> None:
        produce = self._producer.produce
        topic = self.topic
        if timestamps is not None:
            for i, v in enumerate(values):
                self._retry(v, dict(partition=partition, timestamp=timestamps[i],
                                    headers=None if headers is None else headers[i]))
        elif headers is None:
            for v in values:  # the fast loop; a full local queue sends one message slowly
                try:
                    produce(topic, v, partition=partition)
                except BufferError:
                    self._retry(v, {"partition": partition})
        else:
            for v, h in zip(values, headers, strict=True):
                try:
                    produce(topic, v, partition=partition, headers=h)
                except BufferError:
                    self._retry(v, {"partition": partition, "headers": h})

    def _retry(self, value: bytes, kw: dict[str, Any]) -> None:
        """Produce one message, serving the local queue while it is full."""
        if kw.get("headers") is None:
            kw.pop("headers", None)
        since = time.monotonic()
        while True:
            try:
                self._producer.produce(self.topic, value, **kw)
                return
            except BufferError:
                self._producer.poll(0.05)
                if time.monotonic() - since >= 1.0:  # the queue stays full: an outage
                    since = time.monotonic()
                    self.watch.stalled(f"queueing messages for {self.topic}")

    def _produce_one(self, partition: int, value: bytes, headers: Any, timestamp: int | None,
                     on_delivery: Callable[[Any, Any], None]) -> None:
        kw: dict[str, Any] = {"partition": partition, "on_delivery": on_delivery,
                              "headers": headers}
        if timestamp is not None:
            kw["timestamp"] = timestamp
        self._retry(value, kw)
        self.count += 1

    def flush(self) -> None:
        """Return once the broker holds every message written so far (waits out outages)."""
        if not len(self._producer):  # nothing queued or in flight (a new producer's flush
            return                   # would wait for its id)
        while True:
            left = flush_producer(self._producer, self.bootstrap, self.topic)
            if self.watch.fatal:
                raise BrokerError(f"producer for {self.topic} failed: {self.watch.fatal}")
            if left == 0:
                self.watch.alive()
                return
            self.watch.stalled(f"waiting for {self.topic} to acknowledge {left:,} message(s)")

    def close(self) -> None:
        self.flush()


class StopFlag:
    """SIGTERM and SIGINT ask the pipeline to stop after its current batch (and checkpoint).

    A second signal stops the process at once (exit 128 + signal): the stop may be waiting for
    a broker that is gone, and an exactly-once run can always be killed, the next run resumes
    from the last checkpoint.

    >>> flag = StopFlag(install=False); flag.set(15); bool(flag)
    True
    """

    def __init__(self, install: bool = True) -> None:
        self.signal: int | None = None
        #: before the run reads (connecting, loading the checkpoint) there is nothing to
        #: checkpoint: a first signal then stops the process 3 s later if the run has not
        #: started reading by then (the runner clears it once it reads)
        self.starting = install
        self._old: dict[int, Any] = {}
        if install:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._old[sig] = signal.signal(sig, lambda s, f: self._handle(s))

    def _handle(self, sig: int) -> None:
        if self.starting and self.signal is None:
            # the run checkpoints and stops as soon as it reads; if starting takes longer (a
            # broker that does not answer), it stops without one: there is nothing to keep
            import threading

            def late() -> None:
                if self.starting:
                    print("streamanon: stopped before the run started reading (nothing to "
                          "checkpoint)", file=sys.stderr, flush=True)
                    os._exit(128 + sig)

            timer = threading.Timer(3.0, late)
            timer.daemon = True
            timer.start()
        if self.signal is not None:
            print("streamanon: stopping now, without a checkpoint; the next run resumes from "
                  "the last one", file=sys.stderr, flush=True)
            os._exit(128 + sig)
        self.set(sig)

    def set(self, sig: int) -> None:
        self.signal = sig

    def __bool__(self) -> bool:
        return self.signal is not None

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

"""The checkers' own reading of a Kafka topic: every message up to the end of each partition
(where the broker first reports it), as the bytes of a file (one message a line).

Nothing of the pipeline's Kafka client is used (the checker restates what a topic holds):
confluent-kafka directly, ``assign()`` with explicit offsets, no consumer group, nothing
committed. A topic of one partition reads in offset order; several partitions are merged by
message timestamp (ties: partition, then offset), as ``streamanon z`` merges them, and a
partition's first message equal to the topic's first message (the CSV header ``kafka produce
--key-column`` sends to every partition) is read once.
"""

from __future__ import annotations

import time

from streamanon.errors import ConfigError

#: Seconds to wait for the broker's metadata, offsets or messages before giving up.
TIMEOUT = 30.0


def parse_url(url: str) -> tuple[str, str]:
    """``(HOST:PORT, TOPIC)`` of ``kafka://HOST:PORT/TOPIC``.

    >>> parse_url("kafka://127.0.0.1:9092/out")
    ('127.0.0.1:9092', 'out')
    """
    rest = url[len("kafka://"):]
    bootstrap, _, topic = rest.partition("/")
    host, _, port = bootstrap.rpartition(":")
    if not host or not port.isdigit() or not topic or "/" in topic:
        raise ConfigError(f"{url}: expected kafka://HOST:PORT/TOPIC")
    return bootstrap, topic


def topic_bytes(url: str) -> bytes:
    """Every message of the topic at ``url`` up to its end offsets, ``\\n`` after each."""
    try:
        from confluent_kafka import (
            OFFSET_BEGINNING,
            Consumer,
            KafkaError,
            KafkaException,
            TopicPartition,
        )
    except ImportError:
        raise ConfigError(f"{url}: reading a topic needs the kafka extra (pip install "
                         "'streamanon[kafka]'), or give a file (streamanon kafka consume "
                         "URL > file)") from None
    bootstrap, topic = parse_url(url)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "streamanon-verify",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50,
                         "enable.partition.eof": True,
                         "log_level": 0, "socket.connection.setup.timeout.ms": 10_000})
    try:
        try:
            meta = consumer.list_topics(topic, timeout=TIMEOUT)
        except KafkaException as exc:
            raise ConfigError(f"{url}: broker unreachable ({exc.args[0].str()})") from None
        info = meta.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            raise ConfigError(f"{url}: no such topic")
        parts = sorted(info.partitions)
        got: dict[int, list[tuple[int, int, bytes]]] = {p: [] for p in parts}
        # from the beginning; a partition's end is where the broker first reports its end
        # (partition EOF: the high watermark as a Fetch sees it)
        todo = set(parts)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        deadline = time.monotonic() + TIMEOUT
        while todo:
            batch = consumer.consume(10_000, 0.5)
            if batch:
                deadline = time.monotonic() + TIMEOUT
            elif time.monotonic() > deadline:
                raise ConfigError(f"{url}: no answer for {TIMEOUT:g} s before the end of "
                                 f"partition(s) {sorted(todo)}")
            for m in batch:
                p = m.partition()
                if p not in todo:
                    continue
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        todo.discard(p)
                    continue
                got[p].append((m.timestamp()[1], m.offset(), m.value() or b""))
    finally:
        consumer.close()
    return b"".join(v + b"\n" for v in _merged(got))


def _merged(got: dict[int, list[tuple[int, int, bytes]]]) -> list[bytes]:
    """One partition's values in offset order; several merged by (timestamp, partition,
    offset), a partition's first message equal to the first one overall read once.

    >>> _merged({0: [(1, 0, b"h"), (5, 1, b"b")], 1: [(1, 0, b"h"), (3, 1, b"a")]})
    [b'h', b'a', b'b']
    """
    nonempty = {p: ms for p, ms in got.items() if ms}
    if len(nonempty) <= 1:
        return [v for ms in nonempty.values() for _, _, v in ms]
    flat = sorted((ts, p, offset, v) for p, ms in nonempty.items() for ts, offset, v in ms)
    first = flat[0][3]
    out = [first]
    for _ts, p, offset, v in flat[1:]:
        if not (v == first and offset == nonempty[p][0][1]):
            out.append(v)
    return out

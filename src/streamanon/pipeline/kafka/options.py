"""How a ``kafka://`` endpoint is named and how a Kafka run is configured.

* :func:`is_kafka`, :func:`parse_kafka_url` — ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC``.
* :class:`KafkaOptions` — how a run with a ``kafka://`` source reads and keeps its progress.
* :func:`default_group` — the consumer group (and progress topic) a run uses by default.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamanon.errors import ConfigError

KAFKA_PREFIX = "kafka://"
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20


def is_kafka(spec: object) -> bool:
    """True for a ``kafka://HOST:PORT/TOPIC`` endpoint.

    >>> is_kafka("kafka://127.0.0.1:9092/readings"), is_kafka("trace.csv")
    (True, False)
    """
    return isinstance(spec, str) and spec.startswith(KAFKA_PREFIX)


def parse_kafka_url(url: str) -> tuple[str, str]:
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC`` -> ``(bootstrap servers, topic)``.

    >>> parse_kafka_url("kafka://127.0.0.1:9092/readings")
    ('127.0.0.1:9092', 'readings')
    """
    prefix = KAFKA_PREFIX
    if not url.startswith(prefix):
        raise ConfigError(f"not a kafka:// URL: {url!r}")
    rest = url[len(prefix):]
    servers, _, topic = rest.partition("/")
    if not servers or not topic or "/" in topic:
        raise ConfigError(f"expected kafka://HOST:PORT/TOPIC, got {url!r}")
    return servers, topic


@dataclass
class KafkaOptions:
    """How a run with a ``kafka://`` source reads its topic and keeps its progress.

    ``group``: the consumer group (its committed offsets are what ``start="committed"`` and
    lag monitors read) and the name of the run's progress topic, ``GROUP.progress`` on the
    input's broker; default ``streamanon-COMMAND-OUTPUT`` (the output topic and its broker,
    or the output file's name and a hash of its path). ``start``: where a pipeline without a
    checkpoint begins, ``"committed"`` (the group's offsets, else the earliest) or ``"earliest"``; a
    pipeline with a checkpoint always resumes from it. ``until_end``: stop at the end
    offsets found at start (else run until ``stop`` is set: SIGTERM, Ctrl-C).
    ``checkpoint_every``: seconds between checkpoints (what a restart re-reads at most).
    ``config``: librdkafka settings for every client (TLS, SASL, ...).
    ``checkpoint_key``: the file of the key that signs the checkpoints (default:
    ``$STREAMANON_CHECKPOINT_KEY_FILE``, else a per-user file created on first use; see
    :func:`streamanon.pipeline.kafka.exactly_once.checkpoint_key`).
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


def _broker_name(servers: str) -> str:
    """A broker list as part of a topic name (``127.0.0.1:9092`` -> ``127.0.0.1_9092``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", servers)
    if len(name) > 60:
        name = name[:49] + "-" + hashlib.sha256(servers.encode()).hexdigest()[:10]
    return name


def default_group(command: str, output: str | Path, source_topic: str = "") -> str:
    """``streamanon-COMMAND-NAME``: NAME is the output topic and its broker, or the output
    file's name and a hash of its absolute path, or for standard output the input topic and
    ``stdout`` (a Kafka group and topic name: letters, digits, ``._-``). The broker is part of
    the name: the same topic name on two brokers is two pipelines, with two progress topics.

    >>> default_group("z", "kafka://127.0.0.1:9092/published")
    'streamanon-z-published-127.0.0.1_9092'
    >>> default_group("z", "-", "readings")
    'streamanon-z-readings-stdout'
    """
    if is_kafka(output):
        servers, topic = parse_kafka_url(str(output))
        name = f"{topic}-{_broker_name(servers)}"
    elif str(output) == "-":
        name = f"{source_topic}-stdout" if source_topic else "stdout"
    else:
        path = Path(output).resolve()
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
        name = f"{re.sub(r'[^A-Za-z0-9._-]', '_', path.name)[:80]}-{digest}"
    return f"streamanon-{command}-{name}"


__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "KAFKA_PREFIX", "KafkaOptions", "default_group",
           "is_kafka", "parse_kafka_url"]

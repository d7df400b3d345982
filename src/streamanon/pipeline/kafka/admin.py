"""Topic administration: which partitions a topic has, and creating the ones a run needs.

* :func:`topic_partitions` — the partitions of the topic of a ``kafka://`` URL (``None``
  when it does not exist; :class:`~streamanon.errors.EndpointError` when the broker does
  not answer); :func:`partitions_of` the same for a broker and topic that must exist.
* :func:`ensure_topic` — the partitions of a topic, created when missing (a run's outputs
  and progress topic); :func:`create_topics` creates topics explicitly.
* :func:`admin_client` — one admin client per broker and settings, kept for the process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from streamanon.errors import BrokerError, EndpointError
from streamanon.pipeline.kafka.connection import client_config, quiet_logs
from streamanon.pipeline.kafka.options import parse_kafka_url

_ADMINS: dict[tuple[str, str], Any] = {}
_REFUSED: dict[int, list[str]] = {}  # id(admin) -> its latest connection errors

#: seconds a broker that refuses connections is given before a run stops (it may be starting)
REFUSED_GRACE = 3.0


def admin_client(bootstrap: str, config: Mapping[str, Any] | None = None) -> Any:
    """One admin client per broker and settings, kept for the process (a connection each)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    key = (bootstrap, repr(sorted((config or {}).items())))
    admin = _ADMINS.get(key)
    if admin is None:
        errors: list[str] = []

        def seen(err: Any) -> None:
            if err.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT,
                              KafkaError._RESOLVE):
                errors.append(err.str())
                del errors[:-5]

        admin = _ADMINS[key] = AdminClient({**client_config(bootstrap, None, config),
                                            "error_cb": seen})
        _REFUSED[id(admin)] = errors
    return admin


def topic_partitions(url: str, config: Mapping[str, Any] | None = None,
                     timeout: float = 30.0) -> list[int] | None:
    """The partitions of the topic of ``url``; ``None`` when it does not exist.

    Raises :class:`EndpointError` when the broker does not answer within ``timeout``, or
    within :data:`REFUSED_GRACE` seconds when librdkafka reports that it refuses connections
    or cannot be resolved (nothing listens there: waiting longer would not help).
    """
    from confluent_kafka import KafkaException

    bootstrap, topic = parse_kafka_url(url)
    admin = admin_client(bootstrap, config)
    errors = _REFUSED.get(id(admin), [])
    start = time.monotonic()
    deadline = start + timeout
    while True:
        try:
            # all topics: a metadata request naming the topic may make the broker create it
            # (docs/design/kafka.md)
            md = admin.list_topics(timeout=min(0.5, max(0.05, deadline - time.monotonic())))
            break
        except KafkaException as exc:
            admin.poll(0)  # serves error_cb
            now = time.monotonic()
            down = [e for e in errors if "refused" in e.lower() or "resolve" in e.lower()]
            if now >= deadline or (down and now - start >= REFUSED_GRACE):
                why = down[-1] if down else exc.args[0].str()
                within = now - start
                raise EndpointError(f"{url}: no answer from the broker at {bootstrap} "
                                    f"within {within:.0f} s ({why}); is it running?"
                                    ) from None
    errors.clear()
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return sorted(t.partitions)


def partitions_of(bootstrap: str, topic: str, config: Mapping[str, Any] | None = None,
                  timeout: float = 30.0) -> list[int]:
    """The partition ids of ``topic`` (an error when it does not exist)."""
    parts = topic_partitions(f"kafka://{bootstrap}/{topic}", config, timeout)
    if parts is None:
        raise BrokerError(f"topic {topic!r} is not available (create it first)")
    return parts


def ensure_topic(url: str, partitions: int, config: Mapping[str, Any] | None = None,
                 say: Callable[[str], None] | None = None) -> list[int]:
    """The partitions of the topic of ``url``, created with ``partitions`` when missing."""
    have = topic_partitions(url, config)
    if have is not None:
        return have
    bootstrap, topic = parse_kafka_url(url)
    create_topics(bootstrap, {topic: partitions}, client_config=config, exist_ok=True)
    if say is not None:
        say(f"created topic {topic} ({partitions} partition{'s' if partitions > 1 else ''})")
    return topic_partitions(url, config) or list(range(partitions))


def create_topics(bootstrap: str, topics: Mapping[str, int],
                  config: Mapping[str, str] | None = None, timeout: float = 30.0,
                  client_config: Mapping[str, Any] | None = None,
                  exist_ok: bool = False) -> None:
    """Create topics ``{name: partitions}`` explicitly and wait until their metadata shows.

    Args:
        bootstrap: the broker list (``host:port,...``).
        topics: topic name -> its number of partitions.
        config: the topics' configuration (``retention.ms``, ...; ``None``: the broker's defaults).
        timeout: seconds to wait for the creation and the metadata.
        client_config: librdkafka settings of the admin client (TLS, SASL, ...).
        exist_ok: accept a topic that exists already.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **quiet_logs(),
                         **(client_config or {})})
    futures = admin.create_topics([NewTopic(n, num_partitions=p, replication_factor=1,
                                            config=dict(config or {}))
                                   for n, p in topics.items()], request_timeout=timeout)
    for name, fut in futures.items():
        try:
            fut.result(timeout)
        except KafkaException as exc:
            if not (exist_ok and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise BrokerError(f"cannot create topic {name}: {exc.args[0].str()}") from exc
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=timeout)
        if all(n in md.topics and len(md.topics[n].partitions) == p for n, p in topics.items()):
            return
        time.sleep(0.05)
    raise BrokerError(f"topics {sorted(topics)} did not appear within {timeout:g} s")


__all__ = ["admin_client", "create_topics", "ensure_topic", "partitions_of", "topic_partitions"]

"""A run from a ``kafka://`` topic to its outputs, exactly once (:func:`run_kafka`).

The design and its assumptions are in :mod:`streamanon.pipeline.kafka.exactly_once`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamanon.errors import EndpointError
from streamanon.pipeline.chunks import PUBLISHED
from streamanon.pipeline.kafka.admin import ensure_topic, topic_partitions
from streamanon.pipeline.kafka.client import KafkaSource, StopFlag
from streamanon.pipeline.kafka.connection import BrokerWatch
from streamanon.pipeline.kafka.exactly_once import (
    ExactlyOnceRun,
    ProgressLog,
    checkpoint_key,
)
from streamanon.pipeline.kafka.options import (
    KafkaOptions,
    default_group,
    is_kafka,
    parse_kafka_url,
)
from streamanon.pipeline.positions import MessagePositions
from streamanon.pipeline.sinks import JournalFileSink, open_sinks

if TYPE_CHECKING:
    from streamanon.pipeline.stages import Stage


def run_kafka(source_url: str, make_stage: Callable[[], Stage],
              outputs: Mapping[str, tuple[str | Path, str]], options: KafkaOptions,
              command: str, identity: Mapping[str, Any] | None = None
              ) -> tuple[Stage, dict[str, Any]]:
    """Run a stage from a topic to its outputs exactly once; returns ``(stage, delivery)``.

    ``outputs`` maps destinations (``published``, ``suppressed``, ``rejects``) to a target
    (``kafka://`` URL, file path, ``-``) and the option that named it (for messages).

    Args:
        source_url: the input topic (``kafka://HOST:PORT/TOPIC``).
        make_stage: builds the stage of a fresh run.
        outputs: destination -> (target, the option that named it).
        options: how to read the topic and keep the progress.
        command: the command's name (part of the default group name).
        identity: more that a restart must not change (``None``: nothing more).
    """
    bootstrap, topic = parse_kafka_url(source_url)
    config = options.config
    parts = topic_partitions(source_url, config)
    if parts is None:
        raise EndpointError(f"{source_url}: no such topic (create it, or check the name)")
    # every output broker answers before anything is created (the progress topic on the
    # input's broker would otherwise be made for a run that cannot start)
    for target, option in outputs.values():
        if isinstance(target, str) and is_kafka(target):
            try:
                topic_partitions(target, config)
            except EndpointError as exc:
                raise EndpointError(f"{option} {exc}") from None
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
    # producer waits for its id, which the rest of the start-up then hides
    stop = options.stop if options.stop is not None else StopFlag(install=False)
    watch = BrokerWatch("kafka", stop=stop)
    progress = ProgressLog(bootstrap, f"{group}.progress", config=config, watch=watch,
                           key=key)
    sinks = open_sinks(outputs, positions, len(parts), options, journal=True, watch=watch)
    source = KafkaSource(bootstrap, topic, group=group, start=options.start,
                         until_end=options.until_end, config=config,
                         fetch_batch=options.fetch_batch, watch=watch)
    runner = ExactlyOnceRun(source, sinks, progress, make_stage,
                            checkpoint_every=options.checkpoint_every, stop=stop,
                            identity={"input": topic, **options.identity,
                                      **(identity or {})},
                            after_batch=options.after_batch, log=options.say,
                            on_batch=options.on_batch, on_stage=options.on_stage)
    watch.check = runner.check_broker
    try:
        delivery = runner.run()
    except BaseException:
        for sink in sinks.values():  # a file this run created and left empty goes again
            if isinstance(sink, JournalFileSink):
                sink.discard_if_empty()
        raise
    finally:
        runner.source.close()
    delivery["group"] = group
    delivery["checkpoint_key"] = key.origin  # where it is, never the key
    return runner.stage, delivery


__all__ = ["run_kafka"]

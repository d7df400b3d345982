"""One pipeline for every operator and every endpoint: source -> stage -> sinks.

    source   file | stdin | kafka://HOST:PORT/TOPIC      ->  LineChunk: lines + positions
    stage    ZStage | CastleStage (the same rules for every source)  ->  Outputs per destination
    sinks    file | stdout | kafka://HOST:PORT/TOPIC      <-  released, suppressed, rejects

:func:`~streamanon.pipeline.run.run_z` and :func:`~streamanon.pipeline.run.run_castle` drive
a whole run, whatever the endpoints, for the CLI, the demo, the benchmarks and library users.

The names below load lazily from their modules (importing one part does not load the rest):

>>> from streamanon.pipeline import ZStage, run_z
>>> ZStage.__module__, run_z.__module__
('streamanon.pipeline.stages', 'streamanon.pipeline.run')

Design: docs/design/pipeline.md
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamanon._lazy import lazy_exports

if TYPE_CHECKING:
    from streamanon.errors import BadInputError, EndpointError, UnreadableMessagesError
    from streamanon.pipeline.chunks import (
        PUBLISHED,
        REJECTS,
        SUPPRESSED,
        LineChunk,
        Lines,
        Outputs,
        message_chunk,
    )
    from streamanon.pipeline.kafka.admin import ensure_topic, topic_partitions
    from streamanon.pipeline.kafka.options import (
        DEFAULT_MAX_MESSAGE_BYTES,
        KAFKA_PREFIX,
        KafkaOptions,
        default_group,
        is_kafka,
    )
    from streamanon.pipeline.kafka.run import run_kafka
    from streamanon.pipeline.positions import (
        HEADER_IN,
        HEADER_LINE,
        LinePositions,
        MessagePositions,
        Positions,
    )
    from streamanon.pipeline.run import lean_gc, run_castle, run_lines, run_z
    from streamanon.pipeline.sinks import (
        FileSink,
        JournalFileSink,
        KafkaTopicSink,
        ResumableSink,
        Sink,
    )
    from streamanon.pipeline.sources import FileSource
    from streamanon.pipeline.stages import BAD_RECORD_ERRORS, CastleStage, Stage, ZStage

_MODULES = {
    "streamanon.errors": ["BadInputError", "EndpointError", "UnreadableMessagesError"],
    "streamanon.pipeline.chunks": ["PUBLISHED", "REJECTS", "SUPPRESSED", "LineChunk", "Lines",
                                   "Outputs", "message_chunk"],
    "streamanon.pipeline.kafka.admin": ["ensure_topic", "topic_partitions"],
    "streamanon.pipeline.kafka.options": ["DEFAULT_MAX_MESSAGE_BYTES", "KAFKA_PREFIX",
                                          "KafkaOptions", "default_group", "is_kafka"],
    "streamanon.pipeline.kafka.run": ["run_kafka"],
    "streamanon.pipeline.positions": ["HEADER_IN", "HEADER_LINE", "LinePositions",
                                      "MessagePositions", "Positions"],
    "streamanon.pipeline.run": ["lean_gc", "run_castle", "run_lines", "run_z"],
    "streamanon.pipeline.sinks": ["FileSink", "JournalFileSink", "KafkaTopicSink",
                                  "ResumableSink", "Sink"],
    "streamanon.pipeline.sources": ["FileSource"],
    "streamanon.pipeline.stages": ["BAD_RECORD_ERRORS", "CastleStage", "Stage", "ZStage"],
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "BAD_RECORD_ERRORS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "HEADER_IN",
    "HEADER_LINE",
    "KAFKA_PREFIX",
    "PUBLISHED",
    "REJECTS",
    "SUPPRESSED",
    "BadInputError",
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
    "Positions",
    "ResumableSink",
    "Sink",
    "Stage",
    "UnreadableMessagesError",
    "ZStage",
    "default_group",
    "ensure_topic",
    "is_kafka",
    "lean_gc",
    "message_chunk",
    "run_castle",
    "run_kafka",
    "run_lines",
    "run_z",
    "topic_partitions",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

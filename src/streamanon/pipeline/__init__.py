"""One pipeline for every operator and every endpoint: source -> stage -> sinks.

A run reads *chunks of lines* from a source; a stage (an operator behind the readers' rules)
turns each chunk into output lines; sinks write them::

    source   file | stdin | kafka://HOST:PORT/TOPIC      ->  LineChunk: lines + positions
    stage    ZStage | CastleStage (the same rules for every source)  ->  Outputs per destination
    sinks    file | stdout | kafka://HOST:PORT/TOPIC      <-  published, suppressed, rejects

:func:`~streamanon.pipeline.run.run_z` and :func:`~streamanon.pipeline.run.run_castle` drive
a whole run, whatever the endpoints, for the CLI (``streamanon z``, ``streamanon castle``),
the demo, the benchmarks and library users alike::

    run_z("trace.csv", "published.csv", ZAnonymizer(z=5, delta_t=3600))
    run_z("kafka://127.0.0.1:9092/readings", "kafka://127.0.0.1:9092/published",
          ZAnonymizer(z=5, delta_t=3600), kafka=KafkaOptions(until_end=True))

The parts, one module each:

* :mod:`~streamanon.pipeline.positions` — where a record came from.
* :mod:`~streamanon.pipeline.chunks` — input chunks, output lines per destination.
* :mod:`~streamanon.pipeline.sources` — files and stdin (a topic: the Kafka client).
* :mod:`~streamanon.pipeline.stages` — the :class:`~streamanon.pipeline.stages.Stage`
  protocol, z-anonymity and CASTLE behind the readers' rules.
* :mod:`~streamanon.pipeline.sinks` — the :class:`~streamanon.pipeline.sinks.Sink`
  protocol, files, stdout, topics.
* :mod:`~streamanon.pipeline.run` — whole runs; :mod:`~streamanon.pipeline.kafka` — Kafka
  endpoints and exactly-once runs; :mod:`~streamanon.pipeline.file_outputs` — file outputs
  replaced only when a run succeeds.

*Positions* name where a line came from: a line number
(:class:`~streamanon.pipeline.positions.LinePositions`: files, stdin) or a partition and
offset (:class:`~streamanon.pipeline.positions.MessagePositions`: Kafka; one int64 per
record, ``offset << 16 | partition``). They travel with the records, so a rejected record is
named by its position, and a Kafka output message carries the position of the input record it
stands for in a header (``streamanon-in: PARTITION@OFFSET``, or ``streamanon-in-line:
LINE`` for a file source).

*Delivery*, by source:

* A file or stdin source runs once, start to end (:func:`~streamanon.pipeline.run.run_lines`).
  File outputs are written as the run goes; the CLI wraps them in an
  :class:`~streamanon.pipeline.file_outputs.OutputSet` (replaced only when the run
  succeeds). A Kafka output of such a run is produced as the run goes and acknowledged before
  the run returns: a run that dies leaves a prefix of its output in the topic, and running it
  again writes the whole output again (at least once).
* A Kafka source runs exactly once
  (:class:`~streamanon.pipeline.kafka.exactly_once.ExactlyOnceRun`, whose docstring has the
  design and its assumptions): killed at any moment and run again, every output holds exactly
  what one uninterrupted run writes. Kafka outputs are checked against what the killed run
  left (:class:`~streamanon.pipeline.sinks.KafkaTopicSink`); file outputs are appended as the
  run goes and cut back to the length of the last checkpoint on a restart
  (:class:`~streamanon.pipeline.sinks.JournalFileSink`); standard output cannot be taken
  back, so after a restart it repeats what was printed since the last checkpoint (at least
  once).

Stages are picklable (their state is part of a Kafka run's checkpoints) and apply the readers'
rules (:class:`~streamanon.io.readers.RecordParser`, :class:`~streamanon.io.rows.RowReader`)
with the same reasons for every source; Kafka messages first pass
:func:`~streamanon.pipeline.kafka.client.check_messages` (empty, oversized, not UTF-8,
several lines).

The names below load lazily from their modules (importing one part does not load the rest):

>>> from streamanon.pipeline import ZStage, run_z
>>> ZStage.__module__, run_z.__module__
('streamanon.pipeline.stages', 'streamanon.pipeline.run')
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

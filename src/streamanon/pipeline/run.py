"""Whole runs, whatever the endpoints: :func:`run_z`, :func:`run_castle`, and
:func:`run_lines` (a file or stdin source through a stage to its sinks, once).

A ``kafka://`` source is handed to :func:`~streamanon.pipeline.kafka.run.run_kafka`
(exactly once); any other source is read by a
:class:`~streamanon.pipeline.sources.FileSource`.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from streamanon.errors import ConfigError
from streamanon.io.policy import OnError
from streamanon.io.readers import detect_format
from streamanon.pipeline.chunks import PUBLISHED, REJECTS, SUPPRESSED, Outputs
from streamanon.pipeline.kafka.options import DEFAULT_MAX_MESSAGE_BYTES, KafkaOptions, is_kafka
from streamanon.pipeline.positions import MessagePositions, Positions
from streamanon.pipeline.sinks import KafkaTopicSink, ResumableSink, Sink, open_sinks
from streamanon.pipeline.sources import FileSource
from streamanon.pipeline.stages import CastleStage, Stage, ZStage
from streamanon.records import RunStats
from streamanon.zanon import AdaptiveZAnonymizer, ZAnonymizer

if TYPE_CHECKING:
    from streamanon.castle import CastleAnonymizer


def run_lines(source: FileSource, stage: Stage, sinks: Mapping[str, Sink]) -> None:
    """Run ``stage`` over every chunk of ``source`` once, writing to ``sinks``.

    Raises the stage's :class:`~streamanon.io.InputError` (``--on-error fail``) after writing
    the outputs of the records before the bad one.
    """
    stage.tagged = any(isinstance(s, KafkaTopicSink) for s in sinks.values())
    for sink in sinks.values():
        if isinstance(sink, ResumableSink):
            sink.start()

    def emit(out: Outputs) -> None:
        for dest, blocks in out.items():
            sink = sinks.get(dest)
            if sink is not None:
                for lines in blocks:
                    sink.write(lines)

    for chunk in source.chunks():
        out, error = stage.process(chunk)
        emit(out)
        if error is not None:
            raise error
    emit(stage.finish())


def _warn_rejects(stage: ZStage | CastleStage, where: str | None) -> None:
    rej = stage.rejects
    if rej.count:
        written = f" (written to {where})" if where else ""
        print(f"warning: {rej.count} record(s) rejected{written}; first: {rej.first}",
              file=sys.stderr)


@contextlib.contextmanager
def lean_gc(young: int = 100_000) -> Iterator[None]:
    """Fewer garbage collections while a run allocates many short-lived objects per batch.

    A Kafka run makes a few objects per message (its value, its header); the cyclic
    collector would run every 700 allocations and, every tenth time, scan everything alive,
    which cost more than the work itself (docs/design/pipeline.md). Here
    the objects that exist at the start are frozen (never scanned) and the young generation
    is collected every ``young`` allocations; both are undone at the end.
    """
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(young, old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


#: the size of a file's chunks, per command: z's batch engine gains from large batches (its
#: window's tail is joined to every batch); CASTLE works tuple by tuple and holds a chunk's
#: released rows until the chunk is written, so small chunks bound its memory (100,000
#: ASHRAE-shaped rows: 211 MB at 16 MiB, 68 MB at 1 MiB, no slower)
CHUNK_CHARS = {"z": 1 << 24, "castle": 1 << 20}


def _run(command: str, source: str | Path | TextIO | BinaryIO,
         make_stage: Callable[[Positions], Stage],
         outputs: dict[str, tuple[str | Path, str]], rejects_name: str | None,
         progress: Callable[[int], None] | None, kafka: KafkaOptions | None,
         identity: Mapping[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """The common body of :func:`run_z` and :func:`run_castle`."""
    details: dict[str, Any] = {}
    start = time.perf_counter()
    stage: Any = None
    rejects_where = rejects_name or (str(outputs[REJECTS][0]) if REJECTS in outputs else None)
    try:
        with lean_gc():
            if is_kafka(source):
                from streamanon.pipeline.kafka.run import run_kafka

                options = kafka or KafkaOptions()
                stage, delivery = run_kafka(str(source), lambda: make_stage(
                    MessagePositions(str(source))), outputs, options, command, identity)
                details["delivery"] = delivery
            else:
                src = FileSource(source, progress=progress,
                                 chunk_chars=CHUNK_CHARS.get(command, 1 << 24))
                stage = make_stage(src.positions)
                sinks = open_sinks(outputs, src.positions, 1, kafka, journal=False)
                try:
                    run_lines(src, stage, sinks)
                finally:
                    for sink in sinks.values():
                        sink.close()
    finally:
        if stage is not None:
            _warn_rejects(stage, rejects_where)
    elapsed = time.perf_counter() - start
    details["seconds"] = round(elapsed, 3)
    return stage, details


def _formats(source: Any, output: Any, in_format: str | None, out_format: str | None
             ) -> tuple[str, str]:
    """The input and output formats of a run: given, else from a file's suffix (a topic, a
    stream or ``-`` has none to tell)."""
    path = None if is_kafka(source) or not isinstance(source, str | Path) else source
    out_path = None if is_kafka(output) or str(output) == "-" or not isinstance(
        output, str | Path) else output
    return detect_format(path, in_format), detect_format(out_path, out_format)


def run_z(
    source: str | Path | TextIO | BinaryIO,
    output: str | Path | TextIO,
    operator: ZAnonymizer | AdaptiveZAnonymizer,
    *,
    in_format: str | None = None,
    out_format: str | None = None,
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    rejects_name: str | None = None,
    time_tolerance: float = 0.0,
    progress: Callable[[int], None] | None = None,
    kafka: KafkaOptions | None = None,
    delimiter: str = ",",
) -> RunStats:
    """z-anonymize a whole stream from ``source`` to ``output``; returns the accounting.

    ``source``: a file, ``-`` (stdin), an open stream or ``kafka://HOST:PORT/TOPIC``;
    ``output`` and ``rejects_path``: a file, ``-`` (stdout) or ``kafka://`` (module
    docstring: delivery). Raises :class:`~streamanon.io.InputError` under ``on_error=fail``
    after writing what came before the bad record (wrap file outputs in an
    :class:`~streamanon.pipeline.file_outputs.OutputSet`, as the CLI does, so that a partial output
    replaces nothing). ``rejects_name`` is the rejects file's name in messages (when
    ``rejects_path`` is a temporary file). ``details["users_seen"]`` counts distinct users up
    to ``z`` (enough to tell whether z could ever be reached) for the batch engine:
    ``{"at_least": n, "counted_up_to": z}``, n exact when below z.

    Args:
        source: a file, ``-`` (stdin), an open stream or ``kafka://HOST:PORT/TOPIC``.
        output: a file, ``-`` (stdout) or ``kafka://`` for the released tuples.
        operator: the :class:`~streamanon.zanon.ZAnonymizer` or adaptive operator.
        in_format: the input format (``csv`` or ``jsonl``; ``None``: from the name).
        out_format: the output format (``None``: from the name).
        on_error: ``fail`` raises at the first bad record; ``skip`` rejects it and goes on.
        rejects_path: where rejected records go (a file, ``-`` or ``kafka://``; ``None``: nowhere).
        rejects_name: the rejects file's name in messages (when ``rejects_path`` is temporary).
        time_tolerance: seconds a time may go back before the record is rejected.
        progress: called with the bytes consumed by each read.
        kafka: the options of ``kafka://`` endpoints (:class:`KafkaOptions`).
        delimiter: the field delimiter of CSV input (one character; outputs stay comma CSV).
    """
    in_fmt, out_fmt = _formats(source, output, in_format, out_format)
    if is_kafka(source) and in_format is None:
        in_fmt = "auto"  # JSON objects or CSV, as the first message says
    outputs: dict[str, tuple[Any, str]] = {PUBLISHED: (output, "--output")}
    if rejects_path is not None:
        outputs[REJECTS] = (rejects_path, "--rejects")
    max_bytes = kafka.max_message_bytes if kafka is not None else DEFAULT_MAX_MESSAGE_BYTES

    def make_stage(positions: Positions) -> ZStage:
        return ZStage(operator, positions, in_format=in_fmt, out_format=out_fmt,
                      on_error=on_error, time_tolerance=time_tolerance,
                      max_message_bytes=max_bytes, delimiter=delimiter)

    stage, details = _run("z", source, make_stage, outputs, rejects_name, progress, kafka)
    stats = stage.stats()
    stats.details.update(details)
    stats.details["tuples_per_second"] = (round(stats.read / details["seconds"])
                                          if details["seconds"] > 0 else None)
    return stats


def run_castle(
    source: str | Path | TextIO | BinaryIO,
    output: str | Path | TextIO,
    operator: CastleAnonymizer,
    *,
    in_format: str | None = None,
    out_format: str | None = None,
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    rejects_name: str | None = None,
    suppressed_path: str | Path | None = None,
    suppressed_format: str | None = None,
    columns: Sequence[str] | None = None,
    latency: bool = False,
    progress: Callable[[int], None] | None = None,
    kafka: KafkaOptions | None = None,
    delimiter: str = ",",
) -> RunStats:
    """k_s-anonymize a whole stream with CASTLE; returns the accounting.

    Endpoints as :func:`run_z`. Suppressed tuples go to ``suppressed_path`` (as the
    suppression strategy leaves them, with a ``reason`` column; a header only when there are
    none) when given, else they are only counted. ``columns``: the CSV header of a
    ``kafka://`` source whose messages carry none (default: the first message is the
    header). With ``latency`` the mean wall-clock time from feeding a tuple to its release is
    measured (``details["latency_ms"]``). ``details["individuals_seen"]`` and
    ``details["sensitive_values_seen"]`` (with l > 1) count distinct individuals up to k and
    distinct values of each sensitive attribute up to l: enough to tell whether k and l
    could be reached; each is ``{"at_least": n, "counted_up_to": cap}``, n exact below the
    cap. On bad input under ``fail`` it raises after writing what came before: wrap the
    call in an :class:`~streamanon.pipeline.file_outputs.OutputSet`, as the CLI does.

    Args:
        source: a file, ``-`` (stdin), an open stream or ``kafka://HOST:PORT/TOPIC``.
        output: a file, ``-`` (stdout) or ``kafka://`` for the released rows.
        operator: the :class:`~streamanon.castle.CastleAnonymizer`.
        in_format: the input format (``csv`` or ``jsonl``; ``None``: from the name).
        out_format: the output format (``None``: from the name).
        on_error: ``fail`` raises at the first bad row; ``skip`` rejects it and goes on.
        rejects_path: where rejected rows go (``None``: nowhere).
        rejects_name: the rejects file's name in messages (when ``rejects_path`` is temporary).
        suppressed_path: where suppressed tuples go (``None``: only counted).
        suppressed_format: the format of ``suppressed_path`` (``None``: from the name).
        columns: the CSV header of a ``kafka://`` source whose messages carry none.
        latency: measure the mean wall-clock time from feeding a tuple to its release.
        progress: called with the bytes consumed by each read.
        kafka: the options of ``kafka://`` endpoints (:class:`KafkaOptions`).
        delimiter: the field delimiter of CSV input (one character; outputs stay comma CSV).
    """
    if operator.rules is None:
        raise ConfigError("the operator has no rules")
    in_fmt, out_fmt = _formats(source, output, in_format, out_format)
    outputs: dict[str, tuple[Any, str]] = {PUBLISHED: (output, "--output")}
    sup_fmt = None
    if suppressed_path is not None:
        outputs[SUPPRESSED] = (suppressed_path, "--suppressed")
        sup_fmt = out_fmt if is_kafka(suppressed_path) else detect_format(
            None if str(suppressed_path) == "-" else suppressed_path, suppressed_format)
    if rejects_path is not None:
        outputs[REJECTS] = (rejects_path, "--rejects")
    max_bytes = kafka.max_message_bytes if kafka is not None else DEFAULT_MAX_MESSAGE_BYTES

    def make_stage(positions: Positions) -> CastleStage:
        return CastleStage(operator, positions, in_format=in_fmt, out_format=out_fmt,
                           suppressed_format=sup_fmt, on_error=on_error,
                           columns=columns if positions.kind == "message" else None,
                           max_message_bytes=max_bytes, latency=latency,
                           delimiter=delimiter)

    stage, details = _run("castle", source, make_stage, outputs, rejects_name, progress, kafka)
    stats = stage.stats()
    stats.details.update(details)
    stats.details["tuples_per_second"] = (round(stats.read / details["seconds"])
                                          if details["seconds"] > 0 else None)
    return stats


__all__ = ["lean_gc", "run_castle", "run_lines", "run_z"]

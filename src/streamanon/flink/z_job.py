"""The z-anonymity job on Flink, from a file or TCP server and from a topic (``flink`` extra).

Design: docs/design/flink.md
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyflink.common import Types

from streamanon.flink.env import make_env, preload_client_imports, prepare_python_path
from streamanon.flink.functions import META, SNAPSHOT_EVERY, ZKeyGroups
from streamanon.flink.kafka_connector import (
    Z_STATE_LAYOUT,
    KafkaInput,
    KafkaOutput,
    KafkaRunResult,
    ZKeyGroupMessages,
    gated_type,
    kafka_batches,
    kafka_env,
    kafka_message_sink,
    kafka_record,
    kafka_result,
    prepare_endpoints,
    settle_output_base,
    write_plan,
)
from streamanon.flink.outcomes import RECORDS_CODEC, MergeResult, merge_outcomes
from streamanon.flink.runtime import (
    Z_BATCH_SIZE,
    Endpoint,
    JobOptions,
    RunRecord,
    batch_source,
    execute,
    file_head,
    file_record,
    head_lines,
    keyed_rows,
    outcome_sink,
    side_output,
    split_progress,
    wants_progress,
    work_folder,
)
from streamanon.flink.zbatch import Z_KEY_GROUPS, ZChunkParser
from streamanon.io import OnError, detect_format
from streamanon.io.readers import _Reader
from streamanon.pipeline.stages import Z_UNLISTED, listed_params
from streamanon.records import RunStats
from streamanon.zanon.operator import SEPARATOR, ZAnonymizer


def z_parser(source: str | Path | Endpoint | KafkaInput, record: RunRecord, options: JobOptions,
             *, fmt: str = "csv", time_tolerance: float = 0.0,
             separator: str = SEPARATOR, codec: str | None = RECORDS_CODEC) -> ZChunkParser:
    """The chunk parser of the reading step: one batch per key group of ``record``.

    Args:
        source: the input (its name goes in messages).
        record: the run's record (its key groups).
        options: how to run the job (its ``batch_size``; unset: ``Z_BATCH_SIZE``).
        fmt: the input format (``csv`` or ``jsonl``).
        time_tolerance: seconds a time may go backwards before a record is refused.
        separator: the separator of hierarchical values.
        codec: the compression of the batches' Arrow buffers (``None``: none).
    """
    return ZChunkParser(fmt, time_tolerance=time_tolerance, separator=separator,
                        source_name=str(source), key_groups=record.key_groups,
                        batch_size=options.batch_size or Z_BATCH_SIZE, codec=codec)


def build_z_job(batches: Any, sink: Callable[[Any], None], *, z: int, delta_t: float,
                separator: str = SEPARATOR, snapshot_every: int | None = None) -> None:
    """Add the keyed z-anonymity step after the reading step ``batches`` (its rows and its
    side output :data:`~streamanon.flink.functions.META`); ``sink`` takes the outcomes.

    Args:
        batches: the reading step's output (keyed batches, META on the side).
        sink: called with the stream of outcome lines.
        z: the z of z-anonymity.
        delta_t: the window Δt in seconds.
        separator: the separator of hierarchical values.
        snapshot_every: records between snapshots of a key group's state (``None``: the default).
    """
    outcomes = (
        keyed_rows(batches, Types.PICKLED_BYTE_ARRAY())
        .process(ZKeyGroups(z, delta_t, separator, snapshot_every or SNAPSHOT_EVERY),
                 output_type=Types.STRING())
        .name(f"z-anonymity z={z} (per key group)").uid("z-anonymity")
    )
    sink(outcomes.union(side_output(batches, META)))


def check_header(source: str | Path, fmt: str) -> None:
    """Fail early, with ``streamanon z``'s message, on a file that is not text or (CSV) has
    no usable header line."""
    head = file_head(source)
    if fmt != "csv":
        return
    reader = _Reader(fmt, OnError.fail, None, 0.0, 4096, str(source))
    for number, line in enumerate(head_lines(head).split("\n"), start=1):
        if line.strip():
            reader.take_header(number, line.rstrip("\r"))
            return


def run_z_job(
    source: str | Path | Endpoint,
    output: str | Path,
    *,
    z: int,
    delta_t: float,
    options: JobOptions | None = None,
    in_format: str | None = None,
    out_format: str | None = None,
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    rejects_name: str | None = None,
    time_tolerance: float = 0.0,
    snapshot_every: int | None = None,
) -> MergeResult:
    """Run the job to its end and merge its outcomes into ``output``; returns the accounting.

    Raises :class:`~streamanon.io.InputError` under ``on_error=fail`` after writing the rows
    before the bad line (as :func:`streamanon.cli.zanon.run_z`: wrap the call in an
    :class:`~streamanon.pipeline.file_outputs.OutputSet`, as the CLI does, to keep such a
    partial output from replacing anything). ``rejects_name`` is the rejects file's name in
    messages.

    Args:
        source: a file, or a TCP server (:class:`~streamanon.flink.runtime.Endpoint`) sending lines.
        output: the file of the published rows (``-``: stdout).
        z: the z of z-anonymity.
        delta_t: the window Δt in seconds.
        options: how to run the job (``None``: the defaults).
        in_format: the input format (``csv`` or ``jsonl``; ``None``: from the name).
        out_format: the output format (``None``: from the name).
        on_error: ``fail`` raises at the first bad record; ``skip`` rejects it and goes on.
        rejects_path: where rejected records go (``None``: nowhere).
        rejects_name: the rejects file's name in messages (when ``rejects_path`` is temporary).
        time_tolerance: seconds a time may go backwards before a record is refused.
        snapshot_every: records between snapshots of a key group's state (``None``: the default).
    """
    options = (options or JobOptions()).batched(Z_BATCH_SIZE)
    assert options.batch_size
    fmt = detect_format(None if isinstance(source, Endpoint) else source, in_format)
    if not isinstance(source, Endpoint):
        check_header(source, fmt)
    out_fmt = out_format or detect_format(None if str(output) == "-" else output)
    with work_folder(options) as work:
        prepare_python_path()  # before the JVM starts (route_keys asks it)
        preload = preload_client_imports(options.mode)
        record = RunRecord.settle(
            work, file_record("z", source, options.batch_size, Z_KEY_GROUPS,
                              options.parallelism), options.restore_from is not None)
        preload.join()
        env = make_env(**options.env_settings(work, record))
        parts = work / "parts"
        show = wants_progress(source, options)
        progress_file = work / "progress"
        parser = z_parser(source, record, options, fmt=fmt, time_tolerance=time_tolerance)
        batches = batch_source(env, source, parser, record, options,
                               progress_path=str(progress_file) if show else None)
        build_z_job(batches, lambda stream: outcome_sink(stream, parts, options.release_to),
                    z=z, delta_t=delta_t, snapshot_every=snapshot_every)
        run = execute(env, f"streamanon z z={z} delta_t={delta_t:g}",
                      split_progress(progress_file) if show else None,
                      spinner=options.progress and sys.stderr.isatty())
        result = merge_outcomes(parts, output, out_format=out_fmt, on_error=on_error,
                                rejects_path=rejects_path, rejects_name=rejects_name,
                                source=str(source))
    stats = result.stats
    stats.params = {**_z_params(z, delta_t), "input": str(source),
                    "parallelism": options.parallelism, "mode": options.mode,
                    "batch_size": options.batch_size, "batch_ms": options.batch_ms}
    stats.details = {
        "released_per_level": {f"level_{i}": n for i, n in enumerate(result.published_per_level)},
        "publication_ratio": stats.released / max(1, stats.read - stats.rejected),
        "restamped": result.restamped,
        **run.details(stats.read),
    }
    if result.first_error is not None:
        raise result.first_error
    return result


def _z_params(z: int, delta_t: float) -> dict[str, Any]:
    """The job's z parameters as the summaries list them (those of ``streamanon z``)."""
    return listed_params(ZAnonymizer(z=z, delta_t=delta_t), omit=Z_UNLISTED)


def run_z_kafka_job(source: KafkaInput, out: KafkaOutput, *, z: int, delta_t: float,
                    options: JobOptions | None = None, in_format: str = "csv",
                    time_tolerance: float = 0.0,
                    snapshot_every: int | None = None) -> KafkaRunResult:
    """``streamanon flink z`` from a topic to topics (see :mod:`.kafka_connector`).

    Args:
        source: the input topic and how to read it.
        out: the output topics and how to write them.
        z: the z of z-anonymity.
        delta_t: the window Δt in seconds.
        options: how to run the job (``None``: the defaults).
        in_format: the messages' format (``csv`` or ``jsonl``).
        time_tolerance: seconds a time may go backwards before a record is refused.
        snapshot_every: records between snapshots of a key group's state (``None``: the default).
    """
    options = (options or JobOptions()).batched(Z_BATCH_SIZE)
    out.operator = "z"
    out.layout = Z_STATE_LAYOUT
    prepare_endpoints(source, out)
    with work_folder(options) as work:
        prepare_python_path()
        preload = preload_client_imports(options.mode)
        record = kafka_record(work, "z", source, Z_KEY_GROUPS, options)
        settle_output_base(work, out, options.restore_from is not None)
        preload.join()
        env = kafka_env(work, record, options)
        out.stats_path = str(work / "kafka-stats.json")
        # uncompressed batches: compressing and decompressing each one cost more CPU in the
        # interpreter lock the job's Python steps share than the bytes saved between tasks
        parser = z_parser(source, record, options, fmt=in_format,
                          time_tolerance=time_tolerance, codec=None)
        batches = kafka_batches(env, source, parser, record, options)
        # the operator step makes the output messages itself: no step between it and the gate
        messages = (
            keyed_rows(batches, Types.PICKLED_BYTE_ARRAY())
            .process(ZKeyGroupMessages(z, delta_t, SEPARATOR, snapshot_every or SNAPSHOT_EVERY,
                                       out), output_type=gated_type())
            .name(f"z-anonymity z={z} to messages (per key group)").uid("z-anonymity")
            .set_parallelism(options.parallelism))
        kafka_message_sink(messages, out, options)
        write_plan(env, work)
        run = execute(env, f"streamanon z z={z} delta_t={delta_t:g} (kafka)",
                      spinner=options.progress and sys.stderr.isatty())
        stats = RunStats(params={**_z_params(z, delta_t), "input": source.url,
                                 "output": out.published, "parallelism": options.parallelism,
                                 "mode": options.mode, "delivery": out.delivery})
        return kafka_result(stats, work, run)


__all__ = ["build_z_job", "check_header", "run_z_job", "run_z_kafka_job", "z_parser"]

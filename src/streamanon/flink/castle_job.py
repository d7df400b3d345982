"""The CASTLE job on Flink, from a file or TCP server and from a topic (``flink`` extra).

Design: docs/design/flink.md
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pyflink.common import Row as FlinkRow
from pyflink.common import Types

from streamanon.castle import RuleSet
from streamanon.errors import ConfigError, ResumeError, StreamanonError
from streamanon.flink.castle_partition import RULES, CastlePartition, ParseRules
from streamanon.flink.castle_rows import (
    RULES_FILE,
    RULES_LINE,
    CastleChunkParser,
    CastleMergeResult,
    check_rules,
    header_columns,
    merge_castle_outcomes,
)
from streamanon.flink.env import make_env, preload_client_imports, prepare_python_path
from streamanon.flink.functions import META
from streamanon.flink.kafka_connector import (
    CASTLE_STATE_LAYOUT,
    CastleMessages,
    KafkaInput,
    KafkaOutput,
    KafkaRunResult,
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
from streamanon.flink.runtime import (
    CASTLE_BATCH_SIZE,
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
    socket_lines,
    split_progress,
    wants_progress,
    work_folder,
)
from streamanon.io import OnError, detect_format
from streamanon.io.rows import RowReader
from streamanon.pipeline.stages import missing_details
from streamanon.records import RunStats


def numeric_columns(rules: RuleSet) -> list[str]:
    """The columns the rules read as numbers (range generalizers)."""
    return [r.name for r in rules.qi_rules
            if type(r.generalizer).__name__ == "RangeGeneralizer"]


def listed(params: dict[str, Any]) -> dict[str, Any]:
    """The CASTLE parameters a job's summary lists: all but the t-closeness reference
    distribution (a table of counts; the checkpoint identity keeps it)."""
    return {k: v for k, v in params.items() if k not in ("reference", "t_hierarchy")}


def read_rules(rules_paths: Sequence[str | Path], params: dict[str, Any]
               ) -> tuple[list[str], RuleSet]:
    """The ``--rules`` files' texts and the first one's rule set; refused
    (:class:`~streamanon.errors.ConfigError`, naming the file) unless every partition can
    use each of them."""
    texts = [Path(p).read_text(encoding="utf-8") for p in rules_paths]
    if not texts:
        raise ConfigError("give at least one rules file")
    first = RuleSet.from_toml(texts[0])  # fail early on bad rules
    for text, path in zip(texts, rules_paths, strict=True):
        try:
            check_rules(text, first.id_field, params)
        except StreamanonError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    return texts, first


def castle_parser(source: str | Path | Endpoint | KafkaInput, rules_text: str,
                  record: RunRecord, *, fmt: str = "csv") -> CastleChunkParser:
    """The chunk parser of the reading step: one batch per partition of ``record``.

    Args:
        source: the input (its name in messages).
        rules_text: the TOML of the first rule set (its id field and numeric columns).
        record: the run's record (its partitions).
        fmt: the input format (``csv`` or ``jsonl``).
    """
    first = RuleSet.from_toml(rules_text)
    return CastleChunkParser(fmt, first.id_field, numeric_columns(first), record.key_groups,
                             str(source))


def build_castle_job(env: Any, rows: Any, sink: Callable[[Any], None], *,
                     rules_texts: list[str], params: dict[str, Any], columns: list[str],
                     fmt: str = "csv", snapshot_every: int | None = None,
                     rules_from: Endpoint | None = None, bad_rules: str = "skip",
                     kafka: KafkaOutput | None = None) -> None:
    """Add the rules' broadcast and the keyed CASTLE step after the reading step ``rows``
    (its rows and its side output :data:`~streamanon.flink.functions.META`); ``sink`` takes
    the outcomes. ``rules_texts`` (TOML), then the rule sets read from ``rules_from``, go on
    the broadcast stream; ``columns`` are the input's (empty when not known).

    Args:
        env: the Flink stream execution environment.
        rows: the reading step's output (keyed batches, META on the side).
        sink: called with the stream of outcome lines.
        rules_texts: the TOML of the ``--rules`` files, in order.
        params: the CASTLE parameters (k, l, delta, ...).
        columns: the input's columns (empty when not known).
        fmt: the input format (``csv`` or ``jsonl``).
        snapshot_every: rows between snapshots of a partition's state (``None``: the default).
        rules_from: a TCP server sending replacement rule sets (``None``: none).
        bad_rules: ``skip`` keeps the current rules when a rule set is refused; ``fail`` fails the
            job.
        kafka: a Kafka job's outputs: the CASTLE step makes the outcomes messages itself
            (:class:`~streamanon.flink.kafka_connector.CastleMessages`, after the reading step
            of :func:`~streamanon.flink.kafka_connector.kafka_batches`) and ``sink`` takes
            them (``None``: ``sink`` takes outcome lines, the reading step's included).
    """
    first = RuleSet.from_toml(rules_texts[0])
    tagged = Types.TUPLE([Types.INT(), Types.STRING()])
    keyed_message = Types.ROW([Types.INT(), tagged])
    messages = env.from_collection([FlinkRow(0, (RULES_FILE, t)) for t in rules_texts],
                                   type_info=keyed_message).name("rules files")
    if rules_from is not None:
        live = (socket_lines(env, rules_from)
                .map(lambda line: FlinkRow(0, (RULES_LINE, line)), output_type=keyed_message)
                .name("rule lines").set_parallelism(1))
        messages = messages.union(live)
    judged = (
        keyed_rows(messages, tagged)
        .process(ParseRules(len(rules_texts), first.id_field, params, columns, bad_rules),
                 output_type=Types.TUPLE([Types.INT(), Types.STRING()]))
        .name("check rules").uid("parse-rules").set_parallelism(1)
    )
    rules = judged.broadcast(RULES)
    step = (CastlePartition(params, fmt, columns, snapshot_every) if kafka is None
            else CastleMessages(params, fmt, columns, snapshot_every, kafka))
    outcomes = (
        keyed_rows(rows, Types.PICKLED_BYTE_ARRAY())
        .connect(rules)
        .process(step, output_type=Types.STRING() if kafka is None else gated_type())
        .name(f"CASTLE k={params['k']} l={params['l']} delta={params['delta']} "
              f"(per partition{'' if kafka is None else ', to messages'})")
        .uid("castle")
    )
    if kafka is not None:
        sink(outcomes)
        # the rule sets' notes are not messages; a side output no step takes would reach
        # PyFlink's output converter as a main output (OutputTag, note) and fail the job
        from pyflink.java_gateway import get_gateway

        side_output(judged, META)._j_data_stream.sinkTo(
            get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
        ).name("rule notes")
    else:
        sink(outcomes.union(side_output(rows, META), side_output(judged, META)))


def check_castle_head(source: str | Path, fmt: str, rules: RuleSet) -> None:
    """Fail early, with ``streamanon castle``'s message, on a file that is not text or whose
    header (CSV) lacks a column the rules need: the file's first lines through the same reader."""
    head = file_head(source)
    reader = RowReader(io.StringIO(head_lines(head)), fmt, on_error=OnError.skip,
                       rejects=lambda _: None, numeric=numeric_columns(rules),
                       required=rules.required_columns, source_name=str(source))
    for _ in reader:
        break


def run_castle_job(
    source: str | Path | Endpoint,
    output: str | Path,
    *,
    rules_paths: list[str | Path],
    params: dict[str, Any],
    options: JobOptions | None = None,
    partitions: int | None = None,
    in_format: str | None = None,
    out_format: str | None = None,
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    rejects_name: str | None = None,
    snapshot_every: int | None = None,
    rules_from: Endpoint | None = None,
    bad_rules: str = "skip",
) -> CastleMergeResult:
    """Run the CASTLE job to its end and merge the outcomes into ``output`` (rows in input
    order); returns the accounting. Raises :class:`~streamanon.io.InputError` under
    ``on_error=fail``.

    ``partitions`` defaults to the parallelism; a restored run keeps the partitions of the
    run it resumes (another number is refused: it would change what CASTLE releases).
    ``rules_from``: a TCP server sending replacement rule sets while the job runs (each
    ended by a line ``%%``); the job then also waits for it to close.

    Args:
        source: a file, or a TCP server (:class:`~streamanon.flink.runtime.Endpoint`) sending lines.
        output: the file of the released rows (``-``: stdout).
        rules_paths: the rules files (TOML), in order.
        params: the CASTLE parameters (k, l, delta, ...).
        options: how to run the job (``None``: the defaults).
        partitions: the number of CASTLE partitions (``None``: the parallelism).
        in_format: the input format (``csv`` or ``jsonl``; ``None``: from the name).
        out_format: the output format (``None``: from the name).
        on_error: ``fail`` raises at the first bad row; ``skip`` rejects it and goes on.
        rejects_path: where rejected rows go (``None``: nowhere).
        rejects_name: the rejects file's name in messages (when ``rejects_path`` is temporary).
        snapshot_every: rows between snapshots of a partition's state (``None``: the default).
        rules_from: a TCP server sending replacement rule sets (``None``: none).
        bad_rules: ``skip`` keeps the current rules when a rule set is refused; ``fail`` fails the
            job.
    """
    options = (options or JobOptions()).batched(CASTLE_BATCH_SIZE)
    assert options.batch_size
    texts, first = read_rules(rules_paths, params)
    fmt = detect_format(None if isinstance(source, Endpoint) else source, in_format)
    if not isinstance(source, Endpoint):
        check_castle_head(source, fmt, first)
    out_fmt = out_format or detect_format(None if str(output) == "-" else output)
    with work_folder(options) as work:
        restoring = options.restore_from is not None
        prepare_python_path()  # before the JVM starts (route_keys asks it)
        preload = preload_client_imports(options.mode)
        record = RunRecord.settle(
            work, file_record("castle", source, options.batch_size,
                              partitions or options.parallelism, options.parallelism),
            restoring)
        if restoring and partitions is not None and partitions != record.key_groups:
            raise ResumeError(f"--partitions {partitions}: the run being restored has "
                              f"{record.key_groups} partitions (they fix what CASTLE "
                              "releases)")
        preload.join()
        env = make_env(**options.env_settings(work, record))
        show = wants_progress(source, options)
        progress_file = work / "progress"
        columns = header_columns(source) if fmt == "csv" and not isinstance(source, Endpoint) \
            else []
        parser = castle_parser(source, texts[0], record, fmt=fmt)
        rows = batch_source(env, source, parser, record, options,
                            progress_path=str(progress_file) if show else None)
        parts = work / "parts"
        build_castle_job(env, rows, lambda stream: outcome_sink(stream, parts,
                                                                options.release_to),
                         rules_texts=texts, params=params, columns=columns, fmt=fmt,
                         snapshot_every=snapshot_every, rules_from=rules_from,
                         bad_rules=bad_rules)
        run = execute(env, f"streamanon castle k={params['k']} l={params['l']} "
                           f"delta={params['delta']}",
                      split_progress(progress_file) if show else None,
                      spinner=options.progress and sys.stderr.isatty())
        result = merge_castle_outcomes(parts, output, out_format=out_fmt,
                                       on_error=on_error, rejects_path=rejects_path,
                                       rejects_name=rejects_name, source=str(source))
    stats = result.stats
    stats.params = {**listed(params), "input": str(source), "partitions": record.key_groups,
                    "parallelism": options.parallelism, "mode": options.mode,
                    "batch_size": options.batch_size, "batch_ms": options.batch_ms}
    stats.details = {
        "suppressed_by_reason": result.suppressed_by_reason,
        **missing_details(params.get("missing", "reject"), result.suppressed_by_reason),
        "mean_cluster_loss": round(result.mean_cluster_loss, 6),
        **run.details(stats.read),
    }
    if result.first_error is not None:
        raise result.first_error
    return result


def run_castle_kafka_job(source: KafkaInput, out: KafkaOutput, *,
                         rules_paths: list[str | Path], params: dict[str, Any],
                         options: JobOptions | None = None, partitions: int | None = None,
                         in_format: str = "csv",
                         snapshot_every: int | None = None) -> KafkaRunResult:
    """``streamanon flink castle`` from a topic to topics (see :mod:`.kafka_connector`).

    Args:
        source: the input topic and how to read it.
        out: the output topics and how to write them.
        rules_paths: the rules files (TOML), in order.
        params: the CASTLE parameters (k, l, delta, ...).
        options: how to run the job (``None``: the defaults).
        partitions: the number of CASTLE partitions (``None``: the parallelism).
        in_format: the messages' format (``csv`` or ``jsonl``).
        snapshot_every: rows between snapshots of a partition's state (``None``: the default).
    """
    options = (options or JobOptions()).batched(CASTLE_BATCH_SIZE)
    texts, _ = read_rules(rules_paths, params)
    out.operator = "castle"
    out.layout = CASTLE_STATE_LAYOUT
    out.columns = list(source.columns or [])
    out.loss_field = params.get("loss_field")
    prepare_endpoints(source, out)
    with work_folder(options) as work:
        prepare_python_path()
        preload = preload_client_imports(options.mode)
        record = kafka_record(work, "castle", source, partitions or options.parallelism,
                              options)
        settle_output_base(work, out, options.restore_from is not None)
        preload.join()
        env = kafka_env(work, record, options)
        out.stats_path = str(work / "kafka-stats.json")
        parser = castle_parser(source, texts[0], record, fmt=in_format)
        rows = kafka_batches(env, source, parser, record, options)
        build_castle_job(env, rows, lambda stream: kafka_message_sink(stream, out, options),
                         rules_texts=texts, params=params,
                         columns=list(source.columns or []), fmt=in_format,
                         snapshot_every=snapshot_every, kafka=out)
        if options.work_dir is not None:  # (a temporary work folder goes with the run)
            write_plan(env, work)
        run = execute(env, f"streamanon castle k={params['k']} l={params['l']} "
                           f"delta={params['delta']} (kafka)",
                      spinner=options.progress and sys.stderr.isatty())
        stats = RunStats(params={**listed(params), "input": source.url,
                                 "output": out.published,
                                 "partitions": record.key_groups,
                                 "parallelism": options.parallelism, "mode": options.mode,
                                 "delivery": out.delivery})
        return kafka_result(stats, work, run)


__all__ = ["build_castle_job", "castle_parser", "check_castle_head", "read_rules",
           "run_castle_job", "run_castle_kafka_job"]

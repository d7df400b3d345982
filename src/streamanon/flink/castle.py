"""CASTLE on Flink: a keyed broadcast operator over partitions of the individuals (``flink``
extra).

::

    file split numbers -> ReadSplits | TCP lines -> BatchLines (one key, parallelism 1)
      -> (partition, batch of rows), partition = crc32(id) mod partitions
      -> keyed by partition --connect-- rules (broadcast stream)
      -> CastlePartition (parallelism p): one CastleAnonymizer per partition, a batch per call
      -> outcome lines (+ meta) -> FileSink (exactly-once part files) -> merged -o file

    rules: --rules files + lines of --rules-from tcp://HOST:PORT (parallelism 1)
      -> ParseRules (one key, parallelism 1): frame, check, number; refusals -> notes
      -> (version, TOML) broadcast

k (and l) hold per partition, because all tuples of one individual are in one partition and
each partition's operator is the CASTLE core itself; δ counts positions within a partition.

Rules arrive on a broadcast stream (every ``--rules`` file in order: version 1, 2, ...; then
every rule set of the live ``--rules-from`` connection, each ended by a line ``%%``) and are
kept in Flink's broadcast state. :class:`ParseRules` checks each rule set whole before it is
broadcast (:func:`~streamanon.flink.castle_rows.check_rules`): a bad one is refused with its
reason as a note in the outcome stream (or fails the job, ``bad_rules="fail"``), never
applied in part. A partition applies the newest version before its next batch
(``CastleAnonymizer.set_rules``: open clusters keep their rules), from a fresh ``RuleSet`` of
its own (rule sets carry run-time state); each subtask notes when it installed a version.
Tuples that arrive before any rules are held and counted, not dropped (Prink drops them).
With ``--rules-from`` the job ends when the input *and* the rules connection have closed.

The partitions are the key groups: each has its own operator and its own Flink state, so a
job restored at another parallelism moves whole partitions between subtasks; the number of
partitions is fixed for a run (it decides what is released).

State. A partition's operator holds clusters, τ, Ω, adaptive domains and hierarchies, so a
``ValueState`` re-pickled on every batch would cost O(state) per batch. Flink state holds a
*snapshot* of the pickled operator plus a *redo log* of what happened since (batches of rows
as received, rule changes): one ``ListState`` append per batch, and a new snapshot once the
log holds 16 times as many rows as the operator holds tuples, at least
:attr:`CastlePartition.SNAPSHOT_EVERY` (δ and β bound what is held, so the log is bounded and
the snapshots cost a fraction of a row per row; ``snapshot_every`` fixes the number instead).
The operator is deterministic, so snapshot + replay of the log rebuilds exactly the operator
of the checkpoint (outputs of the replay were emitted before the checkpoint and are
dropped). The end of a bounded input fires an
event-time timer at the maximal watermark, which flushes the held tuples.
"""

from __future__ import annotations

import contextlib
import io
import logging
import pickle
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyflink.common import Row as FlinkRow
from pyflink.common import Types
from pyflink.datastream import KeyedBroadcastProcessFunction, KeyedProcessFunction
from pyflink.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.castle.records import CastleRow
from streamanon.flink.castle_rows import (
    RULES_FILE,
    RULES_LINE,
    CastleChunkParser,
    CastleMergeResult,
    RulesInbox,
    check_rules,
    header_columns,
    merge_castle_outcomes,
    outcome_items,
    refused_line,
    rows_of,
)
from streamanon.flink.env import make_env, prepare_python_path
from streamanon.flink.functions import END_OF_INPUT, META
from streamanon.flink.job import (
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
from streamanon.flink.outcomes import castle_batch_line, note_line
from streamanon.io import OnError, detect_format
from streamanon.io.rows import RowReader

RULES = MapStateDescriptor("rules", Types.INT(), Types.STRING())
log = logging.getLogger(__name__)


def subtask_index(runtime_context: Any) -> int:
    """This subtask's index. PyFlink 2.3's thread mode asks the Java context for
    ``getIndexOfThisSubtask``, which Flink 2 moved to ``getTaskInfo()``; ask there."""
    j_context = getattr(runtime_context, "_runtime_context", None)
    if j_context is not None:
        return int(j_context.getTaskInfo().getIndexOfThisSubtask())
    return int(runtime_context.get_index_of_this_subtask())


class ParseRules(KeyedProcessFunction):
    """``(RULES_FILE, text)`` / ``(RULES_LINE, line)`` in, ``(version, TOML)`` out for the
    broadcast; every judgement also goes to META as a note. One instance, so versions are
    numbered once for all partitions."""

    def __init__(self, files: int, id_field: str, params: dict[str, Any],
                 columns: list[str], bad_rules: str = "skip") -> None:
        if bad_rules not in ("skip", "fail"):
            raise ValueError("bad_rules must be skip or fail")
        self.args = (files, id_field, params, columns)
        self.bad_rules = bad_rules

    def open(self, runtime_context: Any) -> None:
        self._state = runtime_context.get_state(
            ValueStateDescriptor("rules-inbox", Types.PICKLED_BYTE_ARRAY()))

    def _inbox(self) -> RulesInbox:
        inbox = RulesInbox(*self.args)
        saved = self._state.value()
        if saved is not None:
            inbox.restore(saved)
        return inbox

    def _emit(self, judged: list[tuple[dict, str | None]]) -> Iterator[Any]:
        for note, text in judged:
            if text is None:
                log.warning("rule set %s refused: %s", note["message"], note["reason"])
                if self.bad_rules == "fail":
                    raise ValueError(f"rule set {note['message']} ({note['from']}) refused: "
                                     f"{note['reason']}")
            yield META, note_line(note)
            if text is not None:
                yield note["version"], text

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        inbox = self._inbox()
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)  # once: same timestamp
        judged = inbox.feed(value[0], value[1])
        self._state.update(inbox.state())
        yield from self._emit(judged)

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        inbox = self._inbox()
        judged = inbox.finish()
        self._state.update(inbox.state())
        yield from self._emit(judged)


class CastlePartition(KeyedBroadcastProcessFunction):
    """One :class:`CastleAnonymizer` per partition (the key), its state as snapshot + redo log;
    a batch of rows in, the batch's outcomes out as one text: the refused rows' lines and one
    :func:`~streamanon.flink.outcomes.castle_batch_line` of what was released and
    suppressed."""

    SNAPSHOT_EVERY = 2000
    REPLAY_RATIO = 16

    def __init__(self, params: dict[str, Any], fmt: str, columns: list[str],
                 snapshot_every: int | None = None) -> None:
        CastleAnonymizer(None, **params)  # validate the parameters on the client
        self.params, self.fmt, self.columns = params, fmt, columns
        self.snapshot_every = max(1, int(snapshot_every)) if snapshot_every else None

    def open(self, runtime_context: Any) -> None:
        self._snapshot = runtime_context.get_state(
            ValueStateDescriptor("snapshot", Types.PICKLED_BYTE_ARRAY()))
        self._log = runtime_context.get_list_state(
            ListStateDescriptor("redo", Types.PICKLED_BYTE_ARRAY()))
        self._subtask = subtask_index(runtime_context)
        # partition -> [operator, applied rules version, rows in the log]
        self._ops: dict[int, list[Any]] = {}
        self._rules: dict[int, str] = {}  # version -> TOML text
        self._latest = -1  # unknown until the broadcast state is read
        # the compiled best selection, loaded now rather than at the first tuple (numba's
        # import and cache load: 0.39-0.46 s measured in the job, on the first batch's path
        # either way: the embedded interpreter's work is serial under the GIL, and loading
        # it in a thread measured no gain)
        from streamanon.castle import cluster

        warm = getattr(cluster, "_load_kernel", None)
        if warm is not None:
            warm()

    # -- rules ---------------------------------------------------------------------------------
    def process_broadcast_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        version, text = value
        ctx.get_broadcast_state(RULES).put(version, text)
        self._rules[version] = text
        self._latest = max(self._latest, version)
        # from now on every batch of this subtask's partitions meets this version (or newer)
        yield note_line({"event": "installed", "version": version, "subtask": self._subtask})

    def _rules_of(self, ctx: Any, version: int) -> RuleSet:
        """A fresh rule set of ``version`` for one partition: rule sets carry run-time state
        (adaptive domains, growing hierarchies), so partitions must not share one."""
        text = self._rules.get(version)
        if text is None:
            text = self._rules[version] = ctx.get_broadcast_state(RULES).get(version)
        return RuleSet.from_toml(text)

    def _latest_version(self, ctx: Any) -> int:
        if self._latest < 0:
            self._latest = max((k for k, _ in ctx.get_broadcast_state(RULES).items()),
                               default=0)
        return self._latest

    # -- the partition's operator ------------------------------------------------------------------
    def _entry(self, ctx: Any) -> list[Any]:
        key = ctx.get_current_key()
        entry = self._ops.get(key)
        if entry is not None:
            return entry
        saved = self._snapshot.value()
        op, version = pickle.loads(saved) if saved is not None else (
            CastleAnonymizer(None, **self.params), 0)
        rows = 0
        for event in self._log.get() or ():
            if event[0] == "rules":
                version = event[1]
                op.set_rules(self._rules_of(ctx, version))
            else:
                batch = rows_of(event[1])
                rows += len(batch)
                for seq, values in batch:
                    with contextlib.suppress(ValueError):  # refused then too, reported then
                        op.process(CastleRow(values, seq))
        entry = self._ops[key] = [op, version, rows]
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        return entry

    def _log_event(self, entry: list[Any], event: tuple, rows: int = 0) -> None:
        entry[2] += rows
        # a snapshot costs about as much as replaying a few rows per tuple held: taken once
        # the log holds REPLAY_RATIO times as many rows as are held, it costs a fraction of
        # a row per row, and a restore replays at most that many rows
        every = self.snapshot_every or max(self.SNAPSHOT_EVERY,
                                           self.REPLAY_RATIO * entry[0].held)
        if entry[2] >= every:
            self._snapshot.update(pickle.dumps((entry[0], entry[1]),
                                               protocol=pickle.HIGHEST_PROTOCOL))
            self._log.clear()
            entry[2] = 0
        else:
            self._log.add(event)

    def _apply_rules(self, entry: list[Any], ctx: Any) -> list[Any]:
        latest = self._latest_version(ctx)
        if latest <= entry[1]:
            return []
        out = entry[0].set_rules(self._rules_of(ctx, latest))
        entry[1] = latest
        self._log_event(entry, ("rules", latest))
        return out

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        _, data = value
        entry = self._entry(ctx)
        op = entry[0]
        out = self._apply_rules(entry, ctx)
        lines: list[str] = []
        batch = rows_of(data)
        for seq, values in batch:
            try:
                out += op.process(CastleRow(values, seq))
            except ValueError as exc:
                lines.append(refused_line(seq, values, self.fmt, self.columns, str(exc)))
        self._log_event(entry, ("rows", data), len(batch))
        if out:
            lines.append(castle_batch_line(outcome_items(out)))
        if lines:
            yield "\n".join(lines)

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        entry = self._entry(ctx)
        out = self._apply_rules(entry, ctx)
        out += entry[0].flush()
        if out:
            yield castle_batch_line(outcome_items(out))


def build_castle_job(env: Any, source: str | Path | Endpoint, out_dir: Path,
                     rules_texts: list[str], params: dict[str, Any], record: RunRecord,
                     options: JobOptions, *, fmt: str = "csv",
                     snapshot_every: int | None = None,
                     rules_from: Endpoint | None = None, bad_rules: str = "skip",
                     progress_path: str | None = None) -> None:
    """Add the CASTLE pipeline to ``env``; ``rules_texts`` (TOML), then the rule sets read
    from ``rules_from``, go on the broadcast stream. ``record.key_groups`` is the number of
    partitions."""
    first = RuleSet.from_toml(rules_texts[0])
    numeric = [r.name for r in first.qi_rules
               if type(r.generalizer).__name__ == "RangeGeneralizer"]
    from streamanon.flink.kafka import KafkaInput

    if isinstance(source, KafkaInput):
        columns = list(source.columns or [])
    else:
        columns = header_columns(source) if fmt == "csv" and not isinstance(source, Endpoint) \
            else []
    parser = CastleChunkParser(fmt, first.id_field, numeric, record.key_groups, str(source))
    rows = batch_source(env, source, parser, record, options, progress_path)
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
    outcomes = (
        keyed_rows(rows, Types.PICKLED_BYTE_ARRAY())
        .connect(rules)
        .process(CastlePartition(params, fmt, columns, snapshot_every),
                 output_type=Types.STRING())
        .name(f"CASTLE k={params['k']} l={params['l']} delta={params['delta']} "
              "(per partition)")
        .uid("castle")
    )
    outcome_sink(outcomes.union(side_output(rows, META), side_output(judged, META)),
                 out_dir, options.release_to)


def check_castle_head(source: str | Path, fmt: str, rules: RuleSet) -> None:
    """Fail early, with ``streamanon castle``'s message, on a file that is not text or whose
    header (CSV) lacks the rules' id column: the file's first lines through the same reader."""
    head = file_head(source)
    numeric = [r.name for r in rules.qi_rules
               if type(r.generalizer).__name__ == "RangeGeneralizer"]
    reader = RowReader(io.StringIO(head_lines(head)), fmt, on_error=OnError.skip,
                       rejects=lambda _: None, numeric=numeric, required=[rules.id_field],
                       source_name=str(source))
    for _ in reader:
        break


def run_castle_job(
    source: str | Path | Endpoint,
    output: str | Path,
    rules_paths: list[str | Path],
    params: dict[str, Any],
    options: JobOptions | None = None,
    *,
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
    ended by a line ``%%``); the job then also waits for it to close."""
    options = replace(options or JobOptions())
    options.batch_size = options.batch_size or CASTLE_BATCH_SIZE
    texts = [Path(p).read_text(encoding="utf-8") for p in rules_paths]
    if not texts:
        raise ValueError("give at least one rules file")
    first = RuleSet.from_toml(texts[0])  # fail early on bad rules
    for text, path in zip(texts, rules_paths, strict=True):
        try:
            check_rules(text, first.id_field, params)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    fmt = detect_format(None if isinstance(source, Endpoint) else source, in_format)
    if not isinstance(source, Endpoint):
        check_castle_head(source, fmt, first)
    out_fmt = out_format or detect_format(None if str(output) == "-" else output)
    with work_folder(options) as work:
        restoring = options.restore_from is not None
        prepare_python_path()  # before the JVM starts (route_keys asks it)
        record = RunRecord.settle(
            work, file_record("castle", source, options.batch_size,
                              partitions or options.parallelism, options.parallelism),
            restoring)
        if restoring and partitions is not None and partitions != record.key_groups:
            raise ValueError(f"--partitions {partitions}: the run being restored has "
                             f"{record.key_groups} partitions (they fix what CASTLE releases)")
        env = make_env(**options.env_settings(work, record))
        show = wants_progress(source, options)
        progress_file = work / "progress"
        build_castle_job(env, source, work / "parts", texts, params, record, options,
                         fmt=fmt, snapshot_every=snapshot_every, rules_from=rules_from,
                         bad_rules=bad_rules,
                         progress_path=str(progress_file) if show else None)
        run = execute(env, f"streamanon castle k={params['k']} l={params['l']} "
                           f"delta={params['delta']}",
                      split_progress(progress_file) if show else None,
                      spinner=options.progress and sys.stderr.isatty())
        result = merge_castle_outcomes(work / "parts", output, out_format=out_fmt,
                                       on_error=on_error, rejects_path=rejects_path,
                                       rejects_name=rejects_name, source=str(source))
    stats = result.stats
    stats.params = {**params, "input": str(source), "partitions": record.key_groups,
                    "parallelism": options.parallelism, "mode": options.mode,
                    "batch_size": options.batch_size, "batch_ms": options.batch_ms}
    stats.details = {
        "suppressed_by_reason": result.suppressed_by_reason,
        "mean_cluster_loss": round(result.mean_cluster_loss, 6),
        "job_seconds": round(run.net_seconds, 3),
        "tuples_per_second": round(stats.read / run.net_seconds) if run.net_seconds > 0
        else None,
        "submit_and_run_seconds": round(run.wall_seconds, 3),
    }
    if result.first_error is not None:
        raise result.first_error
    return result

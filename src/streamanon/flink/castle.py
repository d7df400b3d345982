"""CASTLE on Flink: a keyed broadcast operator over partitions of the individuals (``flink``
extra).

::

    lines (FileSource or TCP, parallelism 1) -> ParseRows (one key, parallelism 1)
      -> key by crc32(id) mod partitions --connect-- rules (broadcast stream)
      -> CastlePartition (parallelism p): one CastleAnonymizer per partition
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
applied in part. A partition applies the newest version before its next tuple
(``CastleAnonymizer.set_rules``: open clusters keep their rules), from a fresh ``RuleSet`` of
its own (rule sets carry run-time state); each subtask notes when it installed a version.
Tuples that arrive before any rules are held and counted, not dropped (Prink drops them).
With ``--rules-from`` the job ends when the input *and* the rules connection have closed.

State. A partition's operator holds clusters, τ, Ω, adaptive domains and hierarchies, so a
``ValueState`` re-pickled on every tuple would cost O(state) per tuple. Flink state holds a
*snapshot* of the pickled operator plus a *redo log* of what happened since (rows, rule
changes): one ``ListState`` append per tuple, and a new snapshot every ``snapshot_every``
(:attr:`CastlePartition.SNAPSHOT_EVERY`) entries. The operator is deterministic, so snapshot
+ replay of the log rebuilds exactly the operator of the checkpoint (outputs of the replay
were emitted before the checkpoint and are dropped). The end of a bounded input fires an
event-time timer at the maximal watermark, which flushes the held tuples.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyflink.common import Types
from pyflink.datastream import KeyedBroadcastProcessFunction, KeyedProcessFunction, OutputTag
from pyflink.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.castle.cluster import Row
from streamanon.flink.castle_rows import (
    RULES_FILE,
    RULES_LINE,
    CastleMergeResult,
    RowLineParser,
    RulesInbox,
    check_rules,
    header_columns,
    merge_castle_outcomes,
    outcome_lines,
    refused_line,
)
from streamanon.flink.env import make_env, prepare_python_path
from streamanon.flink.job import Endpoint, JobOptions, line_source, outcome_sink
from streamanon.flink.outcomes import note_line
from streamanon.io import InputError, OnError, detect_format
from streamanon.records import Rejected

META = OutputTag("castle-meta", Types.STRING())
RULES = MapStateDescriptor("rules", Types.INT(), Types.STRING())
END_OF_INPUT = 2**63 - 2  # an event-time timer here fires on the final (maximal) watermark
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


class ParseRows(KeyedProcessFunction):
    """Lines in, ``(partition, seq, values)`` out; header, blank and refused lines to META."""

    def __init__(self, fmt: str, id_field: str, numeric: list[str], partitions: int,
                 source_name: str, pace: float = 0.0) -> None:
        self.args = (fmt, id_field, numeric, partitions, source_name)
        self.pace = pace

    def open(self, runtime_context: Any) -> None:
        self._state = runtime_context.get_state(
            ValueStateDescriptor("parser", Types.PICKLED_BYTE_ARRAY()))
        self._parser: RowLineParser | None = None

    def process_element(self, line: str, ctx: Any):  # type: ignore[override]
        parser = self._parser
        if parser is None:
            parser = self._parser = RowLineParser(*self.args)
            saved = self._state.value()
            if saved is not None:
                parser.restore(saved)
        if self.pace:
            time.sleep(self.pace)
        meta, row = parser.feed(line)
        self._state.update(parser.state())
        for text in meta:
            yield META, text
        if row is not None:
            yield row


class CastlePartition(KeyedBroadcastProcessFunction):
    """One :class:`CastleAnonymizer` per partition (the key), its state as snapshot + redo log."""

    SNAPSHOT_EVERY = 2000

    def __init__(self, params: dict[str, Any], fmt: str, columns: list[str],
                 snapshot_every: int = SNAPSHOT_EVERY) -> None:
        CastleAnonymizer(None, **params)  # validate the parameters on the client
        self.params, self.fmt, self.columns = params, fmt, columns
        self.snapshot_every = max(1, int(snapshot_every))

    def open(self, runtime_context: Any) -> None:
        self._snapshot = runtime_context.get_state(
            ValueStateDescriptor("snapshot", Types.PICKLED_BYTE_ARRAY()))
        self._log = runtime_context.get_list_state(
            ListStateDescriptor("redo", Types.PICKLED_BYTE_ARRAY()))
        self._subtask = subtask_index(runtime_context)
        # partition -> [operator, applied rules version, log length]
        self._ops: dict[int, list[Any]] = {}
        self._rules: dict[int, str] = {}  # version -> TOML text
        self._latest = -1  # unknown until the broadcast state is read

    # -- rules ---------------------------------------------------------------------------------
    def process_broadcast_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        version, text = value
        ctx.get_broadcast_state(RULES).put(version, text)
        self._rules[version] = text
        self._latest = max(self._latest, version)
        # from now on every tuple of this subtask's partitions meets this version (or newer)
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
        n = 0
        for event in self._log.get() or ():
            n += 1
            if event[0] == "rules":
                version = event[1]
                op.set_rules(self._rules_of(ctx, version))
            else:
                with contextlib.suppress(ValueError):  # refused then too, reported then
                    op.process(Row(event[2], event[1]))
        entry = self._ops[key] = [op, version, n]
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        return entry

    def _log_event(self, entry: list[Any], event: tuple) -> None:
        self._log.add(event)
        entry[2] += 1
        if entry[2] >= self.snapshot_every:
            self._snapshot.update(pickle.dumps((entry[0], entry[1]),
                                               protocol=pickle.HIGHEST_PROTOCOL))
            self._log.clear()
            entry[2] = 0

    def _apply_rules(self, entry: list[Any], ctx: Any) -> list[Any]:
        latest = self._latest_version(ctx)
        if latest <= entry[1]:
            return []
        out = entry[0].set_rules(self._rules_of(ctx, latest))
        entry[1] = latest
        self._log_event(entry, ("rules", latest))
        return out

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        _, seq, values = value
        entry = self._entry(ctx)
        out = self._apply_rules(entry, ctx)
        try:
            out = out + entry[0].process(Row(values, seq))
        except ValueError as exc:
            yield refused_line(seq, values, self.fmt, self.columns, str(exc))
        else:
            self._log_event(entry, ("row", seq, values))
        yield from outcome_lines(out)

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        entry = self._entry(ctx)
        out = self._apply_rules(entry, ctx)
        yield from outcome_lines(out + entry[0].flush())


def build_castle_job(env: Any, source: str | Path | Endpoint, out_dir: Path,
                     rules_texts: list[str], params: dict[str, Any], *, partitions: int,
                     fmt: str = "csv", pace: float = 0.0,
                     release_to: Endpoint | None = None,
                     snapshot_every: int = CastlePartition.SNAPSHOT_EVERY,
                     rules_from: Endpoint | None = None, bad_rules: str = "skip") -> None:
    """Add the CASTLE pipeline to ``env``; ``rules_texts`` (TOML), then the rule sets read
    from ``rules_from``, go on the broadcast stream."""
    first = RuleSet.from_toml(rules_texts[0])
    numeric = [r.name for r in first.qi_rules
               if type(r.generalizer).__name__ == "RangeGeneralizer"]
    columns = header_columns(source) if fmt == "csv" and not isinstance(source, Endpoint) \
        else []
    lines = line_source(env, source)
    rows = (
        lines.key_by(lambda _: 0, key_type=Types.INT())
        .process(ParseRows(fmt, first.id_field, numeric, partitions, str(source), pace))
        .name("parse rows").uid("parse-rows").set_parallelism(1)
    )
    tagged = Types.TUPLE([Types.INT(), Types.STRING()])
    messages = env.from_collection([(RULES_FILE, t) for t in rules_texts],
                                   type_info=tagged).set_parallelism(1).name("rules files")
    if rules_from is not None:
        live = line_source(env, rules_from).map(lambda line: (RULES_LINE, line),
                                                output_type=tagged).set_parallelism(1)
        messages = messages.union(live)
    judged = (
        messages.key_by(lambda _: 0, key_type=Types.INT())
        .process(ParseRules(len(rules_texts), first.id_field, params, columns, bad_rules),
                 output_type=Types.TUPLE([Types.INT(), Types.STRING()]))
        .name("check rules").uid("parse-rules").set_parallelism(1)
    )
    rules = judged.broadcast(RULES)
    outcomes = (
        rows.key_by(lambda r: r[0], key_type=Types.INT())
        .connect(rules)
        .process(CastlePartition(params, fmt, columns, snapshot_every),
                 output_type=Types.STRING())
        .name(f"CASTLE k={params['k']} l={params['l']} delta={params['delta']}")
        .uid("castle")
    )
    outcome_sink(outcomes.union(rows.get_side_output(META), judged.get_side_output(META)),
                 out_dir, release_to)


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
    snapshot_every: int = CastlePartition.SNAPSHOT_EVERY,
    rules_from: Endpoint | None = None,
    bad_rules: str = "skip",
) -> CastleMergeResult:
    """Run the CASTLE job to its end and merge the outcomes into ``output`` (rows in input
    order); returns the accounting. Raises :class:`InputError` under ``on_error=fail``.

    ``rules_from``: a TCP server sending replacement rule sets while the job runs (each
    ended by a line ``%%``); the job then also waits for it to close."""
    options = options or JobOptions()
    partitions = partitions or options.parallelism
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
    if fmt == "csv" and not isinstance(source, Endpoint):
        columns = header_columns(source)
        if first.id_field not in columns:
            raise InputError(Rejected(1, ",".join(columns),
                                      f"CSV header lacks column(s) {first.id_field}"),
                             str(source))
    out_fmt = detect_format(None if str(output) == "-" else output, out_format)
    own = options.work_dir is None
    work = Path(tempfile.mkdtemp(prefix="streamanon-flink-")) if own else Path(
        options.work_dir)  # type: ignore[arg-type]
    try:
        prepare_python_path()
        env = make_env(**options.env_settings(work))
        build_castle_job(env, source, work / "parts", texts, params, partitions=partitions,
                         fmt=fmt, pace=options.pace, release_to=options.release_to,
                         snapshot_every=snapshot_every, rules_from=rules_from,
                         bad_rules=bad_rules)
        start = time.perf_counter()
        env.execute(f"streamanon castle k={params['k']} l={params['l']} "
                    f"delta={params['delta']}")
        elapsed = time.perf_counter() - start
        result = merge_castle_outcomes(work / "parts", output, out_format=out_fmt,
                                       on_error=on_error, rejects_path=rejects_path,
                                       source=str(source))
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    stats = result.stats
    stats.params = {**params, "input": str(source), "partitions": partitions,
                    "parallelism": options.parallelism, "mode": options.mode}
    stats.details = {
        "suppressed_by_reason": result.suppressed_by_reason,
        "mean_cluster_loss": round(result.mean_cluster_loss, 6),
        "job_seconds": round(elapsed, 3),
        "tuples_per_second": round(stats.read / elapsed) if elapsed > 0 else None,
    }
    if result.first_error is not None:
        raise result.first_error
    return result

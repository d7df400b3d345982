"""The PyFlink functions of CASTLE on Flink: a keyed broadcast operator over partitions of the
individuals (``flink`` extra; the job is built and run by :mod:`.castle_job`).

Design: docs/design/flink.md
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyflink.common import Types
from pyflink.datastream import KeyedBroadcastProcessFunction, KeyedProcessFunction
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.errors import ConfigError
from streamanon.flink.castle_rows import RulesInbox, apply_batch, outcome_items, refused_row
from streamanon.flink.functions import END_OF_INPUT, META
from streamanon.flink.outcomes import castle_batch_line, note_line, rejected_line
from streamanon.flink.state import KeyedState

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
    numbered once for all partitions.

    Args:
        files: how many ``--rules`` texts come first (versions 1..files).
        id_field: the id column every rule set must name.
        params: the CASTLE parameters of the run (k, l, delta, ...).
        columns: the input's columns (empty when not known).
        bad_rules: ``skip`` keeps the current rules when a rule set is refused; ``fail`` fails the
            job.
    """

    def __init__(self, files: int, id_field: str, params: dict[str, Any],
                 columns: list[str], bad_rules: str = "skip") -> None:
        if bad_rules not in ("skip", "fail"):
            raise ConfigError("bad_rules must be skip or fail")
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
                    raise ConfigError(f"rule set {note['message']} ({note['from']}) refused: "
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


@dataclass
class Partition:
    """A partition's operator as this task holds it: the rules version it applies and the
    rows in its redo log."""

    op: CastleAnonymizer
    version: int = 0
    logged: int = 0
    #: the input's columns as the last batch of columns gave them (``None``: none yet)
    header: list[str] | None = None


class CastlePartition(KeyedBroadcastProcessFunction):
    """One :class:`CastleAnonymizer` per partition (the key), its state as snapshot + redo log;
    a batch of rows in, the batch's outcomes out as one text: the refused rows' lines and one
    :func:`~streamanon.flink.outcomes.castle_batch_line` of what was released and
    suppressed. (A Kafka job's step, which makes the outcomes messages itself, is
    :class:`~streamanon.flink.kafka_connector.CastleMessages`.)

    Args:
        params: the CASTLE parameters (k, l, delta, ...).
        fmt: the input format (``csv`` or ``jsonl``).
        columns: the input's columns (empty when not known).
        snapshot_every: rows between snapshots of a partition's state (``None``: the default).
    """

    SNAPSHOT_EVERY = 2000
    REPLAY_RATIO = 16

    def __init__(self, params: dict[str, Any], fmt: str, columns: list[str],
                 snapshot_every: int | None = None) -> None:
        CastleAnonymizer(None, **params)  # validate the parameters on the client
        self.params, self.fmt, self.columns = params, fmt, columns
        self.snapshot_every = max(1, int(snapshot_every)) if snapshot_every else None

    def open(self, runtime_context: Any) -> None:
        self._state = KeyedState.open(runtime_context)
        self._subtask = subtask_index(runtime_context)
        self._ops: dict[int, Partition] = {}
        self._rules: dict[int, str] = {}  # version -> TOML text
        self._latest = -1  # unknown until the broadcast state is read
        # the compiled best selection, loaded now rather than at the first tuple (numba's
        # import and cache load are on the first batch's path either way: the embedded
        # interpreter's work is serial under the GIL, so loading it in a thread gains nothing;
        # docs/design/flink.md)
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
    def _partition(self, ctx: Any) -> Partition:
        key = ctx.get_current_key()
        live = self._ops.get(key)
        if live is not None:
            return live
        saved = self._state.saved()
        op, version = pickle.loads(saved) if saved is not None else (
            CastleAnonymizer(None, **self.params), 0)
        rows = 0
        for event in self._state.events():
            if event[0] == "rules":
                version = event[1]
                op.set_rules(self._rules_of(ctx, version))
            else:  # (refused rows were refused then too, and reported then)
                rows += apply_batch(op, event[1], event[2] if len(event) > 2 else None).rows
        live = self._ops[key] = Partition(op, version, rows)
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        return live

    def _log_event(self, live: Partition, event: tuple, rows: int = 0) -> None:
        live.logged += rows
        # a snapshot costs about as much as replaying a few rows per tuple held: taken once
        # the log holds REPLAY_RATIO times as many rows as are held, it costs a fraction of
        # a row per row, and a restore replays at most that many rows
        every = self.snapshot_every or max(self.SNAPSHOT_EVERY,
                                           self.REPLAY_RATIO * live.op.held)
        if live.logged >= every:
            self._state.rebase(pickle.dumps((live.op, live.version),
                                            protocol=pickle.HIGHEST_PROTOCOL))
            live.logged = 0
        else:
            self._state.log(event)

    def _apply_rules(self, live: Partition, ctx: Any) -> list[Any]:
        latest = self._latest_version(ctx)
        if latest <= live.version:
            return []
        out = live.op.set_rules(self._rules_of(ctx, latest))
        live.version = latest
        self._log_event(live, ("rules", latest))
        return out

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        live = self._partition(ctx)
        out, refused = self._take_batch(live, ctx, value[1])
        lines = [rejected_line(refused_row(seq, values, self.fmt, self.columns, reason))
                 for seq, values, reason in refused]
        if out:
            lines.append(castle_batch_line(outcome_items(out)))
        if lines:
            yield "\n".join(lines)

    def _take_batch(self, live: Partition, ctx: Any, batch: bytes, lines: np.ndarray | None = None
              ) -> tuple[list[Any], list[tuple[int, dict[str, Any], str]]]:
        """A batch through the partition's operator (``lines``: each row's line, see
        :func:`~streamanon.flink.castle_rows.apply_batch`), after the newest rules: what it
        released and suppressed, and the rows it refused (the pure path's rule)."""
        out = self._apply_rules(live, ctx)
        done = apply_batch(live.op, batch, lines)
        out += done.items
        self._log_event(live, ("rows", batch) if lines is None else ("rows", batch, lines),
                        done.rows)
        live.header = done.header or live.header
        return out, done.refused

    def _finish(self, live: Partition, ctx: Any) -> list[Any]:
        """The end of the input: what the partition's operator still holds leaves now."""
        out = self._apply_rules(live, ctx)
        out += live.op.flush()
        return out

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        out = self._finish(self._partition(ctx), ctx)
        if out:
            yield castle_batch_line(outcome_items(out))

__all__ = ["RULES", "CastlePartition", "ParseRules", "subtask_index"]


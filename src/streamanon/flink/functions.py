"""The PyFlink functions of the batched jobs (needs the ``flink`` extra).

Design: docs/design/flink.md
"""

from __future__ import annotations

import copy
import logging
import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream import KeyedProcessFunction, OutputTag
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

from streamanon.errors import ConfigError, HelperGone, JobError
from streamanon.flink.splits import block_lines, line_blocks, read_split, write_progress
from streamanon.flink.state import KeyedState
from streamanon.flink.zbatch import ZGroupOperator

log = logging.getLogger(__name__)

#: side output of the reading steps: outcome lines that need no operator (rejected, header,
#: blank), one newline-joined text per batch
META = OutputTag("meta", Types.STRING())
#: an event-time timer here fires on the final (maximal) watermark: the end of input
END_OF_INPUT = 2**63 - 2
#: the fewest rows between snapshots of a z key group's state (see the module docstring);
#: 0: a new snapshot as soon as the log holds as many rows as the operator's live state
SNAPSHOT_EVERY = 0


class _ChunkStage(KeyedProcessFunction):
    """What the reading steps share: a chunk parser whose state lives in Flink state."""

    def __init__(self, parser: Any, routing: list[int], pace: float = 0.0) -> None:
        self.template = parser
        self.routing = list(routing)
        self.pace = float(pace)

    def open(self, runtime_context: Any) -> None:
        self._state = runtime_context.get_state(
            ValueStateDescriptor("reader", Types.PICKLED_BYTE_ARRAY()))
        self._parser: Any = None
        self._position = 0  # ReadSplits: the next split to read

    def _load(self) -> Any:
        if self._parser is None:  # first element of this task (also after a restore)
            self._parser = copy.deepcopy(self.template)
            saved = self._state.value()
            self._restored = saved is not None
            if saved is not None:
                self._position, parser_state = saved
                self._parser.restore(parser_state)
        return self._parser

    def _save(self, parser_state: Any = None) -> None:
        state = self._parser.state() if parser_state is None else parser_state
        self._state.update((self._position, state))

    def _parse(self, blocks: Any) -> Any:
        """Feed blocks; yield the meta lines (side output) and the keyed batches."""
        parser = self._parser
        meta: list[str] = []
        batches: list[tuple[int, Any]] = []
        lines = 0
        for block in blocks:
            lines += block_lines(block)
            m, b = parser.feed(block)
            meta += m
            batches += b
        yield from self._emit(meta, batches, lines)

    def _emit(self, meta: list[str], batches: list[tuple[int, Any]], lines: int) -> Any:
        if self.pace:
            time.sleep(self.pace * lines)
        if meta:
            yield META, "\n".join(meta)
        routing = self.routing
        for group, batch in batches:
            yield Row(routing[group], (group, batch))


class ReadSplits(_ChunkStage):
    """Split numbers in; the split's outcome lines (META) and keyed batches out.

    With ``python`` (the interpreter of a helper process) the splits are parsed ahead in a
    :class:`~streamanon.flink.readahead.ReadAhead` helper, outside the interpreter lock that
    thread mode's Python functions share; without it, or when the helper is gone, here.

    Args:
        path: the input file.
        split_bytes: the size of a split in bytes (a split ends at the end of a line).
        splits: the number of splits of the file.
        parser: the chunk parser (its state lives in Flink state).
        routing: the Flink key of each key group.
        pace: seconds to wait per line read (0: none).
        progress_path: the file where the position is written for a progress bar (``None``: none).
        python: the interpreter of a read-ahead helper process (``None``: no helper).
    """

    def __init__(self, path: str | Path, split_bytes: int, splits: int, parser: Any,
                 routing: list[int], *, pace: float = 0.0,
                 progress_path: str | None = None, python: str | None = None) -> None:
        super().__init__(parser, routing, pace)
        self.path, self.split_bytes, self.splits = str(path), int(split_bytes), int(splits)
        self.progress_path = progress_path
        self.python = python

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self._ahead: Any = None
        self._ahead_failed = self.python is None
        self._restored = False
        # started now, the helper is running by the time the first split number arrives:
        # this step parses split 0 itself (the operators wait for it anyway) while the
        # helper parses it too, for its state, and then split 1; a restored run (known at
        # the first split number) restarts it from the restored position
        self._start_ahead(0, self.template)

    def _start_ahead(self, index: int, parser: Any) -> None:
        """A helper parsing from split ``index`` (with ``parser``) and sending ``index + 1``
        on: split ``index`` is parsed here."""
        from streamanon.flink.readahead import ReadAhead

        if self._ahead_failed or index + 1 >= self.splits:
            return
        try:
            self._ahead = ReadAhead(self.path, self.split_bytes, index, self.splits, parser,
                                    self.python, send_from=index + 1)
        except OSError as exc:
            log.warning("parsing %s in the task itself: %s", self.path, exc)
            self._ahead_failed = True

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None

    def process_element(self, index: int, ctx: Any):  # type: ignore[override]
        self._load()
        if index < self._position:
            return  # read before the checkpoint this run was restored from
        if index > self._position:
            raise JobError(f"split {index} of {self.path} arrived before split "
                               f"{self._position}: the source lost or reordered splits")
        result = self._read_ahead(index)
        if result is None:
            data = read_split(self.path, index, self.split_bytes)
            yield from self._parse(line_blocks(data))
            self._position = index + 1
            self._save()
        else:
            _, meta, batches, parser_state, lines = result
            yield from self._emit(meta, batches, lines)
            self._parser.restore(parser_state)
            self._position = index + 1
            self._save(parser_state)
        write_progress(self.progress_path, self._position, self.splits)

    def _read_ahead(self, index: int) -> Any:
        """Split ``index`` from the helper, or None: parse it here (the split a helper
        starts at, or all of them without one)."""
        ahead, restored, self._restored = self._ahead, self._restored, False
        if ahead is not None and ahead.next == index:
            try:
                return ahead.take(index)
            except (HelperGone, OSError) as exc:
                log.warning("parsing %s in the task itself: %s", self.path, exc)
                self.close()
                self._ahead_failed = True
                return None
        if ahead is not None and ahead.next == index + 1 and not restored:
            return None  # the split the helper started at
        self.close()  # none yet, or one started elsewhere than where the run resumes
        self._start_ahead(index, self._parser)
        return None


class BatchLines(_ChunkStage):
    """Lines in; a batch closes on ``batch_size`` lines or ``batch_ms`` after its first line,
    then its outcome lines (META) and keyed batches go out.

    Args:
        parser: the chunk parser (its state lives in Flink state).
        routing: the Flink key of each key group.
        batch_size: lines at which a batch closes (at least 1).
        batch_ms: milliseconds after its first line at which a batch closes (at least 0).
        pace: seconds to wait per line read (0: none).
    """

    def __init__(self, parser: Any, routing: list[int], *, batch_size: int, batch_ms: float,
                 pace: float = 0.0) -> None:
        super().__init__(parser, routing, pace)
        if batch_size < 1 or batch_ms < 0:
            raise ConfigError("batch_size must be >= 1 and batch_ms >= 0")
        self.batch_size, self.batch_ms = int(batch_size), float(batch_ms)

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self._pending_state = runtime_context.get_list_state(
            ListStateDescriptor("pending", Types.STRING()))
        self._pending: list[str] | None = None

    def process_element(self, line: str, ctx: Any):  # type: ignore[override]
        self._load()
        pending = self._pending
        if pending is None:
            pending = self._pending = list(self._pending_state.get() or ())
            ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        if not pending:
            timers = ctx.timer_service()
            timers.register_processing_time_timer(
                timers.current_processing_time() + int(self.batch_ms))
        line = line.removesuffix("\r")  # as the file reader reads \r\n line ends
        pending.append(line)
        if len(pending) >= self.batch_size:
            yield from self._flush()
        else:
            self._pending_state.add(line)

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        self._load()
        if self._pending is None:
            self._pending = list(self._pending_state.get() or ())
        if self._pending:  # a timer of a batch closed by count finds nothing (or the next)
            yield from self._flush()

    def _flush(self) -> Any:
        block = "\n".join(self._pending or ()).encode("utf-8")
        self._pending = []
        self._pending_state.clear()
        yield from self._parse([block])
        self._save()


@dataclass
class ZGroup:
    """A key group's operator as this task holds it, and the rows in its redo log."""

    op: ZGroupOperator
    logged: int = 0


def current_key(ctx: Any) -> int:
    """The Flink key of a keyed function's element (keyed by :func:`~streamanon.flink.
    runtime.keyed_rows`: an int, which PyFlink may hand over as a one-field ``Row``)."""
    key = ctx.get_current_key()
    return int(key[0]) if isinstance(key, (Row, tuple, list)) else int(key)


class ZKeyGroups(KeyedProcessFunction):
    """z-anonymity per key group: record batches in, one outcome-batch line out per batch.

    Args:
        z: the z of z-anonymity.
        delta_t: the window Δt in seconds.
        separator: the separator of hierarchical values.
        snapshot_every: the fewest rows between snapshots of a key group's state.
    """

    def __init__(self, z: int, delta_t: float, separator: str,
                 snapshot_every: int = SNAPSHOT_EVERY) -> None:
        ZGroupOperator(z, delta_t, separator)  # validate the parameters on the client
        self.z, self.delta_t, self.separator = z, float(delta_t), separator
        self.snapshot_every = max(1, int(snapshot_every))

    def open(self, runtime_context: Any) -> None:
        self._state = KeyedState.open(runtime_context)
        self._groups: dict[int, ZGroup] = {}

    def _group(self, group: int) -> ZGroup:
        live = self._groups.get(group)
        if live is None:
            saved = self._state.saved()
            op = pickle.loads(saved) if saved is not None else ZGroupOperator(
                self.z, self.delta_t, self.separator)
            rows = 0
            for batch in self._state.events():
                rows += op.decide(batch)[1]  # (the outcomes were emitted before the checkpoint)
            live = self._groups[group] = ZGroup(op, rows)
        return live

    def _keep(self, live: ZGroup, batch: Any, rows: int) -> None:
        """Log a processed batch of ``rows`` rows, or take a new snapshot instead."""
        op = live.op
        live.logged += rows
        if live.logged >= max(self.snapshot_every, op.live_pairs()):  # O(1) per row amortized
            self._state.rebase(op.snapshot())
            live.logged = 0
        else:
            self._state.log(batch)

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        group, batch = value
        live = self._group(group)
        text, rows = live.op.process(batch)
        self._keep(live, batch, rows)
        yield text

"""The PyFlink functions of the z-anonymity job (needs the ``flink`` extra).

* :class:`NumberAndValidate` (parallelism 1, one key): numbers input lines and validates them
  with streamanon's own reader (:mod:`streamanon.io.readers`), so the Flink path rejects and
  re-stamps exactly what ``streamanon z`` does. Its state (line number, clock, CSV header) is
  in a Flink ``ValueState``.
* :class:`ZByCoarsestLevel` (parallelism p, keyed by the coarsest hierarchy level of the
  value): all levels of one tuple share that key, so each key's :class:`ZAnonymizer` counts
  exactly what a single global operator would count, and the rule stays in one place.

State of :class:`ZByCoarsestLevel`. A ``ValueState`` holding the pickled operator would be
re-serialized on every tuple (PyFlink's thread mode pickles state on each update), which is
O(state) per tuple. Instead, Flink holds the *exposures of the last Δt* per key in a
``ListState`` (one append per tuple, rewritten when more than half of it has expired), and the
operator object is a cache derived from it. That is sufficient: a future tuple at ``t' >= t``
only counts exposures at times ``>= t' - Δt``, so replaying the retained exposures into a fresh
:class:`ZAnonymizer` reproduces every later decision exactly. On a restore the cache is empty
and each key's operator is rebuilt by that replay on its first tuple.

Order: the validator runs with parallelism 1 and Flink channels are FIFO between one sender
and one receiver, so every key sees its tuples in input order (the rule needs that).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, OutputTag
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

from streamanon.flink.outcomes import (
    BLANK,
    HEADER,
    marker_line,
    published_line,
    rejected_line,
    suppressed_line,
)
from streamanon.io.policy import OnError
from streamanon.io.readers import DEFAULT_MAX_VALUE_LEN, _Reader
from streamanon.records import Record, Suppressed
from streamanon.zanon.operator import SEPARATOR, ZAnonymizer

#: side output of the validator: outcome lines that need no operator (rejects, header, blanks)
META = OutputTag("meta", Types.STRING())


class NumberAndValidate(KeyedProcessFunction):
    """Lines in, ``(key, seq, t, t_text, u, a, restamped)`` records out (meta lines aside).

    ``pace`` seconds are slept per line: for failure drills and demos only (a job that would
    otherwise end before a checkpoint can be taken and the process killed).
    """

    def __init__(
        self,
        fmt: str = "csv",
        *,
        time_tolerance: float = 0.0,
        max_value_len: int = DEFAULT_MAX_VALUE_LEN,
        separator: str = SEPARATOR,
        source_name: str = "input",
        pace: float = 0.0,
    ) -> None:
        self.fmt = fmt
        self.time_tolerance = float(time_tolerance)
        self.max_value_len = max_value_len
        self.separator = separator
        self.source_name = source_name
        self.pace = float(pace)

    def open(self, runtime_context: Any) -> None:
        self._state = runtime_context.get_state(
            ValueStateDescriptor("reader", Types.PICKLED_BYTE_ARRAY()))
        self._reader: _Reader | None = None
        self._line = 0

    def _restore(self) -> _Reader:
        # on_error=skip here: the policy is applied at the merge, which sees every rejection
        reader = _Reader(self.fmt, OnError.skip, None, self.time_tolerance,
                         self.max_value_len, self.source_name)
        saved = self._state.value()
        if saved is not None:
            self._line, reader.clock, reader.header, reader.ncols = saved
        return reader

    def process_element(self, line: str, ctx: Any):  # type: ignore[override]
        reader = self._reader
        if reader is None:
            reader = self._reader = self._restore()
        if self.pace:
            time.sleep(self.pace)
        self._line += 1
        seq = self._line
        if not line.strip():
            yield META, marker_line(seq, BLANK)
        elif self.fmt == "csv" and reader.header is None and not reader.take_header(seq, line)[1]:
            yield META, marker_line(seq, HEADER)
        else:
            if self.fmt == "csv":
                cols = reader.csv_chunk(seq, line)
            else:
                cols = reader.jsonl_chunk(seq, line)
            batch, rejects = reader.finish(cols)
            for r in rejects:
                yield META, rejected_line(r)
            if len(batch):
                a = batch.a[0]
                yield (a.split(self.separator, 1)[0], seq, float(batch.t[0]), batch.t_text[0],
                       batch.u[0], a, batch.restamped > 0)
        self._state.update((seq, reader.clock, reader.header, reader.ncols))


class ZByCoarsestLevel(KeyedProcessFunction):
    """z-anonymity for the tuples of one coarsest level (the key); emits outcome lines."""

    #: rewrite the Flink log when this many expired exposures (and more than the live ones) lie
    #: at its head
    MIN_REWRITE = 256

    def __init__(self, z: int, delta_t: float, separator: str = SEPARATOR) -> None:
        ZAnonymizer(z, delta_t, separator)  # validate the parameters on the client
        self.z, self.delta_t, self.separator = z, float(delta_t), separator

    def open(self, runtime_context: Any) -> None:
        self._log_state = runtime_context.get_list_state(
            ListStateDescriptor("exposures", Types.PICKLED_BYTE_ARRAY()))
        self._cache: dict[str, tuple[ZAnonymizer, deque[tuple[float, str, str]], list[int]]] = {}

    def _rebuild(self) -> tuple[ZAnonymizer, deque[tuple[float, str, str]], list[int]]:
        op = ZAnonymizer(self.z, self.delta_t, self.separator)
        log: deque[tuple[float, str, str]] = deque()
        for t, u, a in self._log_state.get() or ():
            op.observe(t, u, a)
            log.append((t, u, a))
        return op, log, [0]

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        key, seq, t, t_text, u, a, restamped = value
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._rebuild()
        op, log, expired = entry
        out = op.process(Record(t, u, a, t_text))
        exposure = (t, u, a)
        self._log_state.add(exposure)
        log.append(exposure)
        dt = self.delta_t
        while t - log[0][0] > dt:
            log.popleft()
            expired[0] += 1
        if expired[0] >= self.MIN_REWRITE and expired[0] > len(log):
            self._log_state.update(list(log))
            expired[0] = 0
        if isinstance(out, Suppressed):
            yield suppressed_line(seq, restamped)
        else:
            yield published_line(seq, out.a.count(self.separator), restamped, t_text, u, out.a)

"""The PyFlink functions of the z-anonymity job (needs the ``flink`` extra).

* :class:`NumberAndValidate` (parallelism 1, one key): numbers input lines and validates them
  with streamanon's own reader (:class:`~streamanon.flink.lines.LineValidator`), so the Flink
  path rejects and re-stamps exactly what ``streamanon z`` does. Its state (line number,
  clock, CSV header) is in a Flink ``ValueState``.
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

from streamanon.flink.lines import LineValidator, z_outcome
from streamanon.io.readers import DEFAULT_MAX_VALUE_LEN
from streamanon.zanon.operator import SEPARATOR, ZAnonymizer

#: side output of the validator: outcome lines that need no operator (rejects, header, blanks)
META = OutputTag("meta", Types.STRING())


class NumberAndValidate(KeyedProcessFunction):
    """Lines in, :data:`~streamanon.flink.lines.ZInput` records out (meta lines to :data:`META`).

    A :class:`~streamanon.flink.lines.LineValidator` does the work; its state tuple is kept in
    a Flink ``ValueState`` after every line. ``pace`` seconds are slept per line: for failure
    drills only (a job that would otherwise end before a checkpoint and a kill).
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
        self.options = {"time_tolerance": float(time_tolerance), "max_value_len": max_value_len,
                        "separator": separator, "source_name": source_name}
        self.fmt = fmt
        self.pace = float(pace)

    def open(self, runtime_context: Any) -> None:
        self._state = runtime_context.get_state(
            ValueStateDescriptor("validator", Types.PICKLED_BYTE_ARRAY()))
        self._validator: LineValidator | None = None

    def process_element(self, line: str, ctx: Any):  # type: ignore[override]
        validator = self._validator
        if validator is None:  # first line of this task (also after a restore)
            validator = self._validator = LineValidator(self.fmt, **self.options)
            saved = self._state.value()
            if saved is not None:
                validator.restore(saved)
        if self.pace:
            time.sleep(self.pace)
        meta, record = validator.feed(line)
        self._state.update(validator.state())
        for text in meta:
            yield META, text
        if record is not None:
            yield record


class ZByCoarsestLevel(KeyedProcessFunction):
    """z-anonymity for the tuples of one coarsest level (the key); emits outcome lines."""

    #: rewrite the Flink log when this many expired exposures (and more than the live ones) lie
    #: at its head
    MIN_REWRITE = 256

    def __init__(self, z: int, delta_t: float, separator: str = SEPARATOR) -> None:
        # validate the parameters on the client
        ZAnonymizer(z=z, delta_t=delta_t, separator=separator)
        self.z, self.delta_t, self.separator = z, float(delta_t), separator

    def open(self, runtime_context: Any) -> None:
        self._log_state = runtime_context.get_list_state(
            ListStateDescriptor("exposures", Types.PICKLED_BYTE_ARRAY()))
        self._cache: dict[str, tuple[ZAnonymizer, deque[tuple[float, str, str]], list[int]]] = {}

    def _rebuild(self) -> tuple[ZAnonymizer, deque[tuple[float, str, str]], list[int]]:
        op = ZAnonymizer(z=self.z, delta_t=self.delta_t, separator=self.separator)
        log: deque[tuple[float, str, str]] = deque()
        for t, u, a in self._log_state.get() or ():
            op.observe(t, u, a)
            log.append((t, u, a))
        return op, log, [0]

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        key, _, t, _, u, a, _ = value
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._rebuild()
        op, log, expired = entry
        outcome = z_outcome(op, value)
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
        yield outcome

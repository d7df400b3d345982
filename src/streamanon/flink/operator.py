"""z-anonymity and CASTLE as operators of the user's own PyFlink job (the ``flink`` extra).

:func:`z_anonymize` and :func:`castle` take a ``DataStream`` of records (PyFlink ``Row``\\ s
with named fields, or dicts) and return the ``DataStream`` of what is released, so that they
go "at any desired point" of a pipeline between the user's own source and sink. Both run the
keyed functions of the ``streamanon flink`` jobs, in batches, with their state in Flink state.

Design: docs/design/flink.md
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

from streamanon.castle import RuleSet
from streamanon.errors import BadRecordError, ConfigError
from streamanon.flink.castle_partition import RULES, CastlePartition, ParseRules
from streamanon.flink.castle_rows import (
    RULES_END,
    RULES_FILE,
    RULES_LINE,
    check_rules,
    partition_of,
)
from streamanon.flink.functions import END_OF_INPUT, ZKeyGroups
from streamanon.flink.outcomes import (
    BATCH,
    CASTLE_BATCH,
    PUBLISHED,
    REJECTED,
    castle_batch_of,
    outcome_batch_of,
)
from streamanon.flink.zbatch import Z_KEY_GROUPS, key_group_of
from streamanon.zanon.operator import SEPARATOR

log = logging.getLogger(__name__)

_ON_ERROR = ("fail", "skip")


def _fields(record: Any) -> dict[str, Any]:
    """A record's fields by name: a dict as it is, a ``Row`` with named fields as a dict."""
    if isinstance(record, dict):
        return record
    if isinstance(record, Row):
        try:
            return record.as_dict()
        except Exception:  # a Row without field names
            raise BadRecordError("record", "a Row record needs named fields "
                                 "(Row(t=..., u=..., a=...))") from None
    raise BadRecordError("record", f"a record must be a dict or a Row, got "
                         f"{type(record).__name__}")


def _like(record: Any, values: dict[str, Any]) -> Any:
    """``values`` in the input's kind: a dict, or a ``Row`` of the same names."""
    return values if isinstance(record, dict) else Row(**values)


def _routed(stream: Any, route: Any, name: str) -> Any:
    """``stream`` keyed by ``route``'s key, computed at the input's parallelism: chained to
    the step before, so the records of one input subtask keep their order on the way to
    their key's operator (a key's records must come in time order: from one input subtask,
    e.g. one Kafka partition, or already ordered)."""
    mapped = stream.map(route, output_type=Types.TUPLE([Types.INT(),
                                                        Types.PICKLED_BYTE_ARRAY()]))
    parallelism = stream._j_data_stream.getParallelism()
    return mapped.name(name).set_parallelism(parallelism) \
        .key_by(lambda v: v[0], key_type=Types.INT())


def _check(batch_size: int, batch_ms: float, on_error: str) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError("batch_size must be an integer >= 1")
    if batch_ms < 0:
        raise ConfigError("batch_ms must be >= 0")
    if on_error not in _ON_ERROR:
        raise ConfigError("on_error must be fail or skip")


class _Gather:
    """What the batched operators share: a key's waiting records in ``ListState``, a batch
    closed at ``batch_size`` records or ``batch_ms`` after its first, and at the end of
    input."""

    batch_size: int
    batch_ms: float

    def _open_pending(self, runtime_context: Any) -> None:
        self._pending = runtime_context.get_list_state(
            ListStateDescriptor("pending", Types.PICKLED_BYTE_ARRAY()))
        self._waiting = runtime_context.get_state(
            ValueStateDescriptor("waiting", Types.INT()))

    def _gather(self, item: Any, ctx: Any) -> list[Any] | None:
        """Add ``item`` to the current key's batch; the whole batch when it is due."""
        waiting = self._waiting.value() or 0
        timers = ctx.timer_service()
        if waiting == 0:
            timers.register_event_time_timer(END_OF_INPUT)  # (one per key: same timestamp)
            timers.register_processing_time_timer(
                timers.current_processing_time() + int(self.batch_ms))
        if waiting + 1 >= self.batch_size:
            batch = [*(self._pending.get() or ()), item]
            self._pending.clear()
            self._waiting.update(0)
            return batch
        self._pending.add(item)
        self._waiting.update(waiting + 1)
        return None

    def _take(self) -> list[Any]:
        """The current key's waiting records (none left waiting)."""
        batch = list(self._pending.get() or ())
        if batch:
            self._pending.clear()
            self._waiting.update(0)
        return batch


class ZRecords(_Gather, ZKeyGroups):
    """``(key group, record)`` in; the released records of each batch of the key group out
    (the batch through :class:`~streamanon.flink.functions.ZKeyGroups`, whose state and
    snapshots it keeps).

    Args:
        z: the z of the rule.
        delta_t: the window Δt, in seconds.
        separator: the separator of hierarchical values.
        fields: the names of the time, user and value fields of a record.
        batch_size: records of a key group gathered before they are processed.
        batch_ms: milliseconds after a key group's first waiting record at which it is due.
        on_error: ``fail`` fails the job on a refused record, ``skip`` drops and logs it.
    """

    def __init__(self, z: int, delta_t: float, separator: str, *, fields: tuple[str, str, str],
                 batch_size: int, batch_ms: float, on_error: str) -> None:
        super().__init__(z, delta_t, separator)
        self.fields = fields
        self.batch_size, self.batch_ms, self.on_error = batch_size, float(batch_ms), on_error

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self._open_pending(runtime_context)

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        batch = self._gather(value[1], ctx)
        if batch:
            yield from self._released(value[0], batch)

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        batch = self._take()
        if batch:
            yield from self._released(ctx.get_current_key(), batch)

    def _released(self, group: int, records: list[Any]) -> Iterator[Any]:
        rows, kept = [], []
        t_field, u_field, a_field = self.fields
        for record in records:
            try:
                values = _fields(record)
                t, u, a = values[t_field], values[u_field], values[a_field]
                t_text = t if isinstance(t, str) else repr(t) if isinstance(t, float) else str(t)
                rows.append((len(rows), float(t), t_text, u, a, False))
                kept.append(record)
            except (KeyError, TypeError, ValueError, BadRecordError) as exc:
                self._refuse(record, exc)
        if not rows:
            return
        try:
            text = next(ZKeyGroups.process_element(self, (group, rows), None))
        except BadRecordError as exc:  # the batch again, record by record: which one
            if self.on_error == "fail":
                raise
            log.warning("a batch of key group %s refused (%s): record by record", group, exc)
            for row, record in zip(rows, kept, strict=True):
                try:
                    text = next(ZKeyGroups.process_element(self, (group, [(0, *row[1:])]),
                                                           None))
                except BadRecordError as one:
                    self._refuse(record, one)
                    continue
                yield from self._outcomes(text, [record])
            return
        yield from self._outcomes(text, kept)

    def _outcomes(self, text: str, records: list[Any]) -> Iterator[Any]:
        a_field = self.fields[2]
        if text.startswith(BATCH + "\t"):
            batch = outcome_batch_of(text)
            released = [(seq, a) for seq, level, a in zip(
                batch.column("seq").to_pylist(), batch.column("level").to_pylist(),
                batch.column("a").to_pylist(), strict=True) if level >= 0]
        else:
            released = []
            for line in text.split("\n"):
                seq, kind, rest = line.split("\t", 2)
                if kind == PUBLISHED:
                    released.append((int(seq), json.loads(rest.split("\t", 2)[2])[2]))
        for seq, a in released:
            record = records[seq]
            yield _like(record, {**_fields(record), a_field: a})

    def _refuse(self, record: Any, exc: Exception) -> None:
        if self.on_error == "fail":
            raise BadRecordError(self.fields[2], f"record {record!r} refused: {exc}") from None
        log.warning("record %r dropped: %s", record, exc)


def z_anonymize(
    stream: Any,
    *,
    z: int,
    delta_t: float,
    time_field: str = "t",
    user_field: str = "u",
    value_field: str = "a",
    separator: str = SEPARATOR,
    batch_size: int = 256,
    batch_ms: float = 20.0,
    on_error: str = "fail",
    output_type: Any = None,
    name: str | None = None,
) -> Any:
    """The z-anonymity of ``stream``: its records whose value (``value_field``) is published
    at its most specific z-anonymous level, generalized to it.

    Args:
        stream: a ``DataStream`` of dicts or named ``Row``\\ s with a time (a number, or
            text of one; non-decreasing per coarsest value level), a user and a value
            (hierarchy levels joined by ``separator``).
        z: the least number of distinct users a published value has had within ``delta_t``.
        delta_t: the window, in the time field's unit.
        time_field: name of the time field.
        user_field: name of the user field.
        value_field: name of the value field (the one generalized).
        separator: the hierarchy separator of the values.
        batch_size: a key group's records processed together at most.
        batch_ms: the longest a record waits for its batch to fill (milliseconds).
        on_error: ``fail`` (a refused record fails the job) or ``skip`` (dropped, logged).
        output_type: the type information of the output (default: pickled, as the input
            came); e.g. ``Types.ROW_NAMED(...)`` for a Java sink of rows.
        name: the operator's name in the job graph.

    Returns:
        The ``DataStream`` of released records (the input's kind, dicts or ``Row``\\ s).
    """
    from streamanon.flink.zbatch import ZGroupOperator

    ZGroupOperator(z, delta_t, separator)  # validate the parameters here, not in a task
    _check(batch_size, batch_ms, on_error)
    key_groups = Z_KEY_GROUPS
    field = value_field

    def route(record: Any) -> Any:
        try:
            value = _fields(record)[field]
            coarsest = value.strip().split(separator, 1)[0].strip()
        except (KeyError, AttributeError, BadRecordError):
            coarsest = ""  # refused by the operator (with the reason)
        return key_group_of(coarsest, key_groups), record

    keyed = _routed(stream, route, "z key groups")
    return keyed.process(
        ZRecords(z, delta_t, separator, fields=(time_field, user_field, value_field),
                 batch_size=batch_size, batch_ms=batch_ms, on_error=on_error),
        output_type=output_type or Types.PICKLED_BYTE_ARRAY(),
    ).name(name or f"z-anonymity z={z} delta_t={delta_t:g}")


class CastleRecords(_Gather, CastlePartition):
    """``(partition, record)`` in, with the rules' broadcast; the released records of the
    partition out (the batches through :class:`~streamanon.flink.castle_partition.CastlePartition`,
    whose state and snapshots it keeps).

    Args:
        params: the CASTLE parameters (k, l, δ, β, ...) every partition's operator takes.
        id_field: the field that names the individual (partitions are by individual).
        numeric: the fields read as numbers (the rules' numeric quasi-identifiers).
        batch_size: records of a partition gathered before they are processed.
        batch_ms: milliseconds after a partition's first waiting record at which it is due.
        on_error: ``fail`` fails the job on a refused record, ``skip`` drops and logs it.
    """

    def __init__(self, params: dict[str, Any], *, id_field: str, numeric: list[str],
                 batch_size: int, batch_ms: float, on_error: str) -> None:
        super().__init__(params, "jsonl", [])
        self.id_field, self.numeric = id_field, numeric
        self.batch_size, self.batch_ms, self.on_error = batch_size, float(batch_ms), on_error

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self._open_pending(runtime_context)
        self._seq = runtime_context.get_state(ValueStateDescriptor("seq", Types.LONG()))
        self._rows_kind = runtime_context.get_state(ValueStateDescriptor("kind", Types.BOOLEAN()))

    def process_broadcast_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        for _ in super().process_broadcast_element(value, ctx):  # (its note: not a record)
            pass
        return iter(())

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        batch = self._gather(value[1], ctx)
        if batch:
            yield from self._released(batch, ctx)

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        batch = self._take()
        if batch:
            yield from self._released(batch, ctx)
        if timestamp == END_OF_INPUT:
            for text in super().on_timer(timestamp, ctx):
                yield from self._records(text)

    def _released(self, records: list[Any], ctx: Any) -> Iterator[Any]:
        seq = self._seq.value() or 0
        rows = []
        for record in records:
            try:
                values = dict(_fields(record))
                for name in self.numeric:
                    if isinstance(values.get(name), str):
                        values[name] = float(values[name])
                rows.append((seq, values))
                seq += 1
            except (TypeError, ValueError, BadRecordError) as exc:
                self._refuse(record, exc)
        self._seq.update(seq)
        if rows:
            self._rows_kind.update(isinstance(records[0], dict))
            data = pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)
            for text in CastlePartition.process_element(self, (None, data), ctx):
                yield from self._records(text)

    def _records(self, text: str) -> Iterator[Any]:
        as_dict = self._rows_kind.value()
        for line in text.split("\n"):
            if line.startswith(CASTLE_BATCH + "\t"):
                for _, kind, _, values in castle_batch_of(line):
                    if kind == PUBLISHED:
                        yield values if as_dict or as_dict is None else Row(**values)
            elif line.split("\t", 2)[1:2] == [REJECTED]:
                self._refuse(None, ValueError(json.loads(line.split("\t", 2)[2])[1]))

    def _refuse(self, record: Any, exc: Exception) -> None:
        if self.on_error == "fail":
            raise BadRecordError(self.id_field, f"record refused: {exc}") from None
        log.warning("record %r dropped: %s", record, exc)


def _rules_text(rules: str | Path | RuleSet) -> str:
    if isinstance(rules, RuleSet):
        raise ConfigError("give the rules as TOML text or a path to a TOML file (a RuleSet "
                          "carries run-time state and cannot be shared by partitions)")
    if isinstance(rules, Path) or ("\n" not in rules and Path(rules).is_file()):
        return Path(rules).read_text(encoding="utf-8")
    return rules


def castle(
    stream: Any,
    *,
    rules: str | Path,
    k: int,
    l: int,  # noqa: E741
    delta: int,
    beta: int = 50,
    mu: int = 10,
    zeta: int = 10,
    suppression: str = "drop",
    max_delay: float | None = None,
    loss_field: str | None = None,
    diversity: str = "distinct",
    c: float | None = None,
    t: float | None = None,
    reference: Mapping[str, Mapping[str, float]] | None = None,
    closeness: str = "auto",
    t_hierarchy: Mapping[str, Sequence[Sequence[str]]] | None = None,
    dp_epsilon: float | None = None,
    dp_beta: float | None = None,
    hierarchy_scope: str = "shared",
    static: Sequence[str] | None = None,
    static_ttl: float | None = None,
    static_max: int | None = None,
    partitions: int | None = None,
    rules_stream: Any = None,
    bad_rules: str = "skip",
    batch_size: int = 256,
    batch_ms: float = 20.0,
    on_error: str = "fail",
    output_type: Any = None,
    name: str | None = None,
) -> Any:
    """CASTLE (k-anonymity, l-diversity, delay ``delta``) of ``stream``, per partition of the
    individuals (the rules' id field): the released, generalized records.

    Args:
        stream: a ``DataStream`` of dicts or named ``Row``\\ s (the rules' columns; range
            columns as numbers or text of numbers).
        rules: the rule set: TOML text, or the path of a TOML file.
        k: the least number of individuals a released cluster covers.
        l: the least number of distinct sensitive values in it.
        delta: the most tuples a tuple waits before it leaves.
        beta: the most non-k-anonymized clusters kept.
        mu: the recent clusters whose mean loss sets the reuse threshold.
        zeta: the most reusable clusters kept (0: none).
        suppression: what leaves a tuple that cannot be released in time (``drop``, ...).
        max_delay: the longest a tuple waits, in the time field's unit (None: no limit).
        loss_field: a field added to each released record with its information loss.
        diversity: the l-diversity rule, ``distinct``, ``entropy`` or ``recursive``
            (:class:`~streamanon.castle.diversity.Diversity`).
        c: the c of recursive (c,l)-diversity (only with ``diversity="recursive"``).
        t: t-closeness of every sensitive attribute to ``reference`` (None: none).
        reference: per sensitive attribute, the weights of its values: the distribution
            t-closeness measures against (needed with ``t``;
            :func:`streamanon.castle.diversity.reference_of` makes it from rows).
        closeness: t-closeness's ground distance (``auto``, ``equal``, ``ordered``,
            ``hierarchical``).
        t_hierarchy: with ``closeness="hierarchical"``: per sensitive attribute, the paths
            of its values' hierarchy (root side first).
        dp_epsilon: CASTLEGUARD's Laplace noise of scale R / ε on the range attributes
            (None: none; :mod:`streamanon.castle.dp`).
        dp_beta: CASTLEGUARD's β-sampling: the probability that a record is kept (None: 1;
            the others are suppressed, reason ``not sampled (dp-beta)``).
        hierarchy_scope: where a categorical's GLM is measured: ``shared`` (one tree per
            rule set) or ``cluster`` (each released cluster's own tree, as Prink).
        static: quasi-identifiers marked ``static`` as the rules' ``static = true`` does.
        static_ttl: forget an anchor after this much stream time unused (None: never).
        static_max: keep at most this many anchors per partition, least recently used
            forgotten first (None: no bound).
        partitions: partitions of the individuals (crc32 of the id mod this), each its own
            CASTLE operator and state key, fixed for the job (a restore at another
            parallelism keeps them); k and l hold within each. Default: the job's
            parallelism (as ``streamanon flink castle --partitions``).
        rules_stream: a ``DataStream`` of TOML texts, each a whole rule set that replaces
            the running one (checked, numbered and broadcast to every partition).
        bad_rules: ``skip`` (a refused rule set is logged) or ``fail`` (fails the job).
        batch_size: a partition's records processed together at most.
        batch_ms: the longest a record waits for its batch to fill (milliseconds).
        on_error: ``fail`` (a refused record fails the job) or ``skip`` (dropped, logged).
        output_type: the type information of the output (default: pickled).
        name: the operator's name in the job graph.

    Returns:
        The ``DataStream`` of released records (dicts, or ``Row``\\ s for ``Row`` input).
    """
    from streamanon.flink.castle_job import numeric_columns

    _check(batch_size, batch_ms, on_error)
    params: dict[str, Any] = {"k": k, "l": l, "delta": delta, "beta": beta, "mu": mu,
                              "zeta": zeta, "suppression": suppression,
                              "max_delay": max_delay, "loss_field": loss_field,
                              "diversity": diversity, "c": c, "t": t,
                              "reference": reference, "closeness": closeness,
                              "t_hierarchy": t_hierarchy, "dp_epsilon": dp_epsilon,
                              "dp_beta": dp_beta, "hierarchy_scope": hierarchy_scope,
                              "static": static,
                              "static_ttl": static_ttl, "static_max": static_max}
    text = _rules_text(rules)
    first = RuleSet.from_toml(text)
    check_rules(text, first.id_field, params)  # refused here, not in a task
    env = stream._j_data_stream.getExecutionEnvironment()
    from pyflink.datastream import StreamExecutionEnvironment

    flink_env = StreamExecutionEnvironment(env)
    tagged = Types.TUPLE([Types.INT(), Types.STRING()])
    keyed_message = Types.TUPLE([Types.INT(), tagged])
    messages = flink_env.from_collection([(0, (RULES_FILE, text))], type_info=keyed_message)
    if rules_stream is not None:
        def lines(rule_set: str) -> Iterator[Any]:
            for line in rule_set.splitlines():
                yield 0, (RULES_LINE, line)
            yield 0, (RULES_LINE, RULES_END)

        messages = messages.union(rules_stream.flat_map(lines, output_type=keyed_message))
    checked = (messages.key_by(lambda m: m[0], key_type=Types.INT())
               .process(_ParseRuleMessages(1, first.id_field, params, [], bad_rules),
                        output_type=Types.TUPLE([Types.INT(), Types.STRING()]))
               .name("check rules").set_parallelism(1))
    id_field = first.id_field
    if partitions is None:
        partitions = max(1, flink_env.get_parallelism())
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ConfigError("partitions must be an integer >= 1")

    def route(record: Any) -> Any:
        try:
            identity = _fields(record)[id_field]
        except (KeyError, BadRecordError):
            identity = ""  # refused by the operator (with the reason)
        return partition_of(identity, partitions), record

    keyed = _routed(stream, route, "CASTLE partitions")
    return keyed.connect(checked.broadcast(RULES)).process(
        CastleRecords(params, id_field=id_field, numeric=numeric_columns(first),
                      batch_size=batch_size, batch_ms=batch_ms, on_error=on_error),
        output_type=output_type or Types.PICKLED_BYTE_ARRAY(),
    ).name(name or f"CASTLE k={k} l={l} delta={delta}")


class _ParseRuleMessages(ParseRules):
    """:class:`~streamanon.flink.castle_partition.ParseRules` on ``(key, (kind, payload))``
    elements, its notes logged (there is no outcome stream here)."""

    def process_element(self, value: tuple, ctx: Any):  # type: ignore[override]
        yield from self._versions(super().process_element(value[1], ctx))

    def on_timer(self, timestamp: int, ctx: Any):  # type: ignore[override]
        yield from self._versions(super().on_timer(timestamp, ctx))

    @staticmethod
    def _versions(items: Iterator[Any]) -> Iterator[Any]:
        for item in items:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], int):
                yield item
            else:
                with contextlib.suppress(Exception):
                    log.info("rules: %s", item[1])


__all__ = ["CastleRecords", "ZRecords", "castle", "z_anonymize"]

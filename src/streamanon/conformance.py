"""The operator contract, checked for every operator (in the spirit of river's ``yield_checks``).

>>> case = CASES["z"]()
>>> for check in yield_checks(case):
...     check(case)
>>> sorted(CASES)
['castle', 'dezent-ring', 'z', 'z-adaptive']
>>> [check.__name__ for check in CASES["dezent-ring"]().extra]
['check_params', 'check_ring_equals_centralized_rule']

Design: docs/design/core.md
"""

from __future__ import annotations

import doctest
import functools
import inspect
import pickle
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from streamanon.base import SUMMARY_KEYS, StreamOperator
from streamanon.errors import BadRecordError, ConformanceError
from streamanon.records import Record, Suppressed


def _fail(case: Case, rule: str, text: str) -> NoReturn:
    raise ConformanceError(f"{case.name}: {rule}: {text}")


@dataclass
class Case:
    """One operator under test: how to build it, what to feed it, what it must refuse."""

    name: str
    make: Callable[[int], Any]  # seed -> a fresh operator
    records: list[Any]
    bad: list[tuple[Any, type[BadRecordError], str | None]]  # record, error kind, field
    line_of: Callable[[Any], int | None]  # an emitted item -> the input line it stands for
    time_of: Callable[[Any], float]
    positional: tuple[str, ...] = ()
    extra: list[Callable[[Case], None]] = field(default_factory=list)
    seed: int = 7

    @property
    def cls(self) -> type:
        return type(self.make(self.seed))


def _as_list(case: Case, what: str, out: Any) -> list[Any]:
    if not isinstance(out, list):
        _fail(case, "protocol", f"{what} returned {type(out).__name__}, not a list")
    return out


def run(case: Case, op: Any, records: Sequence[Any]) -> list[Any]:
    """Everything ``op`` emits for ``records`` (process each, then flush), in order."""
    out: list[Any] = []
    for r in records:
        out += _as_list(case, "process", op.process(r))
    return out + _as_list(case, "flush", op.flush())


# -- the checks ------------------------------------------------------------------------------
def check_protocol(case: Case) -> None:
    op = case.make(case.seed)
    if not isinstance(op, StreamOperator):
        _fail(case, "protocol", "lacks one of process, advance, flush, summary")
    summary = op.summary()
    missing = [k for k in SUMMARY_KEYS if k not in summary]
    if missing:
        _fail(case, "protocol", f"summary lacks {', '.join(missing)}")
    run(case, op, case.records[:5])
    _as_list(case, "advance", op.advance(case.time_of(case.records[0])))


def check_keyword_only(case: Case) -> None:
    params = list(inspect.signature(case.cls).parameters.values())
    loose = [p.name for p in params if p.kind is not p.KEYWORD_ONLY
             and p.name not in case.positional]
    if loose:
        _fail(case, "keyword_only", f"parameters {', '.join(loose)} are not keyword-only")


def _balanced(case: Case, op: Any, read: int, where: str) -> None:
    s = op.summary()
    if s["read"] != read:
        _fail(case, "accounting", f"{where}: read {s['read']}, fed {read}")
    if s["read"] != s["released"] + s["suppressed"] + s["held"]:
        _fail(case, "accounting", f"{where}: read {s['read']} != released {s['released']} + "
              f"suppressed {s['suppressed']} + held {s['held']}")


def check_accounting(case: Case) -> None:
    op = case.make(case.seed)
    emitted: list[Any] = []
    for i, r in enumerate(case.records, start=1):
        emitted += _as_list(case, "process", op.process(r))
        _balanced(case, op, i, f"after record {i}")
    emitted += _as_list(case, "flush", op.flush())
    _balanced(case, op, len(case.records), "after flush")
    s = op.summary()
    if s["held"]:
        _fail(case, "accounting", f"{s['held']} record(s) still held after flush")
    released = sum(1 for x in emitted if not isinstance(x, Suppressed))
    if (released, len(emitted) - released) != (s["released"], s["suppressed"]):
        _fail(case, "accounting", f"emitted {released} released and {len(emitted) - released} "
              f"suppressed, the summary says {s['released']} and {s['suppressed']}")
    lines = Counter(case.line_of(x) for x in emitted)
    expected = Counter(case.line_of(r) for r in case.records)
    if lines != expected:
        lost = sorted((expected - lines).elements())[:5]
        twice = sorted((lines - expected).elements())[:5]
        _fail(case, "accounting", f"not every record came out exactly once (missing lines "
              f"{lost}, extra {twice})")


def check_determinism(case: Case) -> None:
    first = run(case, case.make(case.seed), case.records)
    if run(case, case.make(case.seed), case.records) != first:
        _fail(case, "determinism", f"two operators built with seed {case.seed} differ")


def check_pickling(case: Case) -> None:
    whole = run(case, case.make(case.seed), case.records)
    n = len(case.records)
    for cut in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        op = case.make(case.seed)
        head: list[Any] = []
        for r in case.records[:cut]:
            head += op.process(r)
        op = pickle.loads(pickle.dumps(op))
        if head + run(case, op, case.records[cut:]) != whole:
            _fail(case, "pickling", f"pickling after {cut} records changed the output")


def check_bad_records(case: Case) -> None:
    half = len(case.records) // 2
    reference = run(case, case.make(case.seed), case.records)
    for bad, kind, field_name in case.bad:
        op = case.make(case.seed)
        head: list[Any] = []
        for r in case.records[:half]:
            head += op.process(r)
        before = op.summary()
        try:
            op.process(bad)
        except BadRecordError as exc:
            if not isinstance(exc, kind):
                _fail(case, "bad_records", f"{bad!r} raised {type(exc).__name__}, not "
                      f"{kind.__name__}")
            if exc.field != field_name or exc.record is not bad or not str(exc):
                _fail(case, "bad_records", f"{bad!r}: the error must name field "
                      f"{field_name!r} and carry the record (got {exc.field!r}, {exc!s})")
        except Exception as exc:  # any other type breaks the contract
            _fail(case, "bad_records", f"{bad!r} raised {type(exc).__name__}: {exc} (not a "
                  "BadRecordError)")
        else:
            _fail(case, "bad_records", f"bad record {bad!r} was accepted")
        if op.summary() != before:
            _fail(case, "bad_records", f"refusing {bad!r} changed the summary")
        if head + run(case, op, case.records[half:]) != reference:
            _fail(case, "bad_records", f"refusing {bad!r} changed what came out afterwards")


def check_advance(case: Case) -> None:
    op = case.make(case.seed)
    emitted: list[Any] = []
    for i, r in enumerate(case.records, start=1):
        emitted += op.process(r)
        if i % 7 == 0:
            emitted += _as_list(case, "advance", op.advance(case.time_of(r)))
            _balanced(case, op, i, f"after advance at record {i}")
    emitted += _as_list(case, "advance", op.advance(case.time_of(case.records[-1]) + 1e9))
    emitted += op.flush()
    _balanced(case, op, len(case.records), "after advance and flush")
    if op.summary()["held"]:
        _fail(case, "advance", "records still held after advancing the clock and flushing")
    if sorted(map(str, map(case.line_of, emitted))) != sorted(
            str(case.line_of(r)) for r in case.records):
        _fail(case, "advance", "advancing the clock lost or repeated records")


def check_docstring_example(case: Case) -> None:
    cls = case.cls
    module = sys.modules[cls.__module__]
    tests = doctest.DocTestFinder(recurse=False).find(cls, globs=dict(vars(module)))
    examples = [t for t in tests if t.examples]
    if not examples:
        _fail(case, "docstring_example", f"{cls.__name__}'s docstring has no example")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in examples:
        runner.run(test, out=lambda _: None)
    if runner.failures:
        _fail(case, "docstring_example", f"{runner.failures} example(s) of {cls.__name__} fail")


def check_params(case: Case) -> None:
    op = case.make(case.seed)
    if not callable(getattr(op, "params", None)):
        _fail(case, "params", f"{type(op).__name__} has no params() (streamanon.base."
              "OperatorBase gives it)")
    try:
        given = op.params()
        positional = {name: getattr(op, name) for name in case.positional}
    except AttributeError as exc:
        _fail(case, "params", str(exc))
    out = run(case, op, case.records)
    if op.params() != given:
        _fail(case, "params", f"the parameters read back changed while running: {given} "
              f"became {op.params()}")
    try:
        again = type(op)(**positional, **given)
    except Exception as exc:
        _fail(case, "params", f"{type(op).__name__}(**params()) fails: "
              f"{type(exc).__name__}: {exc}")
    if run(case, again, case.records) != out:
        _fail(case, "params", f"{type(op).__name__}(**params()) gives another output than the "
              "operator it was read from")


CHECKS = [check_protocol, check_keyword_only, check_accounting, check_determinism,
          check_pickling, check_bad_records, check_advance, check_docstring_example]


def yield_checks(case: Case) -> Iterator[Callable[[Case], None]]:
    """Every check of the contract for ``case``, then the case's own."""
    yield from CHECKS
    yield from case.extra


# -- the operators, discovered -------------------------------------------------------------
def public_operators() -> list[type]:
    """Every class of the public API that is a :class:`~streamanon.base.StreamOperator`: the
    names in ``streamanon.__all__`` and in the ``__all__`` of each subpackage (a subpackage
    whose optional extra is missing is skipped)."""
    import importlib
    import pkgutil

    import streamanon

    packages = [streamanon]
    for info in pkgutil.iter_modules(streamanon.__path__):
        if info.ispkg:
            try:
                packages.append(importlib.import_module(f"streamanon.{info.name}"))
            except ImportError:  # pragma: no cover - an optional extra is not installed
                continue
    found: dict[str, type] = {}
    for package in packages:
        for name in getattr(package, "__all__", []):
            obj = getattr(package, name, None)
            if (inspect.isclass(obj) and not getattr(obj, "_is_protocol", False)
                    and issubclass(obj, StreamOperator)):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


_KEYS = {"name", "params", "seeded", "records", "bad", "time_of", "line_of", "positional",
         "checks"}
_REQUIRED = {"name", "params", "records", "bad", "time_of"}


def case_of(cls: type) -> Case:
    """The :class:`Case` of an operator class, from its ``_conformance_params()`` data (the
    keys are in the module docstring); its checks are the contract's, ``params``, and the
    extra checks the data names.

    >>> from streamanon.zanon import ZAnonymizer
    >>> case = case_of(ZAnonymizer)
    >>> case.name, len(case.records), type(case.make(case.seed)).__name__
    ('z', 300, 'ZAnonymizer')
    """
    where = f"{cls.__module__}.{cls.__qualname__}"
    source = getattr(cls, "_conformance_params", None)
    if source is None:
        raise ConformanceError(f"{where} is a public operator without a conformance case "
                               "(_conformance_params)")
    data = source()
    if not isinstance(data, dict):
        raise ConformanceError(f"{where}._conformance_params() must give a dict (the keys are "
                               "described in streamanon.conformance), got "
                               f"{type(data).__name__}")
    unknown, missing = set(data) - _KEYS, _REQUIRED - set(data)
    if unknown or missing:
        raise ConformanceError(f"{where}._conformance_params(): unknown keys "
                               f"{sorted(unknown)}, missing keys {sorted(missing)}")
    for bad in data["bad"]:
        if not (isinstance(bad, tuple) and len(bad) == 3 and inspect.isclass(bad[1])
                and issubclass(bad[1], BadRecordError)):
            raise ConformanceError(f"{where}._conformance_params(): each bad record is "
                                   f"(record, BadRecordError kind, field), got {bad!r}")
    extra: list[Callable[[Case], None]] = [check_params]
    for name in data.get("checks", ()):
        check = globals().get(f"check_{name}")
        if not callable(check) or check in CHECKS or check is check_params:
            raise ConformanceError(f"{where}._conformance_params(): no extra check {name!r} "
                                   f"(no check_{name} in streamanon.conformance)")
        extra.append(check)
    params = dict(data["params"])
    seeded = bool(data.get("seeded", False))

    def make(seed: int) -> Any:
        return cls(**params, seed=seed) if seeded else cls(**params)

    case = Case(data["name"], make, list(data["records"]), list(data["bad"]),
                data.get("line_of", _line), data["time_of"],
                positional=tuple(data.get("positional", ())), extra=extra)
    if case.cls is not cls:
        raise ConformanceError(f"{where}._conformance_params() must build a "
                               f"{cls.__qualname__}, built a {case.cls.__qualname__}")
    return case


class _Cases(dict):  # type: ignore[type-arg]
    """Name -> case factory of every public operator, discovered on first use."""

    def _fill(self) -> None:
        if not super().__len__():
            for cls in public_operators():
                self[case_of(cls).name] = functools.partial(case_of, cls)

    def __getitem__(self, key: Any) -> Any:
        self._fill()
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[Any]:
        self._fill()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill()
        return super().__len__()

    def items(self) -> Any:
        self._fill()
        return super().items()


#: name -> case factory, for every public operator (each carries its case)
CASES: dict[str, Callable[[], Case]] = _Cases()


def _line(x: Any) -> int | None:
    inner = x.record if isinstance(x, Suppressed) else x
    return getattr(inner, "line", None)


def check_ring_equals_centralized_rule(case: Case) -> None:
    """Exact counting: per cycle and value, the ring publishes what the central rule allows.

    ``D`` (distinct sensors reporting the value within Δt, current cycle included) is counted
    here from the readings themselves; the rule is :func:`streamanon.dezent.rules.publishable`.
    """
    from streamanon.dezent.rules import publishable

    op = case.make(case.seed)
    run(case, op, case.records)
    cfg = op.config
    window = cfg.window_cycles
    by_cycle: dict[int, list[Record]] = {}
    for r in case.records:
        by_cycle.setdefault(op._cycle_of(r.t), []).append(r)
    for cycle, current in by_cycle.items():
        recent = [r for c, rs in by_cycle.items() if 0 <= cycle - c < window for r in rs]
        for value in {r.a for r in current}:
            d = len({r.u for r in recent if r.a == value})
            n = sum(1 for r in current if r.a == value)
            want = int(publishable(d, n, cfg.z, cfg.rule))
            got = op.published_per_cycle.get(cycle, {}).get(value, 0)
            if got != want:
                _fail(case, "centralized_rule", f"cycle {cycle}, value {value!r}: published "
                      f"{got}, the centralized rule allows {want} (D={d}, n={n})")

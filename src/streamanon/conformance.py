"""The operator contract, checked for every operator (in the spirit of river's ``yield_checks``).

Each operator class carries its :class:`Case` (``_conformance_params()``: how to build it for a
seed, a stream to feed it, bad records it must refuse); :func:`public_operators` finds every
operator of the public API, :func:`yield_checks` generates the checks of the contract of
:mod:`streamanon.base` for a case, and ``tests/test_conformance.py`` runs every check on every
public operator (and fails on one without a case):

* ``protocol``: ``process``/``advance``/``flush`` return lists, ``summary`` has the keys;
* ``keyword_only``: parameters are keyword-only (except what the operator works on);
* ``accounting``: at every step ``read == released + suppressed + held``; after ``flush``
  nothing is held and every input record came out exactly once;
* ``determinism``: two operators built with one seed emit identical outputs;
* ``pickling``: pickling mid-stream (several cut points) and resuming changes nothing;
* ``bad_records``: each bad record raises its :class:`~streamanon.errors.BadRecordError` kind
  naming the field and carrying the record, and leaves the operator unchanged;
* ``advance``: telling the time loses nothing and keeps the accounting;
* ``docstring_example``: the class docstring has an example, and it runs;
* plus the case's own checks (for the deZent ring: exact counting equals the centralized rule).

A failed check raises :class:`ConformanceError` (a real exception: ``python -O`` keeps it).

>>> case = CASES["z"]()
>>> for check in yield_checks(case):
...     check(case)
>>> sorted(CASES)
['castle', 'dezent-ring', 'z', 'z-adaptive']
"""

from __future__ import annotations

import doctest
import inspect
import pickle
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamanon.base import SUMMARY_KEYS, StreamOperator
from streamanon.errors import BadRecordError
from streamanon.records import Record, Suppressed


class ConformanceError(AssertionError):
    """An operator broke its contract; the message says which rule and where."""


def _fail(case: Case, rule: str, text: str) -> None:
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


def case_of(cls: type) -> Case:
    """The case an operator class carries (its ``_conformance_params()``)."""
    params = getattr(cls, "_conformance_params", None)
    if params is None:
        raise ConformanceError(f"{cls.__module__}.{cls.__qualname__} is a public operator "
                               "without a conformance case (_conformance_params)")
    case = params()
    if not isinstance(case, Case) or case.cls is not cls:
        raise ConformanceError(f"{cls.__qualname__}._conformance_params() must give a Case "
                               "that builds a " + cls.__qualname__)
    return case


class _Cases(dict):  # type: ignore[type-arg]
    """Name -> case factory of every public operator, discovered on first use."""

    def _fill(self) -> None:
        if not super().__len__():
            for cls in public_operators():
                factory = cls._conformance_params  # type: ignore[attr-defined]
                if factory is not None:
                    self[factory().name] = factory

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


#: name -> case factory, for every public operator that carries a case
CASES: dict[str, Callable[[], Case]] = _Cases()


def _line(x: Any) -> int | None:
    inner = x.record if isinstance(x, Suppressed) else x
    return getattr(inner, "line", None)


def z_stream(n: int = 300, seed: int = 3) -> list[Record]:
    """Hierarchical values (with spaces, empty levels, unicode), ties in time, repeats."""
    rnd = random.Random(seed)
    values = ["EU*FR*Paris", "EU*FR*Lyon", "EU*DE*Berlin", "EU**Nice", " US*NY ", "Asia*東京"]
    t, out = 1_000.0, []
    for i in range(n):
        t += rnd.choice([0.0, 0.0, 1.0, 5.0, 30.0])
        out.append(Record(t, f"u{rnd.randrange(15)}", rnd.choice(values), repr(t), i + 2))
    return out


def _z_bad() -> list[tuple[Any, type[BadRecordError], str | None]]:
    from streamanon.errors import BadValueError, MissingFieldError, TimeOrderError

    return [(Record(0.0, "late", "x"), TimeOrderError, "t"),
            (Record(float("nan"), "clockless", "x"), BadValueError, "t"),
            (Record(1e12, "  ", "x"), MissingFieldError, "u"),
            (Record(1e12, "u1", ""), MissingFieldError, "a"),
            (Record(1e12, "u1", 42), BadValueError, "a")]  # type: ignore[arg-type]


def z_case() -> Case:
    from streamanon.zanon import ZAnonymizer

    return Case("z", lambda seed: ZAnonymizer(z=3, delta_t=300), z_stream(), _z_bad(), _line,
                lambda r: r.t)


def adaptive_case() -> Case:
    from streamanon.zanon import AdaptiveZAnonymizer

    return Case("z-adaptive", lambda seed: AdaptiveZAnonymizer(delta_t=300, k=2, pk=0.6,
                                                               rate=200, z0=3),
                z_stream(), _z_bad(), _line, lambda r: r.t)


def castle_case() -> Case:
    from streamanon.castle import CastleAnonymizer, CastleRow, RuleSet
    from streamanon.errors import BadValueError, MissingFieldError, UnknownCategoryError

    rules = RuleSet.from_dict({"id": "u", "time": "t", "attribute": [
        {"name": "age", "generalizer": "range", "domain": [0, 100]},
        {"name": "city", "generalizer": "hierarchy",
         "paths": [["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE"], ["US"]]},
        {"name": "zip", "generalizer": "reduction"},
        {"name": "dx", "sensitive": True}]})
    rnd = random.Random(5)
    rows = [CastleRow({"u": f"p{rnd.randrange(10)}", "t": i * 10.0, "age": rnd.randint(20, 60),
                 "city": rnd.choice(["Paris", "Lyon", "DE", "US"]),
                 "zip": rnd.choice(["75013", "75001", "6900"]), "dx": rnd.choice("abc")}, i + 2)
            for i in range(160)]
    bad = [(CastleRow({"u": "p1", "t": 0, "city": "US", "zip": "1", "dx": "a"}), MissingFieldError,
            "age"),
           (CastleRow({"u": "p1", "t": 0, "age": "old", "city": "US", "zip": "1", "dx": "a"}),
            BadValueError, "age"),
           (CastleRow({"u": "p1", "t": 0, "age": 3, "city": "Rome", "zip": "1", "dx": "a"}),
            UnknownCategoryError, "city"),
           (CastleRow({"t": 0, "age": 3, "city": "US", "zip": "1", "dx": "a"}), MissingFieldError,
            "u"),
           (CastleRow({"u": "p1", "t": 0, "age": 3, "city": "US", "zip": "1"}), MissingFieldError,
            "dx")]
    return Case("castle", lambda seed: CastleAnonymizer(rules, k=3, l=2, delta=25, beta=6,
                                                        max_delay=200),
                rows, bad, _line, lambda r: r.values["t"], positional=("rules",))


def dezent_case() -> Case:
    from streamanon.dezent.stream import DezentRing
    from streamanon.errors import DuplicateReadingError, TimeOrderError, UnknownCategoryError

    domain = ["low", "mid", "high", "peak"]
    rnd = random.Random(11)
    records: list[Record] = []
    for cycle in range(12):
        for s in rnd.sample(range(20), 14):  # not every sensor every cycle
            t = cycle * 900.0 + rnd.uniform(0, 899)
            records.append(Record(t, f"sn{s}", rnd.choice(domain), None, len(records) + 2))
    records.sort(key=lambda r: r.t)
    records = [Record(r.t, r.u, r.a, None, i + 2) for i, r in enumerate(records)]
    last = records[len(records) // 2 - 1]
    bad = [(Record(last.t, last.u, "off-scale"), UnknownCategoryError, "a"),
           (Record(last.t, last.u, "low"), DuplicateReadingError, "u"),
           (Record(last.t - 2000, "sn99", "low"), TimeOrderError, "t")]

    def make(seed: int) -> Any:
        return DezentRing(z=3, delta_t=1800, period=900, gateways=4, domain=domain,
                          p_pub=0.5, seed=seed)

    return Case("dezent-ring", make, records, bad, _line, lambda r: r.t,
                extra=[check_ring_equals_centralized_rule])


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

"""z-anonymity: publish a value only when at least ``z`` distinct users exposed it within Δt.

>>> op = ZAnonymizer(z=2, delta_t=10)
>>> op.process(Record(0, "alice", "EU*FR*Paris"))
[Suppressed(record=Record(t=0, u='alice', a='EU*FR*Paris'), reason='below threshold')]
>>> op.process(Record(1, "bob", " EU*FR*Lyon "))[0].a
'EU*FR'
>>> op.process(Record(20, "carol", "EU*FR*Lyon"))   # alice and bob expired (20 - 1 > 10)
[Suppressed(record=Record(t=20, u='carol', a='EU*FR*Lyon'), reason='below threshold')]

Design: docs/design/zanon.md
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import numpy as np

from streamanon.base import OperatorBase, legacy_positional
from streamanon.errors import (
    BadValueError,
    ConfigError,
    MissingFieldError,
    ProtocolError,
    TimeOrderError,
)
from streamanon.records import Record, Suppressed

SEPARATOR = "*"


def clean_text(value: object, field: str) -> str:
    """A user or value as the rule sees it: text without surrounding whitespace, never empty.

    The one place where z values are normalized (see the module docstring).

    >>> clean_text("  EU*FR ", "a"), clean_text("Zoë", "u")
    ('EU*FR', 'Zoë')
    """
    if not isinstance(value, str):
        raise BadValueError(field, f"field {field} must be text, got "
                            f"{type(value).__name__} {value!r}")
    text = value.strip()
    if not text:
        raise MissingFieldError(field, f"missing field {field} (empty or blank)")
    return text


def _clean_codes(
    names: Sequence[str], codes: np.ndarray, field: str
) -> tuple[Sequence[str], np.ndarray]:
    """:func:`clean_text` over categorical columns; names that clean to one value share a code."""
    try:
        if all(names) and all(map(str.__eq__, names, map(str.strip, names))):
            return names, codes
    except TypeError:  # a name that is not text: clean_text below says which
        pass
    cleaned = []
    for row, name in enumerate(names):
        try:
            cleaned.append(clean_text(name, field))
        except MissingFieldError:
            at = int(np.flatnonzero(np.asarray(codes) == row)[0]) if len(codes) else 0
            raise MissingFieldError(field, f"missing field {field} (empty or blank) in batch "
                                    f"row {at}") from None
    unique = list(dict.fromkeys(cleaned))
    index = {x: i for i, x in enumerate(unique)}
    remap = np.fromiter(map(index.__getitem__, cleaned), dtype=np.int64, count=len(cleaned))
    return unique, remap[np.asarray(codes, dtype=np.int64)]


def hierarchy_levels(a: str, separator: str = SEPARATOR) -> list[str]:
    """The levels of ``a``, coarsest first: ``"EU*FR*Paris"`` -> ``EU``, ``EU*FR``, ``EU*FR*Paris``.

    >>> hierarchy_levels("EU*FR*Paris")
    ['EU', 'EU*FR', 'EU*FR*Paris']
    """
    if separator not in a:
        return [a]
    levels = []
    pos = a.find(separator)
    while pos >= 0:
        levels.append(a[:pos])
        pos = a.find(separator, pos + 1)
    levels.append(a)
    return levels


def _evict(od: OrderedDict[str, float], t: float, delta_t: float) -> None:
    """Drop users whose latest exposure is more than Δt before ``t`` (oldest first)."""
    while od:
        first_t = od[next(iter(od))]
        if t - first_t > delta_t:
            od.popitem(last=False)
        else:
            break


def z_stream(n: int = 300, seed: int = 3) -> list[Record]:
    """A test stream: hierarchical values (with spaces, empty levels, unicode), ties in time,
    repeats; each record's ``line`` is its position + 2 (a file under a header).

    >>> [(r.t, r.u, r.a) for r in z_stream(2)]
    [(1000.0, 'u9', ' US*NY '), (1000.0, 'u5', ' US*NY ')]
    """
    import random

    rnd = random.Random(seed)
    values = ["EU*FR*Paris", "EU*FR*Lyon", "EU*DE*Berlin", "EU**Nice", " US*NY ", "Asia*東京"]
    t, out = 1_000.0, []
    for i in range(n):
        t += rnd.choice([0.0, 0.0, 1.0, 5.0, 30.0])
        out.append(Record(t, f"u{rnd.randrange(15)}", rnd.choice(values), repr(t), i + 2))
    return out


def _time_of(record: Record) -> float:
    return record.t


class ZAnonymizer(OperatorBase):
    """The z-anonymity operator (fixed ``z``); see the module docstring for the rule.

    Memory holds, per level value, the users whose latest exposure is still within Δt; values
    whose users all expired are dropped eagerly, so state is bounded by what is live in Δt.
    It follows the operator contract of :mod:`streamanon.base` (nothing is ever held).

    >>> op = ZAnonymizer(z=2, delta_t=60)
    >>> op.process(Record(0, "alice", "x"))
    [Suppressed(record=Record(t=0, u='alice', a='x'), reason='below threshold')]
    >>> op.process(Record(5, "bob", "x "))
    [Record(t=5, u='bob', a='x')]
    >>> op.summary()
    {'read': 2, 'released': 1, 'suppressed': 1, 'held': 0, 'released_per_level': [1]}
    """

    @classmethod
    def _conformance_params(cls) -> dict[str, Any]:
        """This operator's case of the contract checks, as data (the keys are described in
        :mod:`streamanon.conformance`): :func:`z_stream` and records it must refuse."""
        bad = [(Record(0.0, "late", "x"), TimeOrderError, "t"),
               (Record(float("nan"), "clockless", "x"), BadValueError, "t"),
               (Record(1e12, "  ", "x"), MissingFieldError, "u"),
               (Record(1e12, "u1", ""), MissingFieldError, "a"),
               (Record(1e12, "u1", 42), BadValueError, "a")]  # type: ignore[arg-type]
        return {"name": "z", "params": {"z": 3, "delta_t": 300}, "records": z_stream(),
                "bad": bad, "time_of": _time_of}

    @legacy_positional("z", "delta_t", "separator")
    def __init__(self, *, z: int, delta_t: float, separator: str = SEPARATOR) -> None:
        if isinstance(z, bool) or not isinstance(z, int | float) or int(z) != z or z < 1:
            raise ConfigError(f"z must be a positive integer, got {z!r}")
        if isinstance(delta_t, bool) or not isinstance(delta_t, int | float) or not (
                delta_t >= 0 and math.isfinite(delta_t)):
            raise ConfigError(f"delta_t must be a finite number >= 0, got {delta_t!r}")
        if not isinstance(separator, str) or not separator:
            raise ConfigError("separator must be a non-empty string")
        self.z = int(z)
        self.delta_t = float(delta_t)
        self.separator = separator
        self.clock = -math.inf
        self.read = 0
        self.published_per_level: list[int] = []
        self.suppressed = 0
        # record-at-a-time state: value -> user -> latest time (ordered by refresh)
        self._live: dict[str, OrderedDict[str, float]] | None = {}
        self._touches: deque[tuple[float, str]] = deque()
        # batch state: one row per live (value, user) pair, sorted by time (see _Tail)
        self._tail: _Tail | None = None

    # -- bookkeeping ---------------------------------------------------------------------
    def _check_time(self, t: object, what: object) -> float:
        """``t`` if the clock may move to it; refuses non-numbers, NaN and time going back."""
        if isinstance(t, bool) or not isinstance(t, int | float) or t != t:
            raise BadValueError("t", f"time is not a number: t={t!r} ({what!r})")
        if not t >= self.clock:
            raise TimeOrderError(
                "t", f"time goes backwards: t={t!r} after {self.clock!r} ({what!r}); readers "
                "re-stamp or reject such records before the operator")
        return t

    def _advance_clock(self, t: float, what: object) -> None:
        self.clock = self._check_time(t, what)

    def _count_published(self, level: int, n: int = 1) -> None:
        per = self.published_per_level
        if level >= len(per):
            per.extend([0] * (level + 1 - len(per)))
        per[level] += n

    @property
    def released(self) -> int:
        """Tuples published so far (at any level)."""
        return sum(self.published_per_level)

    published = released  # the z family's word for it (RunStats, the CLI summaries)

    def summary(self) -> dict[str, Any]:
        """Accounting: ``read == released + suppressed`` (nothing is ever held)."""
        return {"read": self.read, "released": self.released, "suppressed": self.suppressed,
                "held": 0, "released_per_level": list(self.published_per_level)}

    def live_pairs(self) -> int:
        """How many (value, user) exposures are held: the operator's memory."""
        if self._live is not None:
            return sum(len(od) for od in self._live.values())
        return len(self._tail_state()[0])

    def decide(self, counts: Sequence[int]) -> int:
        """The most specific level whose count reaches ``z``, or -1 to suppress."""
        z = self.z
        for level in range(len(counts) - 1, -1, -1):
            if counts[level] >= z:
                return level
        return -1

    # -- record at a time ----------------------------------------------------------------
    def clean(self, record: Record) -> Record:
        """``record`` as the rule sees it (:func:`clean_text`), checked against the clock.

        Raises :class:`~streamanon.errors.BadRecordError` naming the field, changes nothing.
        """
        try:
            self._check_time(record.t, record)
            u, a = clean_text(record.u, "u"), clean_text(record.a, "a")
        except (BadValueError, MissingFieldError, TimeOrderError) as exc:
            raise exc.about(record) from None
        if u is record.u and a is record.a:
            return record
        return Record(record.t, u, a, record.t_text, record.line)

    def observe(self, t: float, u: str, a: str) -> tuple[list[str], list[int]]:
        """Record ``(t, u, a)`` and return its levels with their distinct-user counts.

        The low-level step under :meth:`process`: ``u`` and ``a`` must already be clean
        (:func:`clean_text`); nothing is counted in the summary.
        """
        live = self._dict_state()
        self._advance_clock(t, (t, u, a))
        dt = self.delta_t
        levels = hierarchy_levels(a, self.separator)
        counts = []
        touches = self._touches
        for v in levels:
            od = live.get(v)
            if od is None:
                od = live[v] = OrderedDict()
            else:
                _evict(od, t, dt)
            od[u] = t
            od.move_to_end(u)
            counts.append(len(od))
            touches.append((t, v))
        # eager eviction of values nobody touches any more (bounded memory)
        while touches and t - touches[0][0] > dt:
            _, v = touches.popleft()
            od = live.get(v)
            if od is None:
                continue
            _evict(od, t, dt)
            if not od:
                del live[v]
        return levels, counts

    def process(self, record: Record) -> list[Record | Suppressed]:
        """The outcome of ``record`` as a one-item list (the operator contract).

        Raises :class:`~streamanon.errors.BadRecordError` for a record it cannot take (not a
        number, time going backwards, empty user or value); the operator is then unchanged.
        """
        return [self.process_one(record)]

    def process_one(self, record: Record) -> Record | Suppressed:
        """Publish ``record`` (at its most specific z-anonymous level) or suppress it."""
        record = self.clean(record)
        self.read += 1
        levels, counts = self.observe(record.t, record.u, record.a)
        return self.outcome(record, levels, counts)

    def outcome(
        self, record: Record, levels: list[str], counts: list[int]
    ) -> Record | Suppressed:
        """Apply the decision for counts already observed, and account for it."""
        level = self.decide(counts)
        if level < 0:
            self.suppressed += 1
            return Suppressed(record)
        self._count_published(level)
        if level == len(levels) - 1:
            return record
        return Record(record.t, record.u, levels[level], record.t_text, record.line)

    def advance(self, now: float) -> list[Record | Suppressed]:
        """Nothing is ever held back (zero delay): nothing leaves because time passed."""
        return []

    def flush(self) -> list[Record | Suppressed]:
        """Nothing is ever held back (zero delay): always empty."""
        return []

    # -- batches -------------------------------------------------------------------------
    def process_batch(
        self, t: np.ndarray, u: Sequence[str], a: Sequence[str]
    ) -> tuple[np.ndarray, list[str]]:
        """Process a batch in order; returns the indices of published tuples and their values.

        Identical to calling :meth:`process` on each tuple in turn (tested), at numpy speed.
        """
        u_names = list(dict.fromkeys(u))
        a_names = list(dict.fromkeys(a))
        u_codes = _lookup({x: i for i, x in enumerate(u_names)}, u)
        a_codes = _lookup({x: i for i, x in enumerate(a_names)}, a)
        idx, codes, names = self.process_codes(t, u_codes, u_names, a_codes, a_names)
        return idx, [names[c] for c in codes.tolist()]

    def process_codes(
        self,
        t: np.ndarray,
        u_codes: np.ndarray,
        u_names: Sequence[str],
        a_codes: np.ndarray,
        a_names: Sequence[str],
    ) -> tuple[np.ndarray, np.ndarray, Sequence[str]]:
        """:meth:`process_batch` on categorical columns (``u == u_names[u_codes]``, same for a).

        Returns the indices of published tuples, their published values as codes, and the
        names those codes index (``a_names`` when nothing was generalized). A bad row refuses
        the whole batch (:class:`~streamanon.errors.BadRecordError`), changing nothing.

        Args:
            t: the times.
            u_codes: the users, as codes into ``u_names``.
            u_names: the user names the codes index.
            a_codes: the values, as codes into ``a_names``.
            a_names: the values the codes index.
        """
        t = np.asarray(t, dtype=np.float64)
        n = len(t)
        if n == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), a_names
        prev = np.concatenate(([self.clock], t[:-1]))
        if not bool(np.all(t >= prev)):
            bad = int(np.flatnonzero(~(t >= prev))[0])
            what = (f"batch row {bad}: {u_names[u_codes[bad]]!r}, "
                    f"{a_names[a_codes[bad]]!r}")
            if t[bad] != t[bad]:
                raise BadValueError("t", f"time is not a number ({what})")
            raise TimeOrderError(
                "t", f"time goes backwards: t={t[bad]!r} after {prev[bad]!r} ({what}); "
                "readers re-stamp or reject such records before the operator")
        u_names, u_codes = _clean_codes(u_names, u_codes, "u")
        a_names, a_codes = _clean_codes(a_names, a_codes, "a")
        self.read += n
        tail_v, tail_vnames, tail_u, tail_unames, tail_t = self._tail_state()
        m = len(tail_v)
        a_codes = np.asarray(a_codes, dtype=np.int64)
        # level vocabulary: the tail's values (so that its codes stay valid), then the levels
        # of the batch's distinct values
        flat = not any(map(str.__contains__, a_names, repeat(self.separator)))
        levels_of = [[x] for x in a_names] if flat else [
            hierarchy_levels(x, self.separator) for x in a_names]
        vocab_v = dict.fromkeys(tail_vnames)
        if flat:
            vocab_v.update(dict.fromkeys(a_names))
        else:
            for lv in levels_of:
                vocab_v.update(dict.fromkeys(lv))
        vnames = list(vocab_v)
        v_index = {v: i for i, v in enumerate(vnames)}
        depth = max(map(len, levels_of))
        if flat:
            level_code = _lookup(v_index, a_names)[:, None]
        else:
            level_code = np.full((len(a_names), depth), -1, dtype=np.int64)
            for j, lv in enumerate(levels_of):
                level_code[j, : len(lv)] = [v_index[v] for v in lv]
        vocab_u = {x: i for i, x in enumerate(dict.fromkeys([*tail_unames, *u_names]))}
        unames = list(vocab_u)
        u_code = _lookup(vocab_u, u_names)[np.asarray(u_codes, dtype=np.int64)]
        if depth == 1:
            row_v, row_u, row_t = level_code[a_codes, 0], u_code, t
            row_tuple = row_level = None
        else:
            n_levels = (level_code >= 0).sum(axis=1)[a_codes]
            offsets = np.concatenate(([0], np.cumsum(n_levels)[:-1]))
            row_tuple = np.repeat(np.arange(n), n_levels)
            row_level = np.arange(int(n_levels.sum())) - np.repeat(offsets, n_levels)
            row_v = level_code[a_codes[row_tuple], row_level]
            row_u, row_t = u_code[row_tuple], t[row_tuple]
        all_v = np.concatenate((tail_v, row_v))
        all_u = np.concatenate((tail_u, row_u))
        all_t = np.concatenate((tail_t, row_t))
        counts, keep = _window_counts(all_v, all_u, all_t, self.delta_t, float(t[-1]))
        self._tail = (*_compact(all_v[keep], vnames), *_compact(all_u[keep], unames),
                      all_t[keep])
        self.clock = float(t[-1])
        ok = counts[m:] >= self.z
        if depth == 1:
            published = np.flatnonzero(ok)
            self._count_published(0, len(published))
            out_codes = a_codes[published]
            out_names = a_names  # the very list given: callers may rely on its identity
        else:
            if row_tuple is None or row_level is None:
                raise ProtocolError("hierarchical batch without its level rows")
            best = np.full(n, -1, dtype=np.int64)
            np.maximum.at(best, row_tuple[ok], row_level[ok])
            published = np.flatnonzero(best >= 0)
            out_codes = level_code[a_codes[published], best[published]]
            out_names = vnames
            for level, k in enumerate(np.bincount(best[published], minlength=1).tolist()):
                if k:
                    self._count_published(level, k)
        self.suppressed += n - len(published)
        return published, out_codes, out_names

    # -- the two state representations ----------------------------------------------------
    def _dict_state(self) -> dict[str, OrderedDict[str, float]]:
        if self._live is None:
            if self._tail is None:
                raise ProtocolError("the z state was lost (neither representation is set)")
            tail_v, tail_u, tail_t = _tail_names(self._tail)
            live: dict[str, OrderedDict[str, float]] = {}
            touches: deque[tuple[float, str]] = deque()
            for i in np.argsort(tail_t, kind="stable").tolist():
                v, tt = tail_v[i], float(tail_t[i])
                live.setdefault(v, OrderedDict())[tail_u[i]] = tt
                touches.append((tt, v))
            self._live, self._touches, self._tail = live, touches, None
        return self._live

    def _tail_state(self) -> _Tail:
        if self._tail is not None and len(self._tail) == 3:  # pickled by an earlier version
            v, u, t = self._tail  # type: ignore[misc]
            self._tail = (*_codes_of(v), *_codes_of(u), t)
        if self._tail is None:
            if self._live is None:
                raise ProtocolError("the z state was lost (neither representation is set)")
            rows = [
                (tt, v, uu)
                for v, od in self._live.items()
                for uu, tt in od.items()
                if self.clock - tt <= self.delta_t
            ]
            rows.sort(key=lambda r: r[0])
            self._tail = (*_codes_of([r[1] for r in rows]), *_codes_of([r[2] for r in rows]),
                          np.array([r[0] for r in rows], dtype=np.float64))
            self._live, self._touches = None, deque()
        return self._tail


#: The batch state: value codes and their names, user codes and their names, times; one row
#: per live (value, user) pair, in stream order. The names are distinct and each is used, so
#: that the next batch's vocabulary can start with them and the codes stay valid as they are.
_Tail = tuple[np.ndarray, list[str], np.ndarray, list[str], np.ndarray]


def _codes_of(names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Codes into the distinct names, in order of first appearance."""
    distinct = list(dict.fromkeys(names))
    return _lookup({x: i for i, x in enumerate(distinct)}, names), distinct


def _compact(codes: np.ndarray, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """``codes`` into ``names`` renumbered into only the names they use (in code order)."""
    used = np.zeros(len(names), dtype=bool)
    used[codes] = True
    kept = np.flatnonzero(used)
    renumber = np.cumsum(used) - 1
    return renumber[codes], [names[i] for i in kept.tolist()]


def _tail_names(tail: Any) -> tuple[list[str], list[str], np.ndarray]:
    """A tail's values and users as names, row by row (either layout)."""
    if len(tail) == 3:  # pickled by an earlier version
        return tail  # type: ignore[no-any-return]
    v, v_names, u, u_names, t = tail
    return ([v_names[c] for c in v.tolist()], [u_names[c] for c in u.tolist()], t)


def _lookup(index: dict[str, int], keys: Sequence[str]) -> np.ndarray:
    """Integer codes of ``keys`` in ``index`` (one C-level map, no Python loop body)."""
    return np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=len(keys))


def _stable_argsort(codes: np.ndarray) -> np.ndarray:
    """Stable argsort of non-negative int codes by 16-bit radix passes (numpy's radix sort)."""
    top = int(codes.max(initial=0))
    if top < 1 << 16:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    order = np.argsort((codes & 0xFFFF).astype(np.uint16), kind="stable")
    if top < 1 << 32:
        high = (codes[order] >> 16).astype(np.uint16)
        return order[np.argsort(high, kind="stable")]
    return order[np.argsort(codes[order] >> 16, kind="stable")]


def _search_sorted(a: np.ndarray, v: np.ndarray, side: str, step: int = 4096) -> np.ndarray:
    """``np.searchsorted(a, v, side)`` for sorted ``v``, one block of ``step`` keys at a time.

    The answers of a block lie between those of its first key and of the next block's first
    key, so each block searches only that slice of ``a``, which stays in the cache (a search
    over the whole array misses the cache on its first probes: about twice as slow).

    >>> a = np.array([1, 2, 2, 3, 5, 8, 8, 9])
    >>> v = np.array([0, 2, 2, 4, 8, 10])
    >>> bool((_search_sorted(a, v, "left", 2) == np.searchsorted(a, v, "left")).all())
    True
    """
    if len(v) <= 2 * step:
        return np.searchsorted(a, v, side=side)  # type: ignore[call-overload,no-any-return]
    starts = np.searchsorted(a, v[::step], side=side)  # type: ignore[call-overload]
    ends = [*starts[1:].tolist(), len(a)]
    out = np.empty(len(v), dtype=np.intp)
    for i, (lo, hi) in enumerate(zip(starts.tolist(), ends, strict=True)):
        block = slice(i * step, (i + 1) * step)
        out[block] = np.searchsorted(a[lo:hi], v[block], side=side)  # type: ignore[call-overload]
        out[block] += lo
    return out


#: the C build of the window counts (:mod:`streamanon.zanon._native`), once looked for:
#: ``[module]``, ``[None]`` when it is unavailable (the numpy version serves)
_NATIVE: list[Any] = []


def _window_counts(
    vc: np.ndarray, uc: np.ndarray, t: np.ndarray, delta_t: float, now: float
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct users per row's value within Δt, rows in stream order (``t`` non-decreasing).

    ``vc`` and ``uc`` are value and user codes (int64). Returns the counts and the rows of
    the new tail: each (value, user) pair's latest row still within Δt of ``now``, in stream
    order. One compiled pass (:mod:`streamanon.zanon._native`) where it could be built, else
    :func:`_window_counts_numpy`; the tests hold the two equal.
    """
    if not _NATIVE:
        from streamanon.zanon import _native

        _NATIVE.append(_native.load())
    native = _NATIVE[0]
    if native is None or not len(vc):
        return _window_counts_numpy(vc, uc, t, delta_t, now)
    return native.window_counts(np.ascontiguousarray(vc, dtype=np.int64),  # type: ignore[no-any-return]
                                np.ascontiguousarray(uc, dtype=np.int64),
                                np.ascontiguousarray(t, dtype=np.float64),
                                float(delta_t), float(now))


def _window_counts_numpy(
    vc: np.ndarray, uc: np.ndarray, t: np.ndarray, delta_t: float, now: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_window_counts` with numpy's sorts and searches (no compiler needed)."""
    r = len(vc)
    # per distinct time, the first one more than Δt later
    new_time = np.empty(r, dtype=bool)
    new_time[0] = True
    np.not_equal(t[1:], t[:-1], out=new_time[1:])
    distinct = bool(new_time.all())
    starts = None if distinct else np.flatnonzero(new_time)
    times = t if starts is None else t[starts]
    nt = len(times)
    later = _search_sorted(times, times + delta_t, "right")
    # correct float rounding of t + Δt so that the test is exactly ``t_p - t_q > Δt``
    while True:
        up = (later < nt) & (times[np.minimum(later, nt - 1)] - times <= delta_t)
        down = (later > 0) & (times[np.maximum(later - 1, 0)] - times > delta_t)
        if not (up.any() or down.any()):
            break
        later = later + up - down
    if starts is not None:  # per row: the first row more than Δt later
        later = np.append(starts, r)[later][np.cumsum(new_time) - 1]
    # group rows by value, keeping stream order inside each group
    by_v = _stable_argsort(vc)
    n_v = int(vc.max()) + 1
    vs = np.repeat(np.arange(n_v, dtype=np.int64), np.bincount(vc, minlength=n_v))  # vc[by_v]
    # next exposure of the same (value, user), as a position in by_v order (r = none)
    n_u = int(uc.max()) + 1
    # (gathered from narrow copies: a random gather's cost is the cache misses on its source)
    us = (uc.astype(np.uint16) if n_u <= 1 << 16 else uc)[by_v].astype(np.int64)
    if n_v * n_u <= 1 << 32:  # one code per pair: sorted in two 16-bit passes
        pair = vs * n_u + us
        by_pair = _stable_argsort(pair)
        pair = pair[by_pair]
        same = pair[1:] == pair[:-1]
    else:
        by_pair = _stable_argsort(us)
        by_pair = by_pair[_stable_argsort(vs[by_pair])]
        same = (vs[by_pair[:-1]] == vs[by_pair[1:]]) & (us[by_pair[:-1]] == us[by_pair[1:]])
    nxt = np.full(r, r, dtype=np.int64)
    nxt[by_pair[:-1][same]] = by_pair[1:][same]
    # hi: first position of the same value whose time is more than Δt after this row's: the
    # first whose row is ``later`` or after (inside a value's group, rows are in order)
    base = vs * (r + 1)
    narrow = later.astype(np.int32) if r < 1 << 31 else later
    hi = _search_sorted(base + by_v, base + narrow[by_v], "left")
    end = np.minimum(nxt, hi)
    ends_before = np.cumsum(np.bincount(end, minlength=r + 1)[:r])
    counts = np.empty(r, dtype=np.int64)
    counts[by_v] = np.arange(1, r + 1) - ends_before
    # the tail: rows whose pair has no later row, still within Δt of now (stream order)
    last = np.zeros(r, dtype=bool)
    last[by_v[nxt == r]] = True
    last &= now - t <= delta_t
    return counts, np.flatnonzero(last)

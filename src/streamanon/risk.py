"""Re-identification risk of a released table or stream, per window of released rows.

Rows equal on the quasi-identifiers (generalized values compared as the released text) form a
class; with ``f`` its size in a window of ``n`` rows and ``F`` its size in the population
(:func:`population_counts`; without one the release is its own population, ``F = f``):
``prosecutor = 1/min f``, ``prosecutor_avg = classes/n``, ``journalist = 1/min F``,
``marketer = (1/n) sum f/F``, ``sample_uniques`` = share of rows with ``f = 1``,
``smallest_class = min f`` (El Emam's definitions: docs/guarantees.md). A class the
population lacks, or holds fewer times than the sample, counts with ``F = f``.

>>> r = reidentification_risk([["a", "a", "b", "b", "b", "c"]])
>>> r.overall.smallest_class, r.overall.prosecutor, round(r.overall.prosecutor_avg, 3)
(1, 1.0, 0.5)
>>> round(r.overall.sample_uniques, 3), r.overall.journalist == r.overall.prosecutor
(0.167, True)
>>> p = population_counts([["a", "b", "c"]], [4, 6, 2])
>>> r = reidentification_risk([["a", "a", "b", "b", "b", "c"]], population=p)
>>> r.overall.journalist, round(r.overall.marketer, 4)
(0.5, 0.25)
>>> [w.rows for w in reidentification_risk([list("aabbbc")], window=4).windows]
[4, 2]

numpy on integer codes, no Python loop per row; a column may be a sequence of values, a
numpy array or a pyarrow array. A bad argument is a :class:`~streamanon.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from streamanon.errors import ConfigError

__all__ = ["Population", "ReleaseRisk", "RunningRisk", "WindowRisk", "class_codes",
           "population_counts", "reidentification_risk"]

#: Keys are kept below this so that ``key * cardinality + code`` never overflows int64.
_KEY_LIMIT = 1 << 62


def _factorize(values: Any) -> tuple[np.ndarray, list[Any]]:
    """Integer codes (0..m-1, in order of first appearance for plain sequences) and the
    distinct values, for one column."""
    if hasattr(getattr(values, "type", None), "index_type"):  # pyarrow, dictionary-encoded
        chunks = values.unify_dictionaries().chunks if hasattr(
            values, "unify_dictionaries") else [values]
        if chunks and values.null_count == 0:
            dictionary = chunks[0].dictionary.to_pylist()
            if len(set(dictionary)) == len(dictionary):  # each text once: codes are classes
                codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False)
                                        for c in chunks]).astype(np.int64)
                return codes, dictionary
        values = values.cast(values.type.value_type)
    if hasattr(values, "dictionary_encode"):  # a pyarrow Array or ChunkedArray
        encoded = values.dictionary_encode()
        if hasattr(encoded, "combine_chunks"):
            encoded = encoded.combine_chunks()
        indices = encoded.indices
        if encoded.null_count:  # a null is one more value
            nulls = np.asarray(encoded.is_null().to_numpy(zero_copy_only=False))
            codes = indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            codes[nulls] = len(encoded.dictionary)
            return codes, [*encoded.dictionary.to_pylist(), None]
        codes = indices.to_numpy(zero_copy_only=False).astype(np.int64)
        return codes, encoded.dictionary.to_pylist()
    seen: dict[Any, int] = {}
    add = seen.setdefault
    codes = np.fromiter((add(None if v is None else str(v), len(seen)) for v in values),
                        dtype=np.int64, count=len(values))
    return codes, list(seen)


def _combine(codes: list[np.ndarray], sizes: list[int], n: int) -> np.ndarray:
    """One int64 key per row, equal exactly when every column's code is equal."""
    key = np.zeros(n, dtype=np.int64)
    span = 1
    for c, m in zip(codes, sizes, strict=True):
        m = max(m, 1)
        if span * m >= _KEY_LIMIT:  # compress the keys so far to 0..distinct-1
            uniq, key = np.unique(key, return_inverse=True)
            key = key.astype(np.int64)
            span = max(len(uniq), 1)
        key = key * m + c
        span *= m
    return key


def class_codes(columns: Sequence[Any]) -> np.ndarray:
    """The equivalence class of each row (0..J-1, ordered by the classes' keys), rows being
    equal when every column's value is equal as text.

    >>> class_codes([["x", "y", "x"], ["1", "1", "1"]]).tolist()
    [0, 1, 0]
    """
    if not columns:
        raise ConfigError("at least one quasi-identifier column is needed")
    n = len(columns[0])
    if any(len(c) != n for c in columns):
        raise ConfigError("the quasi-identifier columns differ in length")
    parts = [_factorize(c) for c in columns]
    key = _combine([p[0] for p in parts], [len(p[1]) for p in parts], n)
    return np.unique(key, return_inverse=True)[1].astype(np.int64).reshape(-1)


@dataclass(frozen=True)
class Population:
    """Population class sizes: rows of quasi-identifier values (as released text) with a
    count each (:func:`population_counts`)."""

    columns: tuple[tuple[Any, ...], ...]
    counts: np.ndarray


def population_counts(columns: Sequence[Sequence[Any]], counts: Sequence[float] | None = None
                      ) -> Population:
    """A population table: ``columns`` in the order of the release's quasi-identifiers, and
    the population size of each row's class (default 1 per row: population micro-data
    generalized as the release is). Rows with equal values add up."""
    n = len(columns[0]) if columns else 0
    weights = np.ones(n) if counts is None else np.asarray(counts, dtype=float)
    if len(weights) != n:
        raise ConfigError("the population counts differ in length from its columns")
    if (weights < 0).any() or not np.isfinite(weights).all():
        raise ConfigError("population counts must be finite and >= 0")
    return Population(tuple(tuple(c) for c in columns), weights)


@dataclass(frozen=True)
class WindowRisk:
    """The figures of one window (see the module docstring); ``start`` is the window's first
    row (0-based) for row windows and whole releases, its start time for time windows;
    ``rows`` its released rows (with ids, ``n`` counts (individual, class) pairs instead)."""

    start: float
    rows: int
    classes: int
    smallest_class: int
    sample_uniques: float
    prosecutor: float
    prosecutor_avg: float
    journalist: float
    marketer: float
    not_in_population: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The figures as a plain dict (JSON-ready)."""
        out = asdict(self)
        if float(self.start).is_integer():
            out["start"] = int(self.start)
        return out


@dataclass(frozen=True)
class ReleaseRisk:
    """The whole release's figures and each window's (in order; empty without windows)."""

    overall: WindowRisk
    windows: list[WindowRisk]

    def worst(self) -> dict[str, Any]:
        """Each figure's worst value over the windows (the overall one without windows)."""
        ws = self.windows or [self.overall]
        return {
            "smallest_class": min(w.smallest_class for w in ws),
            "sample_uniques": max(w.sample_uniques for w in ws),
            "prosecutor": max(w.prosecutor for w in ws),
            "prosecutor_avg": max(w.prosecutor_avg for w in ws),
            "journalist": max(w.journalist for w in ws),
            "marketer": max(w.marketer for w in ws),
        }


def _figures(group: np.ndarray, f: np.ndarray, big_f: np.ndarray, missing: np.ndarray,
             n_groups: int) -> dict[str, np.ndarray]:
    """Per group (window), from one entry per (group, class), sorted by group, every group
    having one at least: its sample size ``f``, its population size ``big_f`` (>= f) and
    whether the population lacked it."""
    rows = np.bincount(group, weights=f, minlength=n_groups)
    classes = np.bincount(group, minlength=n_groups)
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])  # every group has an entry
    smallest = np.minimum.reduceat(f, first)
    smallest_pop = np.minimum.reduceat(big_f, first)
    uniques = np.bincount(group, weights=(f == 1).astype(float), minlength=n_groups)
    matched = np.bincount(group, weights=f / big_f, minlength=n_groups)
    lacking = np.bincount(group, weights=missing.astype(float), minlength=n_groups)
    safe = np.maximum(rows, 1)
    return {"rows": rows.astype(np.int64), "classes": classes, "smallest": smallest,
            "uniques": uniques / safe, "prosecutor": 1.0 / smallest,
            "prosecutor_avg": classes / safe, "journalist": 1.0 / smallest_pop,
            "marketer": matched / safe, "lacking": lacking.astype(np.int64)}


def _population_sizes(columns: Sequence[Any], pop: Population, cls: np.ndarray,
                      n_classes: int) -> np.ndarray:
    """The population count of each sample class (0 where the population lacks it)."""
    if len(pop.columns) != len(columns):
        raise ConfigError(f"the population has {len(pop.columns)} quasi-identifier columns, "
                         f"the release {len(columns)}")
    n = len(cls)
    m = len(pop.counts)
    joined = []
    for sample, popcol in zip(columns, pop.columns, strict=True):
        codes, values = _factorize(sample)
        pop_codes, pop_values = _factorize(popcol)
        # map the population's values onto the sample's codes (unknown -> a fresh code)
        index = {v: i for i, v in enumerate(values)}
        fresh = len(values)
        remap = np.array([index.get(None if v is None else str(v), fresh)
                          for v in pop_values], dtype=np.int64)
        joined.append((np.concatenate([codes, remap[pop_codes] if m else
                                       np.zeros(0, np.int64)]), fresh + 1))
    key = _combine([j[0] for j in joined], [j[1] for j in joined], n + m)
    uniq, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    per_key = np.bincount(inverse[n:], weights=pop.counts, minlength=len(uniq))
    sizes = np.zeros(n_classes)
    sizes[cls] = per_key[inverse[:n]]
    return sizes


def reidentification_risk(
    columns: Sequence[Any], *, window: int | None = None, every: float | None = None,
    times: Sequence[float] | np.ndarray | None = None, population: Population | None = None,
    ids: Sequence[Any] | None = None,
) -> ReleaseRisk:
    """The release's risk figures, overall and per window.

    Args:
        columns: the quasi-identifier columns of the released rows, in release order, each a
            sequence of values compared as text.
        window: figures for each run of this many consecutive rows (the last may be shorter).
        every: figures for each window of this many seconds of ``times``: a row falls into
            window ``floor(t / every)`` (windows aligned on multiples of ``every``; a window
            without rows is not listed).
        times: with ``every``, each row's time (seconds).
        population: the population's class sizes (:func:`population_counts`), for the
            journalist and marketer risks; None = the release is its own population.
        ids: each row's individual: a class's size is then its number of distinct
            individuals (an individual released many times in one class counts once), and
            ``n`` the number of (individual, class) pairs; None = one row, one individual.
    """
    if window is not None and every is not None:
        raise ConfigError("give window or every, not both")
    if window is not None and window < 1:
        raise ConfigError("window must be >= 1 row")
    if every is not None and not every > 0:
        raise ConfigError("every must be > 0 seconds")
    cls = class_codes(columns)
    n = len(cls)
    if n == 0:
        empty = WindowRisk(0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return ReleaseRisk(empty, [])
    n_classes = int(cls.max()) + 1
    id_codes: np.ndarray | None = None
    n_ids = 0
    if ids is not None:
        if len(ids) != n:
            raise ConfigError("ids must give one individual per row")
        id_codes, id_values = _factorize(ids)
        n_ids = max(len(id_values), 1)
    if population is not None:
        pop_sizes = _population_sizes(columns, population, cls, n_classes)
    groups: np.ndarray | None = None
    starts: np.ndarray | None = None
    if window is not None:
        groups = np.arange(n, dtype=np.int64) // window
        starts = np.arange(int(groups[-1]) + 1, dtype=float) * window
    elif every is not None:
        if times is None or len(times) != n:
            raise ConfigError("every needs one time per row")
        t = np.asarray(times, dtype=float)
        if not np.isfinite(t).all():
            raise ConfigError("every needs finite times")
        slot = np.floor(t / every).astype(np.int64)
        slots, groups = np.unique(slot, return_inverse=True)
        groups = groups.reshape(-1).astype(np.int64)
        starts = slots.astype(float) * every
    results = []
    for g, start in ((np.zeros(n, dtype=np.int64), None), (groups, starts)):
        if g is None:
            results.append([])
            continue
        n_groups = 1 if start is None else len(start)
        if id_codes is None:
            pair, f = np.unique(g * n_classes + cls, return_counts=True)
        else:  # distinct individuals per (window, class)
            pair, row_pair = np.unique(g * n_classes + cls, return_inverse=True)
            distinct = np.unique(row_pair.reshape(-1) * n_ids + id_codes)
            f = np.bincount(distinct // n_ids, minlength=len(pair))
        rows = np.bincount(g, minlength=n_groups)
        group, pair_cls = pair // n_classes, pair % n_classes
        f = f.astype(np.int64)
        if population is None:
            big_f = f.astype(float)
            missing = np.zeros(len(f), dtype=bool)
        else:
            pop = pop_sizes[pair_cls]
            missing = pop < f
            big_f = np.where(missing, f, pop).astype(float)
        fig = _figures(group, f, big_f, missing, n_groups)
        origin = np.zeros(1) if start is None else start
        results.append([
            WindowRisk(float(origin[i]), int(rows[i]), int(fig["classes"][i]),
                       int(fig["smallest"][i]), float(fig["uniques"][i]),
                       float(fig["prosecutor"][i]), float(fig["prosecutor_avg"][i]),
                       float(fig["journalist"][i]), float(fig["marketer"][i]),
                       int(fig["lacking"][i]))
            for i in range(n_groups)])
    return ReleaseRisk(results[0][0], results[1])


class RunningRisk:
    """The figures of :func:`reidentification_risk` (no population, one row one individual)
    kept up to date while a release is made: :meth:`add` counts ``n`` released rows of one
    class (its quasi-identifier values, compared as text), :meth:`figures` gives the last
    complete window of ``window`` rows (before the first is complete: the rows so far), or
    the whole release with ``window=None``. Plain data: part of a pickled operator. Memory:
    one count per class of the current window (of the whole release without a window)."""

    def __init__(self, qis: Sequence[str], *, window: int | None = None) -> None:
        if window is not None and window < 1:
            raise ConfigError("window must be >= 1 row")
        self.qis, self.window = list(qis), window
        self.counts: dict[tuple[str, ...], int] = {}
        self.rows = 0  # in the current window
        self.last: WindowRisk | None = None  # the last complete window
        self.start = 0  # the current window's first row

    def add(self, values: Any, n: int) -> None:
        """``n`` released rows of the class of ``values`` (a mapping with the
        quasi-identifiers)."""
        key = tuple(str(values[q]) for q in self.qis)
        while n > 0:
            take = n if self.window is None else min(n, self.window - self.rows)
            self.counts[key] = self.counts.get(key, 0) + take
            self.rows += take
            n -= take
            if self.window is not None and self.rows == self.window:
                self.last = self._current()
                self.start += self.rows
                self.counts, self.rows = {}, 0

    def _current(self) -> WindowRisk:
        if not self.counts:
            return WindowRisk(self.start, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)
        f = np.fromiter(self.counts.values(), np.int64, len(self.counts))
        n, classes, smallest = int(f.sum()), len(f), int(f.min())
        return WindowRisk(self.start, n, classes, smallest, float((f == 1).sum()) / n,
                          1.0 / smallest, classes / n, 1.0 / smallest, classes / n)

    def figures(self) -> WindowRisk:
        """The last complete window's figures (the rows so far before there is one)."""
        return self.last if self.last is not None else self._current()

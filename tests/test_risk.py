"""The risk figures against pycanon and against the textbook formulas, on batch tables.

pycanon (the batch tool) computes k (the smallest class) and the equivalence classes of a
table (its risk metrics, ``pycanon.metrics.max_rir`` and ``average_rir``, are one line over
those classes, ``1 / min`` and the mean of ``1 / size``; that module needs scipy, so they are
applied here to pycanon's classes); the formulas of El Emam (prosecutor, journalist,
marketer risk, sample uniques) are recomputed here with plain counting, and each window must
be exactly the figures of its rows taken alone.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.risk import class_codes, population_counts, reidentification_risk

pycanon_anonymity = pytest.importorskip("pycanon.anonymity")
pycanon_aux = pytest.importorskip("pycanon.anonymity.utils.aux_anonymity")

VALUES = st.sampled_from(["a", "b", "[1,4]", "[1,5]", "*", ""])


@st.composite
def tables(draw: st.DrawFn, min_rows: int = 1) -> list[list[str]]:
    """Columns of released text: 1-3 quasi-identifiers, 1-60 rows."""
    n_cols = draw(st.integers(1, 3))
    n = draw(st.integers(min_rows, 60))
    return [draw(st.lists(VALUES, min_size=n, max_size=n)) for _ in range(n_cols)]


def textbook(cols: list[list[str]], population: Counter | None = None) -> dict[str, float]:
    """El Emam's figures by plain counting (no numpy)."""
    rows = list(zip(*cols, strict=True))
    f = Counter(rows)
    n = len(rows)
    big_f = {key: max(population.get(key, 0), f[key]) if population is not None else f[key]
             for key in f}
    return {
        "rows": n,
        "classes": len(f),
        "smallest_class": min(f.values()),
        "sample_uniques": sum(1 for r in rows if f[r] == 1) / n,
        "prosecutor": max(1 / f[r] for r in rows),
        "prosecutor_avg": sum(1 / f[r] for r in rows) / n,
        "journalist": max(1 / big_f[r] for r in rows),
        "marketer": sum(f[k] / big_f[k] for k in f) / n,
    }


def figures(w: object) -> dict[str, float]:
    return {k: getattr(w, k) for k in ("rows", "classes", "smallest_class", "sample_uniques",
                                       "prosecutor", "prosecutor_avg", "journalist",
                                       "marketer")}


def assert_close(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for key in got:
        assert math.isclose(got[key], want[key], rel_tol=1e-12), (key, got[key], want[key])


@settings(max_examples=60, deadline=None)
@given(tables())
def test_pycanon_agrees_on_k_classes_and_highest_risk(cols: list[list[str]]) -> None:
    names = [f"q{i}" for i in range(len(cols))]
    frame = pd.DataFrame(dict(zip(names, cols, strict=True)))
    r = reidentification_risk(cols).overall
    assert r.smallest_class == pycanon_anonymity.k_anonymity(frame, names)
    sizes = [len(ec) for ec in pycanon_aux.get_equiv_class(frame, names)]
    assert r.classes == len(sizes)
    assert math.isclose(r.prosecutor, 1 / min(sizes))  # pycanon's max_rir
    assert math.isclose(r.prosecutor_avg, len(sizes) / len(frame))
    assert math.isclose(r.sample_uniques, sizes.count(1) / len(frame))
    # El Emam's average is over rows; pycanon's average_rir is over classes
    codes = class_codes(cols)
    assert sorted(np.bincount(codes).tolist()) == sorted(sizes)


@settings(max_examples=150, deadline=None)
@given(tables())
def test_every_figure_is_the_textbook_formula(cols: list[list[str]]) -> None:
    r = reidentification_risk(cols)
    assert_close(figures(r.overall), textbook(cols))
    assert r.windows == []
    assert r.overall.journalist == r.overall.prosecutor  # no population: the release is it
    assert r.overall.marketer == r.overall.prosecutor_avg


@settings(max_examples=150, deadline=None)
@given(tables(), st.data())
def test_with_a_population_journalist_and_marketer_follow_it(cols: list[list[str]],
                                                             data: st.DataObject) -> None:
    rows = list(zip(*cols, strict=True))
    keys = [*sorted(set(rows)), tuple("zz" for _ in cols)]  # plus a class not released
    extra = data.draw(st.lists(st.integers(0, 30), min_size=len(keys), max_size=len(keys)))
    kept = data.draw(st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)))
    f = Counter(rows)
    pop = Counter({k: f.get(k, 0) + e for k, e, keep in zip(keys, extra, kept, strict=True)
                   if keep})
    table = population_counts([list(c) for c in zip(*pop, strict=True)] if pop else
                              [[] for _ in cols], list(pop.values()))
    r = reidentification_risk(cols, population=table).overall
    assert_close(figures(r), textbook(cols, pop))
    assert r.not_in_population == sum(1 for k in f if k not in pop)
    assert r.journalist <= r.prosecutor and r.marketer <= r.prosecutor_avg + 1e-12


@settings(max_examples=100, deadline=None)
@given(tables(), st.data(), st.sampled_from([None, 7]))
def test_with_ids_a_class_counts_its_distinct_individuals(cols: list[list[str]],
                                                          data: st.DataObject,
                                                          window: int | None) -> None:
    n = len(cols[0])
    ids = data.draw(st.lists(st.sampled_from("uvwxyz"), min_size=n, max_size=n))
    r = reidentification_risk(cols, ids=ids, window=window)
    starts = range(0, n, window) if window else [0]
    for w, start in zip(r.windows or [r.overall], starts, strict=True):
        end = min(start + window, n) if window else n
        pairs = sorted({(ids[i], *(c[i] for c in cols)) for i in range(start, end)})
        deduped = [[p[j + 1] for p in pairs] for j in range(len(cols))]  # one row a pair
        want = textbook(deduped) | {"rows": end - start}
        assert_close(figures(w), want)


def test_population_rows_without_counts_count_one_each() -> None:
    cols = [["a", "a", "b"]]
    micro = population_counts([["a", "b", "a", "b", "b", "a"]])
    r = reidentification_risk(cols, population=micro).overall
    assert r.journalist == 1 / 3 and math.isclose(r.marketer, (2 / 3 + 1 / 3) / 3)


@settings(max_examples=100, deadline=None)
@given(tables(), st.integers(1, 25))
def test_each_row_window_is_its_rows_taken_alone(cols: list[list[str]], size: int) -> None:
    r = reidentification_risk(cols, window=size)
    n = len(cols[0])
    assert [w.start for w in r.windows] == list(range(0, n, size))
    for w in r.windows:
        part = [c[int(w.start):int(w.start) + size] for c in cols]
        assert_close(figures(w), textbook(part))
    assert_close(figures(r.overall), textbook(cols))


@settings(max_examples=100, deadline=None)
@given(tables(), st.data(), st.sampled_from([1.0, 2.5, 10.0]))
def test_each_time_window_holds_the_rows_of_its_interval(cols: list[list[str]],
                                                         data: st.DataObject,
                                                         every: float) -> None:
    n = len(cols[0])
    times = data.draw(st.lists(st.floats(-50, 50, allow_nan=False), min_size=n, max_size=n))
    r = reidentification_risk(cols, every=every, times=times)
    slots = sorted({math.floor(t / every) for t in times})
    assert [w.start for w in r.windows] == [s * every for s in slots]
    for w, s in zip(r.windows, slots, strict=True):
        idx = [i for i, t in enumerate(times) if math.floor(t / every) == s]
        assert_close(figures(w), textbook([[c[i] for i in idx] for c in cols]))


@settings(max_examples=100, deadline=None)
@given(tables(), st.randoms(use_true_random=False))
def test_the_whole_release_ignores_row_order_and_more_columns_only_split(
        cols: list[list[str]], rnd: object) -> None:
    order = list(range(len(cols[0])))
    rnd.shuffle(order)  # type: ignore[attr-defined]
    shuffled = [[c[i] for i in order] for c in cols]
    assert figures(reidentification_risk(shuffled).overall) == figures(
        reidentification_risk(cols).overall)
    fewer = reidentification_risk(cols[:1]).overall
    more = reidentification_risk(cols).overall
    assert more.smallest_class <= fewer.smallest_class and more.classes >= fewer.classes


def test_values_compare_as_text_and_pyarrow_columns_match_lists() -> None:
    pa = pytest.importorskip("pyarrow")
    cols = [["1", 1, "1.0", None, ""], ["x"] * 5]
    assert class_codes(cols).tolist()[:2] == [0, 0]  # 1 and "1" are the same text
    assert len(set(class_codes(cols).tolist())) == 4  # "1.0", None and "" differ
    text = [["[1,4]", "a", None, "a"], ["x", "y", "x", "y"]]
    arrow = [pa.array(c, type=pa.string()) for c in text]
    chunked = [pa.chunked_array([c[:2], c[2:]]) for c in arrow]
    assert figures(reidentification_risk(arrow).overall) == figures(
        reidentification_risk(text).overall) == figures(reidentification_risk(chunked).overall)


def test_many_columns_of_many_values_do_not_overflow_the_key() -> None:
    rng = np.random.default_rng(3)
    cols = [[str(v) for v in rng.integers(0, 5000, 2000)] for _ in range(8)]
    cols.append(list(cols[0]))  # a repeated column: the same classes
    assert figures(reidentification_risk(cols).overall) == figures(
        reidentification_risk(cols[:8]).overall)
    assert_close(figures(reidentification_risk(cols).overall), textbook(cols))


def test_bad_arguments_are_value_errors() -> None:
    with pytest.raises(ValueError):
        reidentification_risk([["a"]], window=1, every=1.0, times=[0])
    with pytest.raises(ValueError):
        reidentification_risk([["a"]], every=1.0)
    with pytest.raises(ValueError):
        reidentification_risk([["a", "b"], ["a"]])
    with pytest.raises(ValueError):
        reidentification_risk([])
    empty = reidentification_risk([[]])
    assert empty.overall.rows == 0 and empty.windows == []

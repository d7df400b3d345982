"""The z rule: hand-checked cases, batch == record-at-a-time, value semantics (whitespace,
empty levels, unicode), typed errors, bounded memory. The operator contract (accounting,
pickling, determinism, bad records) is checked for every operator in tests/test_conformance.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.errors import (
    BadRecordError,
    BadValueError,
    ConfigError,
    MissingFieldError,
    TimeOrderError,
)
from streamanon.records import Record, Suppressed
from streamanon.zanon import AdaptiveZAnonymizer, ZAnonymizer, hierarchy_levels
from tests.zanon.strategies import streams


def outcomes(op: ZAnonymizer, records: list[Record]) -> list[tuple[float, str, str] | None]:
    out = []
    for r in records:
        [res] = op.process(r)
        out.append(None if isinstance(res, Suppressed) else (res.t, res.u, res.a))
    return out


def batch_outcomes(op: ZAnonymizer, records: list[Record], cuts: list[int]):
    out: list[tuple[float, str, str] | None] = [None] * len(records)
    bounds = [0, *sorted(set(cuts)), len(records)]
    for lo, hi in itertools.pairwise(bounds):
        chunk = records[lo:hi]
        idx, values = op.process_batch(np.array([r.t for r in chunk]), [r.u for r in chunk],
                                       [r.a for r in chunk])
        for i, v in zip(idx.tolist(), values, strict=True):
            out[lo + i] = (chunk[i].t, chunk[i].u, v)
    return out


def one(op, record):
    [out] = op.process(record)
    return out


def test_distinct_users_not_repeats():
    op = ZAnonymizer(z=2, delta_t=100)
    assert isinstance(one(op, Record(0, "alice", "x")), Suppressed)
    assert isinstance(one(op, Record(1, "alice", "x")), Suppressed)  # same user: still 1
    assert one(op, Record(2, "bob", "x")) == Record(2, "bob", "x")


def test_strict_expiry_at_exactly_delta_t():
    op = ZAnonymizer(z=2, delta_t=10)
    op.process(Record(0, "alice", "x"))
    assert one(op, Record(10, "bob", "x")) == Record(10, "bob", "x")  # 10 - 0 = Δt: kept
    op2 = ZAnonymizer(z=2, delta_t=10)
    op2.process(Record(0, "alice", "x"))
    assert isinstance(one(op2, Record(10.5, "bob", "x")), Suppressed)  # > Δt: dropped


def test_refresh_keeps_a_user_alive():
    op = ZAnonymizer(z=2, delta_t=10)
    op.process(Record(0, "alice", "x"))
    op.process(Record(8, "alice", "x"))
    assert one(op, Record(15, "bob", "x")) == Record(15, "bob", "x")


def test_most_specific_level_that_reaches_z():
    op = ZAnonymizer(z=2, delta_t=60)
    op.process(Record(0, "a", "EU*FR*Paris"))
    assert one(op, Record(1, "b", "EU*DE*Berlin")).a == "EU"
    assert one(op, Record(2, "c", "EU*FR*Lyon")).a == "EU*FR"
    assert one(op, Record(3, "d", "EU*FR*Lyon")).a == "EU*FR*Lyon"
    assert op.published_per_level == [1, 1, 1]
    assert op.summary() == {"read": 4, "released": 3, "suppressed": 1, "held": 0,
                            "released_per_level": [1, 1, 1]}


def test_no_buffering_suppressed_never_released_later():
    op = ZAnonymizer(z=3, delta_t=60)
    results = [one(op, Record(i, f"u{i}", "x")) for i in range(3)]
    assert [isinstance(r, Suppressed) for r in results] == [True, True, False]
    assert op.flush() == [] and op.advance(1e9) == []


def test_surrounding_whitespace_is_not_part_of_a_value_or_user():
    """Decided once (``clean_text``): zanon strips values; streamanon strips users too."""
    op = ZAnonymizer(z=2, delta_t=60)
    assert isinstance(one(op, Record(0, "alice", "x ")), Suppressed)
    assert one(op, Record(1, " bob\t", "\u00a0x")) == Record(1, "bob", "x")
    assert isinstance(one(op, Record(2, "alice ", "y")), Suppressed)
    assert isinstance(one(op, Record(3, "alice", " y")), Suppressed)  # alice twice: 1 user
    # inner spaces, empty levels and non-ASCII text are kept as written
    assert hierarchy_levels("EU**Paris") == ["EU", "EU*", "EU**Paris"]
    assert isinstance(one(op, Record(4, "Zoë", "EU**São Paulo")), Suppressed)
    assert one(op, Record(5, "ünal", "EU**Lyon")) == Record(5, "ünal", "EU*")


def test_batch_engine_applies_the_same_value_semantics():
    op = ZAnonymizer(z=2, delta_t=60)
    idx, values = op.process_batch(np.array([0.0, 1.0, 2.0]), ["a", " b", "b"],
                                   ["x", "x ", " x"])
    assert idx.tolist() == [1, 2] and values == ["x", "x"]
    with pytest.raises(MissingFieldError, match="batch row 1"):
        op.process_batch(np.array([3.0, 4.0]), ["c", " "], ["x", "x"])
    assert op.summary()["read"] == 3  # the refused batch changed nothing


@pytest.mark.parametrize(("record", "error", "field"), [
    (Record(9, "b", "y"), TimeOrderError, "t"),
    (Record(float("nan"), "b", "y"), BadValueError, "t"),
    (Record("11", "b", "y"), BadValueError, "t"),
    (Record(11, "  ", "y"), MissingFieldError, "u"),
    (Record(11, "b", ""), MissingFieldError, "a"),
    (Record(11, "b", 7), BadValueError, "a"),
])
def test_bad_records_raise_typed_errors_and_change_nothing(record, error, field):
    for op in (ZAnonymizer(z=1, delta_t=5), AdaptiveZAnonymizer(delta_t=5, k=2, pk=0.5)):
        op.process(Record(10, "a", "x"))
        before = op.summary()
        with pytest.raises(error) as caught:
            op.process(record)
        assert isinstance(caught.value, BadRecordError)
        assert caught.value.field == field and caught.value.record is record
        assert op.summary() == before


def test_time_going_backwards_in_a_batch_is_refused():
    op = ZAnonymizer(z=1, delta_t=5)
    op.process(Record(10, "a", "x"))
    with pytest.raises(TimeOrderError, match="time goes backwards"):
        op.process_batch(np.array([11.0, 10.5]), ["a", "b"], ["x", "x"])


@pytest.mark.parametrize("bad", [{"z": 0, "delta_t": 1}, {"z": 2, "delta_t": float("nan")},
                                 {"z": 2, "delta_t": -1}, {"z": 1.5, "delta_t": 1},
                                 {"z": True, "delta_t": 1}, {"z": 2, "delta_t": 1,
                                                            "separator": ""}])
def test_invalid_parameters(bad):
    with pytest.raises(ConfigError):
        ZAnonymizer(**bad)


def test_parameters_are_keyword_only_with_a_deprecated_positional_path():
    with pytest.warns(DeprecationWarning, match="by keyword"):
        op = ZAnonymizer(3, 60)
    assert (op.z, op.delta_t) == (3, 60.0)
    with pytest.raises(TypeError, match="multiple values"):
        ZAnonymizer(3, z=4, delta_t=60)  # type: ignore[misc]


def test_hierarchy_levels():
    assert hierarchy_levels("a") == ["a"]
    assert hierarchy_levels("a*b*c") == ["a", "a*b", "a*b*c"]
    assert hierarchy_levels("a**b") == ["a", "a*", "a**b"]


@given(streams(), st.integers(1, 5), st.sampled_from([0.0, 1.0, 2.5, 10.0, 1e9]),
       st.lists(st.integers(0, 120), max_size=4))
def test_batch_equals_record_at_a_time(records, z, delta_t, cuts):
    expected = outcomes(ZAnonymizer(z=z, delta_t=delta_t), records)
    cuts = [c for c in cuts if c <= len(records)]
    assert batch_outcomes(ZAnonymizer(z=z, delta_t=delta_t), records, cuts) == expected


@given(streams(), st.integers(1, 4), st.sampled_from([0.0, 2.5, 10.0]), st.integers(0, 120))
def test_mixing_engines_mid_stream(records, z, delta_t, cut):
    """State moves between the dict and the batch representation without changing anything."""
    cut = min(cut, len(records))
    expected = outcomes(ZAnonymizer(z=z, delta_t=delta_t), records)
    op = ZAnonymizer(z=z, delta_t=delta_t)
    head = batch_outcomes(op, records[:cut], [])
    mid = outcomes(op, records[cut: (cut + len(records)) // 2])
    tail = batch_outcomes(op, records[(cut + len(records)) // 2:], [])
    assert head + mid + tail == expected


def test_memory_bounded_by_live_window():
    """Values nobody touches again are forgotten once their users expire."""
    op = ZAnonymizer(z=2, delta_t=10)
    for i in range(10_000):
        op.process(Record(float(i), f"u{i % 7}", f"value-{i}"))
    assert op.live_pairs() <= 11 * 1  # one exposure per second, Δt = 10
    t = np.arange(10_000, 20_000, dtype=float)
    op.process_batch(t, [f"u{i % 7}" for i in range(10_000)], [f"w{i}" for i in range(10_000)])
    assert op.live_pairs() <= 11


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-5, 40), max_size=300), st.lists(st.integers(-10, 50), max_size=300),
       st.sampled_from(["left", "right"]), st.integers(1, 9))
def test_blockwise_search_equals_numpys(a: list[int], v: list[int], side: str, step: int
                                        ) -> None:
    """The batch engine's searches of sorted keys, block by block, answer as numpy's."""
    from streamanon.zanon.operator import _search_sorted

    arr, keys = np.sort(np.array(a, dtype=np.int64)), np.sort(np.array(v, dtype=np.int64))
    got = _search_sorted(arr, keys, side, step)
    assert got.tolist() == np.searchsorted(arr, keys, side=side).tolist()


@given(streams(), st.lists(st.integers(0, 80), max_size=4))
def test_a_tail_pickled_by_an_earlier_version_is_taken_as_it_is(records, cuts) -> None:
    """Batch state saved before the tail was kept as codes (names row by row) resumes
    exactly as the uninterrupted operator (a Flink or Kafka checkpoint of the older code)."""
    import pickle

    from streamanon.zanon.operator import _tail_names

    if not records:
        return
    half = len(records) // 2
    plain, resumed = ZAnonymizer(z=2, delta_t=30), ZAnonymizer(z=2, delta_t=30)
    want = batch_outcomes(plain, records, cuts)
    first = batch_outcomes(resumed, records[:half], [c for c in cuts if c < half])
    if resumed._tail is not None:
        resumed._tail = _tail_names(resumed._tail)  # the earlier layout
    resumed = pickle.loads(pickle.dumps(resumed))
    rest = batch_outcomes(resumed, records[half:], [c - half for c in cuts if c > half])
    assert first + rest == want

"""The z rule: hand-checked cases, batch == record-at-a-time, conformance, bounded memory."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamanon.conformance import check_operator
from streamanon.records import Record, Suppressed
from streamanon.zanon import ZAnonymizer, hierarchy_levels
from tests.zanon.strategies import streams


def outcomes(op: ZAnonymizer, records: list[Record]) -> list[tuple[float, str, str] | None]:
    out = []
    for r in records:
        res = op.process(r)
        out.append(None if isinstance(res, Suppressed) else (res.t, res.u, res.a))
    return out


def batch_outcomes(op: ZAnonymizer, records: list[Record], cuts: list[int]):
    out: list[tuple[float, str, str] | None] = [None] * len(records)
    bounds = [0, *sorted(set(cuts)), len(records)]
    for lo, hi in pairwise(bounds):
        chunk = records[lo:hi]
        idx, values = op.process_batch(np.array([r.t for r in chunk]), [r.u for r in chunk],
                                       [r.a for r in chunk])
        for i, v in zip(idx.tolist(), values, strict=True):
            out[lo + i] = (chunk[i].t, chunk[i].u, v)
    return out


def test_distinct_users_not_repeats():
    op = ZAnonymizer(z=2, delta_t=100)
    assert isinstance(op.process(Record(0, "alice", "x")), Suppressed)
    assert isinstance(op.process(Record(1, "alice", "x")), Suppressed)  # same user: still 1
    assert op.process(Record(2, "bob", "x")) == Record(2, "bob", "x")


def test_strict_expiry_at_exactly_delta_t():
    op = ZAnonymizer(z=2, delta_t=10)
    op.process(Record(0, "alice", "x"))
    assert op.process(Record(10, "bob", "x")) == Record(10, "bob", "x")  # 10 - 0 = Δt: kept
    op2 = ZAnonymizer(z=2, delta_t=10)
    op2.process(Record(0, "alice", "x"))
    assert isinstance(op2.process(Record(10.5, "bob", "x")), Suppressed)  # > Δt: dropped


def test_refresh_keeps_a_user_alive():
    op = ZAnonymizer(z=2, delta_t=10)
    op.process(Record(0, "alice", "x"))
    op.process(Record(8, "alice", "x"))
    assert op.process(Record(15, "bob", "x")) == Record(15, "bob", "x")


def test_most_specific_level_that_reaches_z():
    op = ZAnonymizer(z=2, delta_t=60)
    op.process(Record(0, "a", "EU*FR*Paris"))
    assert op.process(Record(1, "b", "EU*DE*Berlin")).a == "EU"
    assert op.process(Record(2, "c", "EU*FR*Lyon")).a == "EU*FR"
    assert op.process(Record(3, "d", "EU*FR*Lyon")).a == "EU*FR*Lyon"
    assert op.published_per_level == [1, 1, 1]
    assert op.suppressed == 1


def test_no_buffering_suppressed_never_released_later():
    op = ZAnonymizer(z=3, delta_t=60)
    results = [op.process(Record(i, f"u{i}", "x")) for i in range(3)]
    assert [isinstance(r, Suppressed) for r in results] == [True, True, False]
    assert op.flush() == []


def test_time_going_backwards_is_refused_with_the_record():
    op = ZAnonymizer(z=1, delta_t=5)
    op.process(Record(10, "a", "x"))
    with pytest.raises(ValueError, match="time goes backwards"):
        op.process(Record(9, "b", "y"))
    with pytest.raises(ValueError, match="time goes backwards"):
        op.process_batch(np.array([11.0, 10.5]), ["a", "b"], ["x", "x"])


@pytest.mark.parametrize("bad", [{"z": 0, "delta_t": 1}, {"z": 2, "delta_t": float("nan")},
                                 {"z": 2, "delta_t": -1}, {"z": 1.5, "delta_t": 1}])
def test_invalid_parameters(bad):
    with pytest.raises(ValueError):
        ZAnonymizer(**bad)


def test_hierarchy_levels():
    assert hierarchy_levels("a") == ["a"]
    assert hierarchy_levels("a*b*c") == ["a", "a*b", "a*b*c"]
    assert hierarchy_levels("a**b") == ["a", "a*", "a**b"]


@given(streams(), st.integers(1, 5), st.sampled_from([0.0, 1.0, 2.5, 10.0, 1e9]),
       st.lists(st.integers(0, 120), max_size=4))
def test_batch_equals_record_at_a_time(records, z, delta_t, cuts):
    expected = outcomes(ZAnonymizer(z, delta_t), records)
    cuts = [c for c in cuts if c <= len(records)]
    assert batch_outcomes(ZAnonymizer(z, delta_t), records, cuts) == expected


@given(streams(), st.integers(1, 4), st.sampled_from([0.0, 2.5, 10.0]), st.integers(0, 120))
def test_mixing_engines_mid_stream(records, z, delta_t, cut):
    """State moves between the dict and the batch representation without changing anything."""
    cut = min(cut, len(records))
    expected = outcomes(ZAnonymizer(z, delta_t), records)
    op = ZAnonymizer(z, delta_t)
    head = batch_outcomes(op, records[:cut], [])
    mid = outcomes(op, records[cut: (cut + len(records)) // 2])
    tail = batch_outcomes(op, records[(cut + len(records)) // 2:], [])
    assert head + mid + tail == expected


@given(streams(), st.integers(1, 4), st.sampled_from([0.0, 2.5, 10.0]))
def test_conformance(records, z, delta_t):
    check_operator(lambda: ZAnonymizer(z, delta_t), records,
                   bad_record=Record(float("nan"), "clockless", "x"))


def test_memory_bounded_by_live_window():
    """Values nobody touches again are forgotten once their users expire."""
    op = ZAnonymizer(z=2, delta_t=10)
    for i in range(10_000):
        op.process(Record(float(i), f"u{i % 7}", f"value-{i}"))
    assert op.live_pairs() <= 11 * 1  # one exposure per second, Δt = 10
    t = np.arange(10_000, 20_000, dtype=float)
    op.process_batch(t, [f"u{i % 7}" for i in range(10_000)], [f"w{i}" for i in range(10_000)])
    assert op.live_pairs() <= 11

"""The independent checker: accepts the operator's output, catches every kind of tampering."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from streamanon.records import Record, Suppressed
from streamanon.zanon import ZAnonymizer
from streamanon.zanon.verify import check_z
from tests.zanon.strategies import streams


def published(records, z, delta_t):
    op = ZAnonymizer(z, delta_t)
    return [r for r in map(op.process, records) if not isinstance(r, Suppressed)]


@given(streams(), st.integers(1, 5), st.sampled_from([0.0, 2.5, 10.0]))
def test_operator_output_passes_both_modes(records, z, delta_t):
    out = published(records, z, delta_t)
    exact = check_z(records, out, z, delta_t)
    assert exact.ok, exact.first_problem
    assert exact.expected_published == len(out)
    assert check_z(records, out, z, delta_t, exact=False).ok


@given(streams(), st.integers(2, 5), st.sampled_from([0.0, 2.5, 10.0]), st.data())
def test_publishing_a_suppressed_tuple_is_a_privacy_violation(records, z, delta_t, data):
    op = ZAnonymizer(z, delta_t)
    outcomes = [op.process(r) for r in records]
    suppressed = [i for i, o in enumerate(outcomes) if isinstance(o, Suppressed)]
    assume(suppressed)
    i = data.draw(st.sampled_from(suppressed))
    # an identical twin that was published legitimately makes the leak indistinguishable
    assume(sum((r.t, r.u, r.a) == (records[i].t, records[i].u, records[i].a)
               for r in records) == 1)
    # leak the suppressed tuple at its finest level; the checker must flag it in both modes
    tampered = [o if j != i else records[i] for j, o in enumerate(outcomes)]
    out = [o for o in tampered if not isinstance(o, Suppressed)]
    exact = check_z(records, out, z, delta_t)
    assert not exact.ok and exact.privacy_violations >= 1


@given(streams(), st.integers(1, 4), st.sampled_from([0.0, 2.5, 10.0]), st.data())
def test_dropping_a_publishable_tuple_is_a_mismatch(records, z, delta_t, data):
    out = published(records, z, delta_t)
    assume(out)
    i = data.draw(st.integers(0, len(out) - 1))
    report = check_z(records, out[:i] + out[i + 1:], z, delta_t)
    assert not report.ok and report.mismatches >= 1
    assert report.privacy_violations == 0
    # privacy-only mode accepts publishing less
    assert check_z(records, out[:i] + out[i + 1:], z, delta_t, exact=False).ok


def test_coarser_than_needed_is_a_mismatch_not_a_violation():
    records = [Record(0, "a", "EU*FR"), Record(1, "b", "EU*FR")]
    report = check_z(records, [Record(1, "b", "EU")], 2, 10)
    assert report.mismatches == 1 and report.privacy_violations == 0
    assert "EU*FR" in (report.first_problem or "")


def test_fabricated_tuple_is_unmatched():
    records = [Record(0, "a", "x"), Record(1, "b", "x")]
    report = check_z(records, [Record(1, "b", "x"), Record(1, "mallory", "x")], 2, 10)
    assert report.unmatched == 1 and not report.ok
    assert "mallory" in (report.first_problem or "")


def test_privacy_only_flags_a_value_seen_by_too_few_users():
    records = [Record(0, "a", "x"), Record(1, "b", "x"), Record(2, "a", "rare")]
    report = check_z(records, [Record(1, "b", "x"), Record(2, "a", "rare")], 2, 10, exact=False)
    assert report.privacy_violations == 1 and "rare" in (report.first_problem or "")


def test_privacy_window_counts_by_time_not_stream_order():
    """Privacy-only mode counts every exposure at times in [t-Δt, t], e.g. within one cycle."""
    records = [Record(0, "a", "x"), Record(0, "b", "x")]
    assert check_z(records, [Record(0, "a", "x")], 2, 0, exact=False).ok
    assert not check_z(records, [Record(0, "a", "x")], 2, 0).ok  # stream order: only 1 user

"""The independent z checker: genuine outputs pass, every mutation below is caught.

Genuine publishers that must pass (exact and privacy-only modes): the operator (both engines)
on hypothesis streams, a brute-force publisher written here from the spec's definition, and
the authors' ``zanon`` (the oracle).

Broken outputs, and the check that catches each:

====================================================  ==========================================
mutation                                              caught as
====================================================  ==========================================
a leaked suppressed tuple (published at its finest)   privacy violation (both modes)
a dropped publishable tuple                           mismatch (exact; privacy-only accepts it)
a value coarser than the rule publishes               mismatch (exact)
a value finer than z allows                           privacy violation (both modes)
a fabricated tuple (user never in the input)          unmatched (both modes)
a sibling value instead of an ancestor                unmatched (both modes)
a published time shifted by one second                unmatched (both modes)
one input published twice                             mismatch (exact), unmatched (privacy-only)
two published rows swapped                            mismatch (exact)
====================================================  ==========================================

Broken operators (run on a crafted stream that exposes the bug), and the check that catches
each:

=====================================================  =========================================
mutation                                               caught as
=====================================================  =========================================
off-by-one in z (the real operator deciding at z - 1)  privacy violation (both modes)
z counted with duplicates (exposures, not users)       privacy violation (both modes)
window one Δt too long (users expire at 2Δt)           privacy violation (both modes)
window shifted by one (a user drops at exactly Δt)     mismatch (exact)
current tuple not counted                              mismatch (exact)
later tuples at the same time counted                  privacy violation (exact; privacy-only
                                                       counts by time and accepts it, by design)
coarsest reaching level instead of the most specific   mismatch (exact)
a reader that drops late records instead of            mismatch (exact, on files: the checker
re-stamping them                                       re-stamps with its own reader)
a reader that cuts values at the first space           unmatched (both modes, on files)
=====================================================  =========================================
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from streamanon.errors import InputError
from streamanon.records import Record, Suppressed
from streamanon.verify.z import check_z, check_z_files, read_tuples
from streamanon.zanon import ZAnonymizer
from tests.zanon.oracle import oracle_published
from tests.zanon.strategies import streams


def published(records, z, delta_t):
    op = ZAnonymizer(z=z, delta_t=delta_t)
    return [r for rec in records for r in op.process(rec) if not isinstance(r, Suppressed)]


def levels(a: str) -> list[str]:
    parts = a.split("*")
    return ["*".join(parts[: i + 1]) for i in range(len(parts))]


def brute_force(records, z, delta_t, *, distinct=True, window=1.0, drop_at_delta=False,
                current=True, later=False, most_specific=True):
    """The rule straight from the spec, O(n²); the keywords switch on one bug each."""
    out = []
    recs = [Record(r.t, r.u.strip(), r.a.strip()) for r in records]
    for i, r in enumerate(recs):
        seen = recs[: i + 1] if not later else [x for x in recs if x.t <= r.t]
        if not current:
            seen = seen[:-1]
        best = None
        for v in levels(r.a):
            who = [x.u for x in seen if v in levels(x.a) and (
                r.t - x.t < window * delta_t if drop_at_delta else
                r.t - x.t <= window * delta_t)]
            n = len(set(who)) if distinct else len(who)
            if n >= z:
                best = v
                if not most_specific:
                    break
        if best is not None:
            out.append(Record(r.t, r.u, best))
    return out


# -- genuine publishers pass ---------------------------------------------------------------------
@given(streams(), st.integers(1, 5), st.sampled_from([0.0, 2.5, 10.0]))
def test_operator_output_passes_both_modes(records, z, delta_t):
    out = published(records, z, delta_t)
    exact = check_z(records, out, z, delta_t)
    assert exact.ok, exact.first_problem
    assert exact.expected_published == len(out)
    private = check_z(records, out, z, delta_t, exact=False)
    assert private.ok, private.first_problem


@given(streams(max_size=60), st.integers(1, 4), st.sampled_from([0.0, 1.0, 2.5, 10.0]))
def test_the_spec_by_brute_force_passes_and_equals_the_operator(records, z, delta_t):
    """A third implementation, written from the definition, agrees with both."""
    expected = brute_force(records, z, delta_t)
    assert check_z(records, expected, z, delta_t).ok
    assert [(r.t, r.u, r.a) for r in published(records, z, delta_t)] == [
        (r.t, r.u, r.a) for r in expected]


@settings(max_examples=20)
@given(streams(max_size=80), st.integers(1, 4), st.sampled_from([0.0, 2.5, 10.0]))
def test_the_oracle_zanon_passes(records, z, delta_t):
    rows, _ = oracle_published(records, z, delta_t)
    out = [Record(t, u, a) for t, u, a in rows]
    assert check_z(records, out, z, delta_t).ok
    assert check_z(records, out, z, delta_t, exact=False).ok


# -- broken outputs ------------------------------------------------------------------------------
@given(streams(), st.integers(2, 5), st.sampled_from([0.0, 2.5, 10.0]), st.data())
def test_a_leaked_suppressed_tuple_is_a_privacy_violation_in_both_modes(records, z, delta_t,
                                                                         data):
    op = ZAnonymizer(z=z, delta_t=delta_t)
    outcomes = [x for r in records for x in op.process(r)]
    suppressed = [i for i, o in enumerate(outcomes) if isinstance(o, Suppressed)]
    assume(suppressed)
    i = data.draw(st.sampled_from(suppressed))
    leak = outcomes[i].record
    # an identical twin that was published legitimately makes the leak indistinguishable: an
    # input line equal to it, or another line published generalized to the same value (a
    # hierarchy's `EU*x*1` published as `EU` by the same user at the same time)
    key = (leak.t, leak.u, leak.a)
    assume(sum((r.t, r.u.strip(), r.a.strip()) == key for r in records) == 1)
    assume(not any((o.t, o.u, o.a) == key for j, o in enumerate(outcomes)
                   if j != i and not isinstance(o, Suppressed)))
    out = [o if j != i else leak for j, o in enumerate(outcomes) if j == i or not isinstance(
        o, Suppressed)]
    exact = check_z(records, out, z, delta_t)
    assert not exact.ok and exact.privacy_violations >= 1
    private = check_z(records, out, z, delta_t, exact=False)
    # by time (privacy-only) a later tuple at the same time may make the leak legitimate
    later = [r for r in records if r.t == leak.t]
    if len(later) == 1:
        assert not private.ok and private.privacy_violations >= 1


@given(streams(hierarchical=True), st.integers(1, 3), st.sampled_from([2.5, 10.0]), st.data())
def test_a_dropped_publishable_tuple_is_a_mismatch(records, z, delta_t, data):
    out = published(records, z, delta_t)
    assume(out)
    i = data.draw(st.integers(0, len(out) - 1))
    report = check_z(records, out[:i] + out[i + 1:], z, delta_t)
    assert not report.ok and report.mismatches >= 1
    assert report.privacy_violations == 0
    # privacy-only mode accepts publishing less
    assert check_z(records, out[:i] + out[i + 1:], z, delta_t, exact=False).ok


STREAM = [Record(0, "a", "EU*FR"), Record(1, "b", "EU*FR"), Record(2, "c", "EU*DE"),
          Record(3, "d", "US")]


def test_coarser_than_needed_is_a_mismatch_not_a_violation():
    report = check_z(STREAM, [Record(1, "b", "EU"), Record(2, "c", "EU")], 2, 10)
    assert report.mismatches == 1 and report.privacy_violations == 0
    assert "EU*FR" in (report.first_problem or "")


def test_finer_than_allowed_is_a_privacy_violation():
    out = [Record(1, "b", "EU*FR"), Record(2, "c", "EU*DE")]
    for exact in (True, False):
        report = check_z(STREAM, out, 2, 10, exact=exact)
        assert report.privacy_violations == 1 and "EU*DE" in (report.first_problem or "")


@pytest.mark.parametrize(("wrong", "why"), [
    (Record(2, "mallory", "EU"), "fabricated user"),
    (Record(2, "c", "EU*FR"), "sibling, not an ancestor"),
    (Record(3, "c", "EU"), "time shifted by one"),
])
def test_tuples_that_stand_for_no_input_are_unmatched(wrong, why):
    out = [Record(1, "b", "EU*FR"), wrong]
    for exact in (True, False):
        report = check_z(STREAM, out, 2, 10, exact=exact)
        assert report.unmatched == 1 and not report.ok, why
        assert wrong.u in (report.first_problem or "")


def test_one_input_published_twice():
    out = [Record(1, "b", "EU*FR"), Record(1, "b", "EU*FR"), Record(2, "c", "EU")]
    assert check_z(STREAM, out, 2, 10).mismatches >= 1
    assert check_z(STREAM, out, 2, 10, exact=False).unmatched == 1


def test_two_rows_swapped_are_a_mismatch():
    out = [Record(2, "c", "EU"), Record(1, "b", "EU*FR")]
    report = check_z(STREAM, out, 2, 10)
    assert report.mismatches == 2 and report.privacy_violations == report.unmatched == 0
    assert check_z(STREAM, out, 2, 10, exact=False).ok


# -- broken operators ----------------------------------------------------------------------------
class OffByOneZ(ZAnonymizer):
    """The real operator with its decision off by one: publishes at z - 1 users."""

    def decide(self, counts):
        z = self.z
        self.z = z - 1
        try:
            return super().decide(counts)
        finally:
            self.z = z


def run_operator(op, records):
    return [x for r in records for x in op.process(r) if not isinstance(x, Suppressed)]


def test_off_by_one_in_z_is_caught():
    records = [Record(0, "a", "x"), Record(1, "b", "x"), Record(2, "c", "y"),
               Record(3, "d", "y"), Record(4, "e", "y")]
    out = run_operator(OffByOneZ(z=3, delta_t=10), records)
    assert out != published(records, 3, 10)
    for exact in (True, False):
        report = check_z(records, out, 3, 10, exact=exact)
        assert report.privacy_violations >= 1, exact


REPEATS = [Record(0, "a", "x"), Record(1, "a", "x"), Record(2, "a", "x"), Record(3, "b", "y")]
AT_DELTA = [Record(0, "a", "x"), Record(10, "b", "x"), Record(25, "c", "x")]
SAME_TIME = [Record(0, "a", "x"), Record(5, "b", "x"), Record(5, "c", "x")]
LEVELS = [Record(0, "a", "EU*FR"), Record(1, "b", "EU*FR"), Record(2, "c", "EU*DE")]

BROKEN: list[tuple[str, list[Record], int, Callable, str, bool]] = [
    ("z counted with duplicates", REPEATS, 2, lambda r, z, d: brute_force(r, z, d,
                                                                         distinct=False),
     "privacy", True),
    ("window one Δt too long", AT_DELTA, 2, lambda r, z, d: brute_force(r, z, d, window=2.0),
     "privacy", True),
    ("window shifted by one: drop at exactly Δt", AT_DELTA, 2,
     lambda r, z, d: brute_force(r, z, d, drop_at_delta=True), "mismatch", False),
    ("current tuple not counted", SAME_TIME, 2, lambda r, z, d: brute_force(r, z, d,
                                                                           current=False),
     "mismatch", False),
    ("later tuples at the same time counted", SAME_TIME, 3,
     lambda r, z, d: brute_force(r, z, d, later=True), "privacy", False),
    ("coarsest level instead of the most specific", LEVELS, 2,
     lambda r, z, d: brute_force(r, z, d, most_specific=False), "mismatch", False),
]


@pytest.mark.parametrize(("name", "records", "z", "publish", "caught_as", "privacy_mode"),
                         BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_operators_are_caught(name, records, z, publish, caught_as, privacy_mode):
    delta_t = 10.0
    out = publish(records, z, delta_t)
    assert out != brute_force(records, z, delta_t), "the mutant must differ on this stream"
    exact = check_z(records, out, z, delta_t)
    assert not exact.ok
    if caught_as == "privacy":
        assert exact.privacy_violations >= 1
    else:
        assert exact.mismatches >= 1 and exact.privacy_violations == 0
    assert check_z(records, out, z, delta_t, exact=False).ok is not privacy_mode


def write(path, rows, header="t,u,a"):
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_a_reader_that_drops_late_records_is_caught_on_files(tmp_path):
    """The operator's clock needs order; readers re-stamp late records (within the tolerance)
    to the latest time. A reader that dropped them instead would hide tuples from the count."""
    src = write(tmp_path / "in.csv", ["10,a,x", "9.5,b,x", "11,c,x"])
    good = published([Record(10, "a", "x"), Record(10, "b", "x"), Record(11, "c", "x")], 2, 5)
    assert [(r.t, r.u) for r in good] == [(10.0, "b"), (11.0, "c")]
    out = write(tmp_path / "good.csv", ["10.0,b,x", "11,c,x"])
    report = check_z_files(src, out, 2, 5, time_tolerance=1)
    assert report.ok and report.restamped == 1, report.first_problem
    dropped = published([Record(10, "a", "x"), Record(11, "c", "x")], 2, 5)
    bad = write(tmp_path / "bad.csv", [f"{r.t!r},{r.u},{r.a}" for r in dropped])
    report = check_z_files(src, bad, 2, 5, time_tolerance=1)
    assert report.mismatches >= 1


def test_a_reader_that_cuts_values_at_a_space_is_caught_on_files(tmp_path):
    src = write(tmp_path / "in.csv", ["0,a, New York", "1,b,New York ", "2,c,New Delhi"])
    ok = write(tmp_path / "ok.csv", ["1,b,New York"])
    assert check_z_files(src, ok, 2, 5).ok
    # 'New York' and 'New Delhi' read as 'New': b and c published as 'New'
    cut = published([Record(0, "a", "New"), Record(1, "b", "New"), Record(2, "c", "New")],
                    2, 5)
    bad = write(tmp_path / "bad.csv", [f"{r.t!r},{r.u},{r.a}" for r in cut])
    for exact in (True, False):
        assert check_z_files(src, bad, 2, 5, exact=exact).unmatched == 2


# -- the checker's own reader ------------------------------------------------------------------
def test_reader_contract(tmp_path):
    path = write(tmp_path / "in.csv", [
        "1,extra,a,x", "", "2,extra,b , y*z", '3,"quoted, comma",c,"v,w"', "bad line",
        "4,extra,,x", f"5,extra,d,{'x' * 4097}", "6,extra,e,x", "5.5,extra,f,x",
        "4,extra,g,x", "nan,extra,h,x", "2016-01-01T00:00:00Z,extra,i,x"],
        header="t,note,u,a")
    table = read_tuples(path, time_tolerance=1.0)
    assert [(float(t), u, a) for t, u, a in zip(table.t, table.u, table.a, strict=True)] == [
        (1.0, "a", "x"), (2.0, "b", "y*z"), (3.0, "c", "v,w"),
        (6.0, "e", "x"), (6.0, "f", "x"), (1451606400.0, "i", "x")]
    assert table.line == [2, 4, 5, 9, 10, 13]
    assert table.restamped == 1 and table.t_text[4] == "6.0"
    # bad line, empty u, oversized a, 2 s late (tolerance 1), nan
    assert table.rejected == 5
    with pytest.raises(InputError, match=r"in\.csv:6"):
        read_tuples(path, strict=True)


def test_reader_headerless_jsonl_bom_and_crlf(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_bytes(b"\xef\xbb\xbf1,a,x\r\n2,b,x\r\n")
    assert read_tuples(plain).u == ["a", "b"]
    js = tmp_path / "in.jsonl"
    js.write_text("\n".join(json.dumps(o) for o in [
        {"t": 1, "u": "a", "a": "x"}, {"t": "2", "u": 7, "a": 1.5}, [1, 2],
        {"t": True, "u": "b", "a": "x"}]) + "\n")
    table = read_tuples(js)
    assert (table.u, table.a, table.rejected) == (["a", "7"], ["x", "1.5"], 2)
    with pytest.raises(InputError, match="header"):
        read_tuples(io.StringIO("time,user,value\n1,a,x\n"))


def test_file_check_counts_rejected_input_and_refuses_a_bad_output(tmp_path):
    src = write(tmp_path / "in.csv", ["0,a,x", "oops", "1,b,x"])
    out = write(tmp_path / "out.csv", ["1,b,x"])
    report = check_z_files(src, out, 2, 5)
    assert report.ok and report.input_rejected == 1 and report.to_dict()["input_rejected"] == 1
    bad = write(tmp_path / "bad.csv", ["1,b"])
    with pytest.raises(InputError, match=r"bad\.csv:2"):
        check_z_files(src, bad, 2, 5)


def test_privacy_window_counts_by_time_not_stream_order():
    """Privacy-only mode counts every exposure at times in [t-Δt, t], e.g. within one cycle."""
    records = [Record(0, "a", "x"), Record(0, "b", "x")]
    assert check_z(records, [Record(0, "a", "x")], 2, 0, exact=False).ok
    assert not check_z(records, [Record(0, "a", "x")], 2, 0).ok  # stream order: only 1 user


def test_privacy_matching_finds_a_complete_assignment():
    """Two inputs of one user at one time: the deeper output must take the deeper input."""
    records = [Record(0, "a", "EU*FR"), Record(0, "a", "EU*DE"), Record(0, "b", "EU*FR"),
               Record(0, "c", "EU*DE")]
    out = [Record(0, "a", "EU"), Record(0, "a", "EU*FR")]
    assert check_z(records, out, 2, 0, exact=False).ok


def test_an_output_written_exactly_as_the_rule_needs_no_parse_and_others_are_parsed(
        tmp_path, monkeypatch):
    """The exact check compares the output's text with the rule's output written plainly;
    any other text (times written differently, quoting) is parsed and compared by value."""
    from streamanon.verify import z as verify

    parsed = []
    real = verify.read_tuples
    monkeypatch.setattr(verify, "read_tuples", lambda *a, **k: parsed.append(a) or real(*a, **k))
    plain = write(tmp_path / "plain.csv", ["0.50,a,x", "1.50,b,x"])
    assert check_z_files(plain, write(tmp_path / "p.csv", ["1.50,b,x"]), 2, 5).ok
    assert len(parsed) == 1  # the input only: the output's text was the rule's, byte for byte
    assert check_z_files(plain, write(tmp_path / "q.csv", ["1.5,b,x"]), 2, 5).ok
    assert len(parsed) == 3  # another time format: parsed, and equal by value
    src = write(tmp_path / "in.csv", ["0.50,a,x", "1.50,b,x", '2,c,"v,w"', "3,d,\"v,w\""])
    same = write(tmp_path / "same.csv", ["1.50,b,x", '3,d,"v,w"'])
    report = check_z_files(src, same, 2, 5)
    assert report.ok and report.output_tuples == 2, report.first_problem
    reformatted = write(tmp_path / "reformatted.csv", ["1.5,b,x", '3.0,d,"v,w"'])
    assert check_z_files(src, reformatted, 2, 5).ok
    # a writer that forgot to quote: never accepted by text, refused as a bad line
    unquoted = write(tmp_path / "unquoted.csv", ["1.50,b,x", "3,d,v,w"])
    with pytest.raises(InputError, match="expected 3 fields"):
        check_z_files(src, unquoted, 2, 5)
    assert not check_z_files(src, write(tmp_path / "short.csv", ["1.50,b,x"]), 2, 5).ok


@pytest.mark.parametrize(("header", "rows", "clean"), [
    ("t,u,a", ["0.50,a,x", "1.5e0,b,EU*FR", "2,c,é"], True),  # the Arrow lane
    ("a,note,T,u", ["x,n,1,a", "y,n,2,b"], True),
    ("1,a,x", ["2,b,x", "3,c,x"], True),  # no header
    ("t,u,a", ["1,a,x", "0.5,b,x", "2,c,x"], False),  # late: the text path re-stamps
    ("t,u,a", ["1,a,x", "1_0,b,x"], False),  # float() reads 1_0, Arrow does not
    ("t,u,a", ["1,a, x", '2,"b",x', "3,c,x\r"], False),
    ("t,u,a", ["1,a,x", "", "2,b,x"], False),
    ("t,u,a", ["1,a,x", "inf,b,x", "2,,x"], False),
])
def test_the_arrow_lane_reads_what_the_text_path_reads(tmp_path, monkeypatch, header, rows,
                                                       clean):
    """A clean CSV file is read by Arrow, any other by the text path; both give the same
    times, texts, codes, line numbers and counts."""
    from streamanon.verify import z as verify

    path = write(tmp_path / "in.csv", rows, header=header)
    lane = []
    real = verify._arrow_table
    monkeypatch.setattr(verify, "_arrow_table", lambda *a: lane.append(r := real(*a)) or r)
    fast = read_tuples(path, time_tolerance=1.0)
    assert (lane[0] is not None) == clean
    monkeypatch.setattr(verify, "_arrow_table", lambda *a: None)
    slow = read_tuples(path, time_tolerance=1.0)
    assert fast.t.tolist() == slow.t.tolist() and list(fast.line) == list(slow.line)
    for name in ("t_text", "u", "a"):
        assert list(getattr(fast, name)) == list(getattr(slow, name))
        assert [c.tolist() if hasattr(c, "tolist") else c for c in verify._codes(
            getattr(fast, name))] == [c.tolist() if hasattr(c, "tolist") else c
                                      for c in verify._codes(list(getattr(slow, name)))]
    assert (fast.rejected, fast.restamped) == (slow.rejected, slow.restamped)


def test_the_arrow_lane_codes_texts_across_read_blocks_in_order_of_first_appearance(
        tmp_path, monkeypatch):
    """A file of several of Arrow's read blocks (their dictionaries unified) gives the codes
    and names the text path gives, users and values new in later blocks included."""
    from streamanon.verify import z as verify

    rows = [f"{i},u{i % 97 if i < 150_000 else i % 3001},v{(i * 7) % 1009}" for i in
            range(320_000)]
    path = write(tmp_path / "in.csv", rows)
    assert path.stat().st_size > 1 << 22  # more than one block
    fast = read_tuples(path)
    assert isinstance(fast.u, verify._Texts)
    monkeypatch.setattr(verify, "_arrow_table", lambda *a: None)
    slow = read_tuples(path)
    for name in ("u", "a"):
        got, want = verify._codes(getattr(fast, name)), verify._codes(list(getattr(slow, name)))
        assert got[0].tolist() == want[0].tolist() and got[1] == want[1]

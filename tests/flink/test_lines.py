"""Line-at-a-time validation agrees with the file reader (no Flink needed)."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from streamanon.flink.lines import LineValidator, z_outcome
from streamanon.flink.outcomes import merge_rows
from streamanon.io import OnError, RejectLog, iter_batches
from streamanon.zanon import ZAnonymizer

TRICKY = [
    "t,u,a", "1,alice,EU*FR", "", "2,bob,EU*FR*Paris", "1.5,carol,EU", "oops", "3,,EU",
    "nan,dave,EU", "inf,dave,EU", "4, erin ,EU", '5,"frank, jr",EU*DE', "1e1,gina,EU",
    "2016-01-01T00:00:00Z,hank,EU", "9.5,ivan,EU,extra", "12,judy," + "x" * 5000,
    "1_000,kim,EU", "11,lee,EU\r", "13,\tmia,EU", "0x10,ned,EU", "+14,olga,EU",
]


def validate(lines, fast, tolerance=0.0):
    v = LineValidator("csv", time_tolerance=tolerance)
    v.fast = fast
    return [v.feed(x) for x in lines]


def file_reader(lines, tolerance=0.0):
    log = RejectLog()
    got = []
    for batch in iter_batches(io.StringIO("\n".join(lines) + "\n"), "csv", on_error="skip",
                              rejects=log, time_tolerance=tolerance):
        got += [(r.line, r.t, r.time_text(), r.u, r.a) for r in batch.records()]
    return got, log.count


@given(st.lists(st.sampled_from(TRICKY[1:]), max_size=30), st.sampled_from([0.0, 1.0]))
def test_fast_path_and_reader_agree_with_the_file_reader(body, tolerance):
    lines = ["t,u,a", *body]
    fast = validate(lines, True, tolerance)
    assert fast == validate(lines, False, tolerance)
    records = [(r[1], r[2], r[3], r[4], r[5]) for _, r in fast if r is not None]
    rejected = sum(len([m for m in meta if "\tR\t" in m]) for meta, _ in fast)
    expected, n_rejected = file_reader(lines, tolerance)
    assert records == expected
    assert rejected == n_rejected


def test_line_path_publishes_what_the_batch_path_publishes(tmp_path):
    from streamanon.cli.zanon import run_z
    from streamanon.data.traces import write_trace, zipf_trace

    trace = write_trace(tmp_path / "t.csv", zipf_trace(3000, n_users=60, n_values=200,
                                                        levels=3, seed=4))
    run_z(trace, tmp_path / "batch.csv", ZAnonymizer(z=3, delta_t=900))
    op, v, outcomes = ZAnonymizer(z=3, delta_t=900), LineValidator("csv"), []
    for line in trace.read_text().splitlines():
        meta, record = v.feed(line)
        outcomes += meta + ([z_outcome(op, record)] if record else [])
    result = merge_rows(outcomes, tmp_path / "line.csv", on_error=OnError.fail)
    assert (tmp_path / "line.csv").read_bytes() == (tmp_path / "batch.csv").read_bytes()
    assert result.stats.read == 3000 and result.stats.balanced


def test_json_lines_agree_with_the_file_reader():
    lines = ['{"t": 1, "u": "alice", "a": "EU*FR"}', "[1, 2]", '{"t": 2, "u": "bob"}',
             '{"t": "2016-01-01T00:00:00Z", "u": "carol", "a": "EU"}', "{oops",
             '{"t": 0.5, "u": "dave", "a": "EU"}', '{"t": 1451606401, "u": 7, "a": 1.5}']
    v = LineValidator("jsonl", time_tolerance=1.0)
    fed = [v.feed(x) for x in lines]
    records = [(r[1], r[2], r[3], r[4], r[5]) for _, r in fed if r is not None]
    log = RejectLog()
    expected = [(r.line, r.t, r.time_text(), r.u, r.a)
                for b in iter_batches(io.StringIO("\n".join(lines) + "\n"), "jsonl",
                                      on_error="skip", rejects=log, time_tolerance=1.0)
                for r in b.records()]
    assert records == expected
    assert sum(m.count("\tR\t") for meta, _ in fed for m in meta) == log.count == 4

"""The z job's batch layer without Flink: splits, the chunk parser, key groups, the per-group
operator and the merge agree with ``streamanon z`` whatever the cut points."""

from __future__ import annotations

import io
import itertools
import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.cli.zanon import run_z
from streamanon.data.traces import write_trace, zipf_trace
from streamanon.flink.outcomes import (
    merge_rows,
    outcome_text_lines,
    text_lines_of,
)
from streamanon.flink.splits import line_blocks, read_split, split_count
from streamanon.flink.zbatch import (
    RECORDS,
    ZChunkParser,
    ZGroupOperator,
    batch_rows,
    key_group_of,
)
from streamanon.io import OnError, RejectLog, iter_batches
from streamanon.zanon import ZAnonymizer

TRICKY = [
    "1,alice,EU*FR", "", "2,bob,EU*FR*Paris", "1.5,carol,EU", "oops", "3,,EU",
    "nan,dave,EU", "inf,dave,EU", "4, erin ,EU", '5,"frank, jr",EU*DE', "1e1,gina,EU",
    "2016-01-01T00:00:00Z,hank,EU", "9.5,ivan,EU,extra", "12,judy," + "x" * 5000,
    "1_000,kim,EU", "11,lee,EU\r", "13,\tmia,EU", "0x10,ned,EU", "+14,olga,EU", "  ",
    "20,pam,AS*JP", "20,quin,AS*JP*Tokyo", "19.5,rob,AS",
]


def parse(lines: list[str], cuts: list[int], *, as_bytes: bool = True, fmt: str = "csv",
          tolerance: float = 0.0, key_groups: int = 8, batch_size: int = 1 << 16
          ) -> tuple[list[str], list[tuple[int, dict]]]:
    """Feed ``lines`` cut before the given indexes: meta lines, and (group, row) of records."""
    parser = ZChunkParser(fmt, time_tolerance=tolerance, key_groups=key_groups,
                          batch_size=batch_size)
    meta: list[str] = []
    rows: list[tuple[int, dict]] = []
    bounds = [0, *sorted(c for c in set(cuts) if 0 < c < len(lines)), len(lines)]
    for lo, hi in itertools.pairwise(bounds):
        # as the jobs cut them: a file's lines by line_blocks, a stream's lines one by one
        blocks = line_blocks(("\n".join(lines[lo:hi]) + "\n").encode()) if as_bytes else \
            ["\n".join(x.removesuffix("\r") for x in lines[lo:hi])]
        m: list[str] = []
        batches = []
        for block in blocks:
            mm, bb = parser.feed(block)
            m += mm
            batches += bb
        meta += m
        for group, batch in batches:
            got = batch_rows(batch)
            assert len(got) <= batch_size
            rows += [(group, dict(zip(RECORDS.names, r, strict=True))) for r in got]
    return meta, rows


def file_reader(lines: list[str], fmt: str = "csv", tolerance: float = 0.0):
    log = RejectLog()
    got = []
    for batch in iter_batches(io.StringIO("\n".join(lines) + "\n"), fmt, on_error="skip",
                              rejects=log, time_tolerance=tolerance):
        got += [(r.line, r.t, r.time_text(), r.u, r.a) for r in batch.records()]
    return got, log.count


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(TRICKY), max_size=30), st.sampled_from([0.0, 1.0]),
       st.lists(st.integers(1, 30), max_size=5), st.booleans())
def test_chunks_accept_reject_and_restamp_as_the_file_reader(body, tolerance, cuts, as_bytes):
    lines = ["t,u,a", *body]
    meta, rows = parse(lines, cuts, as_bytes=as_bytes, tolerance=tolerance)
    records = sorted((r["seq"], r["t"], r["t_text"], r["u"], r["a"]) for _, r in rows)
    expected, n_rejected = file_reader(lines, tolerance=tolerance)
    assert records == expected
    assert sum("\tR\t" in m for m in meta) == n_rejected
    # every line has exactly one outcome: a record, or a meta line (header, blank, rejected)
    seqs = sorted([r["seq"] for _, r in rows] + [int(m.split("\t")[0]) for m in meta])
    assert seqs == list(range(1, len(lines) + 1))
    # a re-stamped record is flagged: its time text is the reader's, not the input's
    for _, r in rows:
        assert r["restamped"] == (r["t_text"] != lines[r["seq"] - 1].split(",")[0].strip())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(TRICKY), max_size=40), st.sampled_from([1, 3, 1 << 16]),
       st.sampled_from(["lz4", None]))
def test_each_batchs_line_numbers_come_with_it_whatever_its_compression(body, size, codec):
    lines = ["t,u,a", *(body * 12)]  # > 256 lines: the Arrow lane too
    plain = ZChunkParser("csv", key_groups=4, batch_size=size)
    parser = ZChunkParser("csv", key_groups=4, batch_size=size, codec=codec)
    block = "\n".join(lines).encode()
    meta, batches = plain.feed(block)
    got_meta, got, seqs = parser.feed_seqs(block)
    assert got_meta == meta and len(got) == len(seqs) == len(batches)
    for (group, batch), (g, b), s in zip(batches, got, seqs, strict=True):
        assert g == group and batch_rows(b) == batch_rows(batch)
        assert s.tolist() == [r[0] for r in batch_rows(b)]


def test_json_lines_agree_with_the_file_reader():
    lines = ['{"t": 1, "u": "alice", "a": "EU*FR"}', "[1, 2]", '{"t": 2, "u": "bob"}',
             '{"t": "2016-01-01T00:00:00Z", "u": "carol", "a": "EU"}', "{oops",
             '{"t": 0.5, "u": "dave", "a": "EU"}', '{"t": 1451606401, "u": 7, "a": 1.5}']
    meta, rows = parse(lines, [2, 5], fmt="jsonl", tolerance=1.0)
    records = sorted((r["seq"], r["t"], r["t_text"], r["u"], r["a"]) for _, r in rows)
    expected, n_rejected = file_reader(lines, "jsonl", tolerance=1.0)
    assert records == expected
    assert sum("\tR\t" in m for m in meta) == n_rejected == 4


def test_a_key_group_holds_whole_coarsest_levels_in_input_order(tmp_path):
    rows_in = zipf_trace(5000, n_users=80, n_values=400, levels=3, seed=2)
    lines = ["t,u,a", *(",".join(r) for r in rows_in)]
    _, rows = parse(lines, [1000, 3000], batch_size=700)
    for group, r in rows:
        assert group == key_group_of(r["a"].split("*", 1)[0], 8)
    by_group: dict[int, list[int]] = {}
    for group, r in rows:
        by_group.setdefault(group, []).append(r["seq"])
    assert len(by_group) > 1 and all(s == sorted(s) for s in by_group.values())


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 200), st.booleans())
def test_splits_hold_every_line_once(tmp_path_factory, split_bytes, crlf):
    rows_in = zipf_trace(300, n_users=20, n_values=50, levels=2, seed=3)
    end = "\r\n" if crlf else "\n"
    text = end.join(["t,u,a", *(",".join(r) for r in rows_in), "", "last,x,y"])
    path = tmp_path_factory.mktemp("split") / "in.csv"
    path.write_bytes(text.encode())
    blocks = [b for k in range(split_count(path, split_bytes))
              for b in line_blocks(read_split(path, k, split_bytes))]
    lines = [line for b in blocks for line in b.decode().split("\n")]
    assert lines == text.replace("\r\n", "\n").split("\n")


def test_batches_publish_what_streamanon_z_publishes_also_after_a_snapshot(tmp_path):
    trace = write_trace(tmp_path / "t.csv", zipf_trace(6000, n_users=60, n_values=3000,
                                                        levels=3, seed=4))
    run_z(trace, tmp_path / "pure.csv", ZAnonymizer(z=3, delta_t=900))
    data = trace.read_bytes()
    parser = ZChunkParser("csv", key_groups=16, batch_size=300)
    ops: dict[int, ZGroupOperator] = {}
    outcomes: list[str] = []
    for k in range(split_count(trace, 20_000)):
        for block in line_blocks(read_split(trace, k, 20_000)):
            meta, batches = parser.feed(block)
            outcomes += meta
            for group, batch in batches:
                op = ops.setdefault(group, ZGroupOperator(3, 900))
                outcomes.append(op.process(batch)[0])  # either engine, as the mean decides
        if k == 2:  # what Flink state holds: each group's operator, pickled, restored
            ops = {g: pickle.loads(op.snapshot()) for g, op in ops.items()}
    assert len(data) > 3 * 20_000 and len(ops) > 4
    lines = text_lines_of(x for text in outcomes for x in text.split("\n"))
    assert any(x.startswith("@\t") for x in outcomes)  # both engines ran
    assert any("\tP\t" in x or "\tS\t" in x for x in outcomes)
    result = merge_rows(sorted(lines, key=lambda x: int(x.split("\t", 1)[0])),
                        tmp_path / "batched.csv", on_error=OnError.fail)
    assert (tmp_path / "batched.csv").read_bytes() == (tmp_path / "pure.csv").read_bytes()
    assert result.stats.read == 6000 and result.stats.balanced


def test_the_engines_decisions_written_by_the_pure_writers_publish_what_outcomes_do(tmp_path):
    # a Kafka job writes the batch engine's decisions with the pure command's writers; a
    # file job reads them from outcome batches: both publish the same rows, values, times
    rows_in = zipf_trace(4000, n_users=50, n_values=2000, levels=3, seed=6)
    rows_in[7] = (rows_in[7][0], '"x, y"', rows_in[7][2])  # a user that needs quoting
    block = "\n".join(["t,u,a", *(",".join(r) for r in rows_in)]).encode()
    parser = ZChunkParser("csv", key_groups=8, batch_size=500)
    by_outcomes: dict[int, ZGroupOperator] = {}
    by_selected: dict[int, ZGroupOperator] = {}
    quoted = plain = 0
    for lo in range(0, len(block), 30_000):
        cut = block.index(b"\n", lo) if lo else 0
        end = block.find(b"\n", lo + 30_000)
        part = block[cut + (1 if cut else 0):None if end < 0 else end]
        _, batches = parser.feed(part)
        for group, batch in batches:
            outcomes, n = by_outcomes.setdefault(group, ZGroupOperator(3, 900)).decide(batch)
            selected, m = by_selected.setdefault(group, ZGroupOperator(3, 900)
                                                 ).decide_selected(batch)
            assert n == m and isinstance(outcomes, list) == isinstance(selected, list)
            if isinstance(outcomes, list):
                assert outcomes == selected
                continue
            rows = batch_rows(batch)
            published = outcomes.column("level").to_numpy() >= 0
            want = [(rows[i][0], rows[i][2], rows[i][3]) for i in np.flatnonzero(published)]
            values = outcomes.column("a").to_pylist()
            want_a = [values[i] for i in np.flatnonzero(published)]
            assert [(rows[i][0], rows[i][2], rows[i][3]) for i in selected.idx] == want
            assert [selected.names[c] for c in selected.codes.tolist()] == want_a
            plain += selected.plain()
            quoted += not selected.plain()
    assert plain and quoted


def test_outcome_batches_carry_no_values_of_suppressed_tuples():
    parser = ZChunkParser("csv", key_groups=1)
    _, ((_, batch),) = parser.feed(b"t,u,a\n1,alice,EU*FR\n2,bob,EU*DE\n3,carol,EU*FR")
    out = ZGroupOperator(z=2, delta_t=10).apply(batch).to_pylist()
    assert [(r["seq"], r["level"], r["t_text"], r["u"], r["a"]) for r in out] == [
        (2, -1, None, None, None), (3, 0, "2", "bob", "EU"), (4, 1, "3", "carol", "EU*FR")]
    assert outcome_text_lines(ZGroupOperator(2, 10).apply(batch)) == [
        "2\tS\t0", '3\tP\t0\t0\t["2", "bob", "EU"]', '4\tP\t1\t0\t["3", "carol", "EU*FR"]']

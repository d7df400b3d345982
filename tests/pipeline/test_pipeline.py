"""The pipeline without a broker: stages over chunks of lines give the file path's output
however the stream is cut, survive pickling mid-stream (what a Kafka checkpoint relies on),
message checks agree with the slow path, file outputs of Kafka runs are cut back on resume,
and a pipe is read as data arrives."""

from __future__ import annotations

import io
import os
import pickle
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.data import ashrae
from streamanon.pipeline import (
    CastleStage,
    EndpointError,
    FileSource,
    JournalFileSink,
    LineChunk,
    LinePositions,
    Lines,
    MessagePositions,
    ZStage,
    message_chunk,
    run_castle,
    run_z,
)
from streamanon.pipeline.chunks import joined_values, message_block
from streamanon.pipeline.kafka.client import check_messages
from streamanon.zanon import ZAnonymizer


def _trace(n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.choice([0.0, 0.5, 1.0, 4.0], n))
    return [f"{x:g},u{rng.integers(30)},EU*C{rng.integers(3)}*v{rng.integers(9)}" for x in t]


def _drive(stage, chunks, finish: bool = True) -> dict[str, str]:
    out: dict[str, str] = {}
    results = [stage.process(chunk) for chunk in chunks]
    assert all(err is None for _, err in results)
    if finish:
        results.append((stage.finish(), None))
    for res, _ in results:
        for dest, blocks in res.items():
            out[dest] = out.get(dest, "") + "".join((b.header or "") + b.text for b in blocks)
    return out


def _cuts(lines: list[str], sizes: list[int], first: int = 1) -> list[LineChunk]:
    chunks, i = [], 0
    for size in sizes:
        if i >= len(lines):
            break
        part = lines[i:i + size]
        chunks.append(LineChunk(first + i, "\n".join(part).encode()))
        i += size
    if i < len(lines):
        chunks.append(LineChunk(first + i, "\n".join(lines[i:]).encode()))
    return chunks


@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(1, 400), min_size=1, max_size=8), seed=st.integers(0, 99),
       pickled_after=st.integers(0, 8))
def test_z_stage_equals_the_file_path_however_cut_and_across_pickling(tmp_path_factory, sizes,
                                                                      seed, pickled_after):
    tmp = tmp_path_factory.mktemp("z")
    lines = ["t,u,a", *_trace(1200, seed)]
    lines[300] = "bad line"  # rejected with its line number
    src = tmp / "in.csv"
    src.write_text("\n".join(lines) + "\n")
    run_z(src, tmp / "out.csv", ZAnonymizer(z=3, delta_t=10), on_error="skip",
          rejects_path=tmp / "rej.jsonl")
    stage = ZStage(ZAnonymizer(z=3, delta_t=10), LinePositions(str(src)), on_error="skip")
    chunks = _cuts(lines, sizes)
    out = _drive(stage, chunks[:pickled_after], finish=False)
    stage = pickle.loads(pickle.dumps(stage))  # a checkpoint, then a restart
    for dest, text in _drive(stage, chunks[pickled_after:]).items():
        out[dest] = out.get(dest, "") + text
    assert out["published"] == (tmp / "out.csv").read_text()
    assert out["rejects"] == (tmp / "rej.jsonl").read_text()
    assert '"line": 301' in out["rejects"]


def test_castle_stage_survives_pickling_mid_stream(tmp_path):
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(1500, seed=4))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())

    def op():
        return CastleAnonymizer(RuleSet.load(rules), k=4, l=2, delta=100, beta=10)

    run_castle(data, tmp_path / "out.csv", op(), suppressed_path=tmp_path / "sup.csv")
    lines = data.read_text().splitlines()
    chunks = _cuts(lines, [1, 400, 333, 200])
    stage = CastleStage(op(), LinePositions(str(data)), suppressed_format="csv")
    out = _drive(stage, chunks[:3], finish=False)
    state = pickle.dumps(stage)  # open clusters, τ history, Ω, the header, the writers
    stage = pickle.loads(state)
    for dest, text in _drive(stage, chunks[3:]).items():
        out[dest] = out.get(dest, "") + text
    assert out["published"] == (tmp_path / "out.csv").read_text()
    assert out["suppressed"] == (tmp_path / "sup.csv").read_text()
    assert stage.stats().balanced


_message = st.one_of(
    st.builds(lambda t, u: f"{t},u{u},EU*x".encode(), st.integers(0, 5), st.integers(0, 3)),
    st.sampled_from([b"", b" ", b"\xff\xfe", b"1,a\n2,b", b"1,a,b\r", b"t,u,a", b"x" * 300,
                     b"1, a ,b", b"nan,a,b", b"1,a"]))


@settings(max_examples=60, deadline=None)
@given(values=st.lists(_message, min_size=1, max_size=30))
def test_the_message_fast_path_agrees_with_the_checks(values):
    codes = np.arange(len(values), dtype=np.int64) << 16
    chunk = message_chunk(values, codes, 200, b"t,u,a")
    good, texts, bad = check_messages(values, 200)
    lines = chunk.data.decode() if isinstance(chunk.data, bytes) else chunk.data
    by_line = lines.split("\n")
    assert len(by_line) == len(values)
    rejected = {r.line: r.reason for r in chunk.rejected}
    assert rejected == {i: reason for i, (_, reason) in bad.items()}
    for i, t in zip(good, texts, strict=True):
        assert by_line[i] in (t, "")  # kept, or blank when it is the header
    # the outputs do not depend on where batches are cut (a restart cuts them elsewhere)
    outs = []
    for size in (len(values), 1, 7):
        stage = ZStage(ZAnonymizer(z=1, delta_t=5), MessagePositions("kafka://h:1/in"),
                       on_error="skip")
        got: dict[str, str] = {}
        for i in range(0, len(values), size):
            res, _ = stage.process_messages(values[i:i + size], codes[i:i + size])
            for dest, blocks in res.items():
                got[dest] = got.get(dest, "") + "".join(b.text for b in blocks)
        outs.append(got)
        st_ = stage.stats()
        assert st_.read == len(values) - chunk.headers and st_.balanced
    assert outs[0] == outs[1] == outs[2]


@settings(max_examples=80, deadline=None)
@given(values=st.lists(_message, min_size=1, max_size=30))
def test_messages_joined_by_newlines_are_checked_as_the_messages_themselves(values):
    # a Flink job's reading step gets the values joined by newlines, with their sizes: a
    # value holding a newline of its own must be found and refused all the same
    codes = np.arange(len(values), dtype=np.int64) << 16
    sizes = np.array([len(v) for v in values], dtype=np.int32)
    blob = b"\n".join(values)
    assert joined_values(blob, sizes) == values
    expected = message_chunk(values, codes, 200, b"t,u,a")
    got = message_block(blob, sizes, codes, 200, b"t,u,a")
    assert got.data == expected.data
    assert [(r.line, r.text, r.reason) for r in got.rejected] == \
        [(r.line, r.text, r.reason) for r in expected.rejected]
    assert got.headers == expected.headers and (got.codes == codes).all()


def test_a_kafka_runs_file_output_is_cut_back_to_its_checkpoint(tmp_path):
    path = tmp_path / "out.csv"
    sink = JournalFileSink(path, "--output")
    sink.start()
    sink.write(Lines("1,a,x\n", np.array([1]), header="t,u,a\n"))
    sink.flush()
    mark = sink.position()
    sink.write(Lines("2,b,y\n3,c,z\n", np.array([2, 3])))  # after the checkpoint: cut
    sink.close()
    again = JournalFileSink(path, "--output")
    again.resume(mark)
    again.write(Lines("2,b,y\n", np.array([2])))
    again.close()
    assert path.read_text() == "t,u,a\n1,a,x\n2,b,y\n"
    path.write_text("t,u")  # shorter than the checkpoint says: changed since
    with pytest.raises(EndpointError, match="changed or replaced"):
        JournalFileSink(path, "--output").resume(mark)
    with pytest.raises(EndpointError, match="no checkpoint that wrote it"):
        JournalFileSink(path, "--output").start()  # a fresh run never overwrites a file
    with pytest.raises(EndpointError, match="does not exist"):
        JournalFileSink(tmp_path / "no" / "x.csv", "--rejects")


def test_a_pipe_is_read_as_data_arrives(tmp_path):
    """``tail -f log | streamanon z -``: records come out before the writer closes the pipe."""
    r, w = os.pipe()
    got: list[int] = []

    def writer() -> None:
        with os.fdopen(w, "wb") as fh:
            fh.write(b"t,u,a\n1,a,x\n2,b,x\n")
            fh.flush()
            deadline = time.monotonic() + 10
            while not got and time.monotonic() < deadline:  # the first chunk came through
                time.sleep(0.01)
            fh.write(b"3,c,x\n")

    thread = threading.Thread(target=writer)
    thread.start()
    with os.fdopen(r, "rb") as fh:
        for chunk in FileSource(fh, name="pipe").chunks():
            got.append(len(chunk.data.split(b"\n")))
    thread.join()
    assert got[0] == 3 and sum(got) == 4  # header + 2 records first, then 1


def test_run_z_reads_a_text_stream_and_writes_one(tmp_path):
    out = io.StringIO()
    stats = run_z(io.StringIO("t,u,a\n1,a,x\n2,b,x\n"), out, ZAnonymizer(z=2, delta_t=10))
    assert out.getvalue() == "t,u,a\n2,b,x\n" and stats.released == 1 and stats.balanced


@pytest.mark.parametrize("sizes", [[1200], [1] * 40, [7, 300, 2]])
def test_distinct_counts_are_lower_bounds_named_so_and_equal_however_cut(tmp_path, sizes):
    """users_seen stops counting at z (batches decide how far past z a count goes: a file
    and a topic gave 2,000 and 1,618): the summary gives at_least, capped, the same for every
    cut, and the cap it was counted up to."""
    lines = ["t,u,a", *_trace(1200)]
    src = tmp_path / "in.csv"
    src.write_text("\n".join(lines) + "\n")
    stage = ZStage(ZAnonymizer(z=3, delta_t=10), LinePositions(str(src)))
    _drive(stage, _cuts(lines, sizes))
    assert stage.stats().details["users_seen"] == {"at_least": 3, "counted_up_to": 3}
    few = ZStage(ZAnonymizer(z=100, delta_t=10), LinePositions(str(src)))
    _drive(few, _cuts(lines, sizes))
    assert few.stats().details["users_seen"] == {"at_least": 30, "counted_up_to": 100}


def test_castle_counts_individuals_and_sensitive_values_up_to_k_and_l(tmp_path):
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(600, seed=4))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    stats = run_castle(data, tmp_path / "out.csv",
                       CastleAnonymizer(RuleSet.load(rules), k=4, l=2, delta=100, beta=10))
    assert stats.details["individuals_seen"] == {"at_least": 4, "counted_up_to": 4}
    assert stats.details["sensitive_values_seen"] == {
        "meter_reading": {"at_least": 2, "counted_up_to": 2}}
    stats = run_castle(data, tmp_path / "out.csv",
                       CastleAnonymizer(RuleSet.load(rules), k=4, l=1, delta=100, beta=10))
    assert "sensitive_values_seen" not in stats.details  # not counted without l-diversity

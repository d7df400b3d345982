"""The sink contract: stateful sinks say where they stand, plain sinks have no position."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from streamanon.pipeline.chunks import PUBLISHED, REJECTS, Lines
from streamanon.pipeline.positions import LinePositions
from streamanon.pipeline.sinks import FileSink, JournalFileSink, ResumableSink, open_sinks


def test_a_file_sink_is_plain_and_a_journal_file_sink_resumable(tmp_path: Path) -> None:
    plain = FileSink(io.StringIO(), "--output")
    journal = JournalFileSink(tmp_path / "out.csv")
    assert not isinstance(plain, ResumableSink)
    assert not hasattr(plain, "position")
    assert isinstance(journal, ResumableSink)


def test_a_journal_file_sink_resumed_cuts_back_to_its_position(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    sink = JournalFileSink(path)
    sink.start()
    sink.write(Lines("1,a,x\n", np.array([1]), "t,u,a\n"))
    sink.flush()
    mark = sink.position()
    sink.write(Lines("2,b,y\n", np.array([2])))
    sink.close()
    again = JournalFileSink(path)
    again.resume(mark)
    again.close()
    assert path.read_bytes() == b"t,u,a\n1,a,x\n"


def test_open_sinks_chooses_by_target_and_run(tmp_path: Path) -> None:
    pos = LinePositions("in.csv")
    outputs = {PUBLISHED: (tmp_path / "out.csv", "--output"), REJECTS: ("-", "--rejects")}
    once = open_sinks(outputs, pos, 1, None, journal=False)
    assert [type(s) for s in once.values()] == [FileSink, FileSink]
    for s in once.values():
        s.close()
    (tmp_path / "out.csv").unlink()
    journal = open_sinks(outputs, pos, 1, None, journal=True)
    assert [type(s) for s in journal.values()] == [JournalFileSink, FileSink]

"""What a run fixes in its work folder (``job.json``) and its progress file (no Flink needed)."""

from __future__ import annotations

import pytest

from streamanon.flink.runtime import Endpoint, RunRecord, file_record
from streamanon.flink.splits import read_progress, split_count, write_progress


def test_a_restore_keeps_the_splits_key_groups_and_maximum_parallelism(tmp_path):
    data = tmp_path / "in.csv"
    data.write_text("t,u,a\n" + "".join(f"{i},u{i},v\n" for i in range(20_000)))
    work = tmp_path / "work"
    plain = lambda groups, _: list(range(groups))  # noqa: E731 (route_keys needs the JVM)
    first = RunRecord.settle(work, file_record("z", data, 500, 128, parallelism=2), False,
                             plain)
    assert first.splits == split_count(data, first.split_bytes) > 1
    # the restore asks for other batches and parallelism: the stored record wins
    again = RunRecord.settle(work, file_record("z", data, 50_000, 128, parallelism=300), True,
                             plain)
    assert again == first and again.max_parallelism == 128
    assert first.routing == list(range(128))
    with pytest.raises(ValueError, match="holds a run of z"):
        RunRecord.settle(work, file_record("castle", data, 500, 2), True, plain)
    stream = file_record("z", Endpoint("127.0.0.1", 9), 500, 128, parallelism=200)
    assert (stream.splits, stream.max_parallelism) == (0, 200)


def test_progress_file_round_trip(tmp_path):
    path = tmp_path / "progress"
    assert read_progress(path) is None
    write_progress(str(path), 3, 31)
    assert read_progress(path) == (3, 31)
    path.write_text("garbage")
    assert read_progress(path) is None

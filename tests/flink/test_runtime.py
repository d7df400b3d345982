"""What a run fixes in its work folder (``job.json``) and its progress file (no Flink needed)."""

from __future__ import annotations

import os

import pytest

from streamanon.errors import (
    ConfigError,
    HelperGone,
    JobError,
    JobFailed,
    KafkaJarsError,
    OutcomeGap,
    ResumeError,
    StreamanonError,
)
from streamanon.flink.runtime import Z_BATCH_SIZE, Endpoint, JobOptions, RunRecord, file_record
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


def test_refusals_are_typed_errors(tmp_path):
    """Parameters the runtime refuses are :class:`ConfigError`, a run that cannot be resumed
    :class:`ResumeError` (both still ``ValueError``s)."""
    with pytest.raises(ConfigError, match="expected HOST:PORT"):
        Endpoint.parse("no-port")
    record = RunRecord("z", "in.csv", key_groups=128, max_parallelism=128)
    with pytest.raises(ConfigError, match="more than the run's maximum parallelism 128"):
        JobOptions(parallelism=129).env_settings(tmp_path, record)
    data = tmp_path / "in.csv"
    data.write_text("t,u,a\n1,u,v\n")
    plain = lambda groups, _: list(range(groups))  # noqa: E731 (route_keys needs the JVM)
    RunRecord.settle(tmp_path / "work", file_record("z", data, 500, 128), False, plain)
    with pytest.raises(ResumeError, match="holds a run of z"):
        RunRecord.settle(tmp_path / "work", file_record("castle", data, 500, 2), True, plain)


def test_batched_options_keep_their_own_batch_size():
    assert JobOptions().batched(Z_BATCH_SIZE).batch_size == Z_BATCH_SIZE
    mine = JobOptions(batch_size=7)
    assert mine.batched(Z_BATCH_SIZE).batch_size == 7 and mine.batched(1) is not mine


def test_the_job_failures_are_streamanon_errors():
    """Every error class of the Flink jobs lives in :mod:`streamanon.errors`, under one roof."""
    from streamanon.flink import kafka_jars, outcomes, readahead

    assert readahead.HelperGone is HelperGone and outcomes.OutcomeGap is OutcomeGap
    assert kafka_jars.KafkaJarsError is KafkaJarsError
    for cls in (JobFailed, OutcomeGap, HelperGone, KafkaJarsError):
        assert issubclass(cls, JobError) and issubclass(cls, StreamanonError)


def test_a_command_s_jvm_compiles_with_c1_unless_the_user_chose_a_jit_tier(monkeypatch):
    from streamanon.flink.env import JIT_OPTIONS, prepare_jvm_args

    monkeypatch.setenv("JVM_ARGS", "-Djava.io.tmpdir=/tmp/x")
    prepare_jvm_args()
    prepare_jvm_args()  # idempotent
    assert os.environ["JVM_ARGS"] == f"-Djava.io.tmpdir=/tmp/x {JIT_OPTIONS}"
    monkeypatch.setenv("JVM_ARGS", "-XX:-TieredCompilation")
    prepare_jvm_args()
    assert os.environ["JVM_ARGS"] == "-XX:-TieredCompilation"
    monkeypatch.delenv("JVM_ARGS")
    prepare_jvm_args()
    assert os.environ["JVM_ARGS"] == JIT_OPTIONS

"""The Flink z job equals ``streamanon z`` exactly, also after a kill and a restore.

One hierarchical trace (with bad, blank and late lines) is anonymized by the pure-Python path
and by the Flink job at parallelism 2; the outputs must be byte-identical, and so must the
rejects files and the accounting. A second Flink run is killed (SIGKILL of the whole process
tree) after a checkpoint and restarted from it: its merged output must equal the
uninterrupted run's, so nothing was lost or duplicated (the merge also checks one outcome per
input line). A third is killed at parallelism 2 and resumed at parallelism 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamanon.cli.zanon import run_z
from streamanon.data.traces import write_trace, zipf_trace
from streamanon.io import OnError
from streamanon.zanon import ZAnonymizer
from tests.flink.conftest import require_flink, run_and_kill_after_checkpoint, streamanon

require_flink()
pytestmark = pytest.mark.flink

Z, DELTA_T, TOLERANCE = 3, 600.0, 5.0
N = 8000


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    rows = zipf_trace(N, n_users=300, n_values=1000, levels=3, duration=20_000, seed=11)
    path = write_trace(tmp_path_factory.mktemp("trace") / "trace.csv", rows)
    lines = path.read_text().splitlines()
    t_late = repr(float(rows[4000][0]) - 2.0)  # within the tolerance: re-stamped
    t_too_late = repr(float(rows[5000][0]) - 60.0)  # beyond it: rejected
    # inserted after rows[k] (file line k + 2), the latest first so indices stay valid
    lines[5002:5002] = [f"{t_too_late},u8,v8", ",u9,v9"]
    lines[4002:4002] = [f"{t_late},u7,g2.0*g1.0*v3"]
    lines[1002:1002] = ["not,a,valid,line", "", "nan,u1,v1"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def pure(trace, tmp_path_factory) -> tuple[Path, Path, dict]:
    out = tmp_path_factory.mktemp("pure") / "pure.csv"
    rejects = out.with_suffix(".rejects.jsonl")
    stats = run_z(trace, out, ZAnonymizer(z=Z, delta_t=DELTA_T), on_error=OnError.skip,
                  rejects_path=rejects, time_tolerance=TOLERANCE)
    assert stats.rejected == 4 and stats.details["restamped"] == 1  # the trace is as meant
    assert stats.suppressed > 0 and stats.details["released_per_level"]["level_0"] > 0
    return out, rejects, stats.to_dict()


def z_args(trace: Path, out: Path, parallelism: int = 2) -> list[str]:
    return ["flink", "z", "--z", str(Z), "--delta-t", str(DELTA_T), "-p", str(parallelism),
            str(trace), "-o", str(out), "--on-error", "skip", "--time-tolerance",
            str(TOLERANCE)]


@pytest.fixture(scope="module")
def uninterrupted(trace, tmp_path_factory) -> tuple[Path, Path, dict]:
    out = tmp_path_factory.mktemp("flink") / "flink.csv"
    summary = streamanon(*z_args(trace, out))
    return out, Path(f"{out}.rejects.jsonl"), summary


def test_flink_z_output_equals_the_pure_python_path(pure, uninterrupted):
    (pure_out, pure_rejects, pure_stats), (out, rejects, summary) = pure, uninterrupted
    assert out.read_bytes() == pure_out.read_bytes()
    assert rejects.read_bytes() == pure_rejects.read_bytes()
    for key in ("read", "released", "suppressed", "rejected", "released_per_level",
                "restamped"):
        assert summary[key] == pure_stats[key], key
    assert summary["balanced"]
    assert summary["params"]["parallelism"] == 2


def test_kill_after_checkpoint_and_restore_loses_and_duplicates_nothing(
        trace, uninterrupted, tmp_path):
    work = tmp_path / "work"
    out = tmp_path / "restored.csv"
    written = run_and_kill_after_checkpoint([*z_args(trace, out), "--checkpoint-interval",
                                             "1000", "--unaligned-checkpoints", "--pace",
                                             "0.003", "--batch-size", "200"], work)
    assert written < N, "the kill came after the job had written everything"
    assert not out.exists()
    summary = streamanon(*z_args(trace, out), "--work-dir", str(work), "--restore", "latest")
    flink_out, flink_rejects, flink_summary = uninterrupted
    assert out.read_bytes() == flink_out.read_bytes()
    assert Path(f"{out}.rejects.jsonl").read_bytes() == flink_rejects.read_bytes()
    for key in ("read", "released", "suppressed", "rejected", "released_per_level"):
        assert summary[key] == flink_summary[key], key


def test_restore_at_another_parallelism_changes_nothing(trace, uninterrupted, tmp_path):
    """Killed at parallelism 2, resumed at 1: the key groups' state moves to the one subtask
    (small snapshots force the restore through a snapshot and a replay of the redo log)."""
    work = tmp_path / "work"
    out = tmp_path / "rescaled.csv"
    fixed = ["--batch-size", "300", "--snapshot-every", "700"]
    written = run_and_kill_after_checkpoint([*z_args(trace, out), *fixed,
                                             "--checkpoint-interval", "1000",
                                             "--unaligned-checkpoints", "--pace", "0.003"],
                                            work)
    assert written < N, "the kill came after the job had written everything"
    summary = streamanon(*z_args(trace, out, parallelism=1), *fixed, "--work-dir", str(work),
                         "--restore", "latest")
    flink_out, _, flink_summary = uninterrupted
    assert summary["params"]["parallelism"] == 1
    assert out.read_bytes() == flink_out.read_bytes()
    for key in ("read", "released", "suppressed", "rejected", "released_per_level"):
        assert summary[key] == flink_summary[key], key

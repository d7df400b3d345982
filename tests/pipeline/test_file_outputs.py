"""OutputSet: outputs replaced only on success, never over an input, and real kills."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamanon.pipeline.file_outputs import OutputError, OutputSet, Terminated


def partials(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".partial" in p.name]


def test_success_replaces_and_keeps_the_extension_and_mode(tmp_path) -> None:
    target = tmp_path / "out.csv"
    target.write_text("old")
    target.chmod(0o640)
    with OutputSet() as outs:
        tmp = outs.add(target, "-o")
        assert tmp.endswith(".csv") and ".partial" in tmp and Path(tmp).parent == tmp_path
        Path(tmp).write_text("new")
        assert target.read_text() == "old"  # nothing replaced before the block ends
    assert target.read_text() == "new"
    assert (target.stat().st_mode & 0o777) == 0o640
    assert outs.committed == [str(target)] and not partials(tmp_path)


@pytest.mark.parametrize("error", [ValueError("bad line"), KeyboardInterrupt(), Terminated(15)])
def test_failure_keeps_previous_content(tmp_path, error) -> None:
    target = tmp_path / "out.csv"
    target.write_text("old")
    new = tmp_path / "new.csv"
    outs = OutputSet()
    with pytest.raises(type(error)), outs:
        Path(outs.add(target, "-o")).write_text("half")
        Path(outs.add(new, "--rejects")).write_text("half")
        raise error
    assert target.read_text() == "old" and not new.exists()
    assert not partials(tmp_path)
    assert outs.not_written == [str(target), str(new)]
    assert "not written" in outs.describe_failure() and str(new) in outs.describe_failure()


def test_refuses_the_input_itself_by_path_symlink_and_hard_link(tmp_path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("input")
    (tmp_path / "sym.csv").symlink_to(src)
    os.link(src, tmp_path / "hard.csv")
    (tmp_path / "sub").mkdir()
    for name in ("in.csv", "sym.csv", "hard.csv", "sub/../in.csv"):
        with pytest.raises(OutputError, match="destroy the input"), OutputSet([src]) as outs:
            outs.add(tmp_path / name, "-o")
    assert src.read_text() == "input" and not partials(tmp_path)


def test_refuses_duplicates_folders_and_missing_folders(tmp_path) -> None:
    cases = {
        "also the file of -o": [tmp_path / "a.csv", tmp_path / "a.csv"],
        "is a folder": [tmp_path],
        "does not exist": [tmp_path / "nodir" / "a.csv"],
    }
    for message, targets in cases.items():
        with pytest.raises(OutputError, match=message), OutputSet() as outs:
            for i, t in enumerate(targets):
                outs.add(t, "-o" if i == 0 else "--suppressed")
    assert not partials(tmp_path)


def test_only_one_output_may_be_stdout() -> None:
    with pytest.raises(OutputError, match="already taken by -o"), OutputSet() as outs:
        assert outs.add("-", "-o") == "-"
        outs.add("-", "--rejects")


def test_writing_through_a_symlink_replaces_its_target(tmp_path) -> None:
    real = tmp_path / "real.csv"
    real.write_text("old")
    (tmp_path / "link.csv").symlink_to(real)
    with OutputSet() as outs:
        Path(outs.add(tmp_path / "link.csv", "-o")).write_text("new")
    assert (tmp_path / "link.csv").is_symlink() and real.read_text() == "new"


SLOW_WRITER = """
import sys, time
from pathlib import Path
from streamanon.pipeline.file_outputs import OutputSet
with OutputSet([sys.argv[2]]) as outs:
    path = Path(outs.add(sys.argv[1], "-o"))
    path.write_text("half-written")
    print("ready", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_real_kill_leaves_the_previous_output(tmp_path, signum) -> None:
    """A process killed while writing (SIGTERM, or Ctrl-C's SIGINT) leaves the old file and no
    temporary file."""
    target = tmp_path / "out.csv"
    target.write_text("old")
    src = tmp_path / "in.csv"
    src.write_text("x")
    proc = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(target), str(src)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    assert partials(tmp_path)  # the temporary file exists while the run goes on
    proc.send_signal(signum)
    proc.wait(timeout=20)
    assert proc.returncode != 0
    time.sleep(0.05)
    assert target.read_text() == "old" and not partials(tmp_path)

"""Helpers of the Flink tests; each job on the mini-cluster costs ~25-40 s."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def require_flink() -> None:
    """Skip the calling test module without the ``flink`` extra or a Java runtime."""
    pytest.importorskip("pyflink", reason="needs the flink extra: pip install 'streamanon[flink]'")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("PyFlink needs Java 17", allow_module_level=True)

STREAMANON = [sys.executable, "-c", "from streamanon.cli import main; main()"]
DEADLINE = 240.0  # seconds for a whole socket run; only a guard against a hung job


def streamanon(*args: str, timeout: float = 300) -> dict:
    """Run the CLI with ``--json``; returns the summary (fails the test with stderr)."""
    proc = subprocess.run([*STREAMANON, *args, "--json"], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def outcome_lines_on_disk(work: Path) -> int:
    """Outcomes in the part files (committed or in progress) under ``work/parts``: one per
    text line, a batch line's rows."""
    from streamanon.flink.outcomes import BATCH, CASTLE_BATCH, castle_batch_of, outcome_batch_of

    count = 0
    for path in (work / "parts").rglob("*"):
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                with contextlib.suppress(Exception):  # a line still being written
                    if line.startswith(BATCH + "\t"):
                        count += outcome_batch_of(line).num_rows
                    elif line.startswith(CASTLE_BATCH + "\t"):
                        count += len(castle_batch_of(line))
                    else:
                        count += 1
    return count


def completed_checkpoints(work: Path) -> list[int]:
    return [int(m.parent.name.split("-")[1])
            for m in work.glob("checkpoints/*/chk-*/_metadata")]


def run_and_kill_after_checkpoint(args: list[str], work: Path, *, min_written: int = 200,
                                  timeout: float = 240) -> int:
    """Start a job; once ``min_written`` outcome lines are on disk, wait for a checkpoint
    completed after that moment and SIGKILL the job's whole process group.

    The restore then starts from a checkpoint taken mid-stream (it covers at least
    ``min_written`` outcomes). Returns the outcome lines on disk at the kill.
    """
    proc = subprocess.Popen([*STREAMANON, *args, "--work-dir", str(work)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    baseline: int | None = None
    try:
        while True:
            done = completed_checkpoints(work)
            if baseline is None and outcome_lines_on_disk(work) >= min_written:
                baseline = max(done, default=0)
            if baseline is not None and max(done, default=0) > baseline:
                break
            assert proc.poll() is None, "the job ended before it could be killed: " + (
                proc.stderr.read().decode()[-2000:] if proc.stderr else "")
            assert time.monotonic() < deadline, "no checkpoint completed in time"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return outcome_lines_on_disk(work)


class Released:
    """Reads the release connection: outcome lines and notes, as they arrive."""

    def __init__(self, server: socket.socket) -> None:
        self.lines: list[str] = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(server,), daemon=True)
        self.thread.start()

    def _read(self, server: socket.socket) -> None:
        conn, _ = server.accept()
        with conn, conn.makefile("r", encoding="utf-8", newline="\n") as fh:
            for line in fh:
                with self.cond:
                    self.lines.append(line.rstrip("\n"))
                    self.cond.notify_all()

    def notes(self) -> list[dict]:
        with self.cond:
            return [json.loads(x[2:]) for x in self.lines if x.startswith("#\t")]

    def outcomes(self) -> list[str]:
        with self.cond:
            return [x for x in self.lines if x and not x.startswith("#\t")]

    def wait(self, ready: Callable[[], bool], what: str, proc: subprocess.Popen,
             log: Path) -> None:
        """Block until ``ready()`` (re-checked on every arriving line); fail if the job dies."""
        end = time.monotonic() + DEADLINE
        with self.cond:
            while not ready():
                assert proc.poll() is None, f"the job ended while waiting for {what}: " + \
                    log.read_text()[-3000:]
                assert time.monotonic() < end, f"gave up waiting for {what}"
                self.cond.wait(1.0)

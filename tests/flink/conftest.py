"""Helpers of the Flink tests; each job on the mini-cluster costs ~25-40 s."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def require_flink() -> None:
    """Skip the calling test module without the ``flink`` extra or a Java runtime."""
    pytest.importorskip("pyflink", reason="needs the flink extra: pip install 'streamanon[flink]'")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("PyFlink needs Java 17", allow_module_level=True)

STREAMANON = [sys.executable, "-c", "from streamanon.cli import main; main()"]


def streamanon(*args: str, timeout: float = 300) -> dict:
    """Run the CLI with ``--json``; returns the summary (fails the test with stderr)."""
    proc = subprocess.run([*STREAMANON, *args, "--json"], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_and_kill_after_checkpoint(args: list[str], work: Path, *, checkpoints: int = 2,
                                  timeout: float = 240) -> int:
    """Start a job, SIGKILL its whole process group once ``checkpoints`` have completed.

    Returns the number of outcome lines written (visible or in progress) at the kill.
    """
    proc = subprocess.Popen([*STREAMANON, *args, "--work-dir", str(work)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while True:
            done = list(work.glob("checkpoints/*/chk-*/_metadata"))
            if any(int(m.parent.name.split("-")[1]) >= checkpoints for m in done):
                break
            assert proc.poll() is None, "the job ended before it could be killed: " + (
                proc.stderr.read().decode()[-2000:] if proc.stderr else "")
            assert time.monotonic() < deadline, "no checkpoint completed in time"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return sum(len(p.read_bytes().splitlines()) for p in (work / "parts").rglob("*")
               if p.is_file())

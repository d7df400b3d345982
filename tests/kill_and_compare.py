"""Kill-and-compare helpers of the Kafka tests that SIGKILL a job mid-stream (tests/flink: the
connector's restore tests, the standalone cluster's TaskManager kills; tests/pipeline/kafka:
the exactly-once tests): the CASTLE input on a topic, the wait for a checkpoint taken after
output, the pure command's reference run (in the background) and the each-message-once
comparison."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.pipeline.kafka.conftest import EXE, produce, summary_of


def castle_topic(broker: Any, folder: Path, rows: int, *, seed: int
                 ) -> tuple[Path, Path, bytes, str]:
    """``rows`` ASHRAE-shaped rows (``seed``) in ``folder/in.csv``, their rules in
    ``folder/rules.toml`` and on a fresh one-partition topic (the header the first message):
    ``(data, rules, header, topic)``."""
    from streamanon.data import ashrae

    data = ashrae.write_csv(folder / "in.csv", ashrae.generate(rows, seed=seed))
    rules = folder / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    header, *lines = data.read_bytes().splitlines()
    (topic,) = broker.topics("in")
    produce(broker.bootstrap, topic, [header, *lines])
    return data, rules, header, topic


def wait_for_checkpoint_after_output(alive: Callable[[], str | None], work: Path,
                                     written: Callable[[], int], *, min_written: int,
                                     timeout: float, growing: bool = False) -> None:
    """Return once a checkpoint under ``work`` completed after ``written()`` reached
    ``min_written`` (with ``growing``: and the output grew since the previous look, so that
    the job is mid-stream now). ``alive()`` is None while the job runs, else its log's tail
    (the test fails with it); the test fails too after ``timeout`` seconds."""
    from tests.flink.conftest import completed_checkpoints

    deadline = time.monotonic() + timeout
    baseline: int | None = None
    last = 0
    while True:
        ended = alive()
        assert ended is None, "the job ended before the kill: " + ended
        assert time.monotonic() < deadline, "no checkpoint after output in time"
        now = written()
        done = max(completed_checkpoints(work), default=0)
        if baseline is None and now >= min_written:
            baseline = done
        elif baseline is not None and done > baseline and (not growing or now > last):
            return
        last = now
        time.sleep(0.1)


def topic_end(bootstrap: str, topic: str) -> Callable[[], int]:
    """The messages in ``topic[0]`` now (0 before the job created the topic)."""
    from streamanon.pipeline.kafka.client import end_offsets

    def written() -> int:
        try:
            return end_offsets(bootstrap, topic, [0])[0]
        except Exception:  # (the topic appears when the job starts)
            return 0

    return written


def start_pure(broker: Any, command: str, topic: str, out: str, *args: str,
               suppressed: str | None = None) -> Callable[[], dict]:
    """``streamanon COMMAND topic -o out [--suppressed ...] --from earliest ARGS --json`` (the
    pure command on the same topic), started now in a process of its own: call the result for
    its summary (it waits). A kill test starts its reference run once the input
    is on the topic, so that it runs while the job under test waits (paced input, start-up,
    a restart's back-off) instead of after it; the two read the input and write their own
    topics."""
    sup = ["--suppressed", broker.url(suppressed)] if suppressed else []
    proc = subprocess.Popen(
        [str(EXE), command, broker.url(topic), "-o", broker.url(out), *sup, "--from",
         "earliest", *args, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)

    def summary() -> dict:
        try:
            stdout, stderr = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        return summary_of(subprocess.CompletedProcess(proc.args, proc.returncode, stdout,
                                                      stderr))

    return summary


def assert_each_message_once(got: list, want: list, ref: dict, at_kill: int,
                             *context: object) -> None:
    """The killed and recovered job's messages are the pure run's (``want``, its summary
    ``ref``) as a multiset: 0 repeats, 0 missing, nothing else; the kill came mid-stream."""
    assert Counter(got) == Counter(want), (*context, at_kill, len(got), len(want))
    assert len(got) == len(set(got)) == ref["released"] and 0 < at_kill < len(want)


def assert_suppressed_once(got: list, want: list) -> None:
    """The suppressed rows' topic holds the pure run's messages, each once."""
    assert Counter(got) == Counter(want) and len(got) == len(set(got))


def verify_castle_releases(folder: Path, header: bytes, released: list[bytes], rules: Path,
                           data: Path) -> None:
    """The released rows (topic values, under ``header``) pass ``streamanon verify castle``
    (k=4, l=2) against the input ``data``."""
    path = folder / "released.csv"
    path.write_bytes(header + b"\n" + b"".join(v + b"\n" for v in released))
    subprocess.run([str(EXE), "verify", "castle", str(path), "--rules", str(rules), "--k", "4",
                    "--l", "2", "--input", str(data)], check=True, capture_output=True,
                   timeout=120)


def kill_mid_run(bootstrap: str, args: list[str], work: Path, out: str, *, seed: int,
                 min_written: int = 300) -> tuple[int, float]:
    """Start ``streamanon *args`` in its own process group; once a checkpoint completed after
    ``min_written`` messages were in ``out[0]``, wait a random time (seeded) and SIGKILL the
    whole group. Returns the messages in ``out[0]`` at the kill and the delay waited."""
    import contextlib
    import os
    import random
    import signal

    from tests.flink.conftest import STREAMANON

    delay = random.Random(seed).uniform(0.0, 1.5)
    proc = subprocess.Popen([*STREAMANON, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)

    def alive() -> str | None:
        if proc.poll() is None:
            return None
        return proc.stderr.read().decode()[-2000:] if proc.stderr else ""

    try:
        wait_for_checkpoint_after_output(alive, work, topic_end(bootstrap, out),
                                         min_written=min_written, timeout=240)
        time.sleep(delay)
        assert proc.poll() is None, f"the job ended before the kill (delay {delay:.2f} s)"
    finally:
        with contextlib.suppress(ProcessLookupError):  # (a job that ended: its error shows)
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return topic_end(bootstrap, out)(), delay

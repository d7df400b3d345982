"""The progress topic cannot run code: a writer of ``GROUP.progress`` without the checkpoint
key appends checkpoints (an old-style pickle whose loading runs ``os.system``, a forged entry of
the current format, an unsigned batch entry) to a real broker, and the next real
``streamanon z`` refuses each with one line naming topic, partition and offset; the marker
file the pickle would create never appears. The key stays out of outputs and summaries."""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path

import pytest

from tests.pipeline.kafka.conftest import (
    cli,
    produce,
    read_topic,
    require_kafka,
    summary_of,
    z_trace,
)

require_kafka()

pytestmark = pytest.mark.kafka


class _Evil:
    """Unpickling it runs a shell command (what an attacker's checkpoint would do)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple:
        return (os.system, (self.command,))


def _key_file(path: Path, text: str = "k" * 40) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def _append(bootstrap: str, topic: str, entries: list[tuple[bytes, list[tuple[str, bytes]]]]
            ) -> None:
    """What anyone who reaches the broker's port can do: append to the progress topic."""
    from confluent_kafka import Producer

    from streamanon.pipeline.kafka.connection import quiet_logs

    p = Producer({"bootstrap.servers": bootstrap, **quiet_logs()})
    for value, headers in entries:
        p.produce(topic, value, partition=0, headers=headers)
    assert p.flush(30) == 0


def _end(bootstrap: str, topic: str) -> int:
    from streamanon.pipeline.kafka.client import end_offsets

    return end_offsets(bootstrap, topic, [0])[0]


def _first_run(b, tmp_path: Path, key: Path | None, env: dict[str, str] | None = None
               ) -> tuple[list[str], str, dict]:
    (inp,) = b.topics("in")
    trace = z_trace(450, seed=5)
    produce(b.bootstrap, inp, trace[:400])
    out = b.names("out")[0]
    args = ["z", "--z", "2", "--delta-t", "20", b.url(inp), "-o", b.url(out), "--until-end",
            "--json", *(["--checkpoint-key", str(key)] if key is not None else [])]
    first = summary_of(cli(*args, env=env))
    produce(b.bootstrap, inp, trace[400:])  # more input: the next run resumes
    from streamanon.pipeline.kafka.options import default_group

    return args, default_group("z", b.url(out)), first


def _assert_refused(proc, progress: str, offset: int, marker: Path) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.strip().splitlines() if "refusing" in ln]
    assert len(lines) == 1, proc.stderr
    assert f"{progress} partition 0 offset {offset}" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not marker.exists(), "the checkpoint's code ran"


def test_a_pickled_checkpoint_from_a_writer_of_the_topic_never_runs(kafka_broker, tmp_path):
    """The checkpoint format before signing (pickle parts + JSON commit entry): a restart of
    that format unpickled whatever the topic held."""
    b = kafka_broker
    key = _key_file(tmp_path / "ck.key")
    args, group, _ = _first_run(b, tmp_path, key)
    progress = f"{group}.progress"
    marker = tmp_path / "pwned"
    payload = pickle.dumps((_Evil(f"touch {marker}"), None))
    at = _end(b.bootstrap, progress)
    meta = {"seq": 99, "positions": {"0": 0}, "outputs": {},
            "finished": False, "first_part": at, "parts": 1, "bytes": len(payload),
            "stats": {}, "identity": {}}
    _append(b.bootstrap, progress, [
        (payload, [("kind", b"part"), ("prev", b"-1"), ("seq", b"99"), ("part", b"0")]),
        (json.dumps(meta).encode(), [("kind", b"commit"), ("prev", b"-1")])])
    _assert_refused(cli(*args, check=False), progress, at + 1, marker)


def test_a_forged_entry_of_the_current_format_is_refused(kafka_broker, tmp_path):
    """The current format signed with a key the attacker made up; the parts' digest is right,
    so only the signature stands between the pickle and ``pickle.loads``."""
    import hashlib

    from streamanon.pipeline.kafka.exactly_once import FORMAT, entry_mac

    b = kafka_broker
    key = _key_file(tmp_path / "ck.key")
    args, group, _ = _first_run(b, tmp_path, key)
    progress = f"{group}.progress"
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Evil(f"touch {marker}"))
    at = _end(b.bootstrap, progress)
    meta = {"format": FORMAT, "seq": 99, "positions": {"0": 0}, "outputs": {},
            "merge": {"partitions": [0], "released_key": {"0": 0}, "frontier": {"0": 0}},
            "finished": False, "first_part": at, "parts": 1, "bytes": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(), "stats": {}, "identity": {}}
    value = json.dumps(meta).encode()
    _append(b.bootstrap, progress, [
        (payload, [("kind", b"part"), ("prev", b"-1")]),
        (value, [("kind", b"commit"), ("prev", b"-1"),
                 ("hmac", entry_mac(b"x" * 40, progress, "commit", value).encode())])])
    _assert_refused(cli(*args, check=False), progress, at + 1, marker)
    # an unsigned batch entry after the real checkpoint is refused too
    args2, group2, _ = _first_run(b, tmp_path, key)
    progress2 = f"{group2}.progress"
    at2 = _end(b.bootstrap, progress2)
    _append(b.bootstrap, progress2, [(b'{"seq": 1, "frontier": {"0": 3}}',
                                      [("kind", b"batch"), ("prev", str(at2 - 1).encode())])])
    proc = cli(*args2, check=False)
    assert proc.returncode == 2 and "batch entry is not signed" in proc.stderr
    assert f"{progress2} partition 0 offset {at2}" in proc.stderr


def test_another_key_is_refused_and_the_right_one_resumes(kafka_broker, tmp_path):
    b = kafka_broker
    key = _key_file(tmp_path / "ck.key", "s3cr3t-" * 8)
    args, group, first = _first_run(b, tmp_path, key)
    assert first["delivery"]["checkpoint_key"] == str(key)
    other = _key_file(tmp_path / "other.key")
    swapped = [str(other) if a == str(key) else a for a in args]
    proc = cli(*swapped, check=False)
    assert proc.returncode == 2 and "signature does not match" in proc.stderr
    assert str(other) in proc.stderr  # names the key file, never its content
    again = cli(*args)
    summary = summary_of(again)
    assert summary["delivery"]["resumed_from_checkpoint"] is not None
    assert summary["read"] == 450  # the accounting came back from the checkpoint
    # the key is in no output, summary, log or topic
    secret = b"s3cr3t-"
    assert secret.decode() not in again.stdout + again.stderr + proc.stdout + proc.stderr
    progress = read_topic(b.bootstrap, f"{group}.progress")[0]
    assert progress and all(secret not in v and all(secret not in h for h in hs.values())
                            for v, hs in progress)


def test_the_default_key_is_created_private_and_a_shared_key_file_is_refused(kafka_broker,
                                                                             tmp_path):
    b = kafka_broker
    state = tmp_path / "state"
    env = {"XDG_STATE_HOME": str(state), "STREAMANON_CHECKPOINT_KEY_FILE": ""}
    args, _, first = _first_run(b, tmp_path, None, env=env)
    made = state / "streamanon" / "checkpoint.key"
    assert first["delivery"]["checkpoint_key"] == f"{made} (created)"
    assert stat.S_IMODE(made.stat().st_mode) == 0o600 and len(made.read_text().strip()) == 64
    resumed = summary_of(cli(*args, env=env))
    assert resumed["delivery"]["checkpoint_key"] == str(made)
    assert resumed["delivery"]["resumed_from_checkpoint"] is not None
    shared = _key_file(tmp_path / "shared.key")
    shared.chmod(0o644)
    proc = cli(*args, env={"STREAMANON_CHECKPOINT_KEY_FILE": str(shared)}, check=False)
    assert proc.returncode == 2 and "chmod 600" in proc.stderr and "Traceback" not in proc.stderr
    short = _key_file(tmp_path / "short.key", "abc")
    proc = cli(*args, "--checkpoint-key", str(short), check=False)
    assert proc.returncode == 2 and "at least 16 needed" in proc.stderr


def test_a_checkpoint_key_shows_where_it_is_never_what_it_is(tmp_path):
    from streamanon.errors import CheckpointKeyError
    from streamanon.pipeline.kafka.exactly_once import checkpoint_key

    key = checkpoint_key(_key_file(tmp_path / "k", "z" * 32))
    assert key.key == b"z" * 32 and "zzzz" not in repr(key) and "zzzz" not in key.origin
    with pytest.raises(CheckpointKeyError, match="No such file"):
        checkpoint_key(tmp_path / "missing")

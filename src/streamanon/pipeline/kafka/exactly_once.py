"""Exactly-once from a topic to topics, on any Kafka-compatible broker, without transactions.

The partitions are merged by :class:`~streamanon.pipeline.kafka.merge.PartitionMerge`.

Design: docs/design/kafka.md
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pickle
import secrets
import signal
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamanon.errors import (
    BrokerError,
    BrokerTimeout,
    CheckpointKeyError,
    CheckpointRefusedError,
    ResumeError,
)
from streamanon.pipeline.chunks import REJECTS
from streamanon.pipeline.kafka.client import (
    BrokerWatch,
    KafkaSource,
    StopFlag,
    client_config,
    end_offsets,
    flush_producer,
    forgotten_producer,
)
from streamanon.pipeline.kafka.merge import PartitionMerge
from streamanon.pipeline.sinks import ResumableSink

if TYPE_CHECKING:
    from streamanon.pipeline.sinks import Sink
    from streamanon.pipeline.stages import Stage

PART_BYTES = 512 << 10

#: the version of the snapshot format (commit entries say it; another one is refused)
FORMAT = 2
#: where the checkpoint key file is named when no ``--checkpoint-key`` is given
KEY_ENV = "STREAMANON_CHECKPOINT_KEY_FILE"
MIN_KEY_BYTES = 16


@dataclass(frozen=True)
class CheckpointKey:
    """The key that signs a pipeline's checkpoints, and where it came from (``origin``: shown
    in summaries; the key itself never is)."""

    key: bytes
    path: Path
    created: bool = False

    def __repr__(self) -> str:  # never the key
        return f"CheckpointKey(path={str(self.path)!r}, created={self.created})"

    @property
    def origin(self) -> str:
        return f"{self.path}{' (created)' if self.created else ''}"


def default_key_path() -> Path:
    """``$XDG_STATE_HOME/streamanon/checkpoint.key`` (``~/.local/state/...`` by default)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "streamanon" / "checkpoint.key"


def checkpoint_key(path: str | Path | None = None) -> CheckpointKey:
    """The checkpoint key: the file ``path`` (``--checkpoint-key``), else the file named by
    ``$STREAMANON_CHECKPOINT_KEY_FILE``, else :func:`default_key_path`, which is created
    (32 random bytes, hex, mode 0600) when it does not exist. A named file must exist.

    The key is the file's content (surrounding white space removed), at least 16 bytes; a file
    that other users may read or write is refused (like a leaf key: 0600).
    """
    created = False
    if path is None and os.environ.get(KEY_ENV):
        path = os.environ[KEY_ENV]
    if path is None:
        target = default_key_path()
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another run created it meanwhile
                pass
            else:
                with os.fdopen(fd, "w") as f:
                    f.write(secrets.token_hex(32) + "\n")
                created = True
        path = target
    p = Path(path)
    try:
        mode = p.stat().st_mode
        key = p.read_bytes().strip()
    except OSError as exc:
        raise CheckpointKeyError(f"checkpoint key {p}: {exc.strerror or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CheckpointKeyError(
            f"checkpoint key {p}: other users may access it (mode {stat.S_IMODE(mode):04o}); "
            f"make it private: chmod 600 {p}")
    if len(key) < MIN_KEY_BYTES:
        raise CheckpointKeyError(
            f"checkpoint key {p}: {len(key)} bytes, at least {MIN_KEY_BYTES} needed (e.g. "
            "python -c 'import secrets; print(secrets.token_hex(32))' > FILE)")
    return CheckpointKey(key, p, created)


def entry_mac(key: bytes, topic: str, kind: str, value: bytes) -> str:
    """HMAC-SHA256 of a progress-log entry, bound to its topic and kind (hex)."""
    msg = b"streamanon-checkpoint\0%s\0%s\0" % (topic.encode(), kind.encode()) + value
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


@dataclass
class Snapshot:
    seq: int
    positions: dict[int, int]
    outputs: dict[str, Any]
    stage: Any
    merge: PartitionMerge
    finished: bool
    commit_offset: int
    batches: list[dict[int, int]]
    identity: dict[str, Any]


class ProgressLog:
    """The progress topic: snapshots (parts + commit entry) and logged batch frontiers.

    Every commit and batch entry is signed with ``key`` (:func:`entry_mac`; default: the key
    of :func:`checkpoint_key`); :meth:`latest` loads nothing that is not signed with it, and
    unpickles the stage only once the signed commit entry's digest of the parts matched.

    Args:
        bootstrap: the broker list (``host:port,...``).
        topic: the progress topic (one partition).
        config: librdkafka settings of the user (TLS, SASL, ...).
        watch: the run's broker watch (``None``: one of its own).
        key: the key that signs the entries (``None``: :func:`checkpoint_key`'s).
    """

    def __init__(self, bootstrap: str, topic: str, *, config: Mapping[str, Any] | None = None,
                 watch: BrokerWatch | None = None, key: CheckpointKey | None = None) -> None:
        from confluent_kafka import Producer

        self.bootstrap, self.topic = bootstrap, topic
        self.config = dict(config or {})
        self.watch = watch or BrokerWatch(f"progress {topic}")
        self.key = key if key is not None else checkpoint_key()
        self.last_commit = -1
        self.next_offset = 0
        self._producer = Producer({**client_config(bootstrap, self.watch, self.config),
                                   "enable.idempotence": True, "message.timeout.ms": 0,
                                   "linger.ms": 0, "message.max.bytes": 2 * PART_BYTES})

    # -- writing ----------------------------------------------------------------------------
    def _send(self, value: bytes, kind: str, extra: Mapping[str, str] | None = None,
              signed: bool = False) -> int:
        headers = [("kind", kind.encode()), ("prev", str(self.last_commit).encode())]
        headers += [(k, v.encode()) for k, v in (extra or {}).items()]
        if signed:
            headers.append(("hmac", entry_mac(self.key.key, self.topic, kind, value).encode()))
        offset = self.next_offset
        from confluent_kafka import KafkaException

        try:
            self._producer.produce(self.topic, value, partition=0, headers=headers)
        except KafkaException as exc:
            raise forgotten_producer(exc, self.bootstrap, self.topic) from None
        self.next_offset += 1
        return offset

    def _flush(self) -> None:
        while flush_producer(self._producer, self.bootstrap, self.topic):
            if self.watch.fatal:
                raise BrokerError(f"progress log {self.topic} failed: {self.watch.fatal}")
            self.watch.stalled(f"writing a checkpoint to {self.topic}")
        self.watch.alive()

    def log_batch(self, seq: int, frontier: Mapping[int, int]) -> None:
        """Write a batch's frontier and wait until the broker has it (before its outputs)."""
        self._send(json.dumps({"seq": seq, "frontier": frontier}).encode(), "batch",
                   signed=True)
        self._flush()

    def write_snapshot(self, seq: int, positions: Mapping[int, int],
                       outputs: Mapping[str, Any], stage: Any, merge: PartitionMerge,
                       finished: bool, stats: Mapping[str, Any], identity: Mapping[str, Any],
                       before_commit: Callable[[], None] | None = None,
                       wait: bool = True) -> None:
        """Write a snapshot; ``wait``: return once the broker has it (else call
        :meth:`wait` before anything that must come after it).

        Args:
            seq: the snapshot's number.
            positions: input partition -> the next offset to read.
            outputs: each sink's position (what it has written).
            stage: the stage (pickled into the parts).
            merge: the merge of the input partitions.
            finished: whether the run has read all its input.
            stats: the accounting so far.
            identity: the run's identity (a restart must match it).
            before_commit: called after the parts are flushed, before the commit entry (``None``:
                none).
            wait: return once the broker has the snapshot.
        """
        payload = pickle.dumps(stage, protocol=pickle.HIGHEST_PROTOCOL)
        first = self.next_offset
        parts = [payload[i:i + PART_BYTES] for i in range(0, len(payload), PART_BYTES)] or [b""]
        for i, part in enumerate(parts):
            self._send(part, "part", {"seq": str(seq), "part": str(i)})
        if before_commit is not None:
            self._flush()
            before_commit()
        meta = {"format": FORMAT, "seq": seq, "positions": dict(positions),
                "outputs": dict(outputs), "merge": merge.to_json(),
                "finished": finished, "first_part": first, "parts": len(parts),
                "bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest(),
                "stats": dict(stats), "identity": dict(identity), "written": time.time()}
        offset = self._send(json.dumps(meta, default=str).encode(), "commit", signed=True)
        if wait:
            self._flush()
        self.last_commit = offset

    def wait(self) -> None:
        """Return once the broker has everything written to the log."""
        self._flush()

    # -- reading ----------------------------------------------------------------------------
    def _read(self, start: int, end: int) -> list[Any]:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({**client_config(self.bootstrap, self.watch, self.config),
                      "group.id": "streamanon-progress-reader", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 10,
                      "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20})
        try:
            c.assign([TopicPartition(self.topic, 0, start)])
            out: list[Any] = []
            deadline = time.monotonic() + 120
            while len(out) < end - start:
                if time.monotonic() > deadline:
                    raise BrokerTimeout(f"reading {self.topic} offsets {start}..{end}")
                m = c.poll(0.1)
                if m is None or m.error() is not None:
                    continue
                if m.offset() < end:
                    out.append(m)
            return out
        finally:
            c.close()

    def _refuse(self, offset: int, why: str) -> CheckpointRefusedError:
        return CheckpointRefusedError(
            f"refusing the checkpoint in {self.topic} partition 0 offset {offset}: {why}; "
            "nothing of it was loaded (another writer of the progress topic, another "
            f"checkpoint key than {self.key.path}, or a checkpoint of an older streamanon: "
            "give the key it was written with, or start a new pipeline with another --group "
            "and outputs)")

    def _verified(self, m: Any, kind: str) -> bytes:
        """The value of entry ``m`` once its kind and signature are this log's."""
        headers = dict(m.headers() or [])
        value = m.value() or b""
        if headers.get("kind") != kind.encode():
            raise self._refuse(m.offset(), f"expected a {kind} entry, found "
                               f"{(headers.get('kind') or b'no kind')[:20]!r}")
        mac = headers.get("hmac")
        if mac is None:
            raise self._refuse(m.offset(), f"the {kind} entry is not signed")
        want = entry_mac(self.key.key, self.topic, kind, value)
        if not hmac.compare_digest(want.encode(), bytes(mac)):
            raise self._refuse(m.offset(), f"the {kind} entry's signature does not match "
                               "(forged, corrupted, or signed with another key)")
        return value

    def latest(self) -> Snapshot | None:
        """The latest complete snapshot, with the batch frontiers logged after it.

        Raises :class:`~streamanon.errors.CheckpointRefusedError` for an entry that is not
        signed with this log's key, or whose parts do not match their signed digest.
        """
        end = end_offsets(self.bootstrap, self.topic, [0], config=self.config)[0]
        self.next_offset = end
        if end == 0:
            return None
        last = self._read(end - 1, end)[0]
        headers = dict(last.headers() or [])
        if headers.get("kind") == b"commit":
            commit_at = end - 1
        else:
            try:
                commit_at = int(headers["prev"])
            except (KeyError, ValueError):
                raise self._refuse(end - 1, "the last entry names no commit entry") from None
            if not -1 <= commit_at < end - 1:
                raise self._refuse(end - 1, f"the last entry names commit entry {commit_at}, "
                                   "outside the log")
        if commit_at < 0:
            return None
        tail = self._read(commit_at, end)
        try:
            meta = json.loads(self._verified(tail[0], "commit"))
            batches = [{int(p): int(o) for p, o in
                        json.loads(self._verified(m, "batch"))["frontier"].items()}
                       for m in tail[1:] if dict(m.headers() or []).get("kind") != b"part"]
            if meta.get("format") != FORMAT:
                raise self._refuse(commit_at, f"format {meta.get('format')!r}, not {FORMAT}")
            first, n = int(meta["first_part"]), int(meta["parts"])
            if not 0 <= first <= first + n <= commit_at:
                raise self._refuse(commit_at, "its parts lie outside the log")
            parts = self._read(first, first + n)
            payload = b"".join(m.value() or b"" for m in parts)
            if (len(payload) != meta["bytes"] or not hmac.compare_digest(
                    hashlib.sha256(payload).hexdigest(), str(meta["sha256"]))):
                raise self._refuse(commit_at, f"its operator state (offsets {first}.."
                                   f"{first + n - 1}) does not match its signed digest")
            merge = PartitionMerge.from_json(meta["merge"])
            positions = {int(p): int(o) for p, o in meta["positions"].items()}
        except CheckpointRefusedError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # signed, but not ours
            raise self._refuse(commit_at, f"unreadable ({type(exc).__name__}: {exc})"
                               ) from None
        # signed with the user's key, digest matched: written by a holder of the key
        stage = pickle.loads(payload)
        self.last_commit = commit_at
        return Snapshot(meta["seq"], positions, meta["outputs"], stage, merge,
                        meta["finished"], commit_at, batches, meta.get("identity", {}))


#: Test hook (crash tests): ``POINT:N`` kills the process with SIGKILL at the N-th time this
#: process reaches POINT: ``produce`` (a batch's outputs handed to the producers, not yet
#: acknowledged), ``batch`` (a batch's outputs acknowledged: between a produce and a
#: checkpoint), ``snapshot`` (a checkpoint's state written, its commit entry not),
#: ``checkpoint`` (a checkpoint committed, the consumer group's offsets not).
CRASH_ENV = "STREAMANON_CRASH_AT"


class _CrashHook:
    def __init__(self, spec: str | None) -> None:
        self.point, self.at, self.seen = None, 0, 0
        if spec:
            point, _, n = spec.partition(":")
            self.point, self.at = point, int(n or 1)

    def __call__(self, point: str, flush: Callable[[], None] | None = None) -> None:
        if point != self.point:
            return
        self.seen += 1
        if self.seen >= self.at:
            if flush is not None:
                flush()
            os.kill(os.getpid(), signal.SIGKILL)


def _position(sink: Sink) -> Any:
    """Where ``sink`` stands (a plain sink: ``None``, it cannot be taken back)."""
    return sink.position() if isinstance(sink, ResumableSink) else None


class ExactlyOnceRun:
    """Drive ``stage`` from ``source`` to ``sinks`` (by destination name) exactly once.

    ``make_stage`` builds the stage of a fresh run; a run that finds a snapshot in
    ``progress`` resumes it instead. ``identity`` (the stage's, plus what the caller adds)
    must equal the snapshot's: a restart with other parameters would not reproduce the
    killed run's outputs, so it is refused. Output partition of a record = its input
    partition modulo the output's partition count (done by the sinks). ``after_batch``
    (tests) is called with the batch number after each batch's outputs were handed to the
    sinks; ``on_batch`` (progress displays) with the number of messages of each batch. ``run``
    returns the delivery facts; the accounting is ``self.stage.stats()``.

    Args:
        source: the input topic's reader.
        sinks: the sinks by destination name.
        progress: the progress topic (snapshots and batch frontiers).
        make_stage: builds the stage of a fresh run.
        checkpoint_every: seconds between checkpoints.
        idle_ms: milliseconds a partition may stay empty before the merge goes on without it.
        stop: the flag that stops the run (``None``: one that nothing sets).
        identity: more that a restart must not change (added to the stage's).
        after_batch: called with the batch number after each batch's outputs (tests; ``None``:
            none).
        log: where messages go (``None``: nowhere).
        on_batch: called with the number of messages of each batch (``None``: none).
        on_stage: called with the run's stage once it is settled (fresh, or restored from
            the checkpoint): a metrics endpoint reads the live operator through it.
    """

    def __init__(self, source: KafkaSource, sinks: Mapping[str, Sink],
                 progress: ProgressLog, make_stage: Callable[[], Stage], *,
                 checkpoint_every: float = 5.0, idle_ms: float = 500.0,
                 stop: StopFlag | None = None, identity: Mapping[str, Any] | None = None,
                 after_batch: Callable[[int], None] | None = None,
                 log: Callable[[str], None] | None = None,
                 on_batch: Callable[[int], None] | None = None,
                 on_stage: Callable[[Any], None] | None = None) -> None:
        self.source, self.sinks, self.progress = source, dict(sinks), progress
        self.on_batch, self.on_stage = on_batch, on_stage
        self.make_stage = make_stage
        self.checkpoint_every = checkpoint_every
        self.idle_ms = idle_ms
        self.stop = stop if stop is not None else StopFlag(install=False)
        self.extra_identity = dict(identity or {})
        self.after_batch = after_batch
        self.log = log or (lambda s: None)
        self.stage: Any = None
        self.merge: PartitionMerge | None = None
        self.seq = 0
        self.batches = 0
        self.resumed_from: int | None = None
        self.finished = False
        self._empty_since: dict[int, float] = {}
        self._crash = _CrashHook(os.environ.get(CRASH_ENV))
        self._unconfirmed = False  # a checkpoint written but not yet acknowledged

    def identity(self) -> dict[str, Any]:
        ident = dict(self.stage.identity())
        ident.update(self.extra_identity)
        ident["outputs"] = {d: s.ident for d, s in sorted(self.sinks.items())}
        return json.loads(json.dumps(ident, default=str))

    # -- start ------------------------------------------------------------------------------
    def _recover(self) -> list[dict[int, int]]:
        snap = self.progress.latest()
        if snap is None:
            self.stage = self.make_stage()
            self.source.open()
            self.merge = PartitionMerge(self.source.partitions)
            self.merge.frontier = dict(self.source.positions)
            for sink in self.sinks.values():
                if isinstance(sink, ResumableSink):
                    sink.start()
            # a crash before the first checkpoint resumes here; the first outputs wait for it
            # (the producer's id takes a while, which the first batch's work then hides)
            self._snapshot(finished=False, wait=False)
            return []
        self.resumed_from = snap.seq
        self.seq = snap.seq
        fresh = self.stage = self.make_stage()  # this run's parameters, to compare
        mine = self.identity()
        self.stage, self.merge = snap.stage, snap.merge
        then = dict(snap.identity)
        # the policy for bad records may change on a restart: it decides only what happens to
        # records from here on (what was released stays), and a run stopped by a bad record
        # under "fail" wrote no rejects, so it may gain a rejects output
        added = [d for d in mine.get("outputs", {})
                 if d == REJECTS and d not in then.get("outputs", {d: None})
                 and then.get("on_error") == "fail"]
        if then:
            then["on_error"] = mine.get("on_error")
            then["outputs"] = {**then.get("outputs", {}),
                               **{d: mine["outputs"][d] for d in added}}
        if then and then != mine:
            diff = sorted(k for k in {*mine, *then} if mine.get(k) != then.get(k))
            raise ResumeError(
                f"the progress topic {self.progress.topic} holds a checkpoint of a pipeline "
                "with other " + ", ".join(
                    f"{k} (then {then.get(k)!r}, now {mine.get(k)!r})" for k in diff)
                + ": run it with the same parameters, or start a new pipeline (another "
                "--group and outputs)")
        self.merge.reset_buffers()
        self.source.seek(snap.positions)
        self.source.open()
        if getattr(fresh, "on_error", None) != getattr(self.stage, "on_error", None):
            self.log(f"--on-error {fresh.on_error} from here on (the checkpoint's run had "
                     f"{self.stage.on_error}; what it released stays)")
            self.stage.on_error = fresh.on_error
        for name, sink in self.sinks.items():
            if name not in snap.outputs and name in added:
                if isinstance(sink, ResumableSink):
                    sink.start()
                continue
            if name not in snap.outputs:
                raise ResumeError(f"the checkpoint in {self.progress.topic} has no position "
                                  f"for the {name} output")
            if isinstance(sink, ResumableSink):
                sink.resume(snap.outputs[name])
        again = sum(s.reconfirmed for s in self.sinks.values())
        self.log(f"resuming from checkpoint {snap.seq} at input positions "
                 f"{dict(sorted(snap.positions.items()))}"
                 + (f"; {again} output message(s) of the interrupted run to re-confirm"
                    if again else ""))
        self.finished = snap.finished
        return snap.batches

    # -- emitting ---------------------------------------------------------------------------
    def _emit(self, out: Mapping[str, Sequence[Any]]) -> None:
        if self._unconfirmed:  # the first checkpoint must be durable before any output
            self.progress.wait()
            self._unconfirmed = False
        for dest, blocks in out.items():
            sink = self.sinks.get(dest)
            if sink is not None:
                for lines in blocks:
                    sink.write(lines)

    def _flush(self) -> None:
        for sink in self.sinks.values():
            sink.flush()

    def _snapshot(self, finished: bool, wait: bool = True) -> None:
        self._flush()
        assert self.merge is not None
        self.seq += 1
        self.progress.write_snapshot(
            self.seq, self.merge.frontier, {d: _position(s) for d, s in self.sinks.items()},
            self.stage, self.merge, finished, self.stage.stats().to_dict(), self.identity(),
            before_commit=(lambda: self._crash("snapshot")) if self._crash.point == "snapshot"
            else None, wait=wait)
        self._unconfirmed = not wait
        self._crash("checkpoint")
        if self.source._consumer is not None:
            self.source.commit(self.merge.frontier)

    # -- the loop ---------------------------------------------------------------------------
    def _idle(self, p: int) -> bool:
        """Live mode: partition ``p`` is caught up and has been empty for ``idle_ms``."""
        if self.merge is None or self.merge.buffered(p):
            self._empty_since.pop(p, None)
            return False
        now = time.monotonic()
        since = self._empty_since.setdefault(p, now)
        return (now - since) * 1000 >= self.idle_ms

    def check_broker(self) -> None:
        """Stop with a clear message when the broker answers but no longer holds the input
        as this run read it: the topic is gone, has other partitions, or ends before the
        positions read (deleted and created again; a broker with memory storage that
        restarted has lost every topic). Else return (an unreachable broker is waited for)."""
        from streamanon.errors import EndpointError
        from streamanon.pipeline.kafka.admin import topic_partitions

        src = self.source
        url = f"kafka://{src.bootstrap}/{src.topic}"
        try:
            parts = topic_partitions(url, src.config, timeout=2.0)
            if parts is not None and parts == src.partitions:
                ends = end_offsets(src.bootstrap, src.topic, parts, config=src.config,
                                   timeout=3.0)
        except (EndpointError, TimeoutError, RuntimeError):
            return  # no clear answer: keep waiting (and reporting)
        if parts is None:
            what = "no longer exists"
        elif parts != src.partitions:
            what = f"has partitions {parts}, not {src.partitions} as when this run began"
        else:
            behind = {p: (src.positions.get(p, 0), e) for p, e in ends.items()
                      if e < src.positions.get(p, 0)}
            if not behind:
                return
            what = ("ends before the positions this run read (partition: (read, end) "
                    f"{behind})")
        raise EndpointError(
            f"{url}: the input topic {what}: it was deleted or created again, or a broker "
            "with memory storage restarted and lost it; stopping (this pipeline's checkpoints "
            "refer to the old topic: start a new pipeline with another --group and outputs)")

    def run(self) -> dict[str, Any]:
        """Run until the end (``until_end``) or a stop signal; returns the delivery facts."""
        logged = self._recover()
        if self.on_stage is not None:
            self.on_stage(self.stage)
        if hasattr(self.stop, "starting"):
            self.stop.starting = False  # from here a signal stops after a checkpoint
        assert self.merge is not None
        merge, source = self.merge, self.source
        quiet_since = next_check = time.monotonic()
        live_multi = source.ends is None and len(merge.partitions) > 1
        last_cp = time.monotonic()
        batches_at_cp = 0
        error: Exception | None = None
        while True:
            chunks = source.poll(0.2)
            for ch in chunks:
                merge.add(ch.partition, ch.offsets, ch.timestamps, ch.values)
            if chunks:
                quiet_since = time.monotonic()
            elif not source.done and time.monotonic() - quiet_since >= 5.0 and (
                    time.monotonic() >= next_check):
                # nothing for a while: is the input still the topic this run was reading?
                self.check_broker()
                next_check = time.monotonic() + 10.0
            if logged:
                if not merge.covers(logged[0], source.positions):
                    if self.stop:
                        self._snapshot(finished=False)
                        break
                    continue
                batch = merge.take_until(logged.pop(0))
            elif live_multi:
                batch = merge.take(source.exhausted, self._idle)
                if batch is not None:
                    self.progress.log_batch(self.seq, merge.frontier)
            else:
                batch = merge.take(source.exhausted)
            if batch is not None:
                codes = (batch.offsets << 16) | batch.partitions
                out, error = self.stage.process_messages(batch.values, codes)
                self._emit(out)
                self.batches += 1
                self.finished = False
                if self.on_batch is not None:
                    self.on_batch(len(batch))
                self._crash("produce")
                self._crash("batch", self._flush)
                if self.after_batch is not None:
                    self.after_batch(self.batches)
                if error is not None:
                    self._flush()
                    break
            if source.done and not logged and batch is None:
                if not self.finished:
                    self._emit(self.stage.finish())
                    self.finished = True
                self._snapshot(finished=True)
                break
            if self.stop:
                self._snapshot(finished=False)
                break
            if time.monotonic() - last_cp >= self.checkpoint_every:
                if self.batches != batches_at_cp:  # nothing new: nothing to checkpoint
                    self._snapshot(finished=False)
                    batches_at_cp = self.batches
                last_cp = time.monotonic()
        source.close()
        for sink in self.sinks.values():
            sink.close()
        delivery = {"checkpoints_written": self.seq, "batches": self.batches,
                    "resumed_from_checkpoint": self.resumed_from,
                    "reconfirmed_outputs": sum(s.reconfirmed for s in self.sinks.values()),
                    "stopped_by_signal": self.stop.signal,
                    "progress_topic": self.progress.topic}
        if error is not None:
            raise error
        return delivery



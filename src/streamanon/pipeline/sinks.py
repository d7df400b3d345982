"""Sinks: where a run's output lines go, one sink per destination.

:class:`Sink` is the contract every driver writes to; a sink that can say where it stands
and take up from there after a restart is a :class:`ResumableSink` (a stateful sink); one
that cannot is a plain sink (standard output: what was printed cannot be taken back).

* :class:`FileSink` — a file, ``-`` (stdout) or an open text stream (plain).
* :class:`JournalFileSink` — a file output of an exactly-once Kafka run (resumable: cut back
  to the length of the last checkpoint on a restart).
* :class:`KafkaTopicSink` — a topic, one message per line tagged with its input position
  (resumable: the replay is checked against what a killed run wrote).

:func:`open_sinks` chooses among them for a run's outputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TextIO, runtime_checkable

import numpy as np

from streamanon.errors import EndpointError
from streamanon.io.writers import open_text
from streamanon.pipeline.chunks import Lines
from streamanon.pipeline.kafka.admin import ensure_topic
from streamanon.pipeline.kafka.options import is_kafka, parse_kafka_url
from streamanon.pipeline.positions import Positions

if TYPE_CHECKING:
    from streamanon.pipeline.kafka.options import KafkaOptions


class Sink(Protocol):
    """An output of a run, written by destination (``published``, ``suppressed``, ``rejects``).

    Lifecycle, in this order: the sink is made (its target checked, nothing written); a
    :class:`ResumableSink` is then told :meth:`~ResumableSink.start` (a fresh run) or
    :meth:`~ResumableSink.resume` (a restart from a checkpoint); then :meth:`write` for each
    block of lines, with :meth:`flush` between them (every checkpoint of a Kafka run; a
    resumable sink's :meth:`~ResumableSink.position` is read after a flush); :meth:`close`
    once at the end (also after an error), which flushes.
    """

    name: str  #: shown in messages
    ident: str  #: what identifies the output across restarts (topic name, absolute path)
    count: int  #: lines written
    reconfirmed: int  #: lines a restart found already written (not written again)

    def write(self, lines: Lines) -> None:
        """Append ``lines`` (and the destination's CSV header when they carry it)."""

    def flush(self) -> None:
        """Return once everything written is durable (acknowledged, synced)."""

    def close(self) -> None:
        """Flush and release the target (an open stream given by the caller stays open)."""


@runtime_checkable
class ResumableSink(Sink, Protocol):
    """A sink of an exactly-once run that says where it stands and takes up from there."""

    def start(self) -> None:
        """A fresh run: learn where the output ends now (it appends from there)."""

    def position(self) -> Any:
        """Where the output stands (JSON); call after :meth:`flush`."""

    def resume(self, position: Any) -> None:
        """A restart from a checkpoint taken at ``position``: what the killed run wrote after
        it is re-confirmed by the replay (Kafka) or cut off (files)."""


class FileSink:
    """Output lines to a file (created), ``-`` (stdout) or an open text stream (not closed).

    A plain :class:`Sink`: in a Kafka run it is standard output, which cannot be taken back,
    so after a restart it repeats what was printed since the last checkpoint.

    A destination's CSV header arrives with its first :class:`Lines` and is written first.
    The CLI hands it the temporary path of an :class:`~streamanon.pipeline.file_outputs.OutputSet`.
    """

    def __init__(self, target: str | Path | TextIO, name: str | None = None) -> None:
        self.name = name or str(target)
        self.ident = self.name
        self.count = 0
        self.reconfirmed = 0
        self._fh, self._own = open_text(target)

    def write(self, lines: Lines) -> None:
        if lines.header:
            self._fh.write(lines.header)
        data = lines.data()
        if data:
            raw = getattr(self._fh, "buffer", None)
            if isinstance(data, str) or raw is None:  # raw is None: a StringIO
                self._fh.write(lines.text)
            else:  # the bytes as they are, after what the text layer holds
                self._fh.flush()
                raw.write(data)
            self.count += len(lines)

    def flush(self) -> None:
        self._fh.flush()

    def close(self) -> None:
        if self._own:
            self._fh.close()
        else:
            self._fh.flush()


class JournalFileSink:
    """A file output of a Kafka run: appended as the run goes, exactly once across restarts.

    Each checkpoint records the file's length after an ``fsync``; a restart cuts the file
    back to that length and the replay writes the rest again, so the file ends as one
    uninterrupted run writes it. A fresh run (no checkpoint) refuses a file that exists and
    is not empty: it would have to overwrite it (outputs never destroy data).
    """

    def __init__(self, path: str | Path, option: str = "output") -> None:
        self.path = Path(path)
        self.name = str(path)
        self.ident = str(self.path.resolve())
        self.option = option
        self.count = 0
        self.reconfirmed = 0
        self._fh: BinaryIO | None = None
        self._created = False
        folder = self.path.parent
        if self.path.is_dir():
            raise EndpointError(f"{option} {path}: is a folder; give a file name")
        if not folder.is_dir():
            raise EndpointError(f"{option} {path}: the folder {str(folder)!r} does not exist "
                                "(create it first)")

    def start(self) -> None:
        if self.path.exists() and self.path.stat().st_size:
            raise EndpointError(
                f"{self.option} {self.name}: exists and this pipeline has no checkpoint that "
                "wrote it; a Kafka run appends to its file outputs across restarts, so give "
                "a new file (or remove this one)")
        self._fh = open(self.path, "wb")  # noqa: SIM115 - kept open for the run
        self._created = True

    def position(self) -> Any:
        assert self._fh is not None
        return {"bytes": self._fh.tell()}

    def resume(self, position: Any) -> None:
        size = int(position["bytes"])
        have = self.path.stat().st_size if self.path.exists() else -1
        if have < 0 and size == 0:  # a run that wrote nothing removed it (discard_if_empty)
            self.path.touch()
            have = 0
        if have < size:
            raise EndpointError(
                f"{self.option} {self.name}: holds {max(have, 0):,} bytes but the checkpoint "
                f"says {size:,} were written: the file was changed or replaced since")
        self._fh = open(self.path, "r+b")  # noqa: SIM115 - kept open for the run
        self._fh.truncate(size)
        self._fh.seek(size)

    def write(self, lines: Lines) -> None:
        assert self._fh is not None
        if lines.header:
            self._fh.write(lines.header.encode("utf-8"))
        if lines.data():
            self._fh.write(lines.utf8())
            self.count += len(lines)

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self.flush()
            self._fh.close()
            self._fh = None

    def discard_if_empty(self) -> None:
        """A run that stops with an error removes the file if it created it and wrote nothing
        (a header error, a bad first message): exit 2 leaves no empty output behind. A file
        with rows is kept: it is the journal its checkpoint counts on (a rerun continues it)."""
        self.close()
        if self._created and self.path.exists() and not self.path.stat().st_size:
            self.path.unlink()


class KafkaTopicSink:
    """Output lines to a topic: one message per line, tagged with its input position.

    A record goes to partition ``input partition % partitions`` (a file source: partition
    0), so the order of each input partition is kept. The headers name the input record
    (:attr:`Positions.tag_name`). ``exclusive`` (exactly-once runs): the run is the only
    writer, so the delivery report of each batch's last message must show the offset this
    run's count predicts; else :meth:`flush` stops the run. On a restart, :meth:`resume`
    reads what a killed run wrote after the checkpoint; the replay's messages are then
    checked against it (:class:`~streamanon.pipeline.kafka.exactly_once.OutputGate`) and
    produced only past it.

    Args:
        url: the output topic (``kafka://HOST:PORT/TOPIC``).
        positions: the input positions (their header name tags each message).
        config: librdkafka settings of the user (TLS, SASL, ...).
        watch: the run's broker watch (``None``: one of its own).
        exclusive: the run is the topic's only writer (exactly-once runs).
    """

    def __init__(self, url: str, positions: Positions, *,
                 config: Mapping[str, Any] | None = None, watch: Any = None,
                 exclusive: bool = False) -> None:
        from streamanon.pipeline.kafka.client import KafkaSink
        from streamanon.pipeline.kafka.connection import BrokerWatch

        self.bootstrap, self.topic = parse_kafka_url(url)
        self.name = url
        self.ident = self.topic
        self.positions = positions
        self.tag_name = positions.tag_name
        self.config = dict(config or {})
        self._sink = KafkaSink(self.bootstrap, self.topic, config=config,
                               watch=watch or BrokerWatch(f"output {self.topic}"))
        self.partitions = self._sink.partitions
        self.next: dict[int, int] = {}
        self.reconfirmed = 0
        self._gate: Any = None
        self._misplaced: list[tuple[int, int, int]] = []
        self.exclusive = exclusive  # the only writer: check where each batch lands

    @property
    def count(self) -> int:
        return self._sink.count

    def _ends(self) -> dict[int, int]:
        from streamanon.pipeline.kafka.client import end_offsets

        return end_offsets(self.bootstrap, self.topic, self.partitions, config=self.config)

    def start(self) -> None:
        self.next = self._ends()

    def position(self) -> Any:
        return {str(q): o for q, o in self.next.items()}

    def resume(self, position: Any) -> None:
        from streamanon.pipeline.kafka.tail import OutputGate, read_tagged

        base = {int(q): int(o) for q, o in position.items()}
        ends = self._ends()
        short = {q: (base.get(q, 0), e) for q, e in ends.items() if e < base.get(q, 0)}
        if short:
            raise EndpointError(f"output {self.name} lost acknowledged messages (partition: "
                                f"(expected at least, found) {short})")
        self.next = {q: base.get(q, 0) for q in self.partitions}
        found = read_tagged(self.bootstrap, self.topic, self.next, ends, self.tag_name,
                            config=self.config)
        self._gate = OutputGate(self.topic, found)
        self.reconfirmed = 0

    def write(self, lines: Lines) -> None:
        if not lines.data():
            return
        values = bytes(lines.utf8()).split(b"\n")
        values.pop()  # the text ends with a newline
        codes = lines.codes
        nq = len(self.partitions)
        if nq == 1 or self.positions.kind == "line":
            groups = [(self.partitions[0], values, codes)]
        else:
            qs = self.positions.partitions(codes) % nq
            groups = []
            for qi in np.unique(qs).tolist():
                sel = np.flatnonzero(qs == qi)
                groups.append((self.partitions[qi], [values[i] for i in sel.tolist()],
                               codes[sel]))
        name = self.tag_name
        for q, vals, cs in groups:
            tags = self.positions.tags(cs)
            gate = self._gate
            if gate:
                skip = gate.skip(q, vals, tags)
                if skip:
                    self.reconfirmed += skip
                    self.next[q] += skip
                    vals, tags = vals[skip:], tags[skip:]
            if not vals:
                continue
            self.next[q] = self.next.get(q, 0) + len(vals)
            self._sink.write(q, vals, [{name: t} for t in tags],
                             on_last=self._expect(q, self.next[q] - 1) if self.exclusive
                             else None)

    def _expect(self, q: int, offset: int) -> Callable[[Any, Any], None]:
        """The delivery report of a batch's last message: it must land at ``offset``."""
        def check(err: Any, msg: Any) -> None:
            if err is None and msg.offset() != offset:
                self._misplaced.append((q, offset, msg.offset()))
        return check

    def flush(self) -> None:
        """Wait for every acknowledgement; a message that did not land where this run's count
        says means another writer (assumption A2) or a broker that lost acknowledged messages
        (A3): the run stops rather than go on with an output it cannot vouch for."""
        self._sink.flush()
        if self._misplaced:
            q, want, got = self._misplaced[0]
            raise EndpointError(
                f"output {self.name}[{q}]: a message of this run landed at offset {got}, "
                f"expected {want}: another writer on the topic, or the broker lost "
                "acknowledged messages; stopping (the last checkpoint's outputs stand)")

    def close(self) -> None:
        self.flush()


def open_sinks(outputs: Mapping[str, tuple[str | Path, str]], positions: Positions,
               partitions: int, options: KafkaOptions | None, journal: bool,
               watch: Any = None) -> dict[str, Sink]:
    """Sinks by destination from ``{dest: (target, option name)}``: a file (a
    :class:`JournalFileSink` when ``journal``: an exactly-once run), ``-`` or an open stream
    (:class:`FileSink`), or a ``kafka://`` topic (:class:`KafkaTopicSink`, created with
    ``partitions`` when missing).

    Args:
        outputs: destination -> (target, the option that named it).
        positions: the input positions.
        partitions: the partitions of a topic created here.
        options: the Kafka options (librdkafka settings, messages; ``None``: defaults).
        journal: an exactly-once run (a file becomes a :class:`JournalFileSink`).
        watch: the run's broker watch (``None``: each sink its own).
    """
    config = options.config if options is not None else {}
    sinks: dict[str, Sink] = {}
    seen: dict[str, str] = {}
    for dest, (target, option) in outputs.items():
        if not isinstance(target, str | Path):  # an open stream
            sinks[dest] = FileSink(target, option)
            continue
        key = str(target) if is_kafka(target) or str(target) == "-" else str(
            Path(target).resolve())
        if key in seen and key != "-":
            raise EndpointError(f"{option} {target}: is also the output of {seen[key]}; give "
                                "each output its own name")
        seen[key] = option
        if is_kafka(target):
            ensure_topic(str(target), partitions, config,
                         options.say if options is not None else None)
            sinks[dest] = KafkaTopicSink(str(target), positions, config=config, watch=watch,
                                         exclusive=journal)
        elif journal and str(target) != "-":
            sinks[dest] = JournalFileSink(target, option)
        else:
            sinks[dest] = FileSink(target, option if str(target) == "-" else None)
    return sinks


__all__ = ["FileSink", "JournalFileSink", "KafkaTopicSink", "ResumableSink", "Sink",
           "open_sinks"]

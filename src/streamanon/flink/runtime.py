"""What every streamanon job on Flink shares (needs the ``flink`` extra when a job is built).

Design: docs/design/flink.md
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from streamanon.errors import ConfigError, JobError, ResumeError
from streamanon.flink.splits import choose_split_bytes, read_progress, split_count
from streamanon.io.readers import check_text_head

#: a batch closes after this many input lines ... (``--batch-size``): z batches are large,
#: as the batch engine's work per batch grows with the distinct values in it (their
#: hierarchy levels are split once per batch; docs/design/flink.md); CASTLE's work per tuple
#: is larger, and a smaller batch keeps the time a checkpoint barrier waits behind one batch short
Z_BATCH_SIZE = 1 << 18
CASTLE_BATCH_SIZE = 1 << 12
#: ... or this many milliseconds after its first line, whichever comes first (``--batch-ms``)
DEFAULT_BATCH_MS = 5.0
#: Flink's network buffers are flushed after this many milliseconds at the latest: records
#: travel in batches already, so waiting for a full buffer only adds latency
DEFAULT_BUFFER_TIMEOUT_MS = 1
#: files at least this large show a progress bar (on a terminal), like ``streamanon z``
PROGRESS_BYTES = 64 << 20


@dataclass(frozen=True)
class Endpoint:
    """A TCP ``host:port``."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigError(f"expected HOST:PORT, got {text!r}")
        return cls(host or "127.0.0.1", int(port))


@dataclass
class JobOptions:
    """How to run a job: cluster shape, batches, checkpoints, where the part files go."""

    parallelism: int = 1
    mode: str = "thread"
    checkpoint_interval_ms: int = 2000
    checkpoint_dir: str | Path | None = None
    restore_from: str | Path | None = None
    work_dir: str | Path | None = None  # part files; a temporary folder when None
    pace: float = 0.0
    release_to: Endpoint | None = None
    restarts: int = 0
    python_executable: str | None = None
    buffer_timeout_ms: int | None = DEFAULT_BUFFER_TIMEOUT_MS
    unaligned_checkpoints: bool = False
    batch_size: int | None = None  # None: the operator's default
    batch_ms: float = DEFAULT_BATCH_MS
    progress: bool = False  # a progress bar on stderr for a large file (needs a terminal)
    #: thread mode: parse a file's splits ahead in a helper process (see .readahead), and
    #: a CASTLE Kafka job's batches of messages in one
    read_ahead: bool = True

    def batched(self, default: int) -> JobOptions:
        """A copy whose ``batch_size`` is set: its own, else the operator's ``default``."""
        return replace(self, batch_size=self.batch_size or default)

    def env_settings(self, work: Path, record: RunRecord | None = None) -> dict[str, Any]:
        """The keyword arguments of :func:`~streamanon.flink.env.make_env` for this run."""
        if record is not None and self.parallelism > record.max_parallelism:
            raise ConfigError(f"parallelism {self.parallelism} is more than the run's maximum "
                             f"parallelism {record.max_parallelism}")
        return {"parallelism": self.parallelism, "mode": self.mode,
                "max_parallelism": record.max_parallelism if record else None,
                "checkpoint_interval_ms": self.checkpoint_interval_ms,
                "checkpoint_dir": self.checkpoint_dir or work / "checkpoints",
                "restore_from": self.restore_from, "restarts": self.restarts,
                "python_executable": self.python_executable,
                "buffer_timeout_ms": self.buffer_timeout_ms,
                "unaligned_checkpoints": self.unaligned_checkpoints}


@dataclass
class RunRecord:
    """What a run fixes for good (``WORK/job.json``): a restore must read the same splits and
    key the same groups, whatever its own options (e.g. another parallelism)."""

    operator: str
    source: str
    split_bytes: int = 0  # 0: not a file
    splits: int = 0
    key_groups: int = 0  # z: key groups; CASTLE: partitions
    max_parallelism: int = 128  # Flink's key groups: how it spreads our keys over subtasks
    routing: list[int] = field(default_factory=list)  # the Flink key of each of our groups
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def settle(cls, work: Path, fresh: RunRecord, restoring: bool,
               route: Callable[[int, int], list[int]] | None = None) -> RunRecord:
        """The record of the run: ``fresh`` for a new run (written, with the Flink key of
        each group from ``route``, default :func:`route_keys`), the stored one for a restore
        (checked: same operator and source)."""
        path = work / "job.json"
        if restoring and path.is_file():
            stored = cls(**json.loads(path.read_text()))
            if (stored.operator, stored.source) != (fresh.operator, fresh.source):
                raise ResumeError(f"--restore: {work} holds a run of {stored.operator} on "
                                 f"{stored.source}, not {fresh.operator} on {fresh.source}")
            if not stored.routing:
                stored.routing = list(range(stored.key_groups))
            return stored
        fresh.routing = (route or route_keys)(fresh.key_groups, fresh.max_parallelism)
        work.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(fresh)) + "\n")
        return fresh


def murmur(code: int) -> int:
    """Flink's ``MathUtils.murmurHash`` of a 32-bit int (how it hashes a key's hash code)."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    code = rotl((code & mask) * 0xCC9E2D51 & mask, 15)
    code = rotl(code * 0x1B873593 & mask, 13)
    code = ((code * 5 + 0xE6546B64) & mask) ^ 4
    code ^= code >> 16
    code = code * 0x85EBCA6B & mask
    code ^= code >> 13
    code = code * 0xC2B2AE35 & mask
    code ^= code >> 16
    if code >= 1 << 31:
        code -= 1 << 32
    return code if code >= 0 else (-code if code != -(1 << 31) else 0)


def route_keys(groups: int, max_parallelism: int) -> list[int]:
    """The Flink key of each of our ``groups`` key groups, chosen so that Flink's own key
    groups (``murmur(hash(key)) mod max_parallelism``, split into equal ranges per subtask)
    spread ours evenly over the subtasks at any parallelism.

    Keyed by 0, 1, ... directly, Flink would place keys by their hashes: two CASTLE partitions
    land on one subtask of two with probability 1/2, and 128 z groups unevenly. Group ``g``
    gets the first non-negative int whose Flink key group is the middle of the ``g``-th of
    ``groups`` equal slices of ``[0, max_parallelism)`` (for 128 z groups and 128 Flink key
    groups: key group ``g`` itself). Computed from the hash code of PyFlink's key (a one-field
    ``Row`` of the int) and checked against Flink's own assignment in the JVM.
    """
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm

    def key_row(key: int) -> Any:
        row = jvm.org.apache.flink.types.Row(1)
        row.setField(0, key)
        return row

    assign = jvm.org.apache.flink.runtime.state.KeyGroupRangeAssignment.assignToKeyGroup
    base = key_row(0).hashCode()
    if key_row(1000).hashCode() != base + 1000:
        raise JobError("PyFlink's key hash is not what streamanon expects")
    wanted: dict[int, list[int]] = {}
    for g in range(groups):
        wanted.setdefault(((2 * g + 1) * max_parallelism) // (2 * groups), []).append(g)
    keys: dict[int, int] = {}
    key = 0
    while len(keys) < groups:
        for g in wanted.get(murmur(base + key) % max_parallelism, ()):
            if g not in keys:
                keys[g] = key
                break
        key += 1
    routing = [keys[g] for g in range(groups)]
    for g, k in enumerate(routing):  # Flink's own word on every choice
        if assign(key_row(k), max_parallelism) != ((2 * g + 1) * max_parallelism) // (
                2 * groups):
            raise JobError(f"key {k} of group {g} is not where streamanon placed it")
    return routing


def file_record(operator: str, source: str | Path | Endpoint, batch_size: int,
                key_groups: int, parallelism: int = 1, **extra: Any) -> RunRecord:
    """A fresh :class:`RunRecord`: splits of about ``batch_size`` lines for a file; Flink's
    maximum parallelism 128 (or the parallelism, if larger), kept by every restore.

    Args:
        operator: the operator's name (``z`` or ``castle``).
        source: a file, or a TCP server (no splits).
        batch_size: lines per split, about.
        key_groups: the number of key groups.
        parallelism: the job's parallelism (the maximum parallelism is at least this).
        extra: more that the record keeps (e.g. the operator's parameters).
    """
    top = max(128, parallelism)
    if isinstance(source, Endpoint):
        return RunRecord(operator, str(source), key_groups=key_groups, max_parallelism=top,
                         extra=extra)
    path = Path(source).resolve()
    split_bytes = choose_split_bytes(path, batch_size)
    return RunRecord(operator, str(path), split_bytes, split_count(path, split_bytes),
                     key_groups, top, extra)


def socket_lines(env: Any, source: Endpoint) -> Any:
    """A stream of text lines from a TCP server (parallelism 1)."""
    from pyflink.datastream import SourceFunction
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    fn = jvm.org.apache.flink.streaming.api.functions.source.legacy.SocketTextStreamFunction(
        source.host, source.port, "\n", 0)
    return env.add_source(SourceFunction(fn), "socket lines").set_parallelism(1)


def keyed_rows(stream: Any, value_type: Any) -> Any:
    """A stream of ``Row(key, value)`` (int key) keyed by its key in the JVM.

    PyFlink's ``key_by`` adds a Python operator that computes each element's key, one more
    Python step (and task) that every batch crosses; the steps here emit their key with the
    value instead, so Flink keys them with its own ``KeyByKeySelector`` (field 0, the same
    key PyFlink's ``key_by`` builds) and the keyed Python function receives ``value``.
    """
    from pyflink.common import Types
    from pyflink.datastream import KeyedStream
    from pyflink.java_gateway import get_gateway

    selector = get_gateway().jvm.org.apache.flink.streaming.api.functions.python.KeyByKeySelector
    j_keyed = stream._j_data_stream.keyBy(selector(), Types.ROW([Types.INT()]).get_java_type_info())
    return KeyedStream(j_keyed, value_type, stream)


#: what a reading step emits: ``Row(Flink key, (key group, batch))``
def batch_rows_type() -> Any:
    from pyflink.common import Types

    return Types.ROW([Types.INT(), Types.PICKLED_BYTE_ARRAY()])


def batch_source(env: Any, source: str | Path | Endpoint, parser: Any, record: RunRecord,
                 options: JobOptions, *, progress_path: str | None = None) -> Any:
    """The reading step: ``Row(Flink key, (key group, batch))`` out (see :func:`keyed_rows`),
    outcome lines that need no operator on the side output
    :data:`~streamanon.flink.functions.META`.

    A file is read by :class:`~streamanon.flink.functions.ReadSplits` from split numbers;
    a TCP source's lines are gathered by :class:`~streamanon.flink.functions.BatchLines`.
    Another source plugs in beside it: any step that emits the same rows (e.g.
    :func:`~streamanon.flink.kafka_connector.kafka_batches`) feeds the keyed operators
    unchanged.

    Args:
        env: the Flink stream execution environment.
        source: a file, or a TCP server sending lines.
        parser: the chunk parser of the operator.
        record: the run's record (its splits, key groups and their routing).
        options: how to run the job (``batch_size`` resolved).
        progress_path: the file where the reading step writes its position (``None``: none).
    """
    from pyflink.common import Row, Types

    from streamanon.flink.functions import BatchLines, ReadSplits

    if isinstance(source, Endpoint):
        assert options.batch_size, "resolved by the run functions (JobOptions.batched)"
        step: Any = BatchLines(parser, record.routing, batch_size=options.batch_size,
                               batch_ms=options.batch_ms, pace=options.pace)
        lines = socket_lines(env, source)
        upstream = lines.key_by(lambda _: 0, key_type=Types.INT())
        name = f"batch lines (≤ {options.batch_size} lines, ≤ {options.batch_ms:g} ms)"
    else:
        # the split numbers, keyed by one key (the reading step keeps its position in keyed
        # state); a restored source sends them all again, the step skips those it has read
        numbers = env.from_collection(
            [Row(0, k) for k in range(record.splits)],
            type_info=Types.ROW([Types.INT(), Types.LONG()])).name("file splits")
        upstream = keyed_rows(numbers, Types.LONG())
        helper = options.python_executable or sys.executable if (
            options.read_ahead and options.mode == "thread") else None
        step = ReadSplits(record.source, record.split_bytes, record.splits, parser,
                          record.routing, pace=options.pace, progress_path=progress_path,
                          python=helper)
        name = f"read splits ({record.splits} of {record.split_bytes:,} bytes)"
    return (upstream.process(step, output_type=batch_rows_type())
            .name(name).uid("read").set_parallelism(1))


def side_output(stream: Any, tag: Any) -> Any:
    """``stream``'s side output ``tag`` as the JVM holds it (PyFlink's ``get_side_output``
    adds a Python identity ``map``, one more Python task, that a text needs not)."""
    from pyflink.datastream import DataStream

    return DataStream(stream._j_data_stream.getSideOutput(tag.get_java_output_tag()))


def outcome_sink(stream: Any, out_dir: Path, release_to: Endpoint | None = None) -> None:
    """Outcome lines to exactly-once part files under ``out_dir`` (and a TCP sink, if asked:
    there every outcome batch is expanded into one line per input line); a Kafka job's sink
    is :func:`~streamanon.flink.kafka_connector.kafka_message_sink`."""
    from pyflink.common import Types
    from pyflink.common.serialization import Encoder, SimpleStringSchema
    from pyflink.datastream import SinkFunction
    from pyflink.datastream.connectors.file_system import FileSink, OutputFileConfig
    from pyflink.java_gateway import get_gateway

    from streamanon.flink.outcomes import text_lines_of

    sink = (
        FileSink.for_row_format(str(out_dir), Encoder.simple_string_encoder())
        .with_output_file_config(
            OutputFileConfig.builder().with_part_prefix("outcomes").with_part_suffix(".tsv")
            .build())
        .build()
    )
    # rebalanced: every edge into the sink stays all-to-all at any parallelism (a forward
    # edge, between tasks of equal parallelism, that holds in-flight data of an unaligned
    # checkpoint cannot be restored at another parallelism)
    stream.rebalance().sink_to(sink).name("outcome part files").uid("outcome-files")
    if release_to is not None:
        # one line per outcome, flushed as it leaves (SimpleStringSchema adds no delimiter)
        jvm = get_gateway().jvm
        j_schema = SimpleStringSchema()._j_serialization_schema
        fn = jvm.org.apache.flink.streaming.api.functions.sink.legacy.SocketClientSink(
            release_to.host, release_to.port, j_schema, 0, True)
        (stream.rebalance()
         .map(lambda text: "\n".join(text_lines_of(text.split("\n"))) + "\n",
              output_type=Types.STRING()).set_parallelism(1).disable_chaining()
         .name("outcome lines").add_sink(SinkFunction(fn)).name("release socket")
         .set_parallelism(1))


#: the bytes of a file's head the client checks before the job runs
HEAD_BYTES = 1 << 16
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark (spreadsheets write one): read past


def file_head(source: str | Path) -> bytes:
    """The first :data:`HEAD_BYTES` of a file, refused as a whole (as ``streamanon z`` and
    ``streamanon castle`` refuse it) when it is not text: compressed, an archive, binary."""
    with open(source, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    check_text_head(head, str(source))
    return head.removeprefix(BOM)


def head_lines(head: bytes) -> str:
    """The whole lines of a head (a line cut by the head's end is left out)."""
    text = head.decode("utf-8", errors="replace")
    return text if len(head) < HEAD_BYTES else text[: text.rfind("\n") + 1]


@dataclass
class JobRun:
    """How long a job took: Flink's net runtime (the job on the cluster, from its start to
    its end, final checkpoint included) and the wall time of submitting and running it."""

    net_seconds: float
    wall_seconds: float

    def details(self, read: int) -> dict[str, Any]:
        """The run's times in a summary's details, for ``read`` input records."""
        return {"job_seconds": round(self.net_seconds, 3),
                "tuples_per_second": round(read / self.net_seconds) if self.net_seconds > 0
                else None,
                "submit_and_run_seconds": round(self.wall_seconds, 3)}


@contextmanager
def work_folder(options: JobOptions) -> Iterator[Path]:
    """``options.work_dir``, or a private temporary folder (mode 0700) removed afterwards."""
    if options.work_dir is not None:
        yield Path(options.work_dir)
        return
    work = Path(tempfile.mkdtemp(prefix="streamanon-flink-"))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


#: JVM options of a command's own mini-cluster: its JVM lives for one job, and the optimizing
#: JIT compiler (C2) spent more CPU compiling than it saved there, competing with the job for
#: the machine's cores; the quick compiler alone (C1) serves the JVM's share of a job, which
#: moves records in batches (the tests' JVMs run so too; docs/design/flink.md, Measurements)
LOCAL_JVM_ARGS = "-XX:TieredStopAtLevel=1"


@contextmanager
def private_temp() -> Iterator[Path | None]:
    """Everything temporary of this process's Flink jobs in one private folder (mode 0700),
    removed on every way out (the end, an error, Ctrl-C, SIGTERM raised as an exception).

    Inside it go the job's work folder (its part files hold released and suppressed rows),
    PyFlink's own temporary files (Python's :mod:`tempfile`) and, when the JVM gateway is
    started inside the block, the JVM's ``java.io.tmpdir``: the mini-cluster's folders and
    the blob store it copies the jars into. A JVM started here is stopped before the folder
    is removed, so no job writes into it afterwards. Yields the folder, or None when the
    gateway already runs (then nothing is redirected: its temporary folder is fixed).

    A JVM started here (the mini-cluster of one command) also gets :data:`LOCAL_JVM_ARGS`,
    before the caller's own ``JVM_ARGS``, which may override them.
    """
    import pyflink.java_gateway as java_gateway

    if java_gateway._gateway is not None or "PYFLINK_GATEWAY_PORT" in os.environ:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="streamanon-flink-tmp-"))
    saved = {name: os.environ.get(name) for name in ("TMPDIR", "JVM_ARGS")}
    saved_tempdir = tempfile.tempdir
    os.environ["TMPDIR"] = str(root)
    os.environ["JVM_ARGS"] = (f"{LOCAL_JVM_ARGS} {saved['JVM_ARGS'] or ''} "
                              f"-Djava.io.tmpdir={root}")
    tempfile.tempdir = str(root)
    try:
        yield root
    finally:
        tempfile.tempdir = saved_tempdir
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if java_gateway._gateway is not None:
            _stop_gateway(java_gateway)
        shutil.rmtree(root, ignore_errors=True)


#: py4j's loggers: silenced (``disabled``, the one switch PyFlink leaves alone: its
#: ``get_gateway`` sets the level of ``py4j.java_gateway`` itself) where a call to a JVM that
#: is gone would log a traceback a user cannot act on
PY4J_LOGGERS = ("py4j", "py4j.java_gateway", "py4j.clientserver")

_STOPPED = [0]  # gateways this process stopped (:func:`gateways_stopped`)


def gateways_stopped() -> int:
    """How many JVM gateways this process has stopped (each leaves py4j's loggers
    disabled for good: objects of its jobs freed later each try to reach the JVM gone)."""
    return _STOPPED[0]


def _stop_gateway(java_gateway: Any) -> None:
    """Stop the JVM gateway this process started (a child running PythonGatewayServer), so
    that a later job of this process starts one with its own temporary folder."""
    import logging

    gateway, java_gateway._gateway = java_gateway._gateway, None
    # py4j logs a traceback for every call still made to the JVM gone (objects of the job
    # freed later, each trying to reach it): nothing a user can act on
    for name in PY4J_LOGGERS:
        logging.getLogger(name).disabled = True
    _STOPPED[0] += 1
    for pid in _gateway_children():
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    with suppress(Exception):
        gateway.shutdown()


def _gateway_children() -> list[int]:
    """The PIDs of this process's children that run Flink's PythonGatewayServer (Linux)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == os.getpid() and b"PythonGatewayServer" in (
                    entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def execute(env: Any, name: str, progress: Callable[[], tuple[int, int] | None] | None = None,
            spinner: bool = False) -> JobRun:
    """Run the job to its end; with ``progress`` (``(done, total)`` or None) a progress bar
    on stderr while it runs, else with ``spinner`` a spinner naming the job."""
    start = time.perf_counter()
    if progress is None and spinner:
        from rich.console import Console

        with Console(stderr=True).status(f"{name}: Flink job running"):
            result = env.execute(name)
    elif progress is None:
        result = env.execute(name)
    else:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        client = env.execute_async(name)
        future = client.get_job_execution_result()
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("splits"), TimeRemainingColumn(), transient=True) as bar:
            task = bar.add_task(name, total=None)
            while not future.done():
                seen = progress()
                if seen is not None:
                    bar.update(task, completed=seen[0], total=seen[1])
                time.sleep(0.25)
        result = future.result()
    return JobRun(result.get_net_runtime() / 1000.0, time.perf_counter() - start)


def split_progress(path: Path) -> Callable[[], tuple[int, int] | None]:
    """Reads what :func:`~streamanon.flink.splits.write_progress` wrote."""
    return lambda: read_progress(path)


def wants_progress(source: str | Path | Endpoint, options: JobOptions) -> bool:
    """A progress bar for a large file when asked and stderr is a terminal (else a spinner,
    see :func:`execute`: every job takes seconds)."""
    return (options.progress and not isinstance(source, Endpoint) and sys.stderr.isatty()
            and Path(source).stat().st_size >= PROGRESS_BYTES)


__all__ = [
    "CASTLE_BATCH_SIZE",
    "DEFAULT_BATCH_MS",
    "LOCAL_JVM_ARGS",
    "Z_BATCH_SIZE",
    "Endpoint",
    "JobOptions",
    "JobRun",
    "RunRecord",
    "batch_source",
    "execute",
    "file_head",
    "file_record",
    "head_lines",
    "keyed_rows",
    "murmur",
    "outcome_sink",
    "private_temp",
    "route_keys",
    "side_output",
    "socket_lines",
    "work_folder",
]

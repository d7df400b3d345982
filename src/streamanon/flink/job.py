"""Build and run the z-anonymity job on Flink (needs the ``flink`` extra).

::

    lines (FileSource, or a TCP socket; parallelism 1)
      -> NumberAndValidate (one key, parallelism 1)  -- rejects, header, blanks -> meta
      -> key by coarsest level -> ZByCoarsestLevel (parallelism p)
      -> outcome lines (+ meta) -> FileSink (exactly-once part files), optionally a TCP sink

:func:`run_z_job` runs it and merges the part files into one file in input order
(:mod:`streamanon.flink.outcomes`), so the output can be compared with ``streamanon z`` by
``diff``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamanon.flink.env import make_env, prepare_python_path
from streamanon.flink.outcomes import MergeResult, merge_outcomes
from streamanon.io import OnError, detect_format
from streamanon.io.readers import _Reader
from streamanon.zanon.operator import SEPARATOR


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
            raise ValueError(f"expected HOST:PORT, got {text!r}")
        return cls(host or "127.0.0.1", int(port))


@dataclass
class JobOptions:
    """How to run a job: cluster shape, checkpoints, where the outcome part files go."""

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
    buffer_timeout_ms: int | None = None
    unaligned_checkpoints: bool = False

    def env_settings(self, work: Path) -> dict[str, Any]:
        """The keyword arguments of :func:`~streamanon.flink.env.make_env` for this run."""
        return {"parallelism": self.parallelism, "mode": self.mode,
                "checkpoint_interval_ms": self.checkpoint_interval_ms,
                "checkpoint_dir": self.checkpoint_dir or work / "checkpoints",
                "restore_from": self.restore_from, "restarts": self.restarts,
                "python_executable": self.python_executable,
                "buffer_timeout_ms": self.buffer_timeout_ms,
                "unaligned_checkpoints": self.unaligned_checkpoints}


def line_source(env: Any, source: str | Path | Endpoint) -> Any:
    """A stream of text lines at parallelism 1: a file (FileSource) or a TCP socket."""
    from pyflink.common import WatermarkStrategy
    from pyflink.datastream import SourceFunction
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
    from pyflink.java_gateway import get_gateway

    if isinstance(source, Endpoint):
        jvm = get_gateway().jvm
        fn = jvm.org.apache.flink.streaming.api.functions.source.legacy.SocketTextStreamFunction(
            source.host, source.port, "\n", 0)
        return env.add_source(SourceFunction(fn), "socket lines").set_parallelism(1)
    path = Path(source).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such input file: {source}")
    fs = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(path)).build()
    return env.from_source(fs, WatermarkStrategy.no_watermarks(), "file lines").set_parallelism(1)


def outcome_sink(stream: Any, out_dir: Path, release_to: Endpoint | None = None) -> None:
    """Outcome lines to exactly-once part files under ``out_dir`` (and a TCP sink, if asked)."""
    from pyflink.common import Types
    from pyflink.common.serialization import Encoder, SimpleStringSchema
    from pyflink.datastream import SinkFunction
    from pyflink.datastream.connectors.file_system import FileSink, OutputFileConfig
    from pyflink.java_gateway import get_gateway

    sink = (
        FileSink.for_row_format(str(out_dir), Encoder.simple_string_encoder())
        .with_output_file_config(
            OutputFileConfig.builder().with_part_prefix("outcomes").with_part_suffix(".tsv")
            .build())
        .build()
    )
    stream.sink_to(sink).name("outcome part files").uid("outcome-files")
    if release_to is not None:
        # one line per outcome, flushed as it leaves (SimpleStringSchema adds no delimiter)
        jvm = get_gateway().jvm
        j_schema = SimpleStringSchema()._j_serialization_schema
        fn = jvm.org.apache.flink.streaming.api.functions.sink.legacy.SocketClientSink(
            release_to.host, release_to.port, j_schema, 0, True)
        (stream.map(lambda line: line + "\n", output_type=Types.STRING()).set_parallelism(1)
         .add_sink(SinkFunction(fn)).name("release socket").set_parallelism(1))


def build_z_job(
    env: Any,
    source: str | Path | Endpoint,
    out_dir: Path,
    z: int,
    delta_t: float,
    *,
    fmt: str = "csv",
    time_tolerance: float = 0.0,
    pace: float = 0.0,
    release_to: Endpoint | None = None,
    separator: str = SEPARATOR,
) -> None:
    """Add the z-anonymity pipeline to ``env`` (the functions are in :mod:`.functions`)."""
    from pyflink.common import Types

    from streamanon.flink.functions import META, NumberAndValidate, ZByCoarsestLevel

    lines = line_source(env, source)
    records = (
        lines.key_by(lambda _: 0, key_type=Types.INT())
        .process(NumberAndValidate(fmt, time_tolerance=time_tolerance, separator=separator,
                                   source_name=str(source), pace=pace))
        .name("number + validate").uid("validate").set_parallelism(1)
    )
    meta = records.get_side_output(META)
    outcomes = (
        records.key_by(lambda r: r[0], key_type=Types.STRING())
        .process(ZByCoarsestLevel(z, delta_t, separator), output_type=Types.STRING())
        .name(f"z-anonymity z={z}").uid("z-anonymity")
    )
    outcome_sink(outcomes.union(meta), out_dir, release_to)


def check_header(source: str | Path, fmt: str) -> None:
    """Fail early, as ``streamanon z`` does, when a CSV file has no usable header line."""
    if fmt != "csv" or not Path(source).is_file():
        return
    reader = _Reader(fmt, OnError.fail, None, 0.0, 4096, str(source))
    with open(source, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if line.strip():
                reader.take_header(number, line.rstrip("\r\n"))
                return


def run_z_job(
    source: str | Path | Endpoint,
    output: str | Path,
    z: int,
    delta_t: float,
    options: JobOptions | None = None,
    *,
    in_format: str | None = None,
    out_format: str | None = None,
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    time_tolerance: float = 0.0,
) -> MergeResult:
    """Run the job to its end and merge its outcomes into ``output``; returns the accounting.

    Raises :class:`~streamanon.io.InputError` under ``on_error=fail`` after writing the rows
    before the bad line (as :func:`streamanon.cli.zanon.run_z`).
    """
    options = options or JobOptions()
    fmt = detect_format(None if isinstance(source, Endpoint) else source, in_format)
    if not isinstance(source, Endpoint):
        check_header(source, fmt)
    out_fmt = detect_format(None if str(output) == "-" else output, out_format)
    own_dir = options.work_dir is None
    work = Path(tempfile.mkdtemp(prefix="streamanon-flink-")) if own_dir else Path(
        options.work_dir)  # type: ignore[arg-type]
    try:
        prepare_python_path()
        env = make_env(**options.env_settings(work))
        parts = work / "parts"
        build_z_job(env, source, parts, z, delta_t, fmt=fmt, time_tolerance=time_tolerance,
                    pace=options.pace, release_to=options.release_to)
        start = time.perf_counter()
        env.execute(f"streamanon z z={z} delta_t={delta_t:g}")
        elapsed = time.perf_counter() - start
        result = merge_outcomes(parts, output, out_format=out_fmt, on_error=on_error,
                                rejects_path=rejects_path, source=str(source))
    finally:
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)
    stats = result.stats
    stats.params = {"z": z, "delta_t": float(delta_t), "input": str(source),
                    "parallelism": options.parallelism, "mode": options.mode}
    stats.details = {
        "published_per_level": {f"level_{i}": n for i, n in enumerate(result.published_per_level)},
        "publication_ratio": stats.published / max(1, stats.read - stats.rejected),
        "restamped": result.restamped,
        "job_seconds": round(elapsed, 3),
        "tuples_per_second": round(stats.read / elapsed) if elapsed > 0 else None,
    }
    if result.first_error is not None:
        raise result.first_error
    return result


__all__ = ["Endpoint", "JobOptions", "build_z_job", "check_header", "run_z_job"]

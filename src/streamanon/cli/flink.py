"""``streamanon flink ...``: the same operators as jobs on Apache Flink (the ``flink`` extra).

The commands keep the promises of every command (see :mod:`streamanon.cli.common`): outputs
are written beside their targets and renamed into place only when the job and the merge
succeed (no output may be an input), bad input is a one-line ``error:`` naming file and line,
exit codes are those of :mod:`streamanon.cli.exitcodes`, and with ``-o -`` standard output
carries only the rows. A file's header and first bytes are checked before the JVM starts.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from streamanon.cli.app import app
from streamanon.cli.castle import (
    BETA_HELP,
    C_HELP,
    CLOSENESS_HELP,
    DEFAULTS,
    DIVERSITY_HELP,
    DP_BETA_HELP,
    DP_EPSILON_HELP,
    HIERARCHY_SCOPE_HELP,
    K_HELP,
    L_HELP,
    MU_HELP,
    T_HELP,
    T_HIERARCHY_HELP,
    T_REFERENCE_HELP,
    ZETA_HELP,
    ClosenessChoice,
    DiversityChoice,
    HierarchyScopeChoice,
    Missing,
    missing_option,
    read_hierarchy,
    read_reference,
    static_max_option,
    static_names,
    static_option,
    static_ttl_option,
)
from streamanon.cli.common import (
    INPUT_FORMAT_HELP,
    JSON_DATA_HELP,
    OUTPUT_FORMAT_HELP,
    REJECTS_HELP,
    SUMMARY_HELP,
    TOLERANCE_HELP,
    check_format,
    fail,
    on_error_option,
    print_summary,
    require_input,
    write_summary,
    writing,
)
from streamanon.cli.config import config_option
from streamanon.cli.exitcodes import ExitCode
from streamanon.errors import ConfigError, JobError, JobFailed, OnError, StreamanonError

if TYPE_CHECKING:
    from collections.abc import Callable

    from streamanon.flink.kafka_connector import KafkaInput, KafkaOutput, KafkaRunResult
    from streamanon.flink.runtime import Endpoint, JobOptions
    from streamanon.pipeline.file_outputs import OutputSet

flink_app = typer.Typer(
    help=(
        "Run the operators as Apache Flink jobs (PyFlink: the flink extra, "
        "`pip install 'streamanon[flink]'`, and Java 17): on a local mini-cluster by "
        "default, or submitted to a cluster with `flink run -pym streamanon.flink ...` (see "
        "the Flink guide). Output files are the same as the pure-Python commands', so `diff` "
        "compares the two paths."
    ),
    no_args_is_help=True,
)
app.add_typer(flink_app, name="flink")

SOURCE_HELP = "The stream: a CSV file (header t,u,a) or JSON Lines file, or tcp://HOST:PORT " \
    "to read lines from a TCP server (the job connects to it and ends when it closes), or " \
    "kafka://HOST:PORT/TOPIC (one record per message, through Flink's Kafka connector; the " \
    "outputs are then topics too)."
KAFKA_OUT_HELP = " With a kafka:// INPUT: a kafka://HOST:PORT/TOPIC, each message tagged " \
    "with its input record (header streamanon-in: PARTITION@OFFSET), at least once."
PARALLELISM_HELP = "Parallelism of the keyed operator (reading runs at 1)."
BATCH_SIZE_HELP = "Records travel in batches: a batch closes after this many input lines " \
    "(a file is read in splits of about this many lines) ..."
BATCH_MS_HELP = "... or this many milliseconds after its first line, whichever comes first " \
    "(streams: bounds the wait of a line on a slow stream)."
MODE_HELP = "PyFlink execution mode: thread (Python inside the JVM, faster) or process."
CHECKPOINT_HELP = "Checkpoint interval in milliseconds (> 0: the file sink commits on checkpoints)."
WORK_HELP = "Keep the job's part files and checkpoints here (needed for --restore); default: " \
    "a temporary folder removed after the merge."
RESTORE_HELP = "Resume from this checkpoint (a chk-N folder), or 'latest' for the newest one " \
    "under --checkpoint-dir (default WORK/checkpoints); use the killed run's --work-dir. -p " \
    "may differ: the run's splits, key groups and partitions are kept in WORK/job.json."
READ_AHEAD_HELP = "Thread mode, file input: parse the file's next splits in a helper process " \
    "while the job works (the Python functions of thread mode share one interpreter lock; " \
    "the helper runs beside it). Off: parse in the reading task."
OUTPUT_HELP = "Where the {what} go, in input order (- = stdout); .jsonl writes JSON Lines. " \
    "Written when the job has ended, replaced only when the run succeeds; never an input."


def _require_pyflink() -> None:
    try:
        import pyflink  # noqa: F401
    except ImportError:
        fail("Flink support is not installed: pip install 'streamanon[flink]' (needs Java 17)")


def parse_source(source: str, what: str = "INPUT") -> str | Endpoint:
    """An :class:`~streamanon.flink.runtime.Endpoint` for ``tcp://HOST:PORT``, a
    ``kafka://`` URL as it is, else a readable file (exit 2 otherwise; ``-``, stdin, is not
    a Flink source)."""
    from streamanon.cli.kafka import check_url
    from streamanon.flink.runtime import Endpoint
    from streamanon.pipeline.kafka.options import is_kafka

    if is_kafka(source):
        check_url(source, what)
        return source
    if source.startswith("tcp://"):
        try:
            return Endpoint.parse(source[len("tcp://"):])
        except ConfigError as exc:
            fail(f"{what} {source}: {exc}")
    if source == "-":
        fail(f"{what} -: a Flink job cannot read standard input; give a file or "
             "tcp://HOST:PORT")
    require_input(source, what)
    return source


def job_options(*, parallelism: int, mode: str, checkpoint_interval: int,
                checkpoint_dir: Path | None, restore: str | None, work_dir: Path | None,
                release_to: str | None, pace: float, restarts: int = 0,
                python_executable: str | None = None, buffer_timeout: int | None = None,
                unaligned: bool = False, batch_size: int | None = None,
                batch_ms: float | None = None, read_ahead: bool = True) -> JobOptions:
    """The :class:`~streamanon.flink.runtime.JobOptions` of the command's options (exit 2 on
    a --restore or --work-dir that cannot be used).

    Args:
        parallelism: the job's parallelism (--parallelism).
        mode: the Python execution mode, ``thread`` or ``process`` (--mode).
        checkpoint_interval: milliseconds between checkpoints (0: none).
        checkpoint_dir: the checkpoint folder (``None``: ``checkpoints`` in the run's folder).
        restore: ``latest`` (the newest completed checkpoint) or a checkpoint folder to resume from
            (``None``: a fresh run).
        work_dir: the run's folder (``None``: a temporary one).
        release_to: ``HOST:PORT`` of a TCP server the outcomes are also sent to (``None``: none).
        pace: seconds to wait per line read (slows a demo down; 0: none).
        restarts: how often a failed job restarts from its latest checkpoint.
        python_executable: the TaskManagers' Python interpreter (``None``: this one).
        buffer_timeout: milliseconds a record may wait in a network buffer (``None``: the default).
        unaligned: take unaligned checkpoints (barriers overtake buffered records).
        batch_size: records per batch (``None``: the operator's default).
        batch_ms: milliseconds after its first record at which a batch closes (``None``: the
            default).
        read_ahead: in thread mode, parse a file's splits ahead in a helper process.
    """
    from streamanon.flink.env import latest_checkpoint
    from streamanon.flink.runtime import Endpoint, JobOptions

    if restore is not None and work_dir is None:
        fail("--restore needs --work-dir: the folder of the run being resumed")
    if work_dir is not None and work_dir.exists() and not work_dir.is_dir():
        fail(f"--work-dir {work_dir}: is a file; give a folder")
    ckpt_dir = checkpoint_dir or (work_dir / "checkpoints" if work_dir else None)
    restore_from: Path | None = None
    if restore == "latest":
        restore_from = latest_checkpoint(ckpt_dir) if ckpt_dir else None
        if restore_from is None:
            fail(f"--restore latest: no completed checkpoint under {ckpt_dir}")
    elif restore is not None:
        restore_from = Path(restore)
        if not (restore_from / "_metadata").is_file():
            fail(f"--restore {restore}: not a completed checkpoint (no _metadata)")
    try:
        target = Endpoint.parse(release_to) if release_to else None
    except ConfigError as exc:
        fail(f"--release-to {release_to}: {exc}")
    batching = {k: v for k, v in (("batch_size", batch_size), ("batch_ms", batch_ms),
                                  ("buffer_timeout_ms", buffer_timeout)) if v is not None}
    return JobOptions(parallelism=parallelism, mode=str(mode),
                      checkpoint_interval_ms=checkpoint_interval, checkpoint_dir=ckpt_dir,
                      restore_from=restore_from, work_dir=work_dir, pace=pace,
                      release_to=target, restarts=restarts,
                      python_executable=python_executable,
                      unaligned_checkpoints=unaligned, progress=True, read_ahead=read_ahead,
                      **batching)


@contextmanager
def job_errors() -> Iterator[None]:
    """The job's temporary files in one private folder removed on every way out
    (:func:`~streamanon.flink.runtime.private_temp`); failures of a job as
    :class:`~streamanon.errors.JobFailed` (bad input and unusable outputs pass through to
    :func:`~streamanon.cli.common.writing`, which reports them like every command; anything
    else is a bug and keeps its traceback)."""
    from py4j.protocol import Py4JError

    from streamanon.errors import InputError, OutcomeGap, OutputError
    from streamanon.flink.runtime import PY4J_LOGGERS, gateways_stopped, private_temp

    # py4j logs a traceback when a call to the JVM is cut (Ctrl-C, SIGTERM to the process
    # group, the JVM gone); the command says what happened in one line instead. It logs both
    # on the root logger (``logging.exception``: the root's filter drops those) and on its
    # own loggers, whose records reach the root's handlers without passing the root's
    # filters: those loggers are disabled while the command runs (a level would not do:
    # PyFlink's get_gateway sets py4j.java_gateway's own level to WARN)
    root = logging.getLogger()
    root.addFilter(_not_py4j)
    py4j_loggers = [logging.getLogger(name) for name in PY4J_LOGGERS]
    saved = [lg.disabled for lg in py4j_loggers]
    stopped = gateways_stopped()
    for lg in py4j_loggers:
        lg.disabled = True
    # a failure is put into words inside the private folder's block: a Java exception's text
    # is read through the JVM gateway, which leaving the block stops
    try:
        with private_temp():
            try:
                yield
            except (InputError, OutputError, OSError):
                raise
            except OutcomeGap as exc:
                raise JobFailed("the job's part files are not exactly one outcome per input "
                                f"line: {exc}") from None
            except JobError as exc:  # the run broke a promise of its own (or could not start)
                raise JobFailed(_job_failure(exc)) from None
            except StreamanonError as exc:  # parameters or rules refused before the job ran
                raise JobFailed(str(exc)) from None
            except (Py4JError, RuntimeError) as exc:  # a failed Flink job (the Java trace)
                raise JobFailed(_job_failure(exc)) from None
    finally:
        root.removeFilter(_not_py4j)
        # after a gateway stopped in the block they stay disabled (its objects freed later
        # each try to reach the JVM gone: private_temp's _stop_gateway); else as before
        if gateways_stopped() == stopped:
            for lg, was in zip(py4j_loggers, saved, strict=True):
                lg.disabled = was


def _not_py4j(record: logging.LogRecord) -> bool:
    """False for a record py4j's code logged on the root logger."""
    return f"{os.sep}py4j{os.sep}" not in record.pathname


def _failed(message: str, outs: OutputSet | None, written: str | None = None) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    print(f"  {written or (outs.describe_failure() if outs else 'no output was written')}",
          file=sys.stderr)
    raise typer.Exit(int(ExitCode.USAGE))


KAFKA_FAILED = ("the output topics hold the messages of the batches before the failure, each "
                "tagged with its input record (header streamanon-in)")


class ExecutionMode(StrEnum):
    thread = "thread"
    process = "process"


# -- the options of `flink z` and `flink castle`, declared once --------------------------------
InFormat = Annotated[str | None, typer.Option("--input-format", help=INPUT_FORMAT_HELP)]
OutFormat = Annotated[str | None, typer.Option("--output-format", help=OUTPUT_FORMAT_HELP)]
Rejects = Annotated[str | None, typer.Option(
    "--rejects", help=REJECTS_HELP + " Default: OUTPUT.rejects.jsonl (with -o -: only "
    "counted)." + KAFKA_OUT_HELP)]
# kafka:// inputs
Group = Annotated[str | None, typer.Option(
    "--group", help="kafka:// INPUT: the consumer group the job commits its offsets to at "
    "each checkpoint (lag monitors, --from committed). Default: "
    "streamanon-flink-COMMAND-OUTPUT.")]
Start = Annotated[str, typer.Option(
    "--from", help="kafka:// INPUT: where a job not restored from a checkpoint starts: "
    "committed (the group's offsets, else the earliest) or earliest. A restored job resumes "
    "from its checkpoint's offsets.")]
UntilEnd = Annotated[bool, typer.Option(
    "--until-end", help="kafka:// INPUT: stop at the end offsets found at start (batch-like "
    "runs); without it the job runs until stopped (resume it with --restore latest).")]
MaxMessageBytes = Annotated[int, typer.Option(
    "--max-message-bytes", min=1, help="kafka:// INPUT: a longer message is rejected "
    "(bytes).")]
# the job
KafkaConfigFile = Annotated[Path | None, typer.Option(
    "--kafka-config", metavar="FILE", help="Kafka: a properties file of client settings "
    "(security.protocol, ssl.*, sasl.*: librdkafka's names) for the job's Kafka clients, "
    "translated for Flink's Java clients. Its values are never printed.")]
Parallelism = Annotated[int, typer.Option("-p", "--parallelism", min=1, help=PARALLELISM_HELP)]
Mode = Annotated[ExecutionMode, typer.Option("--mode", help=MODE_HELP)]
CheckpointInterval = Annotated[int, typer.Option("--checkpoint-interval", min=1,
                                                 help=CHECKPOINT_HELP)]
CheckpointDir = Annotated[Path | None, typer.Option(
    "--checkpoint-dir", help="Where checkpoints go (default: WORK/checkpoints); kept after "
    "the run.")]
Restore = Annotated[str | None, typer.Option("--restore", help=RESTORE_HELP)]
WorkDir = Annotated[Path | None, typer.Option("--work-dir", help=WORK_HELP)]
ReleaseTo = Annotated[str | None, typer.Option(
    "--release-to", help="Also send every outcome line (seq, P/S, ...) to this TCP server "
    "HOST:PORT as it leaves.")]
Restarts = Annotated[int, typer.Option(
    "--restarts", min=0, help="Restart a failed job from its latest checkpoint up to this "
    "many times, 1, 2, 4, 8, then 10 s apart (default 0: fail).")]
PythonExecutable = Annotated[str | None, typer.Option(
    "--python-executable", help="The Python of the TaskManagers' workers (default: this "
    "one); for clusters.")]
BufferTimeout = Annotated[int | None, typer.Option(
    "--buffer-timeout", min=0, help="Milliseconds a batch may wait in a network buffer "
    "before it is sent (default 1: records travel in batches already; Flink's own default "
    "is 100).")]
Unaligned = Annotated[bool, typer.Option(
    "--unaligned-checkpoints", help="Let checkpoints overtake buffered records (fast "
    "checkpoints under backpressure; in-flight records go into the checkpoint).")]
BatchSize = Annotated[int | None, typer.Option(
    "--batch-size", min=1, help=BATCH_SIZE_HELP + " [default: 262144 for z, 4096 for "
    "CASTLE]")]
BatchMs = Annotated[float | None, typer.Option("--batch-ms", min=0,
                                               help=BATCH_MS_HELP + " [default: 5]")]
ReadAhead = Annotated[bool, typer.Option("--read-ahead/--no-read-ahead", help=READ_AHEAD_HELP)]
Pace = Annotated[float, typer.Option(
    "--pace", hidden=True, help="Seconds slept per input line (failure drills: lets a test "
    "kill the job after a checkpoint).")]
SnapshotEvery = Annotated[int | None, typer.Option(
    "--snapshot-every", min=1, hidden=True, help="Rows between snapshots of an operator's "
    "state in Flink state (a restore replays at most about this many per key group).")]
AsJson = Annotated[bool, typer.Option("--json", help=JSON_DATA_HELP)]
SummaryFile = Annotated[Path | None, typer.Option("--summary", help=SUMMARY_HELP)]


def _default_rejects(on_error: OnError, rejects: str | None, output: str) -> Path | None:
    if on_error is OnError.skip and rejects is None and output != "-":
        return Path(f"{output}.rejects.jsonl")
    return Path(rejects) if rejects is not None else None


def _kafka_endpoints(source: str, output: str, rejects: str | None, suppressed: str | None,
                     on_error: OnError, group: str | None, start: str, until_end: bool,
                     max_message_bytes: int, columns: str | None, command: str,
                     out_format: str | None, config_file: Path | None = None
                     ) -> tuple[KafkaInput, KafkaOutput]:
    """The :class:`~streamanon.flink.kafka_connector.KafkaInput` and ``KafkaOutput`` of a run
    from a topic (exit 2 for an output that is not a topic: the job writes through
    KafkaSink)."""
    from streamanon.cli.kafka import check_url, default_rejects, kafka_config
    from streamanon.flink.kafka_connector import KafkaInput, KafkaOutput
    from streamanon.pipeline.kafka.options import default_group, is_kafka

    if start not in ("committed", "earliest"):
        fail(f"--from {start}: give committed or earliest")
    if on_error is OnError.skip and rejects is None:
        rejects = default_rejects(output)
    for spec, option in ((output, "--output"), (rejects, "--rejects"),
                         (suppressed, "--suppressed")):
        if spec is None:
            continue
        if not is_kafka(spec):
            fail(f"{option} {spec}: a Flink job reading a topic writes topics: give "
                 "kafka://HOST:PORT/TOPIC")
        check_url(spec, option)
    topic = source.rsplit("/", 1)[1]
    config = kafka_config(config_file)
    source_in = KafkaInput(source, start=start, until_end=until_end,
                           group=group or default_group(f"flink-{command}", output, topic),
                           max_message_bytes=max_message_bytes, on_error=str(on_error),
                           columns=[c.strip() for c in columns.split(",")] if columns
                           else None, config=dict(config))
    out = KafkaOutput(output, rejects=rejects if on_error is OnError.skip else None,
                      suppressed=suppressed, out_format=out_format or "csv",
                      on_error=str(on_error), config=dict(config))
    return source_in, out


def _file_outputs(outs: OutputSet, output: str, rejects: Path | None,
                  summary: Path | None) -> tuple[Any, Any, Any]:
    """The temporary files of ``-o``, ``--rejects`` and ``--summary`` (None where not asked)."""
    return (outs.add(output, "--output"),
            outs.add(rejects, "--rejects") if rejects is not None else None,
            outs.add(summary, "--summary") if summary else None)


def _run_kafka(job: Callable[[], KafkaRunResult], k_out: KafkaOutput, title: str, as_json: bool,
               summary_file: Path | None) -> None:
    """Run a Kafka job (``job()``), then print its summary; a failed job exits with
    :data:`KAFKA_FAILED` and its one-line reason."""
    try:
        with job_errors():
            result = job()
    except JobFailed as exc:
        _failed(str(exc), None, KAFKA_FAILED)
    _kafka_summary(result, k_out, title, as_json, summary_file)


def _kafka_summary(result: KafkaRunResult, out: KafkaOutput, title: str, as_json: bool,
                   summary_file: Path | None) -> None:
    summary: dict[str, Any] = result.stats.to_dict()
    summary["outputs"] = [u for u in (out.published, out.rejects, out.suppressed) if u]
    if summary_file is not None:
        summary_file.write_text(json.dumps(summary, indent=2) + "\n")
    print_summary(title, summary, as_json, stdout_has_data=False)


@flink_app.command("z")
def flink_z(
    source: str = typer.Argument(..., metavar="INPUT", help=SOURCE_HELP),
    z: int = typer.Option(..., "--z", min=1, help="Publish a value only when >= z distinct "
                          "users exposed it within Δt."),
    delta_t: float = typer.Option(..., "--delta-t", min=0, help="The window Δt in seconds."),
    output: str = typer.Option("-", "-o", "--output",
                               help=OUTPUT_HELP.format(what="released t,u,a rows")),
    in_format: InFormat = None,
    out_format: OutFormat = None,
    on_error: OnError = on_error_option,
    rejects: Rejects = None,
    group: Group = None,
    start: Start = "committed",
    until_end: UntilEnd = False,
    max_message_bytes: MaxMessageBytes = 1 << 20,
    kafka_config_file: KafkaConfigFile = None,
    time_tolerance: float = typer.Option(0.0, "--time-tolerance", min=0, help=TOLERANCE_HELP),
    parallelism: Parallelism = 2,
    mode: Mode = ExecutionMode.thread,
    checkpoint_interval: CheckpointInterval = 2000,
    checkpoint_dir: CheckpointDir = None,
    restore: Restore = None,
    work_dir: WorkDir = None,
    release_to: ReleaseTo = None,
    restarts: Restarts = 0,
    python_executable: PythonExecutable = None,
    buffer_timeout: BufferTimeout = None,
    unaligned: Unaligned = False,
    batch_size: BatchSize = None,
    batch_ms: BatchMs = None,
    read_ahead: ReadAhead = True,
    pace: Pace = 0.0,
    snapshot_every: SnapshotEvery = None,
    as_json: AsJson = False,
    summary_file: SummaryFile = None,
    config: Path | None = config_option,
) -> None:
    """z-anonymity as a Flink job keyed by the coarsest level of the value; output as `z`.

    Records travel in columnar batches (Arrow), keyed by a group of the value's coarsest
    hierarchy level (128 groups: state moves with them when a job is restored at another
    parallelism). Exit 2 on bad input (nothing written). Example (the two paths agree):

        streamanon flink z --z 5 --delta-t 3600 trace.csv -o flink.csv
        streamanon z --z 5 --delta-t 3600 trace.csv -o pure.csv
        diff pure.csv flink.csv
    """
    in_format = check_format(in_format, "--input-format")
    out_format = check_format(out_format, "--output-format")
    src = parse_source(source)
    _require_pyflink()
    from streamanon.flink.runtime import Endpoint
    from streamanon.flink.z_job import run_z_job

    options = job_options(parallelism=parallelism, mode=mode,
                          checkpoint_interval=checkpoint_interval,
                          checkpoint_dir=checkpoint_dir, restore=restore, work_dir=work_dir,
                          release_to=release_to, pace=pace, restarts=restarts,
                          python_executable=python_executable, buffer_timeout=buffer_timeout,
                          unaligned=unaligned, batch_size=batch_size, batch_ms=batch_ms,
                          read_ahead=read_ahead)
    if isinstance(src, str) and src.startswith("kafka://"):
        from streamanon.flink.z_job import run_z_kafka_job

        k_in, k_out = _kafka_endpoints(src, output, rejects, None, on_error, group, start,
                                       until_end, max_message_bytes, None, "z", out_format,
                                       kafka_config_file)
        _run_kafka(lambda: run_z_kafka_job(k_in, k_out, z=z, delta_t=delta_t, options=options,
                                           in_format=in_format or "csv",
                                           time_tolerance=time_tolerance,
                                           snapshot_every=snapshot_every),
                   k_out, f"streamanon flink z (z={z}, Δt={delta_t:g} s, p={parallelism}, "
                   f"{mode}, kafka)", as_json, summary_file)
        return
    rejects_path = _default_rejects(on_error, rejects, output)
    from streamanon.io import detect_format

    out_format = out_format or detect_format(None if output == "-" else output)
    inputs = [] if isinstance(src, Endpoint) else [src]
    outs: OutputSet | None = None
    try:
        with writing(inputs, skip_hint=on_error is OnError.fail) as outs:
            out, rejects_tmp, summary_tmp = _file_outputs(outs, output, rejects_path,
                                                          summary_file)
            with job_errors():
                result = run_z_job(src, out, z=z, delta_t=delta_t, options=options,
                                   in_format=in_format,
                                   out_format=out_format, on_error=on_error,
                                   rejects_path=rejects_tmp, rejects_name=str(rejects_path),
                                   time_tolerance=time_tolerance,
                                   snapshot_every=snapshot_every)
            summary: dict[str, Any] = result.stats.to_dict()
            summary["outputs"] = outs.targets
            write_summary(summary_tmp, summary)
    except JobFailed as exc:
        _failed(str(exc), outs)
    print_summary(f"streamanon flink z (z={z}, Δt={delta_t:g} s, p={parallelism}, {mode})",
                  summary, as_json, stdout_has_data=output == "-")


@flink_app.command("merge")
def flink_merge(
    parts: Path = typer.Argument(..., metavar="PARTS", help="The job's part-file folder "
                                 "(WORK/parts)."),
    output: str = typer.Option("-", "-o", "--output",
                               help=OUTPUT_HELP.format(what="released rows (z or CASTLE)")),
    castle: bool = typer.Option(False, "--castle", help="The parts of a `flink castle` job "
                                "(default: of a `flink z` job)."),
    out_format: OutFormat = None,
    on_error: OnError = on_error_option,
    rejects: Path = typer.Option(None, "--rejects", help=REJECTS_HELP),
    as_json: AsJson = False,
    summary_file: SummaryFile = None,
) -> None:
    """Merge the part files of a job run elsewhere (e.g. with `flink run`) into one file.

    Checks that every input line has exactly one outcome (no loss, no duplicate). Example:

        streamanon flink merge /shared/run1/parts -o published.csv
    """
    from streamanon.flink.outcomes import merge_outcomes

    out_format = check_format(out_format, "--output-format")
    if not parts.is_dir():
        fail(f"PARTS {parts}: not a folder (give the job's WORK/parts)")
    from streamanon.io import detect_format

    fmt = out_format or detect_format(None if output == "-" else output)
    summary: dict[str, Any]
    outs: OutputSet | None = None
    try:
        with writing([], skip_hint=on_error is OnError.fail) as outs:
            out = outs.add(output, "--output")
            rejects_tmp = outs.add(rejects, "--rejects") if rejects is not None else None
            summary_tmp = outs.add(summary_file, "--summary") if summary_file else None
            with job_errors():
                if castle:
                    from streamanon.flink.castle_rows import merge_castle_outcomes

                    cres = merge_castle_outcomes(parts, out, out_format=fmt,
                                                 on_error=on_error, rejects_path=rejects_tmp,
                                                 rejects_name=str(rejects), source=str(parts))
                    error, summary = cres.first_error, cres.stats.to_dict()
                    summary["suppressed_by_reason"] = cres.suppressed_by_reason
                    summary["mean_cluster_loss"] = round(cres.mean_cluster_loss, 6)
                    summary["rules"] = cres.rules
                else:
                    zres = merge_outcomes(parts, out, out_format=fmt, on_error=on_error,
                                          rejects_path=rejects_tmp, rejects_name=str(rejects),
                                          source=str(parts))
                    error, summary = zres.first_error, zres.stats.to_dict()
                    summary["released_per_level"] = {
                        f"level_{i}": n for i, n in enumerate(zres.published_per_level)}
                    summary["restamped"] = zres.restamped
                    from streamanon.records import with_deprecated_keys

                    summary = with_deprecated_keys(summary)
            if error is not None:
                raise error
            summary["outputs"] = outs.targets
            write_summary(summary_tmp, summary)
    except JobFailed as exc:
        _failed(str(exc), outs)
    print_summary(f"streamanon flink merge ({parts})", summary, as_json,
                  stdout_has_data=output == "-")


def _job_failure(exc: Exception) -> str:
    """The Python (or Java) cause of a failed job in one line, not the whole trace."""
    text = str(exc)
    found = re.findall(r"PythonException: <class '([\w.]+)'>: ([^\n]*)", text)
    if found:
        cls, message = found[-1]
        return f"the Flink job failed: {cls.rsplit('.', 1)[-1]}: {message}"
    for marker in ("Traceback", "Caused by:"):
        pos = text.rfind(marker)
        if pos >= 0:
            lines = [ln for ln in text[pos:].splitlines() if ln.strip()]
            tail = [ln for ln in lines if not ln.startswith((" ", "\t"))]
            return f"the Flink job failed: {(tail[-1] if tail else lines[0]).strip()}"
    return f"the Flink job failed: {text.splitlines()[0] if text else type(exc).__name__}"


class BadRules(StrEnum):
    skip = "skip"
    fail = "fail"


@flink_app.command("castle")
def flink_castle(
    source: str = typer.Argument(..., metavar="INPUT",
                                 help=SOURCE_HELP.replace("(header t,u,a)", "(with a header)")),
    rules_paths: list[Path] = typer.Option(..., "--rules", help="TOML rules file; repeat to "
                                           "send replacements on the broadcast stream (each "
                                           "applies to tuples from its arrival on)."),
    rules_from: str = typer.Option(None, "--rules-from", help="tcp://HOST:PORT: read "
                                   "replacement rule sets from this TCP server while running "
                                   "(TOML, each ended by a line %%; each applies to tuples "
                                   "arriving after it, open clusters keep theirs). The job "
                                   "ends when the input and this connection have closed."),
    bad_rules: BadRules = typer.Option("skip", "--bad-rules", help="A rule set from "
                                       "--rules-from that cannot be used: skip (refuse it, "
                                       "report why, keep the rules in force) or fail (stop "
                                       "the job)."),
    k: int = typer.Option(DEFAULTS["k"], "--k", min=1, help=K_HELP),
    l: int = typer.Option(DEFAULTS["l"], "--l", min=0, help=L_HELP),  # noqa: E741
    diversity: DiversityChoice = typer.Option(DiversityChoice(DEFAULTS["diversity"]),
                                              "--diversity", help=DIVERSITY_HELP),
    c: float = typer.Option(DEFAULTS["c"], "--c", help=C_HELP),
    t: float = typer.Option(DEFAULTS["t"], "--t", min=0, max=1, help=T_HELP),
    t_reference: Path = typer.Option(None, "--t-reference", help=T_REFERENCE_HELP),
    closeness: ClosenessChoice = typer.Option(ClosenessChoice(DEFAULTS["closeness"]),
                                              "--closeness", help=CLOSENESS_HELP),
    t_hierarchy: Path = typer.Option(None, "--t-hierarchy", help=T_HIERARCHY_HELP),
    delta: int = typer.Option(DEFAULTS["delta"], "--delta", min=1, help="A tuple leaves at "
                              "the latest after δ further tuples of its partition have "
                              "arrived."),
    beta: int = typer.Option(DEFAULTS["beta"], "--beta", min=1, help=BETA_HELP + " Per "
                             "partition."),
    mu: int = typer.Option(DEFAULTS["mu"], "--mu", min=1, help=MU_HELP),
    zeta: int = typer.Option(DEFAULTS["zeta"], "--zeta", min=0, help=ZETA_HELP),
    missing: Missing = missing_option,
    dp_epsilon: float = typer.Option(DEFAULTS["dp_epsilon"], "--dp-epsilon", min=0,
                                     help=DP_EPSILON_HELP + " Per partition."),
    dp_beta: float = typer.Option(DEFAULTS["dp_beta"], "--dp-beta", min=0, max=1,
                                  help=DP_BETA_HELP),
    hierarchy_scope: HierarchyScopeChoice = typer.Option(
        HierarchyScopeChoice(DEFAULTS["hierarchy_scope"]), "--hierarchy-scope",
        help=HIERARCHY_SCOPE_HELP),
    static: str = static_option,
    static_ttl: float = static_ttl_option,
    static_max: int = static_max_option,
    partitions: int = typer.Option(None, "--partitions", min=1, help="Partitions of the "
                                   "individuals (crc32(id) mod this); default: the "
                                   "parallelism. k and l hold within each; each is a key "
                                   "group with its own state, fixed for the run (a restore "
                                   "at another parallelism keeps them)."),
    output: str = typer.Option("-", "-o", "--output",
                               help=OUTPUT_HELP.format(what="released rows (columns as "
                                                       "`streamanon castle` writes them)")),
    in_format: InFormat = None,
    out_format: OutFormat = None,
    on_error: OnError = on_error_option,
    rejects: Rejects = None,
    suppressed: str = typer.Option(None, "--suppressed", help="kafka:// INPUT: also write "
                                   "the suppressed rows (with their reason) to this topic."),
    columns: str = typer.Option(None, "--columns", help="kafka:// INPUT of CSV messages: the "
                                "header (comma-separated); default: the first message."),
    group: Group = None,
    start: Start = "committed",
    until_end: UntilEnd = False,
    max_message_bytes: MaxMessageBytes = 1 << 20,
    kafka_config_file: KafkaConfigFile = None,
    parallelism: Parallelism = 2,
    mode: Mode = ExecutionMode.thread,
    checkpoint_interval: CheckpointInterval = 2000,
    checkpoint_dir: CheckpointDir = None,
    restore: Restore = None,
    work_dir: WorkDir = None,
    release_to: ReleaseTo = None,
    restarts: Restarts = 0,
    python_executable: PythonExecutable = None,
    buffer_timeout: BufferTimeout = None,
    unaligned: Unaligned = False,
    batch_size: BatchSize = None,
    batch_ms: BatchMs = None,
    read_ahead: ReadAhead = True,
    pace: Pace = 0.0,
    snapshot_every: SnapshotEvery = None,
    as_json: AsJson = False,
    summary_file: SummaryFile = None,
    config: Path | None = config_option,
) -> None:
    """CASTLE as a keyed broadcast Flink job: partitions of the individuals, rules broadcast.

    Exit 2 on bad input (nothing written). Example (files from `streamanon demo`; then
    check the output with the CASTLE checker):

        streamanon flink castle --rules rules.toml --k 5 --l 2 \\
            --delta 1250 -p 2 in.csv -o out.csv
        streamanon verify castle out.csv --rules rules.toml \\
            --k 5 --l 2 --input in.csv
    """
    in_format = check_format(in_format, "--input-format")
    out_format = check_format(out_format, "--output-format")
    for path in rules_paths:
        require_input(path, "--rules")
    src = parse_source(source)
    live = None
    if rules_from is not None:
        if not rules_from.startswith("tcp://"):
            fail(f"--rules-from {rules_from}: give tcp://HOST:PORT")
        live = parse_source(rules_from, "--rules-from")
    _require_pyflink()
    from streamanon.flink.castle_job import run_castle_job
    from streamanon.flink.runtime import Endpoint

    options = job_options(parallelism=parallelism, mode=mode,
                          checkpoint_interval=checkpoint_interval,
                          checkpoint_dir=checkpoint_dir, restore=restore, work_dir=work_dir,
                          release_to=release_to, pace=pace, restarts=restarts,
                          python_executable=python_executable, buffer_timeout=buffer_timeout,
                          unaligned=unaligned, batch_size=batch_size, batch_ms=batch_ms,
                          read_ahead=read_ahead)
    from streamanon.castle import CastleAnonymizer
    from streamanon.pipeline.stages import signature_params

    diversity = DiversityChoice(diversity).value  # read by signature_params below
    if (t is None) != (t_reference is None):
        fail("--t and --t-reference go together")
    if t_reference is not None:
        from streamanon.castle import RuleSet
        from streamanon.errors import StreamanonError

        try:
            sensitive = RuleSet.load(rules_paths[0]).sensitive
        except (OSError, StreamanonError) as exc:
            fail(f"--rules {rules_paths[0]}: {exc}")
        reference = read_reference(t_reference, sensitive)  # read by signature_params
    if (closeness is ClosenessChoice.hierarchical) != (t_hierarchy is not None):
        fail("--closeness hierarchical and --t-hierarchy go together")
    closeness = ClosenessChoice(closeness).value  # read by signature_params below
    hierarchy_scope = HierarchyScopeChoice(hierarchy_scope).value  # type: ignore[assignment]
    if t_hierarchy is not None:
        t_hierarchy = read_hierarchy(t_hierarchy)  # type: ignore[assignment]
    static = static_names(static)  # type: ignore[assignment]  # read by signature_params
    params = signature_params(CastleAnonymizer, locals())  # the operator's options given
    if isinstance(src, str) and src.startswith("kafka://"):
        from streamanon.flink.castle_job import run_castle_kafka_job

        k_in, k_out = _kafka_endpoints(src, output, rejects, suppressed, on_error, group,
                                       start, until_end, max_message_bytes, columns, "castle",
                                       out_format, kafka_config_file)
        _run_kafka(lambda: run_castle_kafka_job(k_in, k_out, rules_paths=list(rules_paths),
                                                params=params, options=options,
                                                partitions=partitions,
                                                in_format=in_format or "csv",
                                                snapshot_every=snapshot_every),
                   k_out, f"streamanon flink castle (k={k}, l={l}, δ={delta}, "
                   f"p={parallelism}, {mode}, kafka)", as_json, summary_file)
        return
    if suppressed is not None or columns is not None:
        fail("--suppressed and --columns are for a kafka:// INPUT")
    rejects_path = _default_rejects(on_error, rejects, output)
    from streamanon.io import detect_format

    out_format = out_format or detect_format(None if output == "-" else output)
    inputs = [*([] if isinstance(src, Endpoint) else [src]), *rules_paths]
    outs: OutputSet | None = None
    try:
        with writing(inputs, skip_hint=on_error is OnError.fail) as outs:
            out, rejects_tmp, summary_tmp = _file_outputs(outs, output, rejects_path,
                                                          summary_file)
            with job_errors():
                result = run_castle_job(src, out, rules_paths=list(rules_paths),
                                        params=params, options=options, partitions=partitions,
                                        in_format=in_format,
                                        out_format=out_format, on_error=on_error,
                                        rejects_path=rejects_tmp,
                                        rejects_name=str(rejects_path),
                                        snapshot_every=snapshot_every, rules_from=live,
                                        bad_rules=str(bad_rules))
            summary: dict[str, Any] = result.stats.to_dict()
            summary["rules"] = result.rules if as_json else {
                f"rule set {n['message']} ({n['from']})":
                f"version {n['version']}, installed by {len(n['installed_by'])} subtask(s)"
                if n["event"] == "accepted" else f"refused: {n['reason']}"
                for n in result.rules}
            summary["outputs"] = outs.targets
            write_summary(summary_tmp, {**summary, "rules": result.rules})
    except JobFailed as exc:
        _failed(str(exc), outs)
    for note in result.rules:
        if note["event"] == "refused":
            print(f"warning: rule set {note['message']} ({note['from']}) refused, the "
                  f"rules in force stay: {note['reason']}", file=sys.stderr)
    print_summary(f"streamanon flink castle (k={k}, l={l}, δ={delta}, p={parallelism}, {mode})",
                  summary, as_json, stdout_has_data=output == "-")

"""``kafka://`` for ``streamanon z`` and ``castle`` (options, errors, exit codes), and
``streamanon kafka``: a broker on this machine and two topic tools, to try a pipeline.

Exit codes of a run with a ``kafka://`` source: 0 when it reached the end (``--until-end``)
or was stopped by Ctrl-C or SIGTERM in live mode (stopping is how a live pipeline ends; its
checkpoint is written first, so the next run continues there); 130 or 143 when a signal
stopped an ``--until-end`` run before the end (checkpointed too: a rerun continues); 2 for
an endpoint that cannot be used, a checkpoint of other parameters, or a bad message under
``--on-error fail``. A second signal stops at once (128 + signal), without the checkpoint:
like a kill, the next run resumes from the last one.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from streamanon.cli.app import app
from streamanon.cli.common import fail
from streamanon.cli.exitcodes import ExitCode
from streamanon.records import with_deprecated_keys

GROUP_HELP = ("Kafka source: the consumer group, which also names the pipeline's progress "
              "topic GROUP.progress (checkpoints). Default: streamanon-COMMAND-OUTPUT.")
FROM_HELP = ("Kafka source: where a pipeline without a checkpoint starts: 'committed' (the "
             "group's committed offsets, else the earliest) or 'earliest'. A pipeline with a "
             "checkpoint always resumes from it.")
UNTIL_END_HELP = ("Kafka source: stop at the end offsets found at start (for batch-like "
                  "runs); without it the run goes on until Ctrl-C or SIGTERM, then writes a "
                  "checkpoint and exits 0.")
CHECKPOINT_HELP = ("Kafka source: seconds between checkpoints (a restart after a crash "
                   "re-reads at most this much input; 0 = after every batch).")
CHECKPOINT_KEY_HELP = ("Kafka source: the file of the key (>= 16 bytes, mode 0600) that signs "
                       "the checkpoints in GROUP.progress; a checkpoint not signed with it is "
                       "refused. Default: $STREAMANON_CHECKPOINT_KEY_FILE, else "
                       "~/.local/state/streamanon/checkpoint.key (created on first use).")
MAX_MESSAGE_HELP = "Kafka source: a longer message is rejected (bytes)."
BATCH_HELP = ("Kafka source: messages taken per batch at most (smaller: lower latency; "
              "larger: higher throughput).")

group_option = typer.Option(None, "--group", help=GROUP_HELP)
from_option = typer.Option("committed", "--from", help=FROM_HELP)
until_end_option = typer.Option(False, "--until-end", help=UNTIL_END_HELP)
checkpoint_option = typer.Option(5.0, "--checkpoint-every", min=0, help=CHECKPOINT_HELP)
max_message_option = typer.Option(1 << 20, "--max-message-bytes", min=1, help=MAX_MESSAGE_HELP)
batch_option = typer.Option(20_000, "--batch-size", min=1, help=BATCH_HELP)
checkpoint_key_option = typer.Option(None, "--checkpoint-key", metavar="FILE",
                                     help=CHECKPOINT_KEY_HELP)
KAFKA_CONFIG_HELP = ("Kafka: a properties file of client settings for every connection "
                     "(security.protocol, ssl.ca.location, ssl.certificate.location, "
                     "ssl.key.location, sasl.mechanisms, sasl.username, sasl.password, ...; "
                     "librdkafka's names, translated for Flink's Java clients). Its values "
                     "are never printed.")
kafka_config_option = typer.Option(None, "--kafka-config", metavar="FILE",
                                   help=KAFKA_CONFIG_HELP)


def kafka_config(path: Path | None) -> dict[str, str]:
    """The settings of a ``--kafka-config`` file (exit 2 when it cannot be read)."""
    from streamanon.errors import KafkaConfigError
    from streamanon.pipeline.kafka.options import read_kafka_config

    if path is None:
        return {}
    try:
        return read_kafka_config(path)
    except KafkaConfigError as exc:
        fail(str(exc))
    raise AssertionError("unreachable")


def check_url(spec: str, option: str) -> None:
    """Fail (exit 2) unless a ``kafka://`` endpoint is ``kafka://HOST:PORT/TOPIC``."""
    from streamanon.errors import ConfigError
    from streamanon.pipeline.kafka.options import is_kafka, parse_kafka_url

    if not is_kafka(spec):
        return

    try:
        parse_kafka_url(spec)
    except ConfigError as exc:
        fail(f"{option} {spec}: {exc}")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        fail(f"{option} {spec}: kafka:// needs the kafka extra (pip install "
             "'streamanon[kafka]')")


def default_rejects(output: str) -> str:
    """Where rejects go by default under ``--on-error skip``: beside the output."""
    from streamanon.pipeline.kafka.options import is_kafka

    return f"{output}.rejects" if is_kafka(output) else f"{output}.rejects.jsonl"


def options(*, group: str | None, start: str, until_end: bool, checkpoint_every: float,
            max_message_bytes: int, batch_size: int, stop: Any = None,
            on_batch: Any = None, identity: dict[str, Any] | None = None,
            checkpoint_key: Path | None = None, config: dict[str, str] | None = None) -> Any:
    """The :class:`~streamanon.pipeline.kafka.options.KafkaOptions` of a Kafka command's options
    (exit 2 on an unknown --from).

    Args:
        group: the consumer group (``None``: ``streamanon-COMMAND-OUTPUT``).
        start: where a run without a checkpoint begins, ``committed`` or ``earliest`` (else exit 2).
        until_end: stop at the end offsets found at start.
        checkpoint_every: seconds between checkpoints.
        max_message_bytes: the largest message value accepted (larger ones are rejected).
        batch_size: messages fetched per batch.
        stop: the flag that stops the run (``None``: a flag that nothing sets).
        on_batch: called with the number of messages of each batch (progress displays).
        identity: more parameters that a restart must not change.
        checkpoint_key: the file of the key that signs the checkpoints (``None``: the default).
        config: librdkafka settings for every client (TLS, SASL, ...).
    """
    from streamanon.pipeline.kafka.options import KafkaOptions

    if start not in ("committed", "earliest"):
        fail(f"--from {start}: use committed or earliest")
    return KafkaOptions(group=group, start=start, until_end=until_end,
                        checkpoint_every=checkpoint_every, max_message_bytes=max_message_bytes,
                        fetch_batch=batch_size, stop=stop, on_batch=on_batch,
                        identity=dict(identity or {}), checkpoint_key=checkpoint_key,
                        config=dict(config or {}))


@contextmanager
def kafka_progress(source: str) -> Iterator[Any]:
    """On a terminal, a status line counting the messages taken from ``source`` (updated a
    few times a second); nothing otherwise. Yields the callback for ``on_batch``."""
    from streamanon.cli.common import err_console

    if not err_console.is_terminal:
        yield None
        return
    count, shown = [0], [0.0]
    with err_console.status(f"{source}: waiting for messages") as line:
        def tick(n: int) -> None:
            count[0] += n
            now = time.monotonic()
            if now - shown[0] >= 0.25:
                shown[0] = now
                line.update(f"{source}: {count[0]:,} messages (Ctrl-C stops after a "
                            "checkpoint)")
        yield tick


@contextmanager
def endpoint_errors() -> Iterator[None]:
    """Endpoints that cannot be used (a missing topic, a broker that does not answer, a
    checkpoint of other parameters) become a one-line error and exit 2."""
    from streamanon.errors import EndpointError, ResumeError

    try:
        yield
    except (EndpointError, ResumeError) as exc:  # ResumeError: a checkpoint's
        fail(str(exc))


@contextmanager
def kafka_run(until_end: bool) -> Iterator[Any]:
    """Around a run with a Kafka source: Ctrl-C and SIGTERM ask it to stop after its batch
    (it checkpoints, then returns); its errors become one-line messages and exit 2.

    Yields the stop flag to hand to :class:`~streamanon.pipeline.kafka.options.KafkaOptions`;
    after the block, a signal that stopped an ``--until-end`` run before its end exits 130 or
    143.
    """
    from streamanon.errors import BadInputError, StoppedInOutage, UnreadableMessagesError
    from streamanon.pipeline.kafka.client import StopFlag

    stop = StopFlag()
    try:
        with endpoint_errors():
            try:
                yield stop
            except StoppedInOutage as exc:
                print(f"streamanon: {exc}", file=sys.stderr)
                raise typer.Exit(128 + exc.signal) from None
    except UnreadableMessagesError as exc:
        fail(f"{exc} (give --columns, or produce the CSV header first)")
    except BadInputError as exc:
        fail(f"{exc} (rerun the same command with --on-error skip to set bad messages aside "
             "and go on from the last checkpoint; the outputs hold what came before it, and a "
             "rerun under --on-error fail stops here again)")
    finally:
        stop.restore()
    if until_end and stop.signal is not None:
        # the checkpoint is written: a rerun continues, but this run did not reach the end
        what = "interrupted" if stop.signal == signal.SIGINT else "terminated"
        print(f"{what} before the end of the input; the checkpoint is written: run the same "
              "command again to continue", file=sys.stderr)
        raise typer.Exit(int(ExitCode.INTERRUPTED if stop.signal == signal.SIGINT
                             else ExitCode.TERMINATED))


# -- streamanon kafka ------------------------------------------------------------------------------

kafka_app = typer.Typer(
    help=("Try kafka:// pipelines on this machine: a Kafka-compatible broker (the Tansu binary "
          "of the kafka extra), and topic tools to load a file into a topic and print one."),
    no_args_is_help=True,
)
app.add_typer(kafka_app, name="kafka")


def _url(url: str, what: str = "TOPIC") -> tuple[str, str]:
    from streamanon.pipeline.kafka.options import is_kafka, parse_kafka_url

    check_url(url, what)
    if not is_kafka(url):
        fail(f"{what} {url}: expected kafka://HOST:PORT/TOPIC")
    return parse_kafka_url(url)


@kafka_app.command("broker")
def broker_command(
    port: int = typer.Option(9092, "--port", min=1, max=65535, help="Port on 127.0.0.1."),
    workdir: Path = typer.Option(Path("streamanon-kafka"), "--workdir",
                                 help="Where the broker's log goes (created)."),
    storage: str = typer.Option("memory", "--storage", help="memory (lost when the broker "
                                "stops) or s3 (a local S3 server process keeps the data "
                                "while this command runs)."),
) -> None:
    """Run a Kafka-compatible broker on 127.0.0.1 until Ctrl-C (for trying pipelines).

    It is the Tansu broker vendored by the kafka extra: no authentication, loopback only,
    and no transactions or log compaction (the README's Kafka section lists what it lacks).
    Example:

        streamanon kafka broker --port 9092 &
    """
    from streamanon.errors import BrokerError
    from streamanon.harness.kafka_broker import Broker

    if storage not in ("memory", "s3"):
        fail(f"--storage {storage}: use memory or s3")
    if not Broker.available():
        fail("no broker: install the kafka extra (pip install 'streamanon[kafka]')")
    broker = Broker(workdir, storage=storage)
    broker.port = port
    try:
        broker.start()
    except BrokerError as exc:
        fail(f"--port {port}: {exc}")
    print(f"broker on kafka://127.0.0.1:{port} ({storage} storage; log in "
          f"{workdir / 'broker.log'}); Ctrl-C stops it", file=sys.stderr, flush=True)
    stopping: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda s, f: stopping.append(s))
    try:
        while not stopping and broker.proc is not None and broker.proc.poll() is None:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
        code = broker.proc.returncode if broker.proc is not None else None
        broker.stop(kill=storage == "memory")  # memory: nothing to keep, no 5 s clean stop
        broker.close()
    if code is not None:
        fail(f"the broker exited with status {code} (see {workdir / 'broker.log'})")


@kafka_app.command("produce")
def produce_command(
    source: str = typer.Argument(..., metavar="INPUT", help="A text file (CSV or JSON "
                                 "Lines); - = stdin."),
    url: str = typer.Argument(..., metavar="TOPIC", help="kafka://HOST:PORT/TOPIC (created "
                              "when missing)."),
    partitions: int = typer.Option(1, "--partitions", min=1, help="Partitions of a topic "
                                   "created here."),
    key_column: str = typer.Option(None, "--key-column", help="The column whose value picks "
                                   "the partition (every record of a key in one partition): "
                                   "a CSV header's column name (the header line then goes "
                                   "to every partition), a JSON Lines field name, or for a "
                                   "headerless CSV a column number (from 1)."),
    time_column: str = typer.Option(None, "--time-column", help="The column whose time "
                                    "(seconds or ISO 8601) becomes the message timestamp, by "
                                    "which a pipeline merges partitions (named like "
                                    "--key-column)."),
    config_file: Path = kafka_config_option,
) -> None:
    """Load a file into a topic, one message per line (blank lines skipped), in order.

    The CSV header is a message like the others: `streamanon z` skips a t,u,a header, and
    `streamanon castle` takes the first message as its header unless given --columns.
    Example:

        streamanon kafka produce trace.csv kafka://127.0.0.1:9092/readings
    """
    from confluent_kafka import KafkaException

    from streamanon.cli.common import require_input
    from streamanon.errors import EndpointError
    from streamanon.pipeline.kafka.admin import ensure_topic, topic_partitions
    from streamanon.pipeline.kafka.client import KafkaSink
    from streamanon.pipeline.kafka.connection import BrokerWatch
    from streamanon.timefmt import parse_time

    bootstrap, topic = _url(url)
    require_input(source)
    config = kafka_config(config_file)
    try:
        parts = ensure_topic(url, partitions, config or None,
                             say=lambda s: print(s, file=sys.stderr))
    except EndpointError as exc:
        fail(str(exc))
    acked = [0]

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += 1

    watch = BrokerWatch(f"produce {topic}")
    sink = KafkaSink(bootstrap, topic, config=config or None, watch=watch,
                     on_delivery=delivered)

    def check_topic() -> None:  # during an outage: does the broker still hold the topic?
        try:
            now = topic_partitions(url, config or None, timeout=2.0)
        except EndpointError:
            return
        if now != parts:
            raise EndpointError(f"the broker answers but its topic {topic} "
                                f"{'is gone' if now is None else f'has partitions {now}'} "
                                f"(it had {parts}): it restarted and lost it (memory storage)"
                                " or the topic was recreated")

    watch.check = check_topic
    fh = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    key_i = time_i = None
    mode: str | None = None  # json, header (CSV with a header) or numbered (headerless CSV)
    last_ts: dict[int, int] = {}
    n = 0
    first = True
    try:
        for raw in fh:
            line = raw.rstrip(b"\r\n")
            if first:  # a UTF-8 byte order mark is not part of the first record
                line = line.removeprefix(b"\xef\xbb\xbf")
                first = False
            if not line.strip():
                continue
            if mode is None and (key_column or time_column):
                mode = "json" if line.lstrip().startswith(b"{") else (
                    "numbered" if all(c is None or c.isdigit()
                                      for c in (key_column, time_column)) else "header")
                if mode == "numbered":  # headerless CSV: 1-based column numbers
                    for opt, col in (("--key-column", key_column),
                                     ("--time-column", time_column)):
                        if col is not None and int(col) < 1:
                            fail(f"{opt} {col}: columns are numbered from 1")
                    key_i = int(key_column) - 1 if key_column else None
                    time_i = int(time_column) - 1 if time_column else None
                if mode == "header":
                    names = [c.strip() for c in line.decode("utf-8", "replace").split(",")]
                    for opt, col in (("--key-column", key_column),
                                     ("--time-column", time_column)):
                        if col is not None and col not in names:
                            fail(f"{opt} {col}: the header has no such column "
                                 f"({', '.join(names)}; a headerless CSV takes a column "
                                 "number)")
                    key_i = names.index(key_column) if key_column else None
                    time_i = names.index(time_column) if time_column else None
                    # the header's timestamp is the earliest there is (1 ms: 0 would mean
                    # "now"), so that a pipeline merging partitions by timestamp takes every
                    # partition's header first instead of reading the partitions one after
                    # another
                    for q in parts if key_i is not None else parts[:1]:
                        sink.write(q, [line], timestamps=[1] if time_i is not None else None)
                    n += 1
                    continue
            q = parts[0]
            ts = None
            key = when = None
            if mode == "json":
                key, when = _json_fields(line, key_column, time_column)
            elif key_i is not None or time_i is not None:
                fields = line.decode("utf-8", "replace").split(",")
                if key_i is not None and key_i < len(fields):
                    key = fields[key_i].strip()
                if time_i is not None and time_i < len(fields):
                    when = fields[time_i].strip()
            if key is not None:
                q = parts[_stable_hash(key) % len(parts)]
            if time_column is not None:
                try:
                    ts = max(1, int(parse_time(when) * 1000)) if when is not None else None
                except ValueError:
                    ts = None
                # a record without a readable time keeps its partition's last timestamp
                # (the time of producing would put it after every record of the file)
                ts = last_ts[q] = ts if ts is not None else last_ts.get(q, 1)
            sink.write(q, [line], timestamps=None if ts is None else [ts])
            n += 1
        sink.flush()
    except (KafkaException, RuntimeError, EndpointError) as exc:
        why = exc.args[0].str() if isinstance(exc, KafkaException) else str(exc)
        fail(f"{url}: producing stopped: {why}; {acked[0]:,} of the {n:,} message(s) read so far "
             "were acknowledged by the broker (its topic holds them); the others may be lost: "
             "check the topic before producing again")
    except KeyboardInterrupt:
        print(f"interrupted: {acked[0]:,} of the {n:,} message(s) read so far were "
              "acknowledged by the broker", file=sys.stderr)
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    print(f"{n:,} message(s) to {url}", file=sys.stderr)


def _json_fields(line: bytes, key: str | None, when: str | None
                 ) -> tuple[str | None, str | None]:
    """The ``key`` and ``when`` fields of a JSON object line as text (``None`` when absent or
    the line is not an object: such a record goes to the first partition)."""
    import json

    try:
        obj = json.loads(line)
    except ValueError:
        return None, None
    if not isinstance(obj, dict):
        return None, None

    def text(name: str | None) -> str | None:
        v = obj.get(name) if name is not None else None
        return None if v is None else v if isinstance(v, str) else json.dumps(v)

    return text(key), text(when)


def _stable_hash(text: str) -> int:
    """A hash that is the same in every process (Python's ``hash`` of str is salted)."""
    import zlib

    return zlib.crc32(text.encode("utf-8"))


@kafka_app.command("consume")
def consume_command(
    url: str = typer.Argument(..., metavar="TOPIC", help="kafka://HOST:PORT/TOPIC"),
    follow: bool = typer.Option(False, "--follow", help="Keep printing new messages until "
                                "Ctrl-C (default: stop at the end found at start)."),
    header: str = typer.Option(None, "--header", help="Print this line first (e.g. the CSV "
                               "header of the rows, which messages do not carry)."),
    config_file: Path = kafka_config_option,
) -> None:
    """Print a topic's messages to stdout, one per line (each partition's in order).

    Example:

        streamanon kafka consume kafka://127.0.0.1:9092/published | head
    """
    from confluent_kafka import Consumer, TopicPartition

    from streamanon.errors import EndpointError
    from streamanon.pipeline.kafka.admin import topic_partitions
    from streamanon.pipeline.kafka.client import end_offsets, watermarks
    from streamanon.pipeline.kafka.connection import client_config

    bootstrap, topic = _url(url)
    config = kafka_config(config_file)
    try:
        parts = topic_partitions(url, config or None)
    except EndpointError as exc:
        fail(str(exc))
    if parts is None:
        fail(f"{url}: no such topic")
    ends = None if follow else end_offsets(bootstrap, topic, parts, config=config or None)
    c = Consumer({**client_config(bootstrap, extra=config), "group.id": "streamanon-consume",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    out = sys.stdout.buffer
    if header is not None:
        out.write(header.encode("utf-8") + b"\n")
    todo = {p: 0 for p in parts}
    if ends is not None:
        todo = {p: 0 for p in parts if ends[p] > 0}
    try:
        if todo:
            lows = {p: watermarks(c, topic, p, 30)[0] for p in todo}
            c.assign([TopicPartition(topic, p, lows[p]) for p in todo])
        while todo or follow:
            for m in c.consume(10_000, 0.5):
                if m.error() is not None:
                    continue
                p = m.partition()
                if ends is not None and m.offset() >= ends[p]:
                    continue
                out.write((m.value() or b"") + b"\n")
                if ends is not None and m.offset() + 1 >= ends[p]:
                    todo.pop(p, None)
            out.flush()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        from streamanon.cli.common import _quiet_broken_pipe

        _quiet_broken_pipe()
    finally:
        c.close()


# -- the demo's Kafka step -------------------------------------------------------------------------

def kafka_demo(workdir: Path, trace: Path, z: int = 5, delta_t: float = 3600.0,
               n: int = 20_000) -> dict[str, Any]:
    """A two-topic pipeline on the vendored broker: the first ``n`` tuples of ``trace`` into
    ``readings``, ``streamanon z`` from ``readings`` to ``published`` exactly once, the
    output checked equal (byte for byte) to the file path's; the broker is stopped after.

    Returns the summary (``{"skipped": reason}`` when the kafka extra is not installed).

    Args:
        workdir: the folder for the broker's data and the outputs.
        trace: the ``t,u,a`` trace whose first ``n`` tuples are produced.
        z: the z of the run.
        delta_t: the window Δt in seconds.
        n: how many tuples of ``trace`` go into the topic.
    """
    from rich.console import Console
    from rich.table import Table

    from streamanon.errors import CheckerFailure
    from streamanon.harness.kafka_broker import Broker
    from streamanon.pipeline.file_outputs import OutputSet
    from streamanon.pipeline.kafka.admin import create_topics
    from streamanon.pipeline.kafka.options import KafkaOptions
    from streamanon.pipeline.run import run_z
    from streamanon.zanon import ZAnonymizer

    if not Broker.available():
        return {"skipped": "the kafka extra is not installed (pip install 'streamanon[kafka]')"}
    lines = trace.read_bytes().splitlines()[: n + 1]
    part = workdir / f"kafka-readings_n{len(lines) - 1}.csv"
    part.write_bytes(b"\n".join(lines) + b"\n")
    expected_file = workdir / f"kafka-file-path_z{z}.csv"
    with OutputSet([part]) as outs:
        ref = run_z(part, outs.add(expected_file), ZAnonymizer(z=z, delta_t=delta_t))
    with Broker(workdir / "kafka-broker") as broker:
        bootstrap = f"{broker.host}:{broker.port}"
        create_topics(bootstrap, {"readings": 1})
        from streamanon.pipeline.kafka.client import KafkaSink

        sink = KafkaSink(bootstrap, "readings")
        sink.write(0, lines)  # the header too: z skips it
        sink.flush()
        readings, published = f"kafka://{bootstrap}/readings", f"kafka://{bootstrap}/published"
        stats = run_z(readings, published, ZAnonymizer(z=z, delta_t=delta_t),
                      kafka=KafkaOptions(until_end=True, log=lambda s: None))
        from streamanon.pipeline.kafka.client import end_offsets
        from streamanon.pipeline.kafka.tail import read_tagged

        ends = end_offsets(bootstrap, "published", [0])
        got = [v for v, _ in read_tagged(bootstrap, "published", {0: 0}, ends,
                                          "streamanon-in")[0]]
        broker.stop(kill=True)  # memory storage: nothing to keep
    same = got == expected_file.read_bytes().splitlines()[1:]
    if not same:
        raise CheckerFailure("the Kafka pipeline's output differs from the file path's")
    det = stats.details
    table = Table(title=f"Kafka: readings -> streamanon z (z={z}, Δt={delta_t:g} s) -> "
                        "published, exactly once (vendored Tansu broker)")
    for col in ("messages", "released", "suppressed", "= file path", "seconds"):
        table.add_column(col, justify="right")
    table.add_row(f"{stats.read:,}", f"{stats.released:,}", f"{stats.suppressed:,}", "yes",
                  f"{det['seconds']:.1f}")
    Console(stderr=True).print(table)
    return with_deprecated_keys({"input": str(part), "topics": ["readings", "published"],
                                 **stats.to_dict(), "file_path_released": ref.released,
                                 "equal_to_file_path": same})

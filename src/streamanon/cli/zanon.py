"""``streamanon z``: z-anonymize a (t, u, a) stream from a file, stdin or a Kafka topic.

The run itself is :func:`streamanon.pipeline.run.run_z` (re-exported here), the same for every
endpoint; this module turns options into endpoints and errors into exit codes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from streamanon.cli.app import app
from streamanon.cli.common import (
    INPUT_FORMAT_HELP,
    JSON_DATA_HELP,
    OUTPUT_FORMAT_HELP,
    REJECTS_HELP,
    SUMMARY_HELP,
    TOLERANCE_HELP,
    check_format,
    fail,
    file_progress,
    on_error_option,
    print_summary,
    require_input,
    reuse_freed_memory,
    warn,
    write_summary,
    writing,
)
from streamanon.cli.config import config_option
from streamanon.cli.exitcodes import skip_teardown
from streamanon.cli.kafka import (
    batch_option,
    check_url,
    checkpoint_key_option,
    checkpoint_option,
    default_rejects,
    endpoint_errors,
    from_option,
    group_option,
    kafka_config,
    kafka_config_option,
    kafka_progress,
    kafka_run,
    max_message_option,
    options,
    until_end_option,
)
from streamanon.errors import OnError

if TYPE_CHECKING:
    from streamanon.pipeline.run import run_z

__all__ = ["delimiter_option", "input_delimiter", "run_z", "z_command", "z_warnings"]

DELIMITER_HELP = ("The field delimiter of CSV input: one character, or tab (also '\\t'), "
                  "comma, semicolon, pipe; e.g. --delimiter ';' for semicolon exports. "
                  "Outputs stay comma CSV.")
delimiter_option: Any = typer.Option(",", "--delimiter", help=DELIMITER_HELP)


def input_delimiter(spec: str) -> str:
    """The delimiter ``--delimiter`` names (exit 2 with a message when it names none)."""
    from streamanon.errors import ConfigError
    from streamanon.io.readers import delimiter_of

    try:
        return delimiter_of(spec)
    except ConfigError as exc:
        fail(str(exc))


def __getattr__(name: str) -> Any:
    """``run_z``, loaded when first asked for (``z --help`` does not load the pipeline)."""
    if name == "run_z":
        from streamanon.pipeline.run import run_z

        globals()["run_z"] = run_z
        return run_z
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _run_z() -> Any:
    """The run, looked up on this module each time (where a test replaces it)."""
    return globals()["run_z"] if "run_z" in globals() else __getattr__("run_z")


def z_warnings(z: int, delta_t: float, summary: dict[str, Any]) -> None:
    """Say when the parameters made the run pointless (the output is still valid)."""
    if delta_t == 0:
        warn("--delta-t 0: only users exposing a value at the very same instant count "
             "together, so almost nothing can be released", summary)
    seen = summary.get("users_seen", {}).get("at_least")
    if seen is not None and summary["read"] and seen < z:
        warn(f"--z {z}: the input has only {seen} distinct user(s), so no value can reach z "
             "and nothing was released", summary)


@app.command("z")
def z_command(
    source: str = typer.Argument(..., metavar="INPUT", help="The stream to anonymize: CSV "
                                 "(header t,u,a) or JSON Lines; - = stdin; "
                                 "kafka://HOST:PORT/TOPIC = a topic, one record per message "
                                 "(t,u,a or a JSON object), exactly once."),
    z: int = typer.Option(..., "--z", min=1, help="Publish a value only when >= z distinct "
                          "users exposed it within Δt."),
    delta_t: float = typer.Option(..., "--delta-t", min=0, help="The window Δt in seconds."),
    output: str = typer.Option("-", "-o", "--output", help="Where released t,u,a rows go "
                               "(- = stdout); .jsonl writes JSON Lines; kafka://HOST:PORT/TOPIC "
                               "one message per row. A file is replaced only when the run "
                               "succeeds (with a Kafka INPUT: appended, exactly once); never "
                               "one of the inputs."),
    in_format: str = typer.Option(None, "--input-format", help=INPUT_FORMAT_HELP),
    out_format: str = typer.Option(None, "--output-format", help=OUTPUT_FORMAT_HELP),
    on_error: OnError = on_error_option,
    delimiter: str = delimiter_option,
    rejects: str = typer.Option(None, "--rejects", help=REJECTS_HELP + " A file or "
                                "kafka://... Default: OUTPUT.rejects.jsonl (a topic: "
                                "OUTPUT.rejects; with -o -: only counted)."),
    time_tolerance: float = typer.Option(0.0, "--time-tolerance", min=0, help=TOLERANCE_HELP),
    adaptive: bool = typer.Option(False, "--adaptive", help="Re-tune z every --rate seconds so "
                                  "that a share --pk of users is k-anonymous (zanon 0.3.4's "
                                  "procedure; --z is the starting value)."),
    k: int = typer.Option(2, "--k", min=1, help="With --adaptive: the k of the target."),
    pk: float = typer.Option(0.8, "--pk", min=0, max=1, help="With --adaptive: target share."),
    rate: float = typer.Option(1800.0, "--rate", min=0, help="With --adaptive: seconds between "
                               "updates of z."),
    group: str = group_option,
    start: str = from_option,
    until_end: bool = until_end_option,
    checkpoint_every: float = checkpoint_option,
    max_message_bytes: int = max_message_option,
    batch_size: int = batch_option,
    checkpoint_key: Path = checkpoint_key_option,
    config_file: Path = kafka_config_option,
    as_json: bool = typer.Option(False, "--json", help=JSON_DATA_HELP),
    summary_file: Path = typer.Option(None, "--summary", help=SUMMARY_HELP),
    config: Path | None = config_option,
) -> None:
    """Publish each tuple at its most specific level seen by >= z users within Δt, else suppress.

    Values may be hierarchies written coarsest first with '*' (EU*FR*Paris). Output rows repeat
    the input's timestamp text. Exit 2 on bad input (nothing written). A Kafka INPUT runs
    exactly once across crashes (kill it, run it again: every output holds what one run
    writes) until Ctrl-C or SIGTERM (exit 0), or to the end with --until-end. Examples:

        streamanon z --z 5 --delta-t 3600 trace.csv -o published.csv
        streamanon z --z 5 --delta-t 3600 kafka://127.0.0.1:9092/readings -o kafka://127.0.0.1:9092/published
    """
    from streamanon.io import detect_format
    from streamanon.pipeline.kafka.options import is_kafka
    from streamanon.zanon import AdaptiveZAnonymizer, ZAnonymizer

    run_z = _run_z()

    in_format = check_format(in_format, "--input-format")
    out_format = check_format(out_format, "--output-format")
    sep = input_delimiter(delimiter)
    for spec, option in ((source, "INPUT"), (output, "--output"), (rejects, "--rejects")):
        if spec is not None:
            check_url(spec, option)
    if not is_kafka(source):
        require_input(source)
    operator: ZAnonymizer | AdaptiveZAnonymizer
    operator = AdaptiveZAnonymizer(delta_t=delta_t, k=k, pk=pk, rate=rate, z0=z) if adaptive \
        else ZAnonymizer(z=z, delta_t=delta_t)
    if on_error is OnError.skip and rejects is None and output != "-":
        rejects = default_rejects(output)
    out_format = out_format or detect_format(None if output == "-" or is_kafka(output)
                                             else output)
    title = f"streamanon z (z={z}, Δt={delta_t:g} s)"
    kafka_args = dict(group=group, start=start, until_end=until_end,
                      checkpoint_every=checkpoint_every, max_message_bytes=max_message_bytes,
                      batch_size=batch_size, checkpoint_key=checkpoint_key,
                      config=kafka_config(config_file))
    if is_kafka(source):
        with writing([], skip_hint=False) as outs:
            summary_tmp = outs.add(summary_file, "--summary") if summary_file else None
            with kafka_run(until_end) as stop, kafka_progress(source) as tick:
                stats = run_z(source, output, operator, in_format=in_format,
                              out_format=out_format, on_error=on_error, rejects_path=rejects,
                              time_tolerance=time_tolerance, delimiter=sep,
                              kafka=options(**kafka_args, stop=stop,
                                                on_batch=tick))
                summary: dict[str, Any] = stats.to_dict()
                summary["outputs"] = [str(t) for t in (output, rejects) if t is not None]
                z_warnings(z, delta_t, summary)
                write_summary(summary_tmp, summary)
        print_summary(title, summary, as_json, stdout_has_data=output == "-")
        return
    reuse_freed_memory()
    with writing([source], skip_hint=on_error is OnError.fail) as outs:
        out = output if is_kafka(output) else outs.add(output, "--output")
        rejects_tmp = None
        if rejects is not None:
            rejects_tmp = rejects if is_kafka(rejects) else outs.add(rejects, "--rejects")
        summary_tmp = outs.add(summary_file, "--summary") if summary_file else None
        with file_progress(source, f"z-anonymity z={z}") as progress, endpoint_errors():
            stats = run_z(source, out, operator, in_format=in_format, out_format=out_format,
                          on_error=on_error, rejects_path=rejects_tmp,
                          rejects_name=None if rejects is None else str(rejects),
                          time_tolerance=time_tolerance, progress=progress,
                          kafka=options(**kafka_args), delimiter=sep)
        summary = stats.to_dict()
        summary["outputs"] = [*[t for t in (output, rejects) if t is not None and is_kafka(t)],
                              *outs.targets]
        z_warnings(z, delta_t, summary)
        write_summary(summary_tmp, summary)
    print_summary(title, summary, as_json, stdout_has_data=output == "-")
    skip_teardown()  # every output is committed: no need to free the run object by object

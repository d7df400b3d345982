"""``streamanon z``: z-anonymize a (t, u, a) stream from a file or stdin."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    file_progress,
    on_error_option,
    print_summary,
    require_input,
    warn,
    write_summary,
    writing,
)
from streamanon.io import OnError, RecordWriter, RejectLog, detect_format, iter_batches
from streamanon.records import RunStats, Suppressed
from streamanon.zanon import AdaptiveZAnonymizer, ZAnonymizer


def run_z(
    source: str | Path,
    output: str | Path,
    operator: ZAnonymizer | AdaptiveZAnonymizer,
    *,
    in_format: str | None = None,
    out_format: str | None = None,
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    rejects_name: str | None = None,
    time_tolerance: float = 0.0,
    progress: Callable[[int], None] | None = None,
) -> RunStats:
    """Read, anonymize and write a whole stream; returns the accounting.

    Raises :class:`~streamanon.io.InputError` under ``on_error=fail`` (after writing what came
    before the bad line: wrap the call in an :class:`~streamanon.io.output.OutputSet`, as the
    CLI does, to keep such a partial output from replacing anything). ``rejects_name`` is the
    rejects file's name in messages (when ``rejects_path`` is a temporary file).
    ``details["users_seen"]`` counts distinct users up to ``z`` (enough to tell whether z
    could ever be reached) for the batch engine.
    """
    core = operator.core if isinstance(operator, AdaptiveZAnonymizer) else operator
    stats = RunStats(params={"z": core.z, "delta_t": core.delta_t, "input": str(source)})
    if isinstance(operator, AdaptiveZAnonymizer):
        stats.params.update(adaptive=True, k=operator.k, pk=operator.pk, rate=operator.rate)
    out_fmt = detect_format(None if str(output) == "-" else output, out_format)
    rejects = RejectLog(rejects_path, str(source), rejects_name)
    restamped = 0
    users: set[str] = set()
    start = time.perf_counter()
    try:
        with RecordWriter(output, out_fmt) as writer:
            for batch in iter_batches(source, in_format, on_error=on_error, rejects=rejects,
                                      time_tolerance=time_tolerance, progress=progress):
                stats.count_read(len(batch))
                restamped += batch.restamped
                if isinstance(operator, ZAnonymizer):
                    u_codes, u_names, a_codes, a_names = batch.codes()
                    if len(users) < core.z:  # only until z users are seen: no cost after
                        users.update(u_names)
                    idx, codes, names = operator.process_codes(batch.t, u_codes, u_names,
                                                               a_codes, a_names)
                    writer.write_selected(batch, idx, codes, names)
                else:
                    for record in batch.records():
                        for out in operator.process(record):
                            if not isinstance(out, Suppressed):
                                writer.write(out)
    finally:
        rejects.close()
        rejects.warn_summary()
        elapsed = time.perf_counter() - start
        stats.count_read(rejects.count)
        stats.count_rejected(rejects.count)
        stats.count_published(core.published)
        stats.count_suppressed(core.suppressed)
        stats.details = {
            "published_per_level": {
                f"level_{i}": n for i, n in enumerate(core.published_per_level)
            },
            "publication_ratio": core.published / max(1, stats.read - stats.rejected),
            "restamped": restamped,
            "seconds": round(elapsed, 3),
            "tuples_per_second": round((stats.read) / elapsed) if elapsed > 0 else None,
        }
        if isinstance(operator, ZAnonymizer):
            stats.details["users_seen"] = len(users)
        if isinstance(operator, AdaptiveZAnonymizer):
            stats.details["final_z"] = operator.z
            stats.details["z_updates"] = len(operator.history)
    return stats


def z_warnings(z: int, delta_t: float, summary: dict[str, Any]) -> None:
    """Say when the parameters made the run pointless (the output is still valid)."""
    if delta_t == 0:
        warn("--delta-t 0: only users exposing a value at the very same instant count "
             "together, so almost nothing can be published", summary)
    seen = summary.get("users_seen")
    if seen is not None and summary["read"] and seen < z:
        warn(f"--z {z}: the input has only {seen} distinct user(s), so no value can reach z "
             "and nothing was published", summary)


@app.command("z")
def z_command(
    source: str = typer.Argument(..., metavar="INPUT", help="The stream to anonymize: CSV "
                                 "(header t,u,a) or JSON Lines; - = stdin."),
    z: int = typer.Option(..., "--z", min=1, help="Publish a value only when >= z distinct "
                          "users exposed it within Δt."),
    delta_t: float = typer.Option(..., "--delta-t", min=0, help="The window Δt in seconds."),
    output: str = typer.Option("-", "-o", "--output", help="Where published t,u,a rows go "
                               "(- = stdout); .jsonl writes JSON Lines. Replaced only when "
                               "the run succeeds; never one of the inputs."),
    in_format: str = typer.Option(None, "--input-format", help=INPUT_FORMAT_HELP),
    out_format: str = typer.Option(None, "--output-format", help=OUTPUT_FORMAT_HELP),
    on_error: OnError = on_error_option,
    rejects: Path = typer.Option(None, "--rejects", help=REJECTS_HELP + " Default: "
                                 "OUTPUT.rejects.jsonl (with -o -: only counted)."),
    time_tolerance: float = typer.Option(0.0, "--time-tolerance", min=0, help=TOLERANCE_HELP),
    adaptive: bool = typer.Option(False, "--adaptive", help="Re-tune z every --rate seconds so "
                                  "that a share --pk of users is k-anonymous (zanon 0.3.4's "
                                  "procedure; --z is the starting value)."),
    k: int = typer.Option(2, "--k", min=1, help="With --adaptive: the k of the target."),
    pk: float = typer.Option(0.8, "--pk", min=0, max=1, help="With --adaptive: target share."),
    rate: float = typer.Option(1800.0, "--rate", min=0, help="With --adaptive: seconds between "
                               "updates of z."),
    as_json: bool = typer.Option(False, "--json", help=JSON_DATA_HELP),
    summary_file: Path = typer.Option(None, "--summary", help=SUMMARY_HELP),
) -> None:
    """Publish each tuple at its most specific level seen by >= z users within Δt, else suppress.

    Values may be hierarchies written coarsest first with '*' (EU*FR*Paris). Output rows repeat
    the input's timestamp text. Exit 2 on bad input (nothing written). Example:

        streamanon z --z 5 --delta-t 3600 trace.csv -o published.csv
    """
    in_format = check_format(in_format, "--input-format")
    out_format = check_format(out_format, "--output-format")
    require_input(source)
    operator: ZAnonymizer | AdaptiveZAnonymizer
    operator = AdaptiveZAnonymizer(delta_t=delta_t, k=k, pk=pk, rate=rate, z0=z) if adaptive \
        else ZAnonymizer(z=z, delta_t=delta_t)
    if on_error is OnError.skip and rejects is None and output != "-":
        rejects = Path(f"{output}.rejects.jsonl")
    out_format = out_format or detect_format(None if output == "-" else output)
    with writing([source], skip_hint=on_error is OnError.fail) as outs:
        out = outs.add(output, "--output")
        rejects_tmp = outs.add(rejects, "--rejects") if rejects is not None else None
        summary_tmp = outs.add(summary_file, "--summary") if summary_file else None
        with file_progress(source, f"z-anonymity z={z}") as progress:
            stats = run_z(source, out, operator, in_format=in_format, out_format=out_format,
                          on_error=on_error, rejects_path=rejects_tmp,
                          rejects_name=str(rejects), time_tolerance=time_tolerance,
                          progress=progress)
        summary: dict[str, Any] = stats.to_dict()
        summary["outputs"] = outs.targets
        z_warnings(z, delta_t, summary)
        write_summary(summary_tmp, summary)
    print_summary(f"streamanon z (z={z}, Δt={delta_t:g} s)", summary, as_json,
                  stdout_has_data=output == "-")

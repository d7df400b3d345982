"""``streamanon z``: z-anonymize a (t, u, a) stream from a file or stdin."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from streamanon.cli.app import app
from streamanon.cli.common import (
    JSON_HELP,
    REJECTS_HELP,
    TOLERANCE_HELP,
    fail,
    file_progress,
    on_error_option,
    print_summary,
)
from streamanon.io import InputError, OnError, RecordWriter, RejectLog, detect_format, iter_batches
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
    time_tolerance: float = 0.0,
    progress: Callable[[int], None] | None = None,
) -> RunStats:
    """Read, anonymize and write a whole stream; returns the accounting.

    Raises :class:`~streamanon.io.InputError` under ``on_error=fail`` (after writing what came
    before the bad line).
    """
    core = operator.core if isinstance(operator, AdaptiveZAnonymizer) else operator
    stats = RunStats(params={"z": core.z, "delta_t": core.delta_t, "input": str(source)})
    if isinstance(operator, AdaptiveZAnonymizer):
        stats.params.update(adaptive=True, k=operator.k, pk=operator.pk, rate=operator.rate)
    out_fmt = detect_format(None if str(output) == "-" else output, out_format)
    rejects = RejectLog(rejects_path, str(source))
    restamped = 0
    start = time.perf_counter()
    try:
        with RecordWriter(output, out_fmt) as writer:
            for batch in iter_batches(source, in_format, on_error=on_error, rejects=rejects,
                                      time_tolerance=time_tolerance, progress=progress):
                stats.count_read(len(batch))
                restamped += batch.restamped
                if isinstance(operator, ZAnonymizer):
                    idx, codes, names = operator.process_codes(batch.t, *batch.codes())
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
        if isinstance(operator, AdaptiveZAnonymizer):
            stats.details["final_z"] = operator.z
            stats.details["z_updates"] = len(operator.history)
    return stats


@app.command("z")
def z_command(
    source: str = typer.Argument(..., help="Input: CSV (header t,u,a) or JSON Lines; - = stdin."),
    z: int = typer.Option(..., "--z", min=1, help="Publish a value only when >= z distinct users "
                          "exposed it within Δt."),
    delta_t: float = typer.Option(..., "--delta-t", min=0, help="The window Δt in seconds."),
    output: str = typer.Option("-", "-o", "--output", help="Where published t,u,a rows go "
                               "(- = stdout); .jsonl writes JSON Lines."),
    in_format: str = typer.Option(None, "--format", help="csv or jsonl (default: by extension)."),
    on_error: OnError = on_error_option,
    rejects: Path = typer.Option(None, "--rejects", help=REJECTS_HELP + " Default: "
                                 "OUTPUT.rejects.jsonl."),
    time_tolerance: float = typer.Option(0.0, "--time-tolerance", min=0, help=TOLERANCE_HELP),
    adaptive: bool = typer.Option(False, "--adaptive", help="Re-tune z every --rate seconds so "
                                  "that a share --pk of users is k-anonymous (zanon 0.3.4's "
                                  "procedure; --z is the starting value)."),
    k: int = typer.Option(2, "--k", min=1, help="With --adaptive: the k of the target."),
    pk: float = typer.Option(0.8, "--pk", min=0, max=1, help="With --adaptive: target share."),
    rate: float = typer.Option(1800.0, "--rate", min=0, help="With --adaptive: seconds between "
                               "updates of z."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Publish each tuple at its most specific level seen by >= z users within Δt, else suppress.

    Values may be hierarchies written coarsest first with '*' (EU*FR*Paris). Output rows repeat
    the input's timestamp text. Example:

        streamanon z --z 5 --delta-t 3600 trace.csv -o published.csv
    """
    operator: ZAnonymizer | AdaptiveZAnonymizer
    operator = AdaptiveZAnonymizer(delta_t=delta_t, k=k, pk=pk, rate=rate, z0=z) if adaptive \
        else ZAnonymizer(z=z, delta_t=delta_t)
    if on_error is OnError.skip and rejects is None and output != "-":
        rejects = Path(f"{output}.rejects.jsonl")
    try:
        with file_progress(source, f"z-anonymity z={z}") as progress:
            stats = run_z(source, output, operator, in_format=in_format, on_error=on_error,
                          rejects_path=rejects, time_tolerance=time_tolerance,
                          progress=progress)
    except InputError as exc:
        fail(str(exc))
    except (OSError, ValueError) as exc:
        fail(str(exc))
    summary: dict[str, Any] = stats.to_dict()
    print_summary(f"streamanon z (z={z}, Δt={delta_t:g} s)", summary, as_json)


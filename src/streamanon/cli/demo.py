"""``streamanon demo``: every family of anonymization on embedded, seeded default data.

The parts (z, deZent, CASTLE, Kafka) are imported when the demo runs, not for its ``--help``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from streamanon.cli.app import app
from streamanon.cli.common import JSON_HELP, status, writing

console = Console(stderr=True)


def z_demo(workdir: Path, seed: int, n: int = 100_000) -> dict[str, Any]:
    """z-anonymity over a hierarchical Zipf trace for several z; verified and plotted.

    Also writes ``trace.csv``, the file of the README's quick tour.
    """
    from rich.table import Table

    from streamanon.data.traces import write_trace, zipf_trace
    from streamanon.errors import CheckerFailure
    from streamanon.io import read_records
    from streamanon.pipeline.file_outputs import OutputSet
    from streamanon.pipeline.run import run_z
    from streamanon.plots import publication_ratio_vs_z  # matplotlib: only when plotting
    from streamanon.verify.z import check_z
    from streamanon.zanon import ZAnonymizer

    delta_t = 3600.0
    trace = write_trace(workdir / f"z-trace_n{n}_seed{seed}.csv",
                        zipf_trace(n, n_users=2000, n_values=10_000, levels=3, seed=seed))
    shutil.copyfile(trace, workdir / "trace.csv")
    inputs = list(read_records(trace))
    table = Table(title=f"z-anonymity on {trace.name} (Δt = {delta_t:g} s)")
    for col in ("z", "released", "ratio", "per level (coarse..fine)", "checker", "tuples/s"):
        table.add_column(col, justify="right")
    results = []
    for z in (2, 5, 10, 20, 50, 100):
        out = workdir / f"z-published_z{z}_dt{delta_t:g}.csv"
        with OutputSet([trace]) as outs:
            stats = run_z(trace, outs.add(out), ZAnonymizer(z=z, delta_t=delta_t))
        report = check_z(inputs, read_records(out, monotone=False), z, delta_t)
        levels = stats.details["released_per_level"]
        table.add_row(str(z), f"{stats.released:,}", f"{stats.details['publication_ratio']:.3f}",
                      " / ".join(f"{v:,}" for v in levels.values()),
                      "ok" if report.ok else f"FAILED: {report.first_problem}",
                      f"{stats.details['tuples_per_second']:,}")
        results.append({"z": z, "delta_t": delta_t, "output": str(out), **stats.to_dict(),
                        "checker_ok": report.ok})
        if not report.ok:
            raise CheckerFailure(f"checker failed for z={z}: {report.first_problem}")
    console.print(table)
    plot = workdir / f"z-publication-ratio-vs-z_dt{delta_t:g}.png"
    with OutputSet() as outs:
        publication_ratio_vs_z(
            {f"Δt={delta_t:g}s": [(r["z"], r["publication_ratio"]) for r in results]},
            outs.add(plot), f"z-anonymity: publication ratio vs z ({n:,} tuples, 2,000 users)")
    console.print(f"plot: {plot}", markup=False)
    return {"trace": str(trace), "runs": results, "plot": str(plot)}


#: The files `streamanon demo` leaves for the README's quick tour (and docs/getting-started).
TOUR_FILES = {"trace.csv": "a (t,u,a) trace for streamanon z",
              "in.csv": "ASHRAE-shaped rows for streamanon castle",
              "rules.toml": "CASTLE rules for in.csv"}


@app.command("demo")
def demo(
    workdir: Path = typer.Option(Path("streamanon-demo"), "--workdir",
                                 help="Where inputs, outputs and plots are written (created)."),
    seed: int = typer.Option(1, "--seed", help="Seed of every generated data set."),
    z_tuples: int = typer.Option(100_000, "--z-tuples", min=100,
                                 help="Length of the z-anonymity trace."),
    kafka: bool = typer.Option(True, "--kafka/--no-kafka", help="With the kafka extra: also "
                               "start a broker and run z from one topic to another."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Run every operator on embedded default data, check each guarantee, and plot trade-offs.

    Writes everything (inputs, outputs named by their parameters, PNG plots, summary.json) to
    --workdir, plus trace.csv, in.csv and rules.toml: the files of the README's quick tour
    (cd into --workdir and follow it). Example:

        streamanon demo --workdir streamanon-demo --seed 1
    """
    from streamanon.cli.castle import castle_demo
    from streamanon.cli.dezent import dezent_demo
    from streamanon.cli.kafka import kafka_demo

    workdir.mkdir(parents=True, exist_ok=True)
    with writing([]) as outs:
        with status(f"z-anonymity: 6 values of z on {z_tuples:,} tuples, each checked..."):
            z_part = z_demo(workdir, seed, z_tuples)
        with status("deZent: a day of 25 gateways, three scenarios and three z..."):
            dezent_part = dezent_demo(workdir, seed)
        with status("CASTLE: k=5 checked, then k=2, 10, 20 for the loss plot..."):
            castle_part = castle_demo(workdir, seed)
        kafka_part: dict[str, Any] = {"skipped": "--no-kafka"}
        if kafka:
            with status("Kafka: a broker, readings -> streamanon z -> published..."):
                kafka_part = kafka_demo(workdir, Path(z_part["trace"]))
        summary = {"workdir": str(workdir), "seed": seed, "z": z_part, "dezent": dezent_part,
                   "castle": castle_part, "kafka": kafka_part,
                   "quick_tour_files": {str(workdir / f): what for f, what in TOUR_FILES.items()}}
        Path(outs.add(workdir / "summary.json")).write_text(
            json.dumps(summary, indent=2, default=str))
    if as_json:
        print(json.dumps(summary, default=str))
    else:
        console.print(f"[bold green]demo done[/]: outputs, plots and summary.json in {workdir}/")
        console.print(f"quick-tour files in {workdir}/: " + ", ".join(
            f"{f} ({what})" for f, what in TOUR_FILES.items()) + f"; next: cd {workdir}",
            markup=False)

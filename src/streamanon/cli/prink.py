"""``streamanon experiment prink``: Prink's evaluation (ARES'25, Sect. 4) as one command.

The engine is :mod:`streamanon.sim.prink`; the figures are in :mod:`streamanon.plots`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from streamanon.castle.defaults import delta_below_k
from streamanon.cli.app import experiment_app
from streamanon.cli.common import JSON_HELP, fail, warn

__all__ = ["experiment_prink", "merge_runs", "read_runs", "run_prink", "write_figures"]


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{option} {text}: expected comma-separated integers")
    if not values:
        fail(f"{option} {text}: expected at least one integer")
    return values


def run_prink(workdir: Path, *, ks: list[int], deltas: list[int], ls: list[int], n: int | None,
              repeat: int, rate: float | None, data: Path | None, seed: int,
              beta: int | None = None, show_progress: bool = False) -> dict[str, Any]:
    """Run the grid, write the CSV of every run and the three figures; returns a summary.

    Args:
        workdir: the folder the CSVs, the rules and the figures are written to.
        ks: the values of k of the grid.
        deltas: the values of δ of the grid.
        ls: the values of l of the grid.
        n: how many tuples of the stream to use (``None``: all).
        repeat: runs per configuration.
        rate: tuples per second the load client sends (``None``: as fast as possible).
        data: a folder of the real ASHRAE files, else the Table-1 stand-in is generated.
        seed: the stand-in's seed.
        beta: CASTLE's β (default: the number of tuples, as Prink's evaluation).
        show_progress: a progress bar on stderr.
    """
    from rich.console import Console
    from rich.progress import Progress

    from streamanon.data import ashrae
    from streamanon.sim import prink

    workdir.mkdir(parents=True, exist_ok=True)
    if data is not None:
        rows = ashrae.load_real(data, paper_filter=True)
        if n is not None:
            rows = rows[:n]
        source = f"ASHRAE files in {data}"
    else:
        rows = list(ashrae.generate_paper(n, seed=seed))
        source = "the ASHRAE stand-in (Table 1)"
    if not rows:
        fail(f"--data {data}: no tuple passes the paper's filter")
    rules = ashrae.paper_rules_toml()
    (workdir / "prink-rules.toml").write_text(rules, encoding="utf-8")
    total = len(ks) * len(deltas) * len(ls) * repeat
    console = Console(stderr=True)
    done: list[dict[str, Any]] = []

    def on_run(row: dict[str, Any]) -> None:
        # every finished run is on disk at once: a grid stopped midway keeps what it measured
        # (``--replot`` draws it)
        done.append(row)
        prink.write_csv(workdir / "prink-runs.csv", done)
        progress.advance(task)

    with Progress(console=console, disable=not show_progress) as progress:
        task = progress.add_task("Prink grid", total=total)
        runs = prink.run_grid(rows, rules, ks=ks, deltas=deltas, ls=ls, repeat=repeat,
                              beta=beta, rate=rate, on_run=on_run)
    csv_path = prink.write_csv(workdir / "prink-runs.csv", runs)
    return write_figures(workdir, runs, tuples=len(rows), source=source, beta=beta,
                         rate=rate, csv_path=csv_path)


def read_runs(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``prink-runs.csv`` back as numbers (integers where the text is one)."""
    import csv

    def number(text: str) -> Any:
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return text

    with path.open(encoding="utf-8", newline="") as fh:
        return [{k: number(v) for k, v in r.items()} for r in csv.DictReader(fh)]


def merge_runs(sources: list[Path], out: Path) -> list[dict[str, Any]]:
    """The runs of several grids as one: ``out`` (a ``prink-runs.csv``) written and returned.

    Each source is a grid's ``--workdir`` or its ``prink-runs.csv``. The runs are put in the
    grid's order (δ, k, l) and each configuration's repeats numbered 1, 2, ... in the order
    of ``sources``, so that grids run one repeat at a time, or split by k, make one grid.
    """
    from streamanon.sim import prink

    runs: list[dict[str, Any]] = []
    columns: list[str] | None = None
    for src in sources:
        path = src / "prink-runs.csv" if src.is_dir() else src
        if not path.is_file():
            fail(f"--merge {src}: no prink-runs.csv there")
        these = read_runs(path)
        if not these:
            fail(f"--merge {src}: {path} has no run")
        if columns is None:
            columns = list(these[0])
        elif list(these[0]) != columns:
            fail(f"--merge {src}: {path} has other columns than {sources[0]}")
        runs.extend(these)
    if len({r["n"] for r in runs}) > 1:
        fail("--merge: the grids ran on streams of different lengths (n); merge one at a time")
    runs.sort(key=lambda r: (r["delta"], r["k"], r["l"]))
    seen: dict[tuple[Any, ...], int] = {}
    for r in runs:
        key = tuple(r[k] for k in prink.KEYS)
        seen[key] = r["repeat"] = seen.get(key, 0) + 1
    out.parent.mkdir(parents=True, exist_ok=True)
    prink.write_csv(out, runs)
    return runs


def _repeats_text(configs: list[dict[str, Any]]) -> str:
    counts = sorted({int(c["repeats"]) for c in configs})
    if len(counts) == 1:
        return f"{counts[0]} repeat(s)"
    return f"{counts[0]}-{counts[-1]} repeats per configuration"


def write_figures(workdir: Path, runs: list[dict[str, Any]], *, tuples: int, source: str,
                  beta: int | None, rate: float | None, csv_path: Path) -> dict[str, Any]:
    """Aggregate ``runs``, write ``prink-configs.csv`` and the figures; returns the summary.

    Args:
        workdir: the folder the per-configuration CSV and the figures are written to.
        runs: one row per run (``streamanon.sim.prink.run_grid``'s or a CSV's).
        tuples: the stream's length (the titles).
        source: what the stream is (the titles).
        beta: CASTLE's β (``None``: the number of tuples).
        rate: the client's rate (``None``: as fast as possible).
        csv_path: the CSV of every run (named in the summary).
    """
    from streamanon.data import ashrae
    from streamanon.plots import prink_info_loss_vs_k, prink_internal_times, prink_latency
    from streamanon.sim import prink

    agg = prink.aggregate(runs)
    prink.write_csv(workdir / "prink-configs.csv", agg)
    attrs = [*ashrae.PAPER_NUMERIC_QI, "primary_use"]
    deltas = sorted({int(r["delta"]) for r in agg})
    low_l = min(int(r["l"]) for r in agg)
    fig3 = [r for r in agg if r["l"] == low_l]
    paper_d = [d for d in (1250, 20000) if d in deltas] or deltas
    fig3 = [r for r in fig3 if r["delta"] in paper_d]
    l_text = "l = 1 (no l-diversity), as the paper" if low_l <= 1 else f"l = {low_l}"
    beta_text = "β = tuples" if beta is None else f"β = {beta}"
    common = (f"{tuples:,} tuples of {source}; {beta_text}, μ = {prink.PAPER_MU}, "
              f"ζ = {prink.PAPER_ZETA}; {_repeats_text(agg)}")
    plots = []
    for basis in ("cluster", "tuple"):
        name = "prink-fig3-info-loss-vs-k.png" if basis == "cluster" else \
            "prink-fig3-info-loss-vs-k-per-tuple.png"
        plots.append(prink_info_loss_vs_k(
            fig3, attrs, workdir / name,
            f"Fig. 3: information loss per attribute vs k ({l_text}; mean over released "
            f"{basis}s)\n{common}", basis=basis))
    rate_text = f"{rate:,.0f} tuples/s" if rate else "as fast as possible"
    plots.append(prink_latency(agg, workdir / "prink-fig4-latency.png",
                               f"Fig. 4: end-to-end latency through a socket ({rate_text})\n"
                               f"{common}"))
    plots.append(prink_internal_times(agg, workdir / "prink-fig5-internal-times.png",
                                      f"Fig. 5: internal times, Prink's definitions\n{common}"))
    return {"csv": str(csv_path), "configs_csv": str(workdir / "prink-configs.csv"),
            "runs": len(runs), "tuples": tuples, "source": source,
            "plots": [str(p) for p in plots], "configs": agg}


def _replot(workdir: Path, *, data: Path | None, merge: list[Path]) -> dict[str, Any]:
    """The summary and figures of a finished grid, from ``workdir/prink-runs.csv`` (first
    written from the ``merge`` grids' runs when there are any)."""
    csv_path = workdir / "prink-runs.csv"
    if merge:
        merge_runs(merge, csv_path)
    if not csv_path.is_file():
        fail(f"--replot: {csv_path} not found (run the grid into --workdir first)")
    runs = read_runs(csv_path)
    if not runs:
        fail(f"--replot: {csv_path} has no run")
    tuples = int(runs[0]["n"])
    beta = None if all(int(r["beta"]) == tuples for r in runs) else int(runs[0]["beta"])
    source = f"ASHRAE files in {data}" if data is not None else "the ASHRAE stand-in (Table 1)"
    return write_figures(workdir, runs, tuples=tuples, source=source, beta=beta,
                         rate=float(runs[0]["rate"]) or None, csv_path=csv_path)


@experiment_app.command("prink")
def experiment_prink(
    workdir: Path = typer.Option(Path("streamanon-experiments/prink"), "--workdir",
                                 help="Where the CSVs and the figures go (created)."),
    ks: str = typer.Option("5,10,20,40,80", "--k", help="Comma-separated k values."),
    deltas: str = typer.Option("1250,5000,20000", "--delta", help="Comma-separated δ values "
                               "(Prink requires δ >= k: a warning otherwise)."),
    ls: str = typer.Option("0,2,4,8", "--l", help="Comma-separated l values (0 = no "
                           "l-diversity; Fig. 3 uses the smallest)."),
    n: int = typer.Option(None, "--n", min=1, help="Use the first N tuples (default: all "
                          "321,728)."),
    repeat: int = typer.Option(3, "--repeat", min=1, help="Runs per configuration (the paper: "
                               "3); mean and spread are reported."),
    rate: float = typer.Option(1000.0, "--rate", min=0, help="Paced arrival rate of the load "
                               "client, tuples per second (0 = as fast as possible)."),
    beta: int = typer.Option(None, "--beta", min=1, help="β (default: the number of tuples, "
                             "as Prink's evaluation)."),
    data: Path = typer.Option(None, "--data", help="Folder with the real ASHRAE files "
                              "(train.csv, building_metadata.csv, weather_train.csv); the "
                              "paper's filter is applied. Default: the Table-1 stand-in."),
    seed: int = typer.Option(1, "--seed", help="Seed of the stand-in."),
    replot: bool = typer.Option(False, "--replot", help="Run nothing: redraw the figures and "
                                "prink-configs.csv from --workdir's prink-runs.csv (the grid "
                                "is the CSV's; --k, --delta, --l, --n, --repeat are ignored)."),
    merge: list[Path] = typer.Option([], "--merge", metavar="<path>", help="With --replot: "
                                     "first write --workdir's prink-runs.csv from these grids' "
                                     "runs (a --workdir or its prink-runs.csv; repeatable), "
                                     "renumbering each configuration's repeats."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Prink's evaluation: its grid with β = tuples, μ = 100, ζ = 0, Figs. 3-5 and a CSV.

    Each run sends the stream through a socket to CASTLE in a server process at a paced
    rate (Fig. 4 is the client-side latency); loss is printed per cluster (the paper) and per
    tuple (streamanon castle). Example:

        streamanon experiment prink --n 20000 --k 5,10 --delta 1250,20000 --l 0,2 --repeat 2
    """
    import warnings as _w

    k_list, d_list, l_list = _ints(ks, "--k"), _ints(deltas, "--delta"), _ints(ls, "--l")
    for k in [] if replot else k_list:
        for d in d_list:
            msg = delta_below_k(k, d)
            if msg:
                warn(f"--delta {d} --k {k}: {msg}")
    if data is not None and not data.is_dir():
        fail(f"--data {data}: not a folder")
    from rich.console import Console

    console = Console(stderr=True)
    if merge and not replot:
        fail("--merge: only with --replot")
    if replot:
        summary = _replot(workdir, data=data, merge=merge)
    else:
        with _w.catch_warnings():
            _w.simplefilter("ignore")  # δ < k was said above, once per configuration
            summary = run_prink(workdir, ks=k_list, deltas=d_list, ls=l_list, n=n,
                                repeat=repeat, rate=rate or None, data=data, seed=seed,
                                beta=beta, show_progress=not as_json and console.is_terminal)
    if as_json:
        print(json.dumps(summary))
        return
    from rich.table import Table

    from streamanon.plots import nothing_released

    table = Table(title=f"Prink grid on {summary['tuples']:,} tuples of {summary['source']}")
    for col in ("δ", "k", "l", "suppressed", "loss/cluster", "loss/tuple", "latency ms",
                "bestSel ms", "delayC ms", "wait ms"):
        table.add_column(col, justify="right")
    for r in summary["configs"]:
        if nothing_released(r):  # no loss, latency or release time: not 0
            table.add_row(str(r["delta"]), str(r["k"]), str(r["l"]), f"{r['suppressed']:,.0f}",
                          "—", "—", "—", f"{r['best_selection_ms']:.3f}", "—", "—")
            continue
        table.add_row(str(r["delta"]), str(r["k"]), str(r["l"]), f"{r['suppressed']:,.0f}",
                      f"{r['loss_cluster_mean']:.3f}±{r['loss_cluster_mean_sd']:.3f}",
                      f"{r['loss_tuple_mean']:.3f}±{r['loss_tuple_mean_sd']:.3f}",
                      f"{r['latency_ms_mean']:,.1f}±{r['latency_ms_mean_sd']:,.1f}",
                      f"{r['best_selection_ms']:.3f}", f"{r['delay_constraint_ms']:.2f}",
                      f"{r['wait_time_ms']:,.1f}")
    console.print(table)
    console.print(f"runs: {summary['csv']}; per configuration: {summary['configs_csv']}; "
                  f"figures: {', '.join(summary['plots'])}", markup=False)

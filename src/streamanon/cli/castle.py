"""``streamanon castle``, ``experiment castle`` and the demo's CASTLE part (``verify castle``
lives in :mod:`streamanon.cli.verify`)."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from streamanon.castle import CastleAnonymizer, Released, RuleSet, Suppression
from streamanon.castle.verify import check_castle_files, load_rules
from streamanon.cli.app import app, experiment_app
from streamanon.cli.common import JSON_HELP, REJECTS_HELP, fail, on_error_option, print_summary
from streamanon.data import ashrae
from streamanon.errors import BadRecordError
from streamanon.io import InputError, OnError, RejectLog, detect_format
from streamanon.io.rows import RowReader, RowWriter
from streamanon.records import RunStats, Suppressed

console = Console(stderr=True)


def run_castle(
    source: str | Path,
    output: str | Path,
    operator: CastleAnonymizer,
    *,
    in_format: str | None = None,
    out_format: str | None = None,
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    suppressed_path: str | Path | None = None,
    latency: bool = False,
) -> RunStats:
    """Read, anonymize and write a whole stream; returns the accounting.

    Suppressed tuples go to ``suppressed_path`` (as the suppression strategy leaves them) when
    given, else they are only counted. With ``latency`` the mean wall-clock time from feeding a
    tuple to its release is measured (``details["latency_ms"]``).
    """
    rules = operator.rules
    if rules is None:
        raise ValueError("the operator has no rules")
    numeric = [r.name for r in rules.qi_rules if type(r.generalizer).__name__ ==
               "RangeGeneralizer"]
    rejects = RejectLog(rejects_path, str(source))
    reader = RowReader(source, in_format, on_error=on_error, rejects=rejects, numeric=numeric,
                       required=[rules.id_field])
    out_fmt = detect_format(None if str(output) == "-" else output, out_format)
    writer: RowWriter | None = None
    sup_writer: RowWriter | None = None
    extra = [operator.loss_field] if operator.loss_field else []
    stats = RunStats(params={"k": operator.k, "l": operator.l, "delta": operator.delta,
                             "beta": operator.beta, "mu": operator.mu, "zeta": operator.zeta,
                             "suppression": str(operator.suppression), "input": str(source)})
    fed: dict[int, float] = {}
    lat_sum = 0.0
    lat_n = 0

    def emit(items: list[Any]) -> None:
        nonlocal writer, sup_writer, lat_sum, lat_n
        now = time.perf_counter() if latency else 0.0
        for x in items:
            if isinstance(x, Suppressed):
                stats.count_suppressed()
                if suppressed_path is not None:
                    if sup_writer is None:
                        sup_writer = RowWriter(suppressed_path, detect_format(
                            suppressed_path), [*reader.columns, *extra, "reason"])
                    vals = dict(x.record.values)
                    vals["reason"] = x.reason
                    sup_writer.write(vals)
                continue
            assert isinstance(x, Released)
            stats.count_published()
            if writer is None:
                writer = RowWriter(output, out_fmt, reader.columns + extra)
            writer.write(x.values)
            if latency and x.line in fed:
                lat_sum += now - fed.pop(x.line)
                lat_n += 1

    start = time.perf_counter()
    try:
        for row in reader:
            if latency:
                fed[row.line or 0] = time.perf_counter()
            try:
                out = operator.process(row)
            except BadRecordError as exc:  # only a bad record is a rejected row: else a bug
                reader.refuse_row(row, str(exc))
                continue
            emit(out)
        emit(operator.flush())
        if writer is None:
            writer = RowWriter(output, out_fmt, reader.columns + extra)
    finally:
        elapsed = time.perf_counter() - start
        for w in (writer, sup_writer):
            if w is not None:
                w.close()
        rejects.close()
        rejects.warn_summary()
        stats.count_read(reader.read)
        stats.count_rejected(reader.n_rejected)
        summary = operator.summary()
        stats.details = {
            "suppressed_by_reason": summary["suppressed_by_reason"],
            "clusters_released": summary["clusters_released"],
            "tau": summary["tau"],
            "info_loss": summary["info_loss"],
            "mean_info_loss": summary["mean_info_loss"],
            "seconds": round(elapsed, 3),
            "tuples_per_second": round(reader.read / elapsed) if elapsed > 0 else None,
            "best_selection_s": round(operator.timing["best_selection"], 4),
            "delay_constraint_s": round(operator.timing["delay_constraint"], 4),
        }
        if latency:
            stats.details["latency_ms"] = 1000 * lat_sum / max(1, lat_n)
    return stats


@app.command("castle")
def castle_command(
    source: str = typer.Argument(..., help="Input rows: CSV with a header, or JSON Lines; "
                                 "- = stdin."),
    rules_path: Path = typer.Option(..., "--rules", help="TOML rules file: id, and per "
                                    "attribute its generalizer, sensitive flag and weight."),
    k: int = typer.Option(5, "--k", min=1, help="Distinct individuals per released cluster."),
    l: int = typer.Option(2, "--l", min=0, help="Distinct values per sensitive attribute in "  # noqa: E741
                          "each released cluster (0 or 1 = off)."),
    delta: int = typer.Option(200, "--delta", min=1, help="A tuple leaves at the latest "
                              "after δ further tuples have arrived."),
    beta: int = typer.Option(50, "--beta", min=1, help="Maximum number of open clusters."),
    mu: int = typer.Option(10, "--mu", min=1, help="τ = mean loss of the last μ released "
                           "clusters."),
    zeta: int = typer.Option(10, "--zeta", min=0, help="Released clusters kept for reuse "
                             "(0 = no reuse)."),
    max_delay: float = typer.Option(None, "--max-delay", min=0, help="Also release a tuple at "
                                    "the latest this many seconds after it (by the rules' time "
                                    "column)."),
    suppression: Suppression = typer.Option(Suppression.drop, "--suppression",
                                            help="drop, null (empty quasi-identifiers) or "
                                            "generalize (maximal generalization)."),
    output: str = typer.Option("-", "-o", "--output", help="Released rows (same columns as the "
                               "input; ranges as [lo,hi]); .jsonl writes JSON Lines."),
    suppressed: Path = typer.Option(None, "--suppressed", help="Write suppressed tuples here "
                                    "(with a reason column); else they are only counted."),
    loss_column: str = typer.Option(None, "--loss-column", help="Add a column with each "
                                    "tuple's cluster information loss."),
    in_format: str = typer.Option(None, "--format", help="csv or jsonl (default: by extension)."),
    on_error: OnError = on_error_option,
    rejects: Path = typer.Option(None, "--rejects", help=REJECTS_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """k_s-anonymize a stream with CASTLE (and l-diversity): clusters of >= k individuals.

    Example:

        streamanon castle --rules rules.toml --k 5 --l 2 --delta 1250 in.csv -o out.csv
    """
    try:
        rules = RuleSet.load(rules_path)
        operator = CastleAnonymizer(rules, k=k, l=l, delta=delta, beta=beta, mu=mu, zeta=zeta,
                                    suppression=suppression, max_delay=max_delay,
                                    loss_field=loss_column)
    except (OSError, ValueError) as exc:
        fail(f"{rules_path}: {exc}")
    if on_error is OnError.skip and rejects is None and output != "-":
        rejects = Path(f"{output}.rejects.jsonl")
    try:
        stats = run_castle(source, output, operator, in_format=in_format, on_error=on_error,
                           rejects_path=rejects, suppressed_path=suppressed)
    except (InputError, OSError, ValueError) as exc:
        fail(str(exc))
    print_summary(f"streamanon castle (k={k}, l={l}, δ={delta})", stats.to_dict(), as_json)


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"expected comma-separated integers, got {text!r}")


def run_experiment(
    workdir: Path, ks: list[int], deltas: list[int], ls: list[int], *, n: int, beta: int,
    mu: int, zeta: int, seed: int, show_progress: bool = True,
) -> tuple[Path, list[dict[str, Any]], list[Path]]:
    """Run the grid on the ASHRAE-shaped stream; returns the CSV, its rows and the plots."""
    workdir.mkdir(parents=True, exist_ok=True)
    data = ashrae.write_csv(workdir / f"castle-ashrae_n{n}_seed{seed}.csv",
                            ashrae.generate(n, seed=seed))
    rules_file = workdir / "castle-ashrae-rules.toml"
    rules_file.write_text(ashrae.rules_toml())
    grid = [(k, d, l) for d in deltas for k in ks for l in ls]  # noqa: E741
    results: list[dict[str, Any]] = []
    csv_path = workdir / "castle-experiment.csv"
    with Progress(console=console, disable=not show_progress) as progress:
        task = progress.add_task("CASTLE grid", total=len(grid))
        for k, d, l in grid:  # noqa: E741
            op = CastleAnonymizer(RuleSet.load(rules_file), k=k, l=l, delta=d, beta=beta, mu=mu,
                                  zeta=zeta)
            out = workdir / f"castle-out_k{k}_d{d}_l{l}.csv"
            stats = run_castle(data, out, op, latency=True)
            det = stats.details
            per_tuple = max(1, stats.read)
            best_ms = 1000 * det["best_selection_s"] / per_tuple
            delay_ms = 1000 * det["delay_constraint_s"] / per_tuple
            row: dict[str, Any] = {
                "k": k, "delta": d, "l": l, "beta": beta, "mu": mu, "zeta": zeta, "n": n,
                "seed": seed, "read": stats.read, "released": stats.published,
                "suppressed": stats.suppressed, "seconds": det["seconds"],
                "tuples_per_second": det["tuples_per_second"],
                "mean_info_loss": det["mean_info_loss"],
                "mean_info_loss_seven_numeric": round(sum(
                    det["info_loss"][a] for a in ashrae.SEVEN_NUMERIC) / 7, 6),
                "latency_ms": round(det["latency_ms"], 4),
                "best_selection_ms": round(best_ms, 5),
                "delay_constraint_ms": round(delay_ms, 5),
                "waiting_ms": round(max(0.0, det["latency_ms"] - best_ms - delay_ms), 4),
            }
            row.update({f"info_loss_{a}": v for a, v in det["info_loss"].items()})
            results.append(row)
            out.unlink()
            progress.advance(task)
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)
    from streamanon.plots import castle_info_loss_vs_k, castle_latency

    plots = []
    attrs = [*ashrae.NUMERIC_QI, "primary_use"]
    for l in ls:  # noqa: E741
        sel = [r for r in results if r["l"] == l]
        plots.append(castle_info_loss_vs_k(
            sel, attrs, workdir / f"castle-info-loss-vs-k_l{l}.png",
            f"CASTLE information loss per attribute vs k (l={l}, {n:,} ASHRAE-shaped tuples)"))
        plots.append(castle_latency(
            sel, workdir / f"castle-latency-vs-k_l{l}.png",
            f"CASTLE latency per tuple vs k and δ (l={l}, β={beta}, μ={mu})"))
    return csv_path, results, plots


@experiment_app.command("castle")
def experiment_castle(
    workdir: Path = typer.Option(Path("castle-experiment"), "--workdir", help="Where the data, "
                                 "the CSV of runs and the plots go."),
    ks: str = typer.Option("5,10,20,40,80", "--k", help="Comma-separated k values."),
    deltas: str = typer.Option("1250,5000,20000", "--delta", help="Comma-separated δ values."),
    ls: str = typer.Option("0,2,4,8", "--l", help="Comma-separated l values."),
    n: int = typer.Option(30_000, "--n", min=1, help="Tuples of the ASHRAE-shaped stream."),
    beta: int = typer.Option(50, "--beta", min=1),
    mu: int = typer.Option(100, "--mu", min=1),
    zeta: int = typer.Option(10, "--zeta", min=0),
    seed: int = typer.Option(1, "--seed"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """The paper's grid (k x δ x l, or a subset) on the ASHRAE-shaped stream: one CSV row per
    run, PNG plots of information loss vs k per δ and of latency vs k and δ."""
    csv_path, results, plots = run_experiment(workdir, _ints(ks), _ints(deltas), _ints(ls),
                                              n=n, beta=beta, mu=mu, zeta=zeta, seed=seed,
                                              show_progress=not as_json)
    summary = {"csv": str(csv_path), "runs": len(results), "plots": [str(p) for p in plots]}
    if as_json:
        print(json.dumps(summary))
    else:
        table = Table(title=f"CASTLE grid on {n:,} ASHRAE-shaped tuples")
        for col in ("k", "δ", "l", "suppressed", "loss (7 numeric)", "latency ms", "tuples/s"):
            table.add_column(col, justify="right")
        for r in results:
            table.add_row(str(r["k"]), str(r["delta"]), str(r["l"]), f"{r['suppressed']:,}",
                          f"{r['mean_info_loss_seven_numeric']:.3f}", f"{r['latency_ms']:.2f}",
                          f"{r['tuples_per_second']:,}")
        console.print(table)
        console.print(f"runs: {csv_path}; plots: {', '.join(str(p) for p in plots)}")


def castle_demo(workdir: Path, seed: int, n: int = 4_450) -> dict[str, Any]:
    """CASTLE (k=5, l=2, δ=1250) on a slice of the ASHRAE-shaped stream; verified."""
    data = ashrae.write_csv(workdir / f"castle-ashrae_n{n}_seed{seed}.csv",
                            ashrae.generate(n, seed=seed))
    rules_file = workdir / "castle-ashrae-rules.toml"
    rules_file.write_text(ashrae.rules_toml())
    rules = RuleSet.load(rules_file)
    k, l, delta = 5, 2, 1250  # noqa: E741
    out = workdir / f"castle-released_k{k}_l{l}_d{delta}.csv"
    stats = run_castle(data, out, CastleAnonymizer(rules, k=k, l=l, delta=delta, beta=50,
                                                   mu=100, zeta=10))
    report = check_castle_files(out, load_rules(rules_file), k=k, l=l, source=data)
    if not report.ok:
        raise RuntimeError(f"CASTLE checker failed: {report.first_problem}")
    det = stats.details
    table = Table(title=f"CASTLE on {data.name} (k={k}, l={l}, δ={delta})")
    for col in ("released", "suppr.", "classes", "min ids", "loss 7 num.", "checker",
                "tuples/s"):
        table.add_column(col, justify="right")
    seven = sum(det["info_loss"][a] for a in ashrae.SEVEN_NUMERIC) / 7
    table.add_row(f"{stats.published:,}", f"{stats.suppressed:,}", f"{report.classes:,}",
                  str(report.min_individuals), f"{seven:.3f}", "ok",
                  f"{det['tuples_per_second']:,}")
    console.print(table)
    # the trade-off a user tunes: information loss against k (same data, same δ and l)
    from streamanon.plots import castle_info_loss_vs_k  # matplotlib: only when plotting

    sweep = []
    for kk in (2, 5, 10, 20):
        st = stats if kk == k else run_castle(
            data, workdir / f"castle-released_k{kk}_l{l}_d{delta}.csv",
            CastleAnonymizer(rules, k=kk, l=l, delta=delta, beta=50, mu=100, zeta=10))
        sweep.append({"k": kk, "delta": delta, **{
            f"info_loss_{a}": v for a, v in st.details["info_loss"].items()}})
    plot = castle_info_loss_vs_k(
        sweep, list(det["info_loss"]), workdir / f"castle-info-loss-vs-k_l{l}_d{delta}.png",
        f"CASTLE: information loss vs k ({n:,} ASHRAE-shaped tuples, l={l})")
    console.print(f"plot: {plot}")
    return {"input": str(data), "output": str(out), **stats.to_dict(),
            "checker": report.to_dict(), "plot": str(plot), "loss_vs_k": sweep}

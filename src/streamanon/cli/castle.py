"""``streamanon castle``, ``experiment castle`` and the demo's CASTLE part (``verify castle``
lives in :mod:`streamanon.cli.verify`)."""

from __future__ import annotations

import csv
import inspect
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from streamanon.castle import CastleAnonymizer, Released, RuleSet, Suppression
from streamanon.castle.verify import check_castle_files, load_rules
from streamanon.cli.app import app, experiment_app
from streamanon.cli.common import (
    INPUT_FORMAT_HELP,
    JSON_DATA_HELP,
    JSON_HELP,
    OUTPUT_FORMAT_HELP,
    REJECTS_HELP,
    SUMMARY_HELP,
    check_format,
    fail,
    file_progress,
    on_error_option,
    print_summary,
    require_input,
    warn,
    write_summary,
    writing,
)
from streamanon.data import ashrae
from streamanon.errors import BadRecordError
from streamanon.io import OnError, RejectLog, detect_format
from streamanon.io.output import OutputSet
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
    rejects_name: str | None = None,
    suppressed_path: str | Path | None = None,
    suppressed_format: str | None = None,
    latency: bool = False,
    progress: Callable[[int], None] | None = None,
) -> RunStats:
    """Read, anonymize and write a whole stream; returns the accounting.

    Suppressed tuples go to ``suppressed_path`` (as the suppression strategy leaves them, with
    a ``reason`` column; a header only when there are none) when given, else they are only
    counted. With ``latency`` the mean wall-clock time from feeding a tuple to its release is
    measured (``details["latency_ms"]``). ``details["individuals_seen"]`` and
    ``details["sensitive_values_seen"]`` count distinct individuals up to k and distinct values
    of each sensitive attribute up to l: enough to tell whether k and l could be reached.
    On bad input under ``fail`` it raises after writing what came before: wrap the call in an
    :class:`~streamanon.io.output.OutputSet`, as the CLI does.
    """
    rules = operator.rules
    if rules is None:
        raise ValueError("the operator has no rules")
    numeric = [r.name for r in rules.qi_rules if type(r.generalizer).__name__ ==
               "RangeGeneralizer"]
    rejects = RejectLog(rejects_path, str(source), rejects_name)
    reader = RowReader(source, in_format, on_error=on_error, rejects=rejects, numeric=numeric,
                       required=[rules.id_field], progress=progress)
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
    ids: set[Any] = set()
    sensitive: dict[str, set[Any]] = {name: set() for name in rules.sensitive}
    need_ids, need_values = True, operator.l > 1 and bool(sensitive)

    def suppressed_writer() -> RowWriter:
        nonlocal sup_writer
        if sup_writer is None:
            assert suppressed_path is not None
            sup_writer = RowWriter(suppressed_path, detect_format(suppressed_path,
                                                                  suppressed_format),
                                   [*reader.columns, *extra, "reason"])
        return sup_writer

    def emit(items: list[Any]) -> None:
        nonlocal writer, lat_sum, lat_n
        now = time.perf_counter() if latency else 0.0
        for x in items:
            if isinstance(x, Suppressed):
                stats.count_suppressed()
                if suppressed_path is not None:
                    vals = dict(x.record.values)
                    vals["reason"] = x.reason
                    suppressed_writer().write(vals)
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
            if need_ids:
                ids.add(row.values.get(rules.id_field))
                need_ids = len(ids) < operator.k
            if need_values:
                for name, seen in sensitive.items():
                    if len(seen) < operator.l:
                        seen.add(row.values.get(name))
                need_values = any(len(v) < operator.l for v in sensitive.values())
            try:
                out = operator.process(row)
            except BadRecordError as exc:  # only a bad record is a rejected row: else a bug
                reader.refuse_row(row, str(exc))
                continue
            emit(out)
        emit(operator.flush())
        if writer is None:
            writer = RowWriter(output, out_fmt, reader.columns + extra)
        if suppressed_path is not None:
            suppressed_writer()
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
            "individuals_seen": len(ids - {None}),
            "sensitive_values_seen": {k: len(v - {None}) for k, v in sensitive.items()},
        }
        if latency:
            stats.details["latency_ms"] = 1000 * lat_sum / max(1, lat_n)
    return stats


def castle_warnings(k: int, l: int, id_field: str, summary: dict[str, Any]) -> None:  # noqa: E741
    """Say when k or l cannot be reached on this input (the run released nothing for it)."""
    if not summary["read"]:
        return
    seen = summary["individuals_seen"]
    if seen < k:
        warn(f"--k {k}: the input has only {seen} distinct individual(s) ({id_field}), so no "
             "cluster can reach k and nothing was released", summary)
    if l > 1:
        for name, n in summary["sensitive_values_seen"].items():
            if n < l:
                warn(f"--l {l}: the sensitive attribute {name} has only {n} distinct "
                     "value(s), so no cluster can be l-diverse and nothing was released",
                     summary)


#: The operator's own defaults, so that every CASTLE command defaults alike (one place).
DEFAULTS = {name: p.default for name, p in inspect.signature(CastleAnonymizer).parameters.items()
            if p.default is not inspect.Parameter.empty}
K_HELP = "Distinct individuals (the rules' id column) per released cluster."
L_HELP = ("Distinct values of each sensitive attribute per released cluster (0 or 1 = no "
          "l-diversity).")
DELTA_HELP = "Delay bound: a tuple leaves at the latest after δ further tuples have arrived."
BETA_HELP = "Maximum number of open clusters (β)."
MU_HELP = "τ, the loss threshold for new clusters, is the mean loss of the last μ released " \
    "clusters."
ZETA_HELP = "Released clusters kept for reuse (ζ; 0 = no reuse)."


@app.command("castle")
def castle_command(
    source: str = typer.Argument(..., metavar="INPUT", help="Input rows: CSV with a header, "
                                 "or JSON Lines; - = stdin."),
    rules_path: Path = typer.Option(..., "--rules", help="TOML rules file: the id column, and "
                                    "per attribute its generalizer, sensitive flag and weight "
                                    "(every key: docs, CASTLE guide)."),
    k: int = typer.Option(DEFAULTS["k"], "--k", min=1, help=K_HELP),
    l: int = typer.Option(DEFAULTS["l"], "--l", min=0, help=L_HELP),  # noqa: E741
    delta: int = typer.Option(DEFAULTS["delta"], "--delta", min=1, help=DELTA_HELP),
    beta: int = typer.Option(DEFAULTS["beta"], "--beta", min=1, help=BETA_HELP),
    mu: int = typer.Option(DEFAULTS["mu"], "--mu", min=1, help=MU_HELP),
    zeta: int = typer.Option(DEFAULTS["zeta"], "--zeta", min=0, help=ZETA_HELP),
    max_delay: float = typer.Option(None, "--max-delay", min=0, help="Also release a tuple at "
                                    "the latest this many seconds after it (by the rules' time "
                                    "column)."),
    suppression: Suppression = typer.Option(Suppression.drop, "--suppression",
                                            help="What --suppressed receives: drop (the tuple "
                                            "as read), null (empty quasi-identifiers) or "
                                            "generalize (maximal generalization)."),
    output: str = typer.Option("-", "-o", "--output", help="Released rows (same columns as the "
                               "input; ranges as [lo,hi]); - = stdout; .jsonl writes JSON "
                               "Lines. Replaced only when the run succeeds."),
    suppressed: Path = typer.Option(None, "--suppressed", help="Write suppressed tuples here "
                                    "(with a reason column); else they are only counted."),
    loss_column: str = typer.Option(None, "--loss-column", help="Add a column with each "
                                    "tuple's cluster information loss."),
    in_format: str = typer.Option(None, "--input-format", help=INPUT_FORMAT_HELP),
    out_format: str = typer.Option(None, "--output-format", help=OUTPUT_FORMAT_HELP),
    on_error: OnError = on_error_option,
    rejects: Path = typer.Option(None, "--rejects", help=REJECTS_HELP + " Default: "
                                 "OUTPUT.rejects.jsonl (with -o -: only counted)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_DATA_HELP),
    summary_file: Path = typer.Option(None, "--summary", help=SUMMARY_HELP),
) -> None:
    """k_s-anonymize a stream with CASTLE (and l-diversity): clusters of >= k individuals.

    Exit 2 on bad input (nothing written). Example (files from `streamanon demo`):

        streamanon castle --rules rules.toml --k 5 --l 2 in.csv -o out.csv
    """
    in_format = check_format(in_format, "--input-format")
    out_format = check_format(out_format, "--output-format")
    require_input(rules_path, "--rules")
    try:
        rules = RuleSet.load(rules_path)
    except (OSError, ValueError) as exc:
        fail(f"--rules {rules_path}: {exc}")
    require_input(source)
    operator = CastleAnonymizer(rules, k=k, l=l, delta=delta, beta=beta, mu=mu, zeta=zeta,
                                suppression=suppression, max_delay=max_delay,
                                loss_field=loss_column)
    if on_error is OnError.skip and rejects is None and output != "-":
        rejects = Path(f"{output}.rejects.jsonl")
    out_format = out_format or detect_format(None if output == "-" else output)
    with writing([source, rules_path], skip_hint=on_error is OnError.fail) as outs:
        out = outs.add(output, "--output")
        sup_tmp = outs.add(suppressed, "--suppressed") if suppressed is not None else None
        rejects_tmp = outs.add(rejects, "--rejects") if rejects is not None else None
        summary_tmp = outs.add(summary_file, "--summary") if summary_file else None
        with file_progress(source, f"CASTLE k={k} l={l}", min_bytes=2 << 20) as progress:
            stats = run_castle(source, out, operator, in_format=in_format,
                               out_format=out_format, on_error=on_error,
                               rejects_path=rejects_tmp, rejects_name=str(rejects),
                               suppressed_path=sup_tmp,
                               suppressed_format=detect_format(suppressed),
                               progress=progress)
        summary: dict[str, Any] = stats.to_dict()
        summary["outputs"] = outs.targets
        castle_warnings(k, l, rules.id_field, summary)
        write_summary(summary_tmp, summary)
    print_summary(f"streamanon castle (k={k}, l={l}, δ={delta})", summary, as_json,
                  stdout_has_data=output == "-")


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{option} {text}: expected comma-separated integers")
    if not values:
        fail(f"{option} {text}: expected at least one integer")
    return values


#: What the information-loss plot highlights, and what the tables report as "loss 7 num.".
SEVEN_NAME = "numeric QIs (tables: 'loss 7 num.')"


def run_experiment(
    workdir: Path, ks: list[int], deltas: list[int], ls: list[int], *, n: int, beta: int,
    mu: int, zeta: int, seed: int, show_progress: bool = True,
) -> tuple[Path, list[dict[str, Any]], list[Path]]:
    """Run the grid on the ASHRAE-shaped stream; returns the CSV, its rows and the plots.

    The data and the rules are written first (inputs of every run); the CSV of runs and the
    plots are replaced only when the whole grid has run (an :class:`OutputSet`).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    data = ashrae.write_csv(workdir / f"castle-ashrae_n{n}_seed{seed}.csv",
                            ashrae.generate(n, seed=seed))
    rules_file = workdir / "castle-ashrae-rules.toml"
    rules_file.write_text(ashrae.rules_toml())
    grid = [(k, d, l) for d in deltas for k in ks for l in ls]  # noqa: E741
    results: list[dict[str, Any]] = []
    csv_path = workdir / "castle-experiment.csv"
    with OutputSet([data, rules_file]) as outs:
        csv_tmp = outs.add(csv_path, "--workdir")
        with Progress(console=console, disable=not show_progress) as progress:
            task = progress.add_task("CASTLE grid", total=len(grid))
            for k, d, l in grid:  # noqa: E741
                op = CastleAnonymizer(RuleSet.load(rules_file), k=k, l=l, delta=d, beta=beta,
                                      mu=mu, zeta=zeta)
                out = workdir / f".castle-out_k{k}_d{d}_l{l}.partial.csv"  # measured, dropped
                try:
                    stats = run_castle(data, out, op, latency=True)
                finally:
                    out.unlink(missing_ok=True)
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
                progress.advance(task)
        with open(csv_tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(results[0]))
            w.writeheader()
            w.writerows(results)
        from streamanon.plots import castle_info_loss_vs_k, castle_latency

        plots = []
        attrs = [*ashrae.NUMERIC_QI, "primary_use"]
        for l in ls:  # noqa: E741
            sel = [r for r in results if r["l"] == l]
            loss_png = workdir / f"castle-info-loss-vs-k_l{l}.png"
            castle_info_loss_vs_k(
                sel, attrs, outs.add(loss_png, "--workdir"),
                f"CASTLE information loss per attribute vs k (l={l}, {n:,} ASHRAE-shaped "
                f"tuples, β={beta}, μ={mu}, ζ={zeta})", highlight=ashrae.SEVEN_NUMERIC,
                highlight_name=SEVEN_NAME)
            latency_png = workdir / f"castle-latency-vs-k_l{l}.png"
            castle_latency(
                sel, outs.add(latency_png, "--workdir"),
                f"CASTLE latency per tuple vs k and δ (l={l}, β={beta}, μ={mu}, ζ={zeta})")
            plots += [loss_png, latency_png]
    return csv_path, results, plots


@experiment_app.command("castle")
def experiment_castle(
    workdir: Path = typer.Option(Path("streamanon-experiments/castle"), "--workdir",
                                 help="Where the data, the CSV of runs and the plots go "
                                 "(created)."),
    ks: str = typer.Option("5,10,20,40,80", "--k", help="Comma-separated k values."),
    deltas: str = typer.Option("1250,5000,20000", "--delta", help="Comma-separated δ values."),
    ls: str = typer.Option("0,2,4,8", "--l", help="Comma-separated l values."),
    n: int = typer.Option(30_000, "--n", min=1, help="Tuples of the ASHRAE-shaped stream."),
    beta: int = typer.Option(DEFAULTS["beta"], "--beta", min=1, help=BETA_HELP),
    mu: int = typer.Option(DEFAULTS["mu"], "--mu", min=1, help=MU_HELP + " Prink's "
                           "evaluation used 100."),
    zeta: int = typer.Option(DEFAULTS["zeta"], "--zeta", min=0, help=ZETA_HELP + " Prink's "
                             "evaluation used 0."),
    seed: int = typer.Option(1, "--seed", help="Seed of the generated stream."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """The Prink paper's grid (k x δ x l, or a subset) on the ASHRAE-shaped stream.

    One CSV row per run (every parameter named), PNG plots of information loss vs k per δ and
    of latency vs k and δ. β, μ and ζ default to `streamanon castle`'s. Example:

        streamanon experiment castle --k 5,20 --delta 1250 --l 0,2 --n 5000
    """
    k_list, d_list, l_list = _ints(ks, "--k"), _ints(deltas, "--delta"), _ints(ls, "--l")
    with writing([]):
        csv_path, results, plots = run_experiment(
            workdir, k_list, d_list, l_list, n=n, beta=beta, mu=mu, zeta=zeta, seed=seed,
            show_progress=not as_json and console.is_terminal)
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
        console.print(f"runs: {csv_path}; plots: {', '.join(str(p) for p in plots)}",
                      markup=False)


def castle_demo(workdir: Path, seed: int, n: int = 4_450) -> dict[str, Any]:
    """CASTLE (k=5, l=2, δ=1250, the other parameters at their defaults) on a slice of the
    ASHRAE-shaped stream; verified; information loss vs k plotted.

    Also writes ``in.csv`` and ``rules.toml``, the files of the README's quick tour.
    """
    data = ashrae.write_csv(workdir / f"castle-ashrae_n{n}_seed{seed}.csv",
                            ashrae.generate(n, seed=seed))
    rules_file = workdir / "castle-ashrae-rules.toml"
    rules_file.write_text(ashrae.rules_toml())
    shutil.copyfile(data, workdir / "in.csv")
    shutil.copyfile(rules_file, workdir / "rules.toml")
    rules = RuleSet.load(rules_file)
    k, l, delta = 5, 2, 1250  # noqa: E741
    out = workdir / f"castle-released_k{k}_l{l}_d{delta}.csv"
    with OutputSet([data]) as outs:
        stats = run_castle(data, outs.add(out), CastleAnonymizer(rules, k=k, l=l, delta=delta))
    report = check_castle_files(out, load_rules(rules_file), k=k, l=l, source=data)
    if not report.ok:
        raise RuntimeError(f"CASTLE checker failed: {report.first_problem}")
    det = stats.details
    p = stats.params
    table = Table(title=f"CASTLE on {data.name} (k={k}, l={l}, δ={delta}, β={p['beta']}, "
                        f"μ={p['mu']}, ζ={p['zeta']})")
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
        if kk == k:
            st = stats
        else:
            with OutputSet([data]) as outs:
                st = run_castle(data, outs.add(workdir / f"castle-released_k{kk}_l{l}_d{delta}"
                                               ".csv"),
                                CastleAnonymizer(rules, k=kk, l=l, delta=delta))
        sweep.append({"k": kk, "delta": delta, **{
            f"info_loss_{a}": v for a, v in st.details["info_loss"].items()}})
    with OutputSet() as outs:
        plot = workdir / f"castle-info-loss-vs-k_l{l}_d{delta}.png"
        castle_info_loss_vs_k(
            sweep, list(det["info_loss"]), outs.add(plot),
            f"CASTLE: information loss vs k ({n:,} ASHRAE-shaped tuples, l={l})",
            highlight=ashrae.SEVEN_NUMERIC, highlight_name=SEVEN_NAME)
    console.print(f"plot: {plot}", markup=False)
    return {"input": str(data), "output": str(out), **stats.to_dict(),
            "checker": report.to_dict(), "plot": str(plot), "loss_vs_k": sweep}

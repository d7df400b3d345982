"""``streamanon simulate`` and ``streamanon experiment dezent``: the deZent paper's evaluation."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from streamanon.cli.app import app, experiment_app
from streamanon.cli.common import (
    JSON_HELP,
    ORDER_HELP,
    PUBLICATION_HELP,
    cli_wording,
    fail,
    warn,
    writing,
)
from streamanon.errors import StreamanonError

if TYPE_CHECKING:  # the engine loads when a command runs, not for its --help
    from rich.table import Table

    from streamanon.pipeline.file_outputs import OutputSet
    from streamanon.sim.config import SimConfig
    from streamanon.sim.scenarios import SimResult

console = Console(stderr=True)
if not console.is_terminal:
    console = Console(stderr=True, width=160)  # tables stay readable in logs and pipes

RULE_HELP = ("Publication rule: 'paper' (subtract z-1, publish while the count is positive) or "
             "'window' (publish every current record of a value seen by >= z sensors in Δt: "
             "the same guarantee, more utility). Both are reported.")
DISTRICT_HELP = ("How the district's data is made: 'spec' (readings plus up to 10 % noise, "
                 "one-sided, as the specification says) or 'reference' (the deZent authors' "
                 "simulation: integer W plus integer noise 0..+10 %, floored sensor-node "
                 "counts, the static H0 table, its quarter-hour alignment).")
FARM_SHARE_HELP = ("Share of farms (BDEW L0-L2) in the client mix, in [0, 1]; the rest is the "
                   "authors' Berlin mix (no farms).")
COUNTER_BITS_HELP = ("Bits per counter (mask arithmetic is mod 2^bits). Default: the narrowest "
                     "that holds the largest possible count (sensor nodes for the exact "
                     "counter, k x sensor nodes x cycles in Δt for the CBF).")


#: The core's parameter names as the user typed them (errors name the option, not the API).
OPTION_NAMES = {"z": "--z", "delta_t": "--delta-t", "p_pub": "--p-pub", "rule": "--rule",
                "structure": "--structure", "fp_rate": "--fp-rate",
                "counter_bits": "--counter-bits", "cbf_keys": "--cbf-keys",
                "gateways": "--gateways", "max_sn": "--max-sn", "cycles": "--cycles"}


def _sim_config(z: int, delta_t: float, p_pub: float, rule: str, structure: str, fp_rate: float,
                counter_bits: int | None, cbf_keys: int | None, publication: str = "direct",
                publication_order: str = "paper", ring_redraw: int | None = None) -> SimConfig:
    from streamanon.dezent.order import ORDERS
    from streamanon.dezent.protocol import PUBLICATIONS
    from streamanon.sim.config import SimConfig

    if publication not in PUBLICATIONS:
        fail(f"--publication must be one of {', '.join(PUBLICATIONS)}, got {publication!r}")
    if publication_order not in ORDERS:
        fail(f"--publication-order must be one of {', '.join(ORDERS)}, got "
             f"{publication_order!r}")
    try:
        return SimConfig(z=z, delta_t=delta_t, p_pub=p_pub, rule=rule, structure=structure,
                         fp_rate=fp_rate, counter_bits=counter_bits, cbf_keys=cbf_keys,
                         publication=publication, publication_order=publication_order,
                         ring_redraw=ring_redraw)
    except StreamanonError as exc:
        fail(cli_wording(str(exc), OPTION_NAMES))


def _cycles(days: float, cycles: int | None) -> int:
    """--cycles, else --days in 15-minute cycles; fewer than one cycle is a usage error."""
    from streamanon.dezent.grid import CYCLES_PER_DAY
    from streamanon.sim.experiment import cycles_for

    if cycles is None and round(days * CYCLES_PER_DAY) < 1:
        fail(f"--days {days:g} is less than one 15-minute cycle ({1 / CYCLES_PER_DAY:.4f} "
             "days): give more days, or --cycles")
    return cycles_for(days, cycles)


def _findings(summary: dict[str, Any]) -> list[str]:
    """The deZent lines under the table: position bias, gateway linkability, bytes per day."""
    p, s = summary["params"], summary["scenarios"]
    d = s["dezent"]
    link = d["gateway_linkability"]
    lines = [
        f"position bias ({p['publication_order']} order; max/min publication ratio over ring "
        f"positions): deZent {d['position_bias'] or float('nan'):.3f} (centralized, which has no "
        f"ring order: {s['centralized']['position_bias'] or float('nan'):.3f})",
        f"gateway linkability ({p['publication']} publication; the CE's best guess of a tuple's "
        f"gateway, balanced accuracy on the first day, floor 1/n = {link['floor']:.3f}): what it "
        f"sees {_acc(link['what_the_ce_sees'])}, from the channel alone "
        f"{_acc(link['channel_only'])}, from the values alone {_acc(link['content_only'])}",
        "bytes per day: " + ", ".join(f"{name} {m['bytes_per_day']:,}"
                                      for name, m in s.items())
        + f" (deZent counters of {summary['structure']['bits']} bits)"]
    return lines


def _acc(r: dict[str, Any]) -> str:
    return "n/a" if r["balanced_accuracy"] is None else f"{r['balanced_accuracy']:.3f}"


def export_run(result: SimResult, outdir: Path) -> dict[str, str]:
    """Write the measurements and each scenario's published tuples as ``t,u,a`` CSV files.

    ``t`` = seconds since the start of the profile year (cycle x 900), ``u`` = the true sensor
    ID, ``a`` = the bucket value in W; ``streamanon verify z --privacy-only`` re-checks them.
    The measurements include the Δt before the first simulated cycle (counted, not published).
    """
    import numpy as np

    from streamanon.dezent.grid import CYCLE_SECONDS
    from streamanon.io import RecordWriter
    from streamanon.pipeline.file_outputs import OutputSet
    from streamanon.sim.scenarios import SCENARIOS

    assert result.published is not None and result.readings is not None
    assert result.history is not None
    outdir.mkdir(parents=True, exist_ok=True)
    ids = result.district.sensor_ids
    h = len(result.history)
    readings = np.concatenate([result.history, result.readings])
    first = result.start - h
    C, S = readings.shape
    times = [str(int((first + c) * CYCLE_SECONDS)) for c in range(C)]
    paths: dict[str, str] = {}

    def write(path: Path, mask: Any) -> None:
        with RecordWriter(outs.add(path, "--export"), "csv") as w:
            for c in range(C):
                if mask is None:
                    cols: list[int] = list(range(S))
                elif c < h:
                    continue
                else:
                    cols = mask[c - h].nonzero()[0].tolist()
                w.write_columns([times[c]] * len(cols), [ids[s] for s in cols],
                                [str(int(readings[c, s])) for s in cols])

    with OutputSet() as outs:  # all files replaced together, only once all are written
        write(outdir / "measurements.csv", None)
        paths["measurements"] = str(outdir / "measurements.csv")
        for name in SCENARIOS:
            path = outdir / f"published_{name}.csv"
            write(path, result.published[name])
            paths[name] = str(path)
    return paths


def _table(summary: dict[str, Any]) -> Table:
    from rich.table import Table

    p = summary["params"]
    other = "window" if p["rule"] == "paper" else "paper"
    table = Table(title=(
        f"deZent simulation: {p['gateways']} gateways, {p['sensors']} sensor nodes, "
        f"{p['cycles']} cycles, z={p['z']}, Δt={p['delta_t']:g} s, p_pub={p['p_pub']:g}, "
        f"{p['structure']} ({summary['structure']['bytes']:,} B), seed {p['seed']}"))
    for col in ("scenario", f"ratio ({p['rule']})", f"ratio ({other})", "published",
                "msgs SN->GW", "msgs GW<->GW", "msgs GW->CE", "bytes total", "violations"):
        table.add_column(col, justify="right")
    for name, m in summary["scenarios"].items():
        table.add_row(name, f"{m['publication_ratio']:.3f}",
                      f"{m['publication_ratio_by_rule'][other]:.3f}", f"{m['published']:,}",
                      f"{m['messages']['sn_gw']:,}", f"{m['messages']['gw_gw']:,}",
                      f"{m['messages']['gw_ce']:,}", f"{m['bytes']['total']:,}",
                      f"{m['violations']:,}")
    return table


STRUCTURE_HELP = ("Counting structure on the ring: 'exact' (one counter per bucket value: "
                  "publishes exactly what the centralized rule does, ~120-byte messages on the "
                  "default district: counters as wide as their bound) or 'cbf' (the paper's "
                  "counting Bloom filter: fixed size, "
                  "may add false positives, counted as violations).")


@app.command("simulate")
def simulate_command(
    gateways: int = typer.Option(25, "--gateways", min=1, help="Gateways in the ring."),
    max_sn: int = typer.Option(20, "--max-sn", min=1,
                               help="Max sensor nodes per gateway (drawn ~ normal(max/2, 2))."),
    z: int = typer.Option(10, "--z", min=1, help="Publish a value only when >= z distinct "
                          "sensor nodes reported it within Δt."),
    days: float = typer.Option(1.0, "--days", min=0.0, help="Simulated days (96 cycles of 15 "
                               "minutes each; at least one cycle)."),
    cycles: int = typer.Option(None, "--cycles", min=1, help="Simulated cycles (overrides "
                               "--days)."),
    start_day: int = typer.Option(0, "--start-day", min=0, help="First day of the profile "
                                  "year (0 = Jan 1)."),
    delta_t: float = typer.Option(7260.0, "--delta-t", min=0, help="Δt in seconds (default "
                                  "121 min: the current cycle and the 8 before it)."),
    p_pub: float = typer.Option(0.5, "--p-pub", min=0.0, max=1.0, help="Publication "
                                "probability of the first publication pass, in (0, 1]."),
    rule: str = typer.Option("paper", "--rule", help=RULE_HELP),
    structure: str = typer.Option("exact", "--structure", help=STRUCTURE_HELP),
    fp_rate: float = typer.Option(0.05, "--fp-rate", help="With --structure cbf: target "
                                  "false-positive rate, in (0, 1)."),
    counter_bits: int = typer.Option(None, "--counter-bits", min=1, max=63,
                                     help=COUNTER_BITS_HELP),
    publication: str = typer.Option("direct", "--publication", help=PUBLICATION_HELP),
    publication_order: str = typer.Option("paper", "--publication-order", help=ORDER_HELP),
    cbf_keys: int = typer.Option(None, "--cbf-keys", min=1, help="With --structure cbf: size "
                                 "the CBF for this many keys (default 10 x mean SNs per "
                                 "gateway x cycles in Δt)."),
    seed: int = typer.Option(1, "--seed", help="Seed of the district, noise, ring and coins."),
    district_kind: str = typer.Option("spec", "--district", help=DISTRICT_HELP),
    farm_share: float = typer.Option(0.0, "--farm-share", min=0.0, max=1.0,
                                     help=FARM_SHARE_HELP),
    ring_redraw: int = typer.Option(None, "--ring-redraw", min=1,
                                    help="Draw the ring again every N cycles (default: fixed "
                                    "at setup, as the paper; every draw is a new chance for "
                                    "colluders to flank a gateway)."),
    export: Path = typer.Option(None, "--export", help="Also write measurements.csv and "
                                "published_<scenario>.csv (t,u,a) to this folder (created); "
                                "they replace older ones only when all are written."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Simulate a district: centralized vs fully decentralized vs deZent on identical readings.

    Example:

        streamanon simulate --gateways 25 --max-sn 20 --z 10 --days 1 --seed 1

    Add --publication mix --publication-order random for unlinkable, unbiased publication.
    """
    from streamanon.dezent.collusion import collusion_table, exposure_line, exposure_table
    from streamanon.dezent.grid import CYCLES_PER_DAY
    from streamanon.dezent.ring import Ring
    from streamanon.dezent.rules import RULES
    from streamanon.sim.district import District, DistrictConfig
    from streamanon.sim.scenarios import simulate

    if rule not in RULES:
        fail(f"--rule must be one of {', '.join(RULES)}, got {rule!r}")
    n_cycles = _cycles(days, cycles)
    cfg = _sim_config(z, delta_t, p_pub, rule, structure, fp_rate, counter_bits, cbf_keys,
                      publication, publication_order, ring_redraw)
    warnings: dict[str, Any] = {}
    with writing([]):
        try:
            district = District(DistrictConfig(gateways=gateways, max_sn=max_sn, seed=seed,
                                               kind=district_kind, farm_share=farm_share))
            if z > district.sensors:
                warn(f"--z {z}: the district has only {district.sensors} sensor nodes, so no "
                     "value can reach z and nothing is published", warnings)
            began = time.perf_counter()
            start = start_day * CYCLES_PER_DAY
            with _cycle_progress(n_cycles, as_json) as progress:
                result = simulate(district, n_cycles, cfg, start=start,
                                  keep_published=export is not None, on_chunk=progress)
            seconds = time.perf_counter() - began
        except (StreamanonError, OverflowError) as exc:
            fail(cli_wording(str(exc), OPTION_NAMES))
        summary = result.to_dict()
        summary["seconds"] = round(seconds, 3)
        summary.update(warnings)
        if gateways >= 3:
            summary["collusion"] = collusion_table(gateways, trials=20_000, seed=seed)
            draws = Ring(gateways, seed, redraw=ring_redraw).draws(start, n_cycles)
            summary["ring_exposure"] = exposure_table(gateways, draws, seed=seed)
        if export is not None:
            summary["export"] = export_run(result, export)
            summary["verify_with"] = (f"streamanon verify z {export}/measurements.csv "
                                      f"{export}/published_dezent.csv --z {z} "
                                      f"--delta-t {delta_t:g} --privacy-only")
    if as_json:
        print(json.dumps(summary, default=str))
    else:
        console.print(_table(summary))
        for line in _findings(summary):
            console.print(line, markup=False)
        if "collusion" in summary:
            console.print("collusion (two colluders flank an honest gateway), formula / Monte "
                          "Carlo: " + ", ".join(
                              f"{r['attackers']} of {r['n']}: {r['p_formula']:.3f} / "
                              f"{r['p_monte_carlo']:.3f}" for r in summary["collusion"]))
            console.print(exposure_line(summary["ring_exposure"], ring_redraw), markup=False)
        if export is not None:
            console.print(f"exported to {export}/; check with: {summary['verify_with']}",
                          markup=False)


@contextmanager
def _cycle_progress(total: int, quiet: bool) -> Iterator[Callable[[int], None] | None]:
    """A progress bar over simulated cycles on a terminal (runs longer than a week)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from streamanon.dezent.grid import CYCLES_PER_DAY

    if quiet or total <= 7 * CYCLES_PER_DAY or not console.is_terminal:
        yield None
        return
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task("simulated cycles", total=total)
        yield lambda n: bar.advance(task, n)


@experiment_app.command("dezent")
def experiment_dezent(
    gateways: str = typer.Option("5,25,50,100", "--gateways", help="Comma-separated gateway "
                                 "counts."),
    zs: str = typer.Option("1,5,10,25,50,100", "--z", help="Comma-separated z values."),
    seeds: str = typer.Option("1-10", "--seeds", help="Seeds: '1-10' or '1,2,3'."),
    max_sn: int = typer.Option(20, "--max-sn", min=1, help="Max sensor nodes per gateway."),
    days: float = typer.Option(1.0, "--days", min=0.0, help="Simulated days per run (at least "
                               "one 15-minute cycle)."),
    p_pub: float = typer.Option(0.5, "--p-pub", min=0.0, max=1.0, help="Publication "
                                "probability of the first publication pass, in (0, 1]."),
    rule: str = typer.Option("paper", "--rule", help=RULE_HELP),
    structure: str = typer.Option("exact", "--structure", help=STRUCTURE_HELP + " The "
                                  "CBF-size sweep always uses cbf."),
    fp_rate: float = typer.Option(0.05, "--fp-rate", help="With --structure cbf: target "
                                  "false-positive rate, in (0, 1)."),
    cbf_keys: str = typer.Option("10,20,30,50,100,200,900", "--cbf-keys",
                                 help="CBF sizes (keys) of the violations-vs-bytes sweep, run at "
                                 "--sweep-gateways and --sweep-z; '' to skip."),
    sweep_gateways: int = typer.Option(25, "--sweep-gateways", min=1,
                                       help="Gateways of the CBF-size sweep."),
    sweep_z: int = typer.Option(10, "--sweep-z", min=1, help="z of the CBF-size sweep and of "
                                "the messages/bytes plot (if in --z; else the middle z)."),
    publication: str = typer.Option("direct", "--publication", help=PUBLICATION_HELP),
    publication_order: str = typer.Option("paper", "--publication-order", help=ORDER_HELP),
    fp_rates: str = typer.Option("0.2,0.1,0.05,0.01,0.001", "--fp-rates",
                                 help="CBF false-positive rates of the bytes-per-day vs "
                                 "violations trade-off (with the exact counter and the "
                                 "centralized scheme), at --sweep-gateways and --sweep-z; '' "
                                 "to skip."),
    order_z: int = typer.Option(25, "--order-z", min=0, help="z of the paper-vs-random "
                                "publication order runs (p_pub = 1, --sweep-gateways); 0 to "
                                "skip."),
    linkability: bool = typer.Option(True, "--linkability/--no-linkability",
                                     help="Also run direct sending vs the mix at "
                                     "--sweep-gateways and --sweep-z (gateway linkability)."),
    district_kind: str = typer.Option("spec", "--district", help=DISTRICT_HELP),
    farm_share: float = typer.Option(0.0, "--farm-share", min=0.0, max=1.0,
                                     help=FARM_SHARE_HELP),
    jobs: int = typer.Option(0, "--jobs", min=0, help="Parallel processes (0 = all cores)."),
    workdir: Path = typer.Option(Path("streamanon-experiments/dezent"), "--workdir",
                                 help="Folder of the CSV and the PNG plots (created); they "
                                 "are replaced only when the whole grid has run."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Grid gateways x z x seeds: one CSV row per run, progress bar, PNG plots.

    Plots: publication ratio vs z per scenario (one per gateway count), messages and bytes per
    scenario vs gateways, collusion probability vs attacker share (formula and Monte Carlo),
    violations vs CBF bytes, bytes per day vs violations (CBF at --fp-rates, exact counter,
    centralized), and publication ratio by ring position (paper vs random order). The JSON
    summary's ``findings`` has the means over seeds: position bias, gateway linkability
    (direct vs mix) and the trade-off's points. Example:

        streamanon experiment dezent --gateways 5,25 --z 5,10 --seeds 1-3
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from streamanon.dezent.rules import RULES
    from streamanon.sim.experiment import grid, run_grid, write_csv

    try:
        g_list = _ints(gateways)
        z_list = _ints(zs)
        seed_list = _ints(seeds)
        keys_list = _ints(cbf_keys) if cbf_keys.strip() else []
        rates = [float(x) for x in fp_rates.split(",") if x.strip()]
    except ValueError as exc:
        fail(str(exc))
    if rule not in RULES:
        fail(f"--rule must be one of {', '.join(RULES)}, got {rule!r}")
    from streamanon.sim.district import KINDS

    if district_kind not in KINDS:
        fail(f"--district must be one of {', '.join(KINDS)}, got {district_kind!r}")
    base = _sim_config(sweep_z, 7260.0, p_pub, rule, structure, fp_rate, None, None,
                       publication, publication_order)
    if any(not 0 < r < 1 for r in rates):
        fail(f"--fp-rates must be in (0, 1), got {fp_rates!r}")
    specs = grid(g_list, z_list, seed_list, max_sn=max_sn, cycles=_cycles(days, None),
                 base=base, cbf_keys=keys_list, sweep_gateways=sweep_gateways, fp_rates=rates,
                 order_z=order_z or None, linkability=linkability, district=district_kind,
                 farm_share=farm_share)
    workdir.mkdir(parents=True, exist_ok=True)
    n_jobs = jobs or (os.cpu_count() or 1)
    began = time.perf_counter()
    with writing([]) as outs:
        with Progress("[progress.description]{task.description}", BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                      disable=as_json or not console.is_terminal) as progress:
            task = progress.add_task("deZent runs", total=len(specs))
            rows = run_grid(specs, n_jobs, on_done=lambda _row: progress.advance(task))
        tag = f"maxsn{max_sn}_days{days:g}_seeds{seed_list[0]}-{seed_list[-1]}"
        csv_path = workdir / f"dezent_grid_{tag}.csv"
        write_csv(rows, Path(outs.add(csv_path, "--workdir")))
        plots = _plots(rows, workdir, tag, max_sn, sweep_z, outs)
    summary = {"runs": len(rows), "csv": str(csv_path), "plots": [str(p) for p in plots],
               "findings": _experiment_findings(rows),
               "seconds": round(time.perf_counter() - began, 2)}
    if as_json:
        print(json.dumps(summary))
    else:
        console.print(f"{len(rows)} runs -> {csv_path}", markup=False)
        for key, value in summary["findings"].items():
            console.print(f"{key}: {value}", markup=False)
        for p in plots:
            console.print(f"plot: {p}", markup=False)


def _plots(rows: list[dict[str, Any]], out: Path, tag: str, max_sn: int, z_cost: int,
           outs: OutputSet) -> list[Path]:
    """Draw the grid's plots into ``out`` through ``outs``; returns the final paths."""
    from streamanon.dezent.collusion import collusion_table
    from streamanon.dezent.grid import CYCLES_PER_DAY
    from streamanon.sim.experiment import iter_main_rows, mean_by, per_position
    from streamanon.sim.scenarios import SCENARIOS

    plots: list[Path] = []

    def target(path: Path) -> str:
        plots.append(path)
        return outs.add(path, "--workdir")

    from streamanon.plots import (  # matplotlib: only when plotting
        bytes_per_day_tradeoff,
        collusion_vs_share,
        dezent_cost_vs_gateways,
        gw_ce_messages_per_scenario,
        publication_ratio_by_position,
        publication_ratio_vs_z,
        violations_vs_cbf_bytes,
    )

    main = list(iter_main_rows(rows))
    for g in sorted({r["gateways"] for r in main}):
        sub = [r for r in main if r["gateways"] == g]
        series = {name: [(z, v) for (z,), v in mean_by(
            sub, ["z"], f"{name}.publication_ratio").items()] for name in SCENARIOS}
        publication_ratio_vs_z(
            series, target(out / f"dezent_publication_ratio_vs_z_gw{g}_{tag}.png"),
            f"deZent: publication ratio vs z ({g} gateways, max {max_sn} SNs)")
    zs = sorted({r["z"] for r in main})
    z_mid = z_cost if z_cost in zs else zs[(len(zs) - 1) // 2]
    sub = [r for r in main if r["z"] == z_mid]
    per_day = {r["gateways"]: r["cycles"] / CYCLES_PER_DAY for r in sub}
    msgs = {n: [(g, v / per_day[g]) for (g,), v in mean_by(
        sub, ["gateways"], f"{n}.messages.total").items()] for n in SCENARIOS}
    byts = {n: [(g, v / per_day[g]) for (g,), v in mean_by(
        sub, ["gateways"], f"{n}.bytes.total").items()] for n in SCENARIOS}
    dezent_cost_vs_gateways(
        msgs, byts, target(out / f"dezent_cost_vs_gateways_z{z_mid}_{tag}.png"),
        f"deZent: messages and bytes per day vs gateways (z={z_mid})")
    gw_ce = {n: [(g, v / per_day[g]) for (g,), v in mean_by(
        sub, ["gateways"], f"{n}.messages.gw_ce").items()] for n in SCENARIOS}
    gw_ce_messages_per_scenario(
        gw_ce, target(out / f"dezent_gw_ce_messages_vs_gateways_z{z_mid}_{tag}.png"),
        f"deZent: GW -> CE messages per day vs gateways (z={z_mid})")
    n_coll = 100
    collusion_vs_share(
        collusion_table(n_coll, shares=(0.05, 0.1, 0.2, 0.3, 0.4, 0.5), trials=20_000),
        target(out / f"dezent_collusion_vs_share_n{n_coll}.png"),
        f"deZent: collusion success vs attacker share (n = {n_coll} gateways)")
    sweep = [r for r in rows if r["sweep"] == "cbf_keys"]
    if sweep:
        points = [(b, v) for (b,), v in mean_by(sweep, ["structure.bytes"],
                                                "dezent.violations").items()]
        g0, z0 = sweep[0]["gateways"], sweep[0]["z"]
        violations_vs_cbf_bytes(
            points, target(out / f"dezent_violations_vs_cbf_bytes_gw{g0}_z{z0}_{tag}.png"),
            f"deZent: violations vs CBF size ({g0} gateways, z={z0})")
    trade = [r for r in rows if r["sweep"] == "tradeoff"]
    if trade:
        g0, z0 = trade[0]["gateways"], trade[0]["z"]
        bytes_per_day_tradeoff(
            _tradeoff_points(trade),
            target(out / f"dezent_bytes_per_day_tradeoff_gw{g0}_z{z0}_{tag}.png"),
            f"deZent: bytes per day vs violations ({g0} gateways, z={z0}, counters from the "
            "bound; mean over seeds)")
    order = [r for r in rows if r["sweep"] == "order"]
    if order:
        g0, z0 = order[0]["gateways"], order[0]["z"]
        series = {f"{o} order": per_position([r for r in order if r["publication_order"] == o],
                                             "dezent") for o in ("paper", "random")}
        series["centralized (no ring order)"] = per_position(
            [r for r in order if r["publication_order"] == "paper"], "centralized")
        publication_ratio_by_position(
            series, target(out / f"dezent_publication_ratio_by_position_gw{g0}_z{z0}_{tag}.png"),
            f"deZent: publication ratio by ring position ({g0} gateways, z={z0}, p_pub=1; "
            "mean over seeds)")
    return plots


def _experiment_findings(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over seeds of the sweeps' headline figures."""
    from streamanon.sim.experiment import mean_by, per_position

    out: dict[str, Any] = {}
    order = [r for r in rows if r["sweep"] == "order"]
    if order:
        bias = mean_by(order, ["publication_order"], "dezent.position_bias")
        ratio = mean_by(order, ["publication_order"], "dezent.publication_ratio")
        spread = {o: max(v) / min(v) for o in ("paper", "random")
                  if (v := per_position([r for r in order if r["publication_order"] == o],
                                        "dezent"))}
        out["position_bias"] = {
            "z": order[0]["z"], "gateways": order[0]["gateways"],
            **{f"{o}_bias_per_run": round(v, 4) for (o,), v in bias.items()},
            **{f"{o}_bias_of_mean_profile": round(v, 4) for o, v in spread.items()},
            **{f"{o}_publication_ratio": round(v, 6) for (o,), v in ratio.items()},
            "violations": sum(int(r["dezent.violations"]) for r in order)}
    link = [r for r in rows if r["sweep"] == "linkability"]
    if link:
        key = "dezent.gateway_linkability"
        out["gateway_linkability"] = {
            "gateways": link[0]["gateways"], "floor": float(link[0][f"{key}.floor"]),
            **{f"{p}_{what}": round(v, 4) for what in ("what_the_ce_sees", "channel_only",
                                                        "content_only")
               for (p,), v in mean_by(link, ["publication"],
                                      f"{key}.{what}.balanced_accuracy").items()},
            **{f"{p}_bytes_per_day": round(v) for (p,), v in mean_by(
                link, ["publication"], "dezent.bytes_per_day").items()}}
    trade = [r for r in rows if r["sweep"] == "tradeoff"]
    if trade:
        out["bytes_per_day_tradeoff"] = _tradeoff_points(trade)
    return out


def _tradeoff_points(rows: list[dict[str, Any]]) -> list[tuple[str, float, float]]:
    """(label, bytes per day, violations per day), means over seeds."""
    import numpy as np

    from streamanon.sim.experiment import mean_by

    points = []
    for (kind, rate), _v in mean_by(rows, ["structure", "fp_rate"], "dezent.bytes_per_day"
                                    ).items():
        sel = [r for r in rows if r["structure"] == kind and r["fp_rate"] == rate]
        days = float(sel[0]["days"])
        label = f"CBF P={rate:g}" if kind == "cbf" else "exact counter"
        points.append((label, round(float(np.mean([float(r["dezent.bytes_per_day"])
                                                   for r in sel]))),
                       round(float(np.mean([float(r["dezent.violations"]) for r in sel]))
                             / days, 2)))
    exact = [r for r in rows if r["structure"] == "exact"] or rows
    points.append(("centralized", round(float(np.mean([float(r["centralized.bytes_per_day"])
                                                        for r in exact]))), 0.0))
    return points


def _ints(text: str) -> list[int]:
    """'1-3,7' -> [1, 2, 3, 7]."""
    from streamanon.errors import ConfigError

    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part[1:]:
            lo, hi = part.split("-", 1) if not part.startswith("-") else (part, part)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    if not out:
        raise ConfigError(f"no numbers in {text!r}")
    return out


def dezent_demo(workdir: Path, seed: int) -> dict[str, Any]:
    """``streamanon demo``'s deZent part: a one-day district through all three scenarios,
    exported and re-checked with the independent z checker, and a publication-ratio plot."""
    from streamanon.dezent.grid import CYCLES_PER_DAY
    from streamanon.errors import CheckerFailure
    from streamanon.io import read_records
    from streamanon.pipeline.file_outputs import OutputSet
    from streamanon.plots import publication_ratio_vs_z  # matplotlib: only when plotting
    from streamanon.sim.config import SimConfig
    from streamanon.sim.district import District, DistrictConfig
    from streamanon.sim.scenarios import SCENARIOS, simulate
    from streamanon.verify.z import check_z

    district = District(DistrictConfig(gateways=25, max_sn=20, seed=seed))
    runs = {}
    for z in (5, 10, 25):
        runs[z] = simulate(district, CYCLES_PER_DAY, SimConfig(z=z, structure="cbf"),
                           keep_published=(z == 10))
    main = runs[10]
    outdir = workdir / f"dezent-gw25-maxsn20-z10-day1-seed{seed}"
    paths = export_run(main, outdir)
    inputs = list(read_records(paths["measurements"]))
    checks = {}
    for name in SCENARIOS:
        report = check_z(inputs, read_records(paths[name], monotone=False), 10, 7260.0,
                         exact=False)
        checks[name] = report.ok
        if name != "dezent" and not report.ok:
            raise CheckerFailure(f"z checker failed for {name}: {report.first_problem}")
    summary = main.to_dict()
    console.print(_table(summary))
    console.print("z checker (privacy only) on the exported tuples: " + ", ".join(
        f"{k} {'ok' if v else 'VIOLATIONS (counted above)'}" for k, v in checks.items()))
    exact = simulate(district, CYCLES_PER_DAY, SimConfig(z=10, structure="exact"))
    ex = exact.metrics["dezent"].result
    console.print(
        f"with the exact counter instead of the CBF ({exact.spec.nbytes:,} B per ring message "
        f"vs {main.spec.nbytes:,} B): deZent publishes {ex['published']:,} "
        f"(centralized {exact.metrics['centralized'].result['published']:,}), "
        f"{ex['bytes']['total']:,} bytes in total, {ex['violations']} violations")
    series = {name: [(z, r.metrics[name].result["publication_ratio"]) for z, r in runs.items()]
              for name in SCENARIOS}
    plot = workdir / f"dezent-publication-ratio-vs-z_gw25_seed{seed}.png"
    with OutputSet() as outs:
        publication_ratio_vs_z(
            series, outs.add(plot),
            f"deZent: publication ratio vs z (25 gateways, {district.sensors} SNs, 1 day, "
            f"{main.spec.kind})")
    console.print(f"plot: {plot}", markup=False)
    return {"export": paths, "checker_ok": checks, "plot": str(plot),
            "publication_ratio": {z: {n: r.metrics[n].result["publication_ratio"]
                                      for n in SCENARIOS} for z, r in runs.items()},
            "scenarios": summary["scenarios"], "exact_structure": {
                "structure_bytes": exact.spec.nbytes, "dezent": ex}}

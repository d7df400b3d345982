"""``streamanon cluster up``: a whole local deZent deployment on loopback."""

from __future__ import annotations

from pathlib import Path

import typer

from streamanon.cli.app import app
from streamanon.cli.common import JSON_HELP, fail, print_summary

cluster_app = typer.Typer(help="A local deZent deployment (CA, CE, gateways, sensor replay) "
                          "as separate processes on loopback.", no_args_is_help=True)
app.add_typer(cluster_app, name="cluster")


def _spec(gateways: int, period: float, cycles: int | None, z: int, max_sn: int, seed: int,
          start_day: int, delta_t: float, p_pub: float, structure: str) -> object:
    from streamanon.net.cluster import ClusterSpec

    if structure not in ("exact", "cbf"):
        fail(f"--structure must be exact or cbf, got {structure!r}")
    return ClusterSpec(gateways=gateways, period=period, cycles=cycles, z=z, max_sn=max_sn,
                       seed=seed, start_cycle=start_day * 96, delta_t=delta_t, p_pub=p_pub,
                       structure=structure)


@cluster_app.command("init")
def cluster_init(
    gateways: int = typer.Option(5, "--gateways", min=1),
    period: float = typer.Option(1.0, "--period", min=0.05, help="Wall seconds per cycle."),
    cycles: int = typer.Option(96, "--cycles", min=1, help="Cycles to run (96 = one day)."),
    z: int = typer.Option(3, "--z", min=1),
    max_sn: int = typer.Option(20, "--max-sn", min=1, help="Max sensor nodes per gateway."),
    seed: int = typer.Option(1, "--seed", help="District, ring and structure seed."),
    start_day: int = typer.Option(0, "--start-day", min=0),
    delta_t: float = typer.Option(7260.0, "--delta-t", min=0.0),
    p_pub: float = typer.Option(0.5, "--p-pub", min=0.001, max=1.0),
    structure: str = typer.Option("exact", "--structure", help="exact or cbf."),
    workdir: Path = typer.Option(Path("streamanon-cluster"), "--workdir"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write what `cluster up` would run, without running it: pki/ (kept if it exists),
    ce.toml, gw<i>.toml (loopback ports, clock started by writing clock.t0) and cluster.toml
    (for `sensors replay --cluster`). Then start each daemon yourself."""
    from streamanon.net.cluster import Cluster

    spec = _spec(gateways, period, cycles, z, max_sn, seed, start_day, delta_t, p_pub,
                 structure)
    cluster = Cluster(spec, workdir)  # type: ignore[arg-type]
    cluster.prepare()
    files = ["ce.toml", *[f"gw{i}.toml" for i in range(gateways)], "cluster.toml", "pki/"]
    print_summary(f"deZent site in {workdir}", {
        "workdir": str(workdir), "files": ", ".join(files), "ce": cluster.ce_addr,
        "sensor_addresses": ", ".join(cluster.sensor_addrs),
        "start_the_clock": f"date +%s.%N > {workdir}/clock.t0"}, as_json)


@cluster_app.command("up")
def cluster_up(
    gateways: int = typer.Option(5, "--gateways", min=1),
    period: float = typer.Option(1.0, "--period", min=0.05, help="Wall seconds per cycle."),
    cycles: int = typer.Option(None, "--cycles", min=1, help="Cycles to run, then stop by "
                               "itself (default: until Ctrl-C)."),
    z: int = typer.Option(3, "--z", min=1),
    max_sn: int = typer.Option(20, "--max-sn", min=1, help="Max sensor nodes per gateway."),
    seed: int = typer.Option(1, "--seed", help="District, ring and structure seed."),
    start_day: int = typer.Option(0, "--start-day", min=0),
    delta_t: float = typer.Option(7260.0, "--delta-t", min=0.0),
    p_pub: float = typer.Option(0.5, "--p-pub", min=0.001, max=1.0),
    structure: str = typer.Option("exact", "--structure", help="exact or cbf."),
    workdir: Path = typer.Option(Path("streamanon-cluster"), "--workdir",
                                 help="Configs, PKI, CE database, logs, CSV files."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Start CE + gateways + sensor replay as separate processes; run --cycles cycles and stop
    by itself, or run until Ctrl-C (which stops every process in order). Leaves ce.sqlite,
    logs/, measurements.csv and published.csv in --workdir, and checks published.csv with the
    independent z checker.

    Example: streamanon cluster up --gateways 5 --period 1 --cycles 20 --z 3 --workdir run1
    """
    from streamanon.net.cluster import Cluster, check_run

    spec = _spec(gateways, period, cycles, z, max_sn, seed, start_day, delta_t, p_pub,
                 structure)
    try:
        summary = Cluster(spec, workdir).run()  # type: ignore[arg-type]
    except (RuntimeError, OSError, ValueError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted; every process was stopped", 130)
    summary["z_check"] = check_run(workdir, z, delta_t)
    print_summary(f"deZent cluster: {gateways} gateways, {cycles or 'until Ctrl-C'} cycles of "
                  f"{period:g} s",
                  summary, as_json)
    if not summary["z_check"]["ok"]:
        raise typer.Exit(1)

"""``streamanon cluster up|init|status``: a whole local deZent deployment on loopback.

Exit codes: 0 ok; 1 the z check found a violation, a daemon exited with an error, or (status)
a daemon is unreachable; 2 usage or input error (e.g. a workdir holding an earlier run);
130 interrupted (Ctrl-C: every process was stopped in order first).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from streamanon.cli.app import app
from streamanon.cli.common import (
    JSON_HELP,
    ORDER_CHOICE,
    PUBLICATION_CHOICE,
    err_console,
    fail,
    print_summary,
)

cluster_app = typer.Typer(help="A local deZent deployment (CA, CE, gateways, sensor nodes "
                          "replaying a simulated district) as separate processes on loopback.",
                          no_args_is_help=True)
app.add_typer(cluster_app, name="cluster")

GATEWAYS = typer.Option(5, "--gateways", min=1, help="Gateways in the ring (gw0..gwN-1).")
PERIOD = typer.Option(1.0, "--period", min=0.05, help="Wall seconds per cycle (a cycle is 15 "
                      "minutes of data time: 1 replays a day in 96 s).")
Z = typer.Option(3, "--z", min=1, help="A value is published only once at least z distinct "
                 "sensor nodes reported it within --delta-t.")
MAX_SN = typer.Option(20, "--max-sn", min=1, help="Max sensor nodes per gateway (each gets "
                      "its own certificate).")
SEED = typer.Option(1, "--seed", help="District, ring order and counting-structure seed.")
START_DAY = typer.Option(0, "--start-day", min=0, help="Day of the profile year to start at "
                         "(0 = 1 January).")
DELTA_T = typer.Option(7260.0, "--delta-t", min=0.0, help="Seconds of data time a reading "
                       "counts for (7260 = the current cycle and 8 before).")
P_PUB = typer.Option(0.5, "--p-pub", min=0.001, max=1.0, help="Probability of publishing in "
                     "the first publication pass (evens out the bias towards the gateways "
                     "after the coordinator).")
STRUCTURE = typer.Option("exact", "--structure", help="Counting structure: exact (no false "
                         "positives) or cbf (the paper's counting Bloom filter).")
MIN_MEMBERS = typer.Option(3, "--min-members", min=1, help="No cycle runs in a ring of fewer "
                           "gateways (the secure sum hides a share only among 3 or more).")
STORE = typer.Option(None, "--store", help="The CE's store: a PostgreSQL DSN "
                     "postgresql://user@host:port/db (default: ce.sqlite in --workdir).")
INSECURE = typer.Option(False, "--insecure-plaintext-sensors", help="Plain TCP sensor ports "
                        "that take the sensor ID from the line: anyone who reaches a port can "
                        "inject readings. For comparisons only.")
SENSOR_TRANSPORT = typer.Option("line", "--sensor-transport", help="How the sensor nodes "
                                "reach their gateway: line (its TLS line port) or mqtt (a "
                                "mosquitto broker per gateway, started by the gateway: TLS, "
                                "the sensors' certificates, an ACL per sensor topic).")
ID_MODE = typer.Option("sensor", "--id-mode", help="The ID of a published tuple: sensor (its "
                       "sensor's ID) or pseudonym (a per-gateway keyed pseudonym; pair it "
                       "with --publication mix).")
PUBLICATION = typer.Option("direct", "--publication", help=PUBLICATION_CHOICE)
ORDER = typer.Option("paper", "--publication-order", help=ORDER_CHOICE)
WORKDIR = typer.Option(Path("streamanon-cluster"), "--workdir", help="Configs, PKI (pki/, the "
                       "CA's key in ca/), CE database, outboxes (state/), logs/, CSV files.")


def _spec(gateways: int, period: float, cycles: int | None, z: int, max_sn: int, seed: int,
          start_day: int, delta_t: float, p_pub: float, structure: str, min_members: int,
          store: str | None, insecure: bool, publication: str, publication_order: str,
          sensor_transport: str = "line", id_mode: str = "sensor") -> Any:
    from streamanon.harness.local_site import LocalSiteSpec
    from streamanon.net.store import is_postgres

    if structure not in ("exact", "cbf"):
        fail(f"--structure must be exact or cbf, got {structure!r}")
    if gateways < min_members:
        err_console.print(f"[bold red]warning:[/] --gateways {gateways} is below --min-members "
                          f"{min_members}: every cycle is skipped and nothing is published "
                          "(the secure sum hides a gateway's counts only among 3 or more)")
    if sensor_transport not in ("line", "mqtt"):
        fail(f"--sensor-transport must be line or mqtt, got {sensor_transport!r}")
    if sensor_transport == "mqtt" and insecure:
        fail("--sensor-transport mqtt has no plaintext mode (the brokers require certificates)")
    if id_mode not in ("sensor", "pseudonym"):
        fail(f"--id-mode must be sensor or pseudonym, got {id_mode!r}")
    if store is not None and not is_postgres(store):
        fail(f"--store must be a postgresql:// DSN (SQLite is the default), got {store!r}")
    return LocalSiteSpec(gateways=gateways, period=period, cycles=cycles, z=z, max_sn=max_sn,
                         seed=seed, start_cycle=start_day * 96, delta_t=delta_t, p_pub=p_pub,
                         structure=structure, min_members=min_members, store=store,
                         insecure_plaintext_sensors=insecure, publication=publication,
                         publication_order=publication_order,
                         sensor_transport=sensor_transport, id_mode=id_mode)


@cluster_app.command("init")
def cluster_init(
    gateways: int = GATEWAYS,
    period: float = PERIOD,
    cycles: int = typer.Option(96, "--cycles", min=1, help="Cycles the configs run, then the "
                               "gateways stop by themselves (96 = one day)."),
    z: int = Z,
    max_sn: int = MAX_SN,
    seed: int = SEED,
    start_day: int = START_DAY,
    delta_t: float = DELTA_T,
    p_pub: float = P_PUB,
    structure: str = STRUCTURE,
    min_members: int = MIN_MEMBERS,
    store: str = STORE,
    insecure: bool = INSECURE,
    publication: str = PUBLICATION,
    publication_order: str = ORDER,
    sensor_transport: str = SENSOR_TRANSPORT,
    id_mode: str = ID_MODE,
    workdir: Path = WORKDIR,
    force: bool = typer.Option(False, "--force", help="Clear an earlier site in --workdir "
                               "first."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write what `cluster up` would run, without running it: ca/, pki/ (a certificate per
    gateway, the CE, monitor and every sensor node), ce.toml, gw<i>.toml (loopback ports;
    the clock starts when clock.t0 is written) and cluster.toml (for `sensors replay
    --cluster`). Then start each daemon yourself."""
    from streamanon.errors import StreamanonError
    from streamanon.harness.local_site import LocalSite

    spec = _spec(gateways, period, cycles, z, max_sn, seed, start_day, delta_t, p_pub,
                 structure, min_members, store, insecure, publication, publication_order,
                 sensor_transport, id_mode)
    cluster = LocalSite(spec, workdir, mode="force" if force else "new")
    try:
        cluster.prepare()
    except (StreamanonError, OSError) as exc:  # WorkdirInUse among them
        fail(str(exc))
    files = ["ce.toml", *[f"gw{i}.toml" for i in range(gateways)], "cluster.toml", "pki/",
             "ca/"]
    summary = {
        "workdir": str(workdir), "files": ", ".join(files), "ce": cluster.ce_addr,
        "sensor_addresses": ", ".join(cluster.sensor_addrs),
        "start_the_clock": f"date +%s.%N > {workdir}/clock.t0"}
    if gateways >= 3:
        from streamanon.dezent.collusion import exposure_line, exposure_table

        # the daemons' ring is drawn once from the shared ring seed (fixed at setup)
        summary["ring_exposure"] = exposure_line(exposure_table(gateways, 1, seed=seed), None)
    print_summary(f"deZent site in {workdir}", summary, as_json)


@cluster_app.command("up")
def cluster_up(
    gateways: int = GATEWAYS,
    period: float = PERIOD,
    cycles: int = typer.Option(None, "--cycles", min=1, help="Cycles to run, then stop by "
                               "itself (default: until Ctrl-C or the end of the year)."),
    z: int = Z,
    max_sn: int = MAX_SN,
    seed: int = SEED,
    start_day: int = START_DAY,
    delta_t: float = DELTA_T,
    p_pub: float = P_PUB,
    structure: str = STRUCTURE,
    min_members: int = MIN_MEMBERS,
    store: str = STORE,
    insecure: bool = INSECURE,
    publication: str = PUBLICATION,
    publication_order: str = ORDER,
    sensor_transport: str = SENSOR_TRANSPORT,
    id_mode: str = ID_MODE,
    workdir: Path = WORKDIR,
    force: bool = typer.Option(False, "--force", help="Clear an earlier run in --workdir "
                               "first (its files, and the rows of a PostgreSQL --store)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the earlier run in "
                                "--workdir: same PKI, CE rows and outboxes; the replay goes on "
                                "at the cycle after the last one; measurements.csv grows."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Start CE + gateways + sensor replay as separate processes; run --cycles cycles and stop
    by itself, or run until Ctrl-C (which stops every process in order: gateways first, they
    flush their outboxes). Leaves the CE's database, logs/, measurements.csv, published.csv
    and run.json in --workdir, and checks published.csv with the independent z checker
    (exit 1 on a violation).

    Example: streamanon cluster up --gateways 5 --period 1 --cycles 20 --z 3 --workdir run1
    """
    from streamanon.errors import StreamanonError, WorkdirInUse
    from streamanon.harness.local_site import LocalSite, check_run

    if force and resume:
        fail("give --force or --resume, not both")
    spec = _spec(gateways, period, cycles, z, max_sn, seed, start_day, delta_t, p_pub,
                 structure, min_members, store, insecure, publication, publication_order,
                 sensor_transport, id_mode)
    if insecure:
        err_console.print("[bold red]warning:[/] --insecure-plaintext-sensors: the sensor "
                          "ports are plain TCP and trust the ID in each line; anyone who "
                          "reaches them can inject readings")
    try:
        cluster = LocalSite(spec, workdir, mode="force" if force else
                          "resume" if resume else "new")
        with _CycleProgress(cluster) as progress:
            summary = cluster.run(progress)
    except WorkdirInUse as exc:
        fail(str(exc))
    except (RuntimeError, OSError) as exc:  # a daemon that did not start, a store not reachable
        fail(str(exc), 1)
    except StreamanonError as exc:  # parameters the site refuses
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted while starting; every process was stopped", 130)
    summary["z_check"] = check_run(workdir, z, delta_t)
    print_summary(f"deZent cluster: {gateways} gateways, {cycles or 'until Ctrl-C'} cycles of "
                  f"{period:g} s", summary, as_json)
    if summary["interrupted"]:
        err_console.print(f"stopped by Ctrl-C after cycle {summary['cycles'][1]}: gateways "
                          "flushed their outboxes, then the CE stopped; continue with "
                          "--resume")
        raise typer.Exit(130)
    if not summary["z_check"]["ok"] or any(c not in (0, None) for c in
                                           summary["exit_codes"].values()):
        raise typer.Exit(1)


class _CycleProgress:
    """A rich progress bar over the cycles on a terminal; nothing when not a TTY."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.bar: Any = None

    def __enter__(self) -> Any:
        if not err_console.is_terminal:
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        spec = self.cluster.spec
        self.bar = Progress(TextColumn("cycles"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[note]}"), console=err_console,
                            transient=True)
        self.bar.__enter__()
        task = self.bar.add_task("cycles", total=spec.cycles, note="")

        def update(cycle: int) -> None:
            done = max(0, cycle - spec.start_cycle)
            if spec.cycles is not None:
                done = min(done, spec.cycles)
            self.bar.update(task, completed=done, note=f"cycle {cycle} (Ctrl-C stops)")

        return update

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


@cluster_app.command("status")
def cluster_status(
    workdir: Path = WORKDIR,
    once: bool = typer.Option(False, "--once", help="Print the table once (the default when "
                              "not on a terminal) instead of refreshing it every --interval."),
    interval: float = typer.Option(1.0, "--interval", min=0.2, help="Seconds between "
                                   "refreshes."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """A live table of the site in --workdir: every daemon's state and figures (last cycle,
    ring size, peers up, cycles completed/skipped, readings taken/refused, tuples published,
    outbox depth, mean CE commit time; at the CE its rows), read from the daemons' metrics
    endpoints over mutual TLS with pki/monitor.crt. Exit 1 when a daemon is unreachable.
    """
    from streamanon.harness.local_site import site_status
    from streamanon.net.config import ConfigError

    if not (workdir / "ce.toml").exists():
        fail(f"{workdir} holds no site (no ce.toml): see `cluster init` or `cluster up`")
    try:
        rows = site_status(workdir)
    except ConfigError as exc:
        fail(str(exc))
    if as_json or once or not err_console.is_terminal:
        if as_json:
            import json

            print(json.dumps(rows))
        else:
            from rich.console import Console

            Console(stderr=True, width=max(err_console.width, 150)).print(_status_table(rows))
    else:
        from rich.live import Live

        try:
            with Live(_status_table(rows), console=err_console, auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    rows = site_status(workdir)
                    live.update(_status_table(rows), refresh=True)
        except KeyboardInterrupt:
            pass
    if any(r["state"] != "up" for r in rows):
        raise typer.Exit(1)


_COLUMNS = ("daemon", "state", "cycle", "ring", "peers_up", "completed", "skipped",
            "readings_ok", "readings_refused", "published", "outbox", "rows", "refused",
            "commit_ms")


def _status_table(rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title=f"deZent site, {time.strftime('%H:%M:%S')}")
    for col in _COLUMNS:
        table.add_column(col.replace("_", " "), justify="left" if col in ("daemon", "state")
                         else "right")
    for r in rows:
        table.add_row(*("" if r.get(c) is None else str(r.get(c)) for c in _COLUMNS))
    return table

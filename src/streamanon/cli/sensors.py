"""``streamanon sensors replay``: a simulated district's readings sent to running gateways."""

from __future__ import annotations

import tomllib
from dataclasses import asdict
from pathlib import Path

import typer

from streamanon.cli.app import app
from streamanon.cli.common import JSON_HELP, fail, print_summary

sensors_app = typer.Typer(help="Sensor nodes: replay a simulated district against running "
                          "gateways (line protocol, see streamanon.net.sensors).",
                          no_args_is_help=True)
app.add_typer(sensors_app, name="sensors")


@sensors_app.command("replay")
def replay_command(
    cluster: Path = typer.Option(None, "--cluster", help="cluster.toml written by `cluster up` "
                                 "(district, clock, addresses); the options below override."),
    gateway: list[str] = typer.Option(None, "--gateway", help="Sensor address host:port of "
                                      "gw0, gw1, ... (repeat, in order)."),
    max_sn: int = typer.Option(20, "--max-sn", min=1),
    seed: int = typer.Option(1, "--seed"),
    start: int = typer.Option(None, "--start-cycle", min=0, help="First cycle of the profile "
                              "year (default 0)."),
    cycles: int = typer.Option(None, "--cycles", min=1, help="Cycles to replay (default 96)."),
    t0: float = typer.Option(None, "--t0", help="Wall time (Unix) at which cycle 0 begins on "
                             "the gateways' clock ([clock] t0)."),
    t0_file: Path = typer.Option(None, "--t0-file", help="Instead of --t0: connect to every "
                                 "gateway, then wait for this file to hold t0 (the gateways' "
                                 "[clock] t0_file)."),
    period: float = typer.Option(None, "--period", min=0.001, help="Wall seconds per cycle "
                                 "(default 900: real time)."),
    lead: float = typer.Option(None, "--lead", min=0.0, help="Send each cycle this many "
                               "seconds before it begins (default 0)."),
    measurements: Path = typer.Option(None, "--measurements", help="Write the acknowledged "
                                      "readings here as t,u,a CSV."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Send each sensor's bucketed readings (BDEW profiles + noise) to its gateway, cycle by
    cycle, optionally faster than real time (--period 1 = one cycle per second)."""
    from streamanon.net.sensors import replay
    from streamanon.sim.district import District, DistrictConfig

    dist: dict[str, object] = {"gateways": len(gateway or []), "max_sn": max_sn, "seed": seed}
    rep: dict[str, object] = {}
    base = Path(".")
    if cluster is not None:
        try:
            doc = tomllib.loads(cluster.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            fail(f"{cluster}: {exc}")
        dist, rep, base = doc["district"], doc["replay"], cluster.resolve().parent
    addresses = list(gateway) if gateway else list(rep.get("gateways", []))  # type: ignore[call-overload]
    if not addresses:
        fail("give --cluster or --gateway addresses")
    dist["gateways"] = len(addresses)
    p = float(period if period is not None else rep.get("period", 900.0))  # type: ignore[arg-type]
    s = int(start if start is not None else rep.get("start", 0))  # type: ignore[call-overload]
    out = measurements or (base / str(rep["measurements"]) if "measurements" in rep else None)
    if t0_file is None and "t0_file" in rep and t0 is None:
        t0_file = base / str(rep["t0_file"])
    if t0 is None and t0_file is None and "t0" not in rep:
        fail("give --t0 or --t0-file: the gateways' clock ([clock] t0 or t0_file)")
    try:
        district = District(DistrictConfig(**dist))  # type: ignore[arg-type]
        stats = replay(district, addresses, start=s,
                       cycles=int(cycles if cycles is not None else rep.get("cycles", 96)),  # type: ignore[call-overload]
                       t0=float(t0 if t0 is not None else rep.get("t0", 0.0)),  # type: ignore[arg-type]
                       period=p, lead=float(lead if lead is not None else rep.get("lead", 0.0)),  # type: ignore[arg-type]
                       measurements=out,
                       data_period=float(rep.get("data_period", 900.0)),  # type: ignore[arg-type]
                       t0_file=t0_file if t0 is None else None,
                       ready_file=(base / str(rep["ready_file"]) if "ready_file" in rep
                                   else None))
    except (ValueError, TypeError) as exc:
        fail(str(exc))
    print_summary("sensor replay", asdict(stats), as_json)

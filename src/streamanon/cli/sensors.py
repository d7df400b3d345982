"""``streamanon sensors replay``: a simulated district's readings sent to running gateways."""

from __future__ import annotations

import tomllib
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer

from streamanon.cli.app import app
from streamanon.cli.common import JSON_HELP, fail, print_summary
from streamanon.errors import StreamanonError

sensors_app = typer.Typer(help="Sensor nodes: replay a simulated district against running "
                          "gateways, each sensor node with its own TLS certificate (see "
                          "streamanon.net.intake).",
                          no_args_is_help=True)
app.add_typer(sensors_app, name="sensors")


def _cluster_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``[district]`` and ``[replay]`` of a cluster.toml, paths made absolute."""
    try:
        doc = tomllib.loads(path.read_text())
        district, rep = dict(doc["district"]), dict(doc["replay"])
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        fail(f"{path}: not a cluster file ({exc})")
    base = path.resolve().parent
    for key in ("measurements", "t0_file", "ready_file", "pki"):
        if key in rep:
            rep[key] = base / str(rep[key])
    return district, rep


@sensors_app.command("replay")
def replay_command(
    cluster: Path = typer.Option(None, "--cluster", help="cluster.toml written by `cluster up` "
                                 "or `cluster init` (district, clock, addresses); the options "
                                 "below override it."),
    gateway: list[str] = typer.Option(None, "--gateway", help="Sensor address host:port of "
                                      "gw0, gw1, ... (repeat, in order)."),
    max_sn: int = typer.Option(None, "--max-sn", min=1, help="Max sensor nodes per gateway "
                               "(default 20)."),
    seed: int = typer.Option(None, "--seed", help="District seed (default 1)."),
    start: int = typer.Option(None, "--start-cycle", min=0, help="First cycle of the profile "
                              "year (default 0)."),
    cycles: int = typer.Option(None, "--cycles", min=1, help="Cycles to replay (default 96)."),
    t0: float = typer.Option(None, "--t0", help="Wall time (Unix) at which cycle 0 begins on "
                             "the gateways' clock (\\[clock] t0)."),
    t0_file: Path = typer.Option(None, "--t0-file", help="Instead of --t0: connect to every "
                                 "gateway, then wait for this file to hold t0 (the gateways' "
                                 "\\[clock] t0_file)."),
    period: float = typer.Option(None, "--period", min=0.001, help="Wall seconds per cycle "
                                 "(default 900: real time)."),
    lead: float = typer.Option(None, "--lead", min=0.0, help="Send each cycle this many "
                               "seconds before it begins (default 0)."),
    measurements: Path = typer.Option(None, "--measurements", help="Write the acknowledged "
                                      "readings here as t,u,a CSV."),
    pki: Path = typer.Option(None, "--pki", help="The deployment folder of `pki init "
                             "--sensors`: each sensor node connects over TLS with its own "
                             "certificate (sensors/gw<i>/<id>.crt). Without it: plain TCP, "
                             "for gateways with insecure_plaintext_sensors = true only."),
    transport: str = typer.Option(None, "--transport", help="line (the gateways' TLS line "
                                  "port, default) or mqtt (each sensor node an MQTT client of "
                                  "its gateway's broker, QoS 1, its own certificate)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Send each sensor's bucketed readings (BDEW profiles + noise) to its gateway, cycle by
    cycle, optionally faster than real time (--period 1 = one cycle per second)."""
    from streamanon.harness.sensor_replay import replay
    from streamanon.sim.district import District, DistrictConfig

    district_args: dict[str, Any] = {"max_sn": 20, "seed": 1}
    rep: dict[str, Any] = {"start": 0, "cycles": 96, "period": 900.0, "lead": 0.0,
                           "data_period": 900.0, "gateways": []}
    if cluster is not None:
        more_district, more_rep = _cluster_file(cluster)
        district_args.update(more_district)
        rep.update(more_rep)
    given = {"start": start, "cycles": cycles, "period": period, "lead": lead,
             "measurements": measurements, "gateways": list(gateway) if gateway else None,
             "pki": pki, "transport": transport}
    rep.update({k: v for k, v in given.items() if v is not None})
    district_args.update({k: v for k, v in {"max_sn": max_sn, "seed": seed}.items()
                          if v is not None})
    if t0 is not None:
        rep["t0"], rep["t0_file"] = t0, None
    elif t0_file is not None:
        rep["t0_file"] = t0_file
    if not rep["gateways"]:
        fail("give --cluster or --gateway addresses")
    if rep.get("t0") is None and rep.get("t0_file") is None:
        fail("give --t0 or --t0-file: the gateways' clock ([clock] t0 or t0_file)")
    district_args["gateways"] = len(rep["gateways"])
    try:  # the numbers of --cluster's file or the options
        timing = {"start": int(rep["start"]), "cycles": int(rep["cycles"]),
                  "t0": float(rep.get("t0") or 0.0), "period": float(rep["period"]),
                  "lead": float(rep["lead"]), "data_period": float(rep["data_period"])}
    except (ValueError, TypeError) as exc:
        fail(str(exc))
    try:
        district = District(DistrictConfig(**district_args))
        stats = replay(district, list(rep["gateways"]), **timing,
                       measurements=rep.get("measurements"), t0_file=rep.get("t0_file"),
                       ready_file=rep.get("ready_file"), pki=rep.get("pki"),
                       append=bool(rep.get("append", False)),
                       transport=str(rep.get("transport", "line")))
    except (StreamanonError, TypeError) as exc:
        fail(str(exc))
    print_summary("sensor replay", asdict(stats), as_json)

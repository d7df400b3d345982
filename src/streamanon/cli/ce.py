"""``streamanon ce``: the deZent central entity daemon, and ``ce export``."""

from __future__ import annotations

from pathlib import Path

import typer

from streamanon.cli.app import app
from streamanon.cli.common import JSON_HELP, fail, print_summary
from streamanon.cli.gateway import setup_logging

ce_app = typer.Typer(help="The deZent central entity: stores published tuples from the "
                     "gateways (mutual TLS, SQLite).", invoke_without_command=True)
app.add_typer(ce_app, name="ce")


@ce_app.callback()
def ce_run(
    ctx: typer.Context,
    config: Path = typer.Option(None, "--config", help="ce.toml (see streamanon.net.config)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every batch."),
) -> None:
    """Run the central entity until SIGTERM/Ctrl-C: `streamanon ce --config ce.toml`."""
    if ctx.invoked_subcommand is not None:
        return
    if config is None:
        fail("--config is required (or use a subcommand: export)")
    from streamanon.net.ce import run_ce
    from streamanon.net.config import ConfigError, load_ce_config

    try:
        cfg = load_ce_config(config)
    except ConfigError as exc:
        fail(str(exc))
    setup_logging("ce", verbose)
    try:
        run_ce(cfg)
    except OSError as exc:
        fail(f"central entity: {exc}")


@ce_app.command("export")
def ce_export(
    config: Path = typer.Option(None, "--config", help="ce.toml (its db is exported)."),
    db: Path = typer.Option(None, "--db", help="The SQLite database (instead of --config)."),
    output: Path = typer.Option(Path("-"), "--output", "-o", help="CSV file (t,u,a); - for "
                                "stdout."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write every tuple the CE holds as t,u,a CSV, in time order."""
    from streamanon.net.ce import export_csv
    from streamanon.net.config import ConfigError, load_ce_config

    if db is None:
        if config is None:
            fail("give --config or --db")
        try:
            db = load_ce_config(config).db
        except ConfigError as exc:
            fail(str(exc))
    try:
        n = export_csv(db, output)
    except FileNotFoundError as exc:
        fail(str(exc))
    if str(output) != "-":
        print_summary("CE export", {"db": str(db), "output": str(output), "rows": n}, as_json)

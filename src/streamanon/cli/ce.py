"""``streamanon ce``: the deZent central entity daemon, and ``ce export``."""

from __future__ import annotations

from pathlib import Path

import typer

from streamanon.cli.app import app
from streamanon.cli.common import JSON_HELP, fail, print_summary
from streamanon.cli.gateway import setup_logging

ce_app = typer.Typer(help="The deZent central entity: checks and stores the tuples the "
                     "gateways publish (mutual TLS; SQLite or PostgreSQL).",
                     invoke_without_command=True)
app.add_typer(ce_app, name="ce")


@ce_app.callback()
def ce_run(
    ctx: typer.Context,
    config: Path = typer.Option(None, "--config", help="ce.toml (see streamanon.net.config)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every batch."),
) -> None:
    """Run the central entity until SIGTERM/Ctrl-C: `streamanon ce --config ce.toml`.

    The store is the config's `store`: a SQLite file (default) or a PostgreSQL DSN
    postgresql://user@host:port/db (password in ~/.pgpass or PGPASSFILE).
    """
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
    from streamanon.errors import StreamanonError

    try:
        run_ce(cfg)
    except (OSError, StreamanonError) as exc:  # StoreUnavailable among them
        fail(f"central entity: {exc}")


@ce_app.command("export")
def ce_export(
    config: Path = typer.Option(None, "--config", help="ce.toml (its store is exported)."),
    store: str = typer.Option(None, "--store", help="Instead of --config: a SQLite file or a "
                              "postgresql:// DSN."),
    output: Path = typer.Option(Path("-"), "--output", "-o", help="CSV file (t,u,a); - for "
                                "stdout."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write every tuple the CE holds as t,u,a CSV, in time order."""
    from streamanon.errors import StoreUnavailable
    from streamanon.net.ce import _redact
    from streamanon.net.config import ConfigError, load_ce_config
    from streamanon.net.store import export_csv

    if store is None:
        if config is None:
            fail("give --config or --store")
        try:
            store = load_ce_config(config).store
        except ConfigError as exc:
            fail(str(exc))
    from streamanon.net.store import is_postgres

    if not is_postgres(store) and not Path(store).is_file():
        fail(f"--store {store}: no such SQLite file")  # before the CSV header is written
    try:
        n = export_csv(store, output)
    except (FileNotFoundError, StoreUnavailable) as exc:
        fail(str(exc))
    except Exception as exc:  # psycopg's errors: a DSN that does not connect
        fail(f"{_redact(store)}: {exc}")
    if str(output) != "-":
        print_summary("CE export", {"store": _redact(store), "output": str(output), "rows": n},
                      as_json)

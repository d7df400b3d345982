"""``streamanon gateway``: one deZent gateway daemon."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from streamanon.cli.app import app
from streamanon.cli.common import fail


def setup_logging(name: str, verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format=f"%(asctime)s {name} %(levelname)s %(message)s")
    logging.getLogger("asyncio").setLevel(logging.WARNING if not verbose else logging.DEBUG)


@app.command("gateway")
def gateway_command(
    config: Path = typer.Option(..., "--config", help="gw.toml (see streamanon.net.config)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
) -> None:
    """Run one gateway: its authenticated sensor nodes (TLS, one certificate each, from its
    registry), ring rounds with its peers over mutual TLS (no cycle below min_members),
    published tuples to the CE. Stops on SIGTERM/Ctrl-C (flushing its outbox) or after
    clock.last_cycle.
    """
    from streamanon.errors import StreamanonError
    from streamanon.net.config import ConfigError, load_gateway_config
    from streamanon.net.gateway import run_gateway

    try:
        cfg = load_gateway_config(config)
    except ConfigError as exc:
        fail(str(exc))
    setup_logging(cfg.name, verbose)
    try:
        code = run_gateway(cfg)
    except (OSError, StreamanonError) as exc:  # ports in use, an unusable CRL or registry
        fail(f"gateway {cfg.name}: {exc}")
    if code:
        raise typer.Exit(code)

"""``streamanon pki init``: the private CA of a deZent deployment."""

from __future__ import annotations

from pathlib import Path

import typer

from streamanon.cli.app import app
from streamanon.cli.common import JSON_HELP, fail, print_summary

pki_app = typer.Typer(help="Certificates for the deZent daemons (a private CA).",
                      no_args_is_help=True)
app.add_typer(pki_app, name="pki")


@pki_app.command("init")
def pki_init(
    directory: Path = typer.Argument(..., help="Directory for the CA and the certificates."),
    gateways: int = typer.Option(..., "--gateways", min=1, help="Gateways (gw0..gwN-1)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing CA."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Create ca.crt/ca.key, gw<i>.crt/.key for every gateway and ce.crt/.key (keys 0600).

    Example: streamanon pki init pki --gateways 5
    """
    from streamanon.net.pki import init_pki  # cryptography: only when used

    try:
        files = init_pki(directory, gateways, force=force)
    except (FileExistsError, ValueError) as exc:
        fail(str(exc))
    print_summary(f"PKI in {directory}", {"certificates": files}, as_json)

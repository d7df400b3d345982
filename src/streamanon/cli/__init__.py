"""The ``streamanon`` command line: one module per command group, all on one typer app."""

import streamanon.cli.ce  # (register the deZent daemon commands)
import streamanon.cli.cluster
import streamanon.cli.gateway
import streamanon.cli.pki
import streamanon.cli.sensors  # noqa: F401
from streamanon.cli import castle, demo, dezent, flink, verify, zanon  # noqa: F401 (commands)
from streamanon.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]

"""The ``streamanon`` command line: one module per command group, all on one typer app."""

from streamanon.cli import castle, demo, dezent, flink, verify, zanon  # noqa: F401 (commands)
from streamanon.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]

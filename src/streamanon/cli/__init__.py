"""The ``streamanon`` command line: one module per command group, all on one typer app."""

from streamanon.cli import demo, flink, verify, zanon  # noqa: F401  (register commands)
from streamanon.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]

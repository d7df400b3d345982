"""The ``streamanon`` command line: one module per command group, all on one typer app.

Exit codes are those of :class:`streamanon.cli.exitcodes.ExitCode`; :func:`main` turns an
unexpected exception (a bug) into exit 70 with its traceback, so that exit 1 keeps meaning
"a check found a problem".
"""

import sys
import traceback

import streamanon.cli.ce  # (register the deZent daemon commands)
import streamanon.cli.cluster
import streamanon.cli.gateway
import streamanon.cli.pki
import streamanon.cli.sensors  # noqa: F401
from streamanon.cli import castle, demo, dezent, flink, kafka, verify, zanon  # noqa: F401
from streamanon.cli.app import app
from streamanon.cli.exitcodes import ExitCode


def main() -> None:
    """The console script: run the app; a crash is an internal error (exit 70)."""
    try:
        app()
    except Exception:
        traceback.print_exc()
        print("internal error: this is a bug in streamanon; please report it with the "
              "traceback above", file=sys.stderr)
        sys.exit(int(ExitCode.INTERNAL))


__all__ = ["ExitCode", "app", "main"]

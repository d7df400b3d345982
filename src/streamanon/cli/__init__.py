"""The ``streamanon`` command line: one module per command group, all on one typer app.

Importing this package loads typer and the app's table of commands, nothing else: each
command's module is imported when that command runs or its help is shown (see
:mod:`streamanon.cli.app`), so start-up stays instant.

Exit codes are those of :class:`streamanon.cli.exitcodes.ExitCode`; :func:`main` turns an
unexpected exception (a bug) into exit 70 with its traceback (and a
:class:`~streamanon.errors.ConfigError`, parameters an operator refuses, into exit 2 with one
line), so that exit 1 keeps meaning
"a check found a problem". A command whose optional extra is not installed (a
``ModuleNotFoundError`` of one of :data:`streamanon.extras.EXTRA_OF_MODULE`) exits 2 with one
line naming the extra to install.
"""

import os
import sys
import traceback

from streamanon.cli.app import app
from streamanon.cli.exitcodes import ExitCode, teardown_skipped
from streamanon.errors import ConfigError
from streamanon.extras import install_hint


def main() -> None:
    """The console script: run the app; a crash is an internal error (exit 70).

    A command whose outputs are all committed may ask to skip the interpreter's teardown
    (:func:`~streamanon.cli.exitcodes.skip_teardown`): the process then ends with its exit
    code as soon as stdout and stderr are flushed.
    """
    if "_STREAMANON_COMPLETE" in os.environ:  # shell completion (docs/reference/cli.md)
        from typer._completion_classes import completion_init

        completion_init()
    try:
        app()
    except SystemExit as exc:
        if teardown_skipped() and (exc.code is None or isinstance(exc.code, int)):
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except OSError:  # a closed stdout: the command has already said what it wrote
                pass
            os._exit(exc.code or 0)
        raise
    except ConfigError as exc:  # parameters an operator refuses (e.g. --delta-t 1e400)
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(int(ExitCode.USAGE))
    except Exception as exc:
        hint = install_hint(exc) if isinstance(exc, ModuleNotFoundError) else None
        if hint is not None:  # a command of an extra that is not installed
            print(f"error: {hint}", file=sys.stderr)
            sys.exit(int(ExitCode.USAGE))
        traceback.print_exc()
        print("internal error: this is a bug in streamanon; please report it with the "
              "traceback above", file=sys.stderr)
        sys.exit(int(ExitCode.INTERNAL))


__all__ = ["ExitCode", "app", "main"]

"""The ``streamanon`` command line: one module per command group, all on one typer app.

Importing this package loads no typer: its ``app`` attribute (the typer app and its table of
commands, :mod:`streamanon.cli.app`) loads when first asked for, and each command's module
when that command runs or its help is shown. :func:`main` prints a cached help page
(:mod:`streamanon.cli.helpcache`) before it loads typer at all.

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
import types
from typing import TYPE_CHECKING, Any

from streamanon.cli.exitcodes import ExitCode, teardown_skipped

if TYPE_CHECKING:
    from streamanon.cli.app import app


class _Package(types.ModuleType):
    """This package, whose ``app`` is the typer app, loaded on first use.

    The submodule :mod:`streamanon.cli.app` has the attribute's name: the import system binds
    the submodule to it once loaded, which the setter declines, so that ``app`` stays the
    typer app however the two were imported.
    """

    @property
    def app(self) -> Any:
        override = self.__dict__.get("_app_override")
        if override is not None:
            return override
        from streamanon.cli.app import app as typer_app

        return typer_app

    @app.setter
    def app(self, value: Any) -> None:
        if not isinstance(value, types.ModuleType):  # e.g. a test's stand-in
            self.__dict__["_app_override"] = value


sys.modules[__name__].__class__ = _Package


def main() -> None:
    """The console script: run the app; a crash is an internal error (exit 70).

    ``streamanon [COMMAND ...] --help`` prints the cached page when there is a fresh one, and
    caches the page it renders otherwise (:mod:`streamanon.cli.helpcache`).

    A command whose outputs are all committed may ask to skip the interpreter's teardown
    (:func:`~streamanon.cli.exitcodes.skip_teardown`): the process then ends with its exit
    code as soon as stdout and stderr are flushed.
    """
    from streamanon.cli import helpcache

    argv = sys.argv[1:]
    if helpcache.is_help(argv) and helpcache.enabled():
        page = helpcache.lookup(argv)
        if page is not None:
            sys.stdout.write(page)
            sys.stdout.flush()
            sys.exit(int(ExitCode.OK))  # as typer ends a help
        with helpcache.recording(argv) as rec:
            try:
                _run()
            except SystemExit as exc:
                if exc.code in (None, 0):
                    rec.store()
                raise
        return
    _run()


def _run() -> None:
    import traceback

    from streamanon.errors import ConfigError
    from streamanon.extras import install_hint

    if "_STREAMANON_COMPLETE" in os.environ:  # shell completion (docs/reference/cli.md)
        from typer._completion_classes import completion_init

        completion_init()
    from streamanon.cli.app import app as typer_app

    try:
        typer_app()
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

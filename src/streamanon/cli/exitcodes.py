"""Exit codes of every ``streamanon`` command, in one place (import them, do not repeat them).

>>> int(ExitCode.USAGE), ExitCode(130).name
(2, 'INTERRUPTED')

Design: docs/design/cli.md
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The process exit status of a ``streamanon`` command (see the module table)."""

    OK = 0
    PROBLEM = 1
    USAGE = 2
    INTERNAL = 70
    INTERRUPTED = 130
    BROKEN_PIPE = 141
    TERMINATED = 143


_skip_teardown = False


def skip_teardown() -> None:
    """Let :func:`streamanon.cli.main` end this process at once when the command returns.

    A command calls it once every output is written, committed and closed: what is left is
    the interpreter freeing each object of the run one by one and unloading its modules
    (0.03-0.05 s after a 2,000,000-tuple z run; nothing a file needs). Only the console
    script acts on it (with ``os._exit``, after flushing stdout and stderr); a command run
    in process (tests, ``CliRunner``) returns as usual.
    """
    global _skip_teardown
    _skip_teardown = True


def teardown_skipped() -> bool:
    """Whether the command that ran asked for :func:`skip_teardown`."""
    return _skip_teardown


__all__ = ["ExitCode", "skip_teardown", "teardown_skipped"]

"""Exit codes of every ``streamanon`` command, in one place (import them, do not repeat them).

=====  ==============================================================================
code   meaning
=====  ==============================================================================
0      ok: the run finished and every output was written
1      a check found a problem (``verify``: a counterexample; ``cluster up``: its own
       privacy check failed); the outputs were written, the problem is reported
2      usage or input error: a bad option, an unreadable or invalid input, an output that
       would overwrite an input; nothing was written (previous files untouched)
70     internal error: a bug in streamanon (the traceback is printed; please report it)
130    interrupted (Ctrl-C); nothing was written, and stderr says so
141    the reader of standard output closed it (``streamanon z ... | head``); as 130
143    terminated (SIGTERM); as 130
=====  ==============================================================================

A run reading a Kafka topic is the exception: Ctrl-C or SIGTERM is how a live pipeline
stops, so it checkpoints what it read and exits 0; under ``--until-end`` a run stopped before
the end exits 130 or 143 (checkpointed too). docs/reference/exit-codes.md has the details.

>>> int(ExitCode.USAGE), ExitCode(130).name
(2, 'INTERRUPTED')
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

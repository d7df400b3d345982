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


__all__ = ["ExitCode"]

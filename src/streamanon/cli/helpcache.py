"""Rendered ``--help`` pages, cached: ``streamanon [COMMAND ...] --help`` without typer.

The first ``--help`` of a command renders as always (typer and rich) and keeps what it wrote
to stdout; a later one with the same argv, terminal and environment prints it back, byte
for byte, without importing typer. An entry holds the files of every module loaded by its
rendering (path, mtime, size): an edited or reinstalled module makes it a miss. Stored
under ``$XDG_CACHE_HOME/streamanon/help`` (default ``~/.cache``); ``STREAMANON_NO_HELP_CACHE=1``
turns it off.

Design: docs/design/cli.md
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

#: Set (to anything but "" or "0") to render every help with typer and cache nothing.
OPT_OUT = "STREAMANON_NO_HELP_CACHE"

#: What typer, click and rich read from the environment when they render help (width,
#: colours, terminal detection, translations), and what changes how Python writes text.
RENDER_ENV = ("COLUMNS", "LINES", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "PY_COLORS",
              "GITHUB_ACTIONS", "TERMINAL_WIDTH", "_TYPER_FORCE_DISABLE_TERMINAL",
              "TYPER_USE_RICH", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS",
              "JUPYTER_LINES", "DATABRICKS_RUNTIME_VERSION", "LANG", "LANGUAGE", "LC_ALL",
              "LC_MESSAGES", "LC_CTYPE", "PYTHONIOENCODING", "PYTHONUTF8")

_FORMAT = 1
_MAX_WORDS = 4


def is_help(argv: Sequence[str]) -> bool:
    """Whether ``argv`` asks for a help page only: command names, then ``--help``.

    >>> is_help(["verify", "castle", "--help"]), is_help(["--help"])
    (True, True)
    >>> is_help(["z", "-o", "--help"]), is_help(["z", "in.csv", "--help"]), is_help([])
    (False, False, False)
    """
    if not argv or argv[-1] != "--help" or len(argv) > _MAX_WORDS + 1:
        return False
    return all(word[:1].isalpha() and word.isascii()
               and all(c.isalnum() or c in "-_" for c in word) for word in argv[:-1])


def enabled() -> bool:
    """Whether the cache is on (:data:`OPT_OUT` unset, no shell completion under way, a
    stdout to print to)."""
    return (os.environ.get(OPT_OUT, "") in ("", "0")
            and "_STREAMANON_COMPLETE" not in os.environ
            and sys.stdout is not None and sys.stderr is not None)


def directory() -> str:
    """Where entries live: ``$XDG_CACHE_HOME/streamanon/help``, else ``~/.cache/...``."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is to be ignored
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "streamanon", "help")


def _terminal() -> tuple[int, int] | None:
    for fd in (0, 1, 2):  # the streams rich asks, in its order
        try:
            return tuple(os.get_terminal_size(fd))  # type: ignore[return-value]
        except (AttributeError, ValueError, OSError):  # not a terminal
            continue
    return None


def key(argv: Sequence[str]) -> str:
    """Everything the rendering of ``streamanon ARGV`` depends on besides module files."""
    import streamanon

    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    out = sys.stdout
    env = sorted((name, value) for name, value in os.environ.items()
                 if name in RENDER_ENV or name.startswith("STREAMANON_"))
    parts: list[Any] = [
        _FORMAT, streamanon.__version__, streamanon.__file__, sys.version, sys.executable,
        tuple(sys.flags), sys.path[1:], sys.argv[:1], getattr(spec, "name", None),
        getattr(main, "__package__", None), list(argv), env, _terminal(),
        _isatty(out), getattr(out, "encoding", None), getattr(out, "errors", None),
    ]
    return repr(parts)


def _isatty(stream: TextIO | None) -> bool | None:
    try:
        return None if stream is None else stream.isatty()
    except ValueError:  # a closed stream
        return None


def _path(text_key: str) -> str:
    raw = text_key.encode("utf-8", "surrogateescape")
    name = f"{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}{len(raw) % 65536:04x}"
    return os.path.join(directory(), name)


def lookup(argv: Sequence[str]) -> str | None:
    """The cached page of ``streamanon ARGV``, or None (no entry, or one that is stale)."""
    text_key = key(argv)
    try:
        with open(_path(text_key), "rb") as f:
            data = f.read()
    except OSError:  # no entry yet (or an unreadable cache): render
        return None
    try:
        fmt, stored, deps, page = marshal.loads(data)
    except (ValueError, EOFError, TypeError):  # a damaged entry: render and replace it
        return None
    if fmt != _FORMAT or stored != text_key or not isinstance(page, str):
        return None
    for path, mtime, size in deps:
        try:
            st = os.stat(path)
        except OSError:  # a module gone: stale
            return None
        if st.st_mtime_ns != mtime or st.st_size != size:
            return None
    return page


class _Tee:
    """``stream`` as it is (tty, encoding, size), keeping a copy of the text written."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.parts: list[str] = []
        self.bypassed = False

    def write(self, text: str) -> int:
        written = self._stream.write(text)  # first: click probes with bytes (a TypeError)
        self.parts.append(text)
        return written

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    @property
    def buffer(self) -> Any:  # bytes written past the copy: nothing to cache
        self.bypassed = True
        return self._stream.buffer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Recording:
    """What one real rendering wrote; :meth:`store` keeps it when it was a help page."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.key = key(argv)
        self.out: _Tee | None = None
        self.err: _Tee | None = None

    def store(self) -> None:
        """Write the entry (atomically) if the run printed to stdout alone, by text."""
        out, err = self.out, self.err
        if out is None or err is None or out.bypassed or err.bypassed or err.parts:
            return
        page = "".join(out.parts)
        if not page:
            return
        deps = []
        for path in sorted({f for m in list(sys.modules.values())
                            if isinstance(f := getattr(m, "__file__", None), str)
                            and not f.startswith("<")}):  # "<stdin>": no file
            try:
                st = os.stat(path)
            except OSError:  # a module from a zip or a deleted file: cannot tell staleness
                return
            deps.append((path, st.st_mtime_ns, st.st_size))
        data = marshal.dumps((_FORMAT, self.key, deps, page))
        target = _path(self.key)
        tmp = f"{target}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        except OSError:  # a read-only or full cache: the help was printed, skip the entry
            try:
                os.unlink(tmp)
            except OSError:  # never created
                return


def recording(argv: Sequence[str]) -> Iterator[Recording]:
    """Copy what is written to stdout and stderr while the body renders ``streamanon ARGV``
    (a context manager)."""
    from contextlib import contextmanager

    @contextmanager
    def tees() -> Iterator[Recording]:
        rec = Recording(argv)
        saved = sys.stdout, sys.stderr
        if saved[0] is None or saved[1] is None:
            yield rec
            return
        rec.out, rec.err = _Tee(saved[0]), _Tee(saved[1])
        sys.stdout, sys.stderr = rec.out, rec.err  # type: ignore[assignment]
        try:
            yield rec
        finally:
            if sys.stdout is rec.out:
                sys.stdout = saved[0]
            if sys.stderr is rec.err:
                sys.stderr = saved[1]

    return tees()  # type: ignore[return-value]

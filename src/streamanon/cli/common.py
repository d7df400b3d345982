"""Shared CLI plumbing: summaries (table or --json), error exits, safe outputs, progress.

Design: docs/design/cli.md
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from streamanon.cli.exitcodes import ExitCode
from streamanon.errors import InputError, OnError

if TYPE_CHECKING:
    from streamanon.pipeline.file_outputs import OutputSet

ON_ERROR_HELP = (
    "What to do with a bad input line (malformed, unclosed quote, missing field, not UTF-8, "
    "non-finite or backwards time, oversized value): 'fail' stops with a one-line message "
    "naming the line (exit 2, nothing written); 'skip' writes it to the rejects file and goes "
    "on."
)
REJECTS_HELP = "With --on-error skip: write rejected lines here as JSON Lines."
TOLERANCE_HELP = (
    "Seconds a record may be late (behind the latest time seen). Late within the tolerance: "
    "re-stamped to the latest time and counted; later: rejected."
)
# deZent publication options, shared by `simulate`, `experiment dezent` and `cluster up|init`
# (only the simulations report what they measure: the *_HELP texts say it, the *_CHOICE ones,
# for a live cluster, do not)
PUBLICATION_CHOICE = ("How gateways hand tuples to the CE: 'direct' (each sends its own: the "
                      "CE knows every tuple's gateway) or 'mix' (sealed to the CE, padded, "
                      "shuffled by every gateway around the ring, one batch per cycle: the CE "
                      "cannot tell the gateway; costs ring bytes).")
PUBLICATION_HELP = PUBLICATION_CHOICE + " Reported: gateway linkability, bytes/day."
ORDER_CHOICE = ("Publication order: 'paper' (every pass from the coordinator's successor: "
                "the gateways right after it are favoured) or 'random' (every pass from a "
                "random gateway: no ring position favoured, same publications per value).")
ORDER_HELP = ORDER_CHOICE + (" Reported: position bias (max/min publication ratio over ring "
                             "positions).")
JSON_HELP = "Print the summary as one JSON object on stdout instead of a table."
JSON_DATA_HELP = (
    "Print the summary as one JSON object instead of a table: on stdout, or on stderr when "
    "stdout carries the rows (-o -)."
)
SUMMARY_HELP = "Also write the summary as JSON to this file (replaced only on success)."
INPUT_FORMAT_HELP = "Format of INPUT: csv or jsonl (default: by extension, else csv)."
OUTPUT_FORMAT_HELP = "Format of the output: csv or jsonl (default: by extension, else csv)."

on_error_option = typer.Option(OnError.fail, "--on-error", help=ON_ERROR_HELP)


def stderr_console() -> Any:
    """The rich console on stderr that progress, spinners and summary tables use, made on
    first use (a run with --json off a terminal never loads rich) and kept as this module's
    ``err_console`` (where a test may put its own)."""
    console = globals().get("err_console")
    if console is None:
        from rich.console import Console

        console = globals()["err_console"] = Console(stderr=True)
    return console


def __getattr__(name: str) -> Any:
    if name == "err_console":
        return stderr_console()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def on_terminal() -> bool:
    """Whether stderr is a terminal as rich sees it; rich is asked (and loaded) only when
    stderr is a TTY or an environment variable may force one, or its console exists."""
    if "err_console" not in globals() and not sys.stderr.isatty() and not any(
            os.environ.get(v) for v in ("FORCE_TERMINAL", "TTY_COMPATIBLE", "TTY_INTERACTIVE")):
        return False
    return bool(stderr_console().is_terminal)


#: Files at least this large get a progress bar (on a terminal): a second or more of work.
PROGRESS_MIN_BYTES = 32 << 20


@contextmanager
def file_progress(
    path: str | Path, description: str, min_bytes: int = PROGRESS_MIN_BYTES
) -> Iterator[Callable[[int], None] | None]:
    """A rich progress bar over the bytes of ``path`` when the run will take a while.

    Shown only on a terminal and for files of at least ``min_bytes``; yields the callback to
    give the reader (:func:`streamanon.io.iter_batches`, :class:`~streamanon.io.rows.RowReader`),
    or None.
    """
    size = os.path.getsize(path) if str(path) != "-" and os.path.isfile(path) else 0
    if size < min_bytes or not on_terminal():
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
               TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=stderr_console(), transient=True) as bar:
        task = bar.add_task(description, total=size)
        yield lambda n: bar.advance(task, n)


@contextmanager
def status(message: str) -> Iterator[None]:
    """A spinner with ``message`` on a terminal while a step runs; nothing otherwise."""
    if not on_terminal():
        yield
        return
    with stderr_console().status(message):
        yield


def reuse_freed_memory() -> None:
    """Keep the memory a file run frees for its next chunk instead of returning it to the OS.

    A run over a file allocates the same large arrays chunk after chunk. By default glibc
    maps every block over 128 KiB afresh and unmaps it when freed, and Arrow's jemalloc
    returns pages on its own schedule, so each chunk faults its pages in again (about half of
    those faults are saved here; docs/design/cli.md). Blocks up to 32 MiB come from the heap,
    which is trimmed only above 1 GiB free; Arrow allocates with the same malloc. For one-shot
    file runs only: a live Kafka pipeline keeps the defaults, so it gives memory back
    between bursts.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None)
            libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
            libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
        except (OSError, AttributeError):  # not glibc: its own defaults
            pass
    if "pyarrow" in sys.modules:
        import pyarrow

        pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    else:  # Arrow reads it when it makes its pool: a run whose chunks all take the C
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"  # parser never imports pyarrow


def fail(message: str, code: int = ExitCode.USAGE) -> NoReturn:
    """Exit with a one-line ``error:`` message on stderr (exit 2 unless told otherwise)."""
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(int(code))


def warn(message: str, summary: dict[str, Any] | None = None) -> None:
    """A ``warning:`` line on stderr, also kept in ``summary["warnings"]`` when given."""
    print(f"warning: {message}", file=sys.stderr)
    if summary is not None:
        summary.setdefault("warnings", []).append(message)


def cli_wording(message: str, names: Mapping[str, str]) -> str:
    """A core's error message with its parameter names replaced by the user's option names.

    >>> cli_wording("p_pub must be in (0, 1], got 0.0", {"p_pub": "--p-pub"})
    '--p-pub must be in (0, 1], got 0.0'
    """
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
    return pattern.sub(lambda m: names[m.group(1)], message) if names else message


def require_input(path: str | Path, what: str = "INPUT") -> None:
    """Fail (exit 2) unless ``path`` is ``-`` or a readable file, naming ``what``."""
    if str(path) == "-":
        return
    p = Path(path)
    if not p.exists():
        fail(f"{what} {path}: no such file")
    if p.is_dir():
        fail(f"{what} {path}: is a folder; give a file")
    if not os.access(p, os.R_OK):
        fail(f"{what} {path}: permission denied")


def check_format(value: str | None, option: str) -> str | None:
    """Fail (exit 2) unless ``value`` is None, csv or jsonl; returns it lower-cased."""
    if value is None:
        return None
    if value.lower() not in ("csv", "jsonl"):
        fail(f"{option} {value}: use csv or jsonl")
    return value.lower()


def _os_error(exc: OSError, outs: OutputSet) -> str:
    name = outs.display(exc.filename) if exc.filename else None
    reason = exc.strerror or str(exc)
    return f"{name}: {reason}" if name else reason


@contextmanager
def writing(inputs: Iterable[str | Path | None], *, skip_hint: bool = False
            ) -> Iterator[OutputSet]:
    """Run a command's work inside an :class:`OutputSet` and turn failures into exit codes.

    ``inputs`` are the files the command reads (no output may be one of them). Inside the
    block, register every output with ``outs.add(target, "--option")`` and write to the path
    it returns. Bad input or a refused output exits 2, Ctrl-C 130, SIGTERM 143; each says on
    stderr which files were not written (they keep their previous content). ``skip_hint``
    adds the --on-error skip hint to a bad-line error.
    """
    from streamanon.errors import UnreadableInputError
    from streamanon.pipeline.file_outputs import OutputError, OutputSet, Terminated

    outs = OutputSet(inputs)
    try:
        with outs:
            yield outs
    except OutputError as exc:
        fail(str(exc))
    except UnreadableInputError as exc:
        _fail_after(str(exc), outs)
    except InputError as exc:
        hint = " (fix the line, or give --on-error skip to set bad lines aside)" if (
            skip_hint) else ""
        _fail_after(f"{exc}{hint}", outs)
    except BrokenPipeError:
        if outs.targets:
            print(f"error: standard output was closed by its reader; "
                  f"{outs.describe_failure()}", file=sys.stderr)
        _quiet_broken_pipe()
    except OSError as exc:
        _fail_after(_os_error(exc, outs), outs)
    except (KeyboardInterrupt, Terminated) as exc:
        outs.settle()  # the signal may have come before the set could clean up (its __exit__)
        code = ExitCode.TERMINATED if isinstance(exc, Terminated) else ExitCode.INTERRUPTED
        what = "terminated" if code == ExitCode.TERMINATED else "interrupted"
        print(f"{what}: {outs.describe_failure()}", file=sys.stderr)
        raise typer.Exit(int(code)) from None


def _quiet_broken_pipe() -> NoReturn:
    """The reader of stdout went away (``| head``): stop quietly, as Unix tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(int(ExitCode.BROKEN_PIPE))


def _fail_after(message: str, outs: OutputSet) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    print(f"  {outs.describe_failure()}", file=sys.stderr)
    raise typer.Exit(int(ExitCode.USAGE))


def _flatten(prefix: str, value: Any, rows: list[tuple[str, str]]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, rows)
    elif isinstance(value, float):
        rows.append((prefix, f"{value:,.4g}" if abs(value) < 1e5 else f"{value:,.0f}"))
    elif isinstance(value, int) and not isinstance(value, bool):
        rows.append((prefix, f"{value:,}"))
    elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        rows.append((prefix, "\n".join(value)))
    else:
        rows.append((prefix, str(value)))


def write_summary(path: str | Path | None, summary: Mapping[str, Any]) -> None:
    """Write the summary as JSON to ``path`` (``--summary``: a path from ``outs.add``)."""
    if path is not None:
        Path(path).write_text(json.dumps(summary, default=str) + "\n", encoding="utf-8")


def print_summary(title: str, summary: Mapping[str, Any], as_json: bool, *,
                  stdout_has_data: bool = False) -> None:
    """The run's summary: ``--json`` as one JSON object, else a two-column table on stderr.

    The JSON goes to stdout, unless ``stdout_has_data`` (the rows went to stdout with
    ``-o -``): then to stderr, so stdout stays rows only. Call it after the outputs are
    committed (after the :func:`writing` block), so a closed stdout cannot undo them.
    The table leaves out the deprecated keys (:data:`~streamanon.records.DEPRECATED_KEYS`)
    whose new key it shows; the JSON keeps them.
    """
    if as_json:
        try:
            print(json.dumps(summary, default=str),
                  file=sys.stderr if stdout_has_data else sys.stdout, flush=True)
        except BrokenPipeError:
            _quiet_broken_pipe()
        return
    from streamanon.records import DEPRECATED_KEYS

    shown = {k: v for k, v in summary.items()
             if not (k in DEPRECATED_KEYS and DEPRECATED_KEYS[k] in summary)}
    rows: list[tuple[str, str]] = []
    _flatten("", shown, rows)
    bold = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
    try:
        sys.stderr.write(summary_table(title, rows, width=_stderr_width(), bold=bold))
        sys.stderr.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()


def _stderr_width() -> int:
    """``$COLUMNS``, else the terminal's width on stderr, else 80 (as rich decides)."""
    try:
        return max(20, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80


def summary_table(title: str, rows: Sequence[tuple[str, str]], *, width: int = 80,
                  bold: bool = False) -> str:
    """A run's summary as a two-column box (keys left, values right-aligned) under its
    centred title, at most ``width`` columns wide: over it, long values wrap and long keys
    end in an ellipsis. Plain text, drawn here rather than by rich: rich's import and layout
    cost about 0.1 s of CPU, more than a short run's work.

    >>> print(summary_table("run", [("read", "1,000"), ("warnings", "a\\nbb")]), end="")
            run
    ┌──────────┬───────┐
    │ read     │ 1,000 │
    │ warnings │     a │
    │          │    bb │
    └──────────┴───────┘
    """
    import textwrap

    keys = [k for k, _ in rows] or [""]
    values = [v.split("\n") for _, v in rows] or [[""]]
    kw = max(map(len, keys))
    vw = max(len(line) for lines in values for line in lines)
    room = max(width - 7, 2)
    if kw + vw > room:
        vw = max(1, min(vw, max(room - kw, room // 2)))
        kw = max(1, min(kw, room - vw))
    out = [f"{title:^{kw + vw + 7}}".rstrip() + "\n" if title else "",
           f"┌{'─' * (kw + 2)}┬{'─' * (vw + 2)}┐\n"]
    on, off = ("\033[1m", "\033[0m") if bold else ("", "")
    for key, lines in zip(keys, values, strict=False):
        key = key if len(key) <= kw else key[:kw - 1] + "…"
        wrapped = [w for line in lines for w in (textwrap.wrap(line, vw) or [""])]
        for i, line in enumerate(wrapped):
            cell = f"{key:<{kw}}" if i == 0 else " " * kw
            out.append(f"│ {on}{cell}{off} │ {line:>{vw}} │\n")
    out.append(f"└{'─' * (kw + 2)}┴{'─' * (vw + 2)}┘\n")
    return "".join(out)

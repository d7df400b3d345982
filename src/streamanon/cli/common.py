"""Shared CLI plumbing: summaries (table or --json), error exits, the bad-input options."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from streamanon.io import OnError

ON_ERROR_HELP = (
    "What to do with a bad input line (malformed, missing field, non-finite or backwards "
    "time, oversized value): 'fail' stops with a one-line message naming the line (exit 2); "
    "'skip' writes it to the rejects file and goes on."
)
REJECTS_HELP = "With --on-error skip: write rejected lines here as JSON Lines."
TOLERANCE_HELP = (
    "Seconds a record may be late (behind the latest time seen). Late within the tolerance: "
    "re-stamped to the latest time and counted; later: rejected."
)
JSON_HELP = "Print the summary as one JSON object on stdout instead of a table."

on_error_option = typer.Option(OnError.fail, "--on-error", help=ON_ERROR_HELP)

err_console = Console(stderr=True)


@contextmanager
def file_progress(path: str | Path, description: str) -> Iterator[Callable[[int], None] | None]:
    """A rich progress bar over the bytes of ``path`` when the run will take a while.

    Shown only on a terminal and for files over 64 MiB (a few seconds of work); yields the
    callback to give :func:`streamanon.io.iter_batches`, or None.
    """
    size = os.path.getsize(path) if str(path) != "-" and os.path.isfile(path) else 0
    if size < 64 << 20 or not err_console.is_terminal:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
               TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task(description, total=size)
        yield lambda n: bar.advance(task, n)


def fail(message: str, code: int = 2) -> NoReturn:
    """Exit with a one-line ``error:`` message on stderr."""
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def _flatten(prefix: str, value: Any, rows: list[tuple[str, str]]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, rows)
    elif isinstance(value, float):
        rows.append((prefix, f"{value:,.4g}" if abs(value) < 1e5 else f"{value:,.0f}"))
    elif isinstance(value, int) and not isinstance(value, bool):
        rows.append((prefix, f"{value:,}"))
    else:
        rows.append((prefix, str(value)))


def print_summary(title: str, summary: Mapping[str, Any], as_json: bool) -> None:
    """One JSON object on stdout (``--json``), else a two-column table on stderr.

    The table goes to stderr so that ``-o -`` (published rows on stdout) stays clean.
    """
    if as_json:
        print(json.dumps(summary, default=str))
        return
    table = Table(title=title, show_header=False)
    table.add_column("", style="bold")
    table.add_column("", justify="right")
    rows: list[tuple[str, str]] = []
    _flatten("", summary, rows)
    for k, v in rows:
        table.add_row(k, v)
    err_console.print(table)

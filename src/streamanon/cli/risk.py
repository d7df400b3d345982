"""``streamanon risk``: re-identification risk of a released stream, per window of rows.

The figures are :func:`streamanon.risk.reidentification_risk`'s; this module reads the
columns it needs from the release (CSV with pyarrow's reader, or JSON Lines) and prints them.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import typer

from streamanon.cli.app import app
from streamanon.cli.common import JSON_HELP, fail, print_summary
from streamanon.errors import ConfigError

WINDOW_FIELDS = ["start", "rows", "classes", "smallest_class", "sample_uniques", "prosecutor",
                 "prosecutor_avg", "journalist", "marketer", "not_in_population"]


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def _text(value: Any) -> str:
    """A JSON value as the text a CSV release would show (numbers without a needless .0)."""
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def read_columns(path: str | Path, names: list[str], fmt: str | None = None) -> list[Any]:
    """The named columns of a release file, as text (pyarrow arrays for CSV, lists for JSON
    Lines); a missing column or an unreadable line exits 2."""
    name = str(path)
    fmt = fmt or ("jsonl" if name.endswith((".jsonl", ".ndjson")) else "csv")
    if fmt == "jsonl":
        cols: list[list[str]] = [[] for _ in names]
        source = sys.stdin if name == "-" else open(name, encoding="utf-8")  # noqa: SIM115
        with source as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    fail(f"{name}:{number}: not JSON ({exc.msg})")
                if not isinstance(obj, dict):
                    fail(f"{name}:{number}: not a JSON object")
                for col, key in zip(cols, names, strict=True):
                    if key not in obj:
                        fail(f"{name}:{number}: no column {key!r}")
                    col.append(_text(obj[key]))
        return cols
    import pyarrow as pa
    import pyarrow.csv as pacsv

    pa.enable_signal_handlers(False)  # a Ctrl-C during the read stays Python's (design/pipeline.md)
    source = pa.py_buffer(sys.stdin.buffer.read()) if name == "-" else name
    try:
        table = pacsv.read_csv(
            pa.BufferReader(source) if name == "-" else source,
            convert_options=pacsv.ConvertOptions(
                include_columns=names,  # dictionary-encoded by the reader: no string copies
                column_types=dict.fromkeys(names, pa.dictionary(pa.int32(), pa.string())),
                strings_can_be_null=False, quoted_strings_can_be_null=False),
            read_options=pacsv.ReadOptions(block_size=16 << 20))
    except (pa.ArrowInvalid, KeyError) as exc:
        fail(f"{name}: {exc}")
    return [table.column(n) for n in names]


def release_times(column: Any) -> Any:
    """Each row's time in seconds: a number, or a released range ``[lo,hi]`` at ``hi`` (the
    latest time it may stand for); each distinct text is parsed once."""
    import numpy as np

    from streamanon.risk import class_codes

    codes = class_codes([column]) if len(column) else np.zeros(0, dtype=np.int64)
    parsed = np.empty(int(codes.max()) + 1 if len(codes) else 0)
    first = np.full(len(parsed), -1, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)  # each class's first row
    for code, row in enumerate(first.tolist()):
        v = column[row]
        v = v.as_py() if hasattr(v, "as_py") else v
        text = "" if v is None else str(v).strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1].rsplit(",", 1)[-1]
        try:
            parsed[code] = float(text)
        except ValueError:
            fail(f"row {row + 1}: time {v!r} is neither a number nor a [lo,hi] range")
        if not math.isfinite(parsed[code]):
            fail(f"row {row + 1}: time {v!r} is not finite")
    return parsed[codes]


def file_risk(path: str | Path, qis: list[str], *, fmt: str | None = None,
              window: int | None = None) -> dict[str, Any]:
    """The risk summary of a release file (the figures of ``streamanon risk``'s summary:
    the quasi-identifiers, the whole release's figures and, with ``window``, the worst
    window's); a missing column exits 2."""
    from streamanon.risk import reidentification_risk

    try:
        report = reidentification_risk(read_columns(path, qis, fmt), window=window)
    except ConfigError as exc:
        fail(str(exc))
    out: dict[str, Any] = {
        "qi": qis, "windows": len(report.windows),
        "overall": {k: v for k, v in report.overall.to_dict().items() if k != "start"}}
    if window is not None:
        out["window_rows"] = window
        out["worst_window"] = report.worst()
    return out


@app.command("risk", help="""Re-identification risk of a released stream: prosecutor,
journalist and marketer risk, sample uniques and smallest class, per window of rows.

Rows equal on the --qi columns (their released text) form a class; with f its size in a
window of n rows and F its size in the population (--population; without it the release is
its own population, and journalist risk equals prosecutor risk): prosecutor = 1/min f,
prosecutor_avg = classes/n, journalist = 1/min F, marketer = (1/n) sum f/F, sample_uniques =
share of rows with f = 1 (El Emam's definitions; docs: Guarantees). With --id a class's
size counts its distinct individuals, and n the (individual, class) pairs. The summary gives the
whole release and the worst window; -o writes one CSV row per window.

Examples:

    streamanon risk out.csv --qi primary_use,square_feet,year_built --window 1000

    streamanon risk out.csv --qi square_feet,year_built --every 86400 --time timestamp --json
""")
def risk_command(
    output: str = typer.Argument(..., metavar="OUTPUT", help="The released rows (CSV with a "
                                 "header, or JSON Lines; - = stdin)."),
    qi: list[str] = typer.Option(..., "--qi", help="Quasi-identifier columns (repeat or "
                                 "comma-separate)."),
    id_field: str = typer.Option(None, "--id", help="The column naming the individual: a "
                                 "class's size is then its distinct individuals (one released "
                                 "many times counts once); default: one row, one individual."),
    window: int = typer.Option(None, "--window", min=1, help="Figures per run of this many "
                               "consecutive rows."),
    every: float = typer.Option(None, "--every", help="Figures per window of this many "
                                "seconds of the --time column (aligned on multiples of it)."),
    time_column: str = typer.Option(None, "--time", help="With --every: the time column (a "
                                    "number, or a range [lo,hi] counted at hi)."),
    population: Path = typer.Option(None, "--population", help="Population class sizes: a "
                                    "CSV or JSON Lines file with the --qi columns (as "
                                    "released) and a 'count' column (without one, each row "
                                    "counts 1)."),
    windows_out: str = typer.Option(None, "--output", "-o", help="Write one CSV row per "
                                    "window here (- = stdout)."),
    in_format: str = typer.Option(None, "--input-format", help="csv or jsonl (default: by "
                                  "extension, else csv)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    from streamanon.risk import reidentification_risk

    qis = _split(qi)
    if not qis:
        fail("--qi names no column")
    if window is not None and every is not None:
        fail("give --window or --every, not both")
    if every is not None and not (math.isfinite(every) and every > 0):
        fail("--every must be > 0 seconds")
    if every is not None and not time_column:
        fail("--every needs --time (the column holding each row's time)")
    if in_format not in (None, "csv", "jsonl"):
        fail(f"--input-format must be csv or jsonl, not {in_format!r}")
    names = qis + ([time_column] if every is not None and time_column not in qis else [])
    names += [id_field] if id_field and id_field not in names else []
    try:
        cols = read_columns(output, names, in_format)
        times = None
        if every is not None:
            times = release_times(cols[names.index(time_column)])
        pop = None
        if population is not None:
            pop = _read_population(population, qis)
        report = reidentification_risk(cols[:len(qis)], window=window, every=every,
                                       times=times, population=pop,
                                       ids=cols[names.index(id_field)] if id_field else None)
    except ConfigError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename}: {exc.strerror}")
    if windows_out is not None:
        _write_windows(windows_out, report.windows or [report.overall])
    scope = (f"per {window} rows" if window else f"per {every:g} s of {time_column}" if every
             else "whole release")
    summary: dict[str, Any] = {
        "rows": report.overall.rows, "qi": qis, "windows": len(report.windows),
        "individuals": f"distinct {id_field}" if id_field else "one per row",
        "population": str(population) if population else "the release itself",
        "overall": {k: v for k, v in report.overall.to_dict().items() if k != "start"},
        "worst_window": report.worst(),
    }
    print_summary(f"risk ({scope})", summary, as_json,
                  stdout_has_data=windows_out == "-")


def _read_population(path: Path, qis: list[str]) -> Any:
    from streamanon.risk import population_counts

    fmt = "jsonl" if path.suffix in (".jsonl", ".ndjson") else "csv"
    with open(path, encoding="utf-8") as fh:
        header = fh.readline()
    has_count = ('"count"' in header) if fmt == "jsonl" else (
        "count" in [h.strip().strip('"') for h in header.rstrip("\r\n").split(",")])
    cols = read_columns(path, qis + (["count"] if has_count else []), fmt)
    counts = None
    if has_count:
        raw = cols.pop()
        raw = raw.to_pylist() if hasattr(raw, "to_pylist") else raw
        try:
            counts = [float(x) for x in raw]
        except ValueError:
            fail(f"{path}: a count is not a number")
    texts = [c.to_pylist() if hasattr(c, "to_pylist") else c for c in cols]
    try:
        return population_counts(texts, counts)
    except ConfigError as exc:
        fail(f"{path}: {exc}")


def _write_windows(target: str, windows: list[Any]) -> None:
    import csv

    fh = sys.stdout if target == "-" else open(target, "w", encoding="utf-8", newline="")  # noqa: SIM115
    try:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(WINDOW_FIELDS)
        for w in windows:
            d = w.to_dict()
            writer.writerow([d[k] if not isinstance(d[k], float) else f"{d[k]:.6g}"
                             for k in WINDOW_FIELDS])
    finally:
        if fh is not sys.stdout:
            fh.close()

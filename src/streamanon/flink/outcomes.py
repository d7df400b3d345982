"""The outcome lines the Flink jobs write, and their merge into one ``streamanon z`` file.

Every input line ends as exactly one outcome line, keyed by its line number (``seq``)::

    seq \\t P \\t level \\t restamped \\t ["t_text", "u", "a'"]    published at hierarchy level
    seq \\t S \\t restamped                                     suppressed
    seq \\t R \\t ["text", "reason"]                            rejected by the reader's checks
    seq \\t H | B                                              CSV header / blank line
    # \\t {json}                                              a note (rule sets), no input line

This module needs no pyflink: it is the pure half of the sink. The job writes outcome lines
through Flink's ``FileSink``, whose part files are exactly-once (a file becomes visible only
when the checkpoint that covers it completes; after a restore, in-progress files are truncated
to the checkpointed length, and files written after the last checkpoint stay hidden
``.part-*.inprogress.*`` files). :func:`merge_outcomes` reads only the visible part files, and
*checks* rather than assumes the exactly-once property: line numbers must be unique and
contiguous from 1, else it raises :class:`OutcomeGap`. Nothing is deduplicated, so a
duplicate or a loss cannot be hidden by the merge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streamanon.io import InputError, OnError, RecordWriter, RejectLog
from streamanon.records import Rejected, RunStats

PUBLISHED, SUPPRESSED, REJECTED, HEADER, BLANK = "P", "S", "R", "H", "B"
NOTE = "#"  # first field of a note line: about the job (rule sets), not about an input line


def published_line(seq: int, level: int, restamped: bool, t_text: str, u: str, a: str) -> str:
    return f"{seq}\t{PUBLISHED}\t{level}\t{int(restamped)}\t{json.dumps([t_text, u, a])}"


def suppressed_line(seq: int, restamped: bool) -> str:
    return f"{seq}\t{SUPPRESSED}\t{int(restamped)}"


def rejected_line(rejected: Rejected) -> str:
    return f"{rejected.line}\t{REJECTED}\t{json.dumps([rejected.text, rejected.reason])}"


def marker_line(seq: int, kind: str) -> str:
    return f"{seq}\t{kind}"


def note_line(note: dict) -> str:
    """A note in the outcome stream (e.g. a rule set accepted, refused or installed)."""
    return f"{NOTE}\t{json.dumps(note, sort_keys=True)}"


class OutcomeGap(RuntimeError):
    """The part files do not hold exactly one outcome per input line (a loss or a duplicate)."""


def part_files(out_dir: str | Path) -> list[Path]:
    """The committed part files under ``out_dir`` (hidden in-progress files are skipped)."""
    root = Path(out_dir)
    return sorted(
        p for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def read_outcomes(out_dir: str | Path,
                  notes: list[dict] | None = None) -> list[tuple[int, str]]:
    """All outcome lines as ``(seq, line)``, sorted by ``seq``; checks one outcome per line.

    Note lines are not outcomes: they go to ``notes`` (in file order) when given."""
    rows: list[tuple[int, str]] = []
    for path in part_files(out_dir):
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                line = line.rstrip("\n")
                if line.startswith(NOTE + "\t"):
                    if notes is not None:
                        notes.append(json.loads(line[2:]))
                elif line:
                    rows.append((int(line[: line.index("\t")]), line))
    rows.sort(key=lambda r: r[0])
    for i, (seq, _) in enumerate(rows, start=1):
        if seq != i:
            what = "duplicate" if seq < i else "missing"
            raise OutcomeGap(
                f"{what} outcome at input line {min(seq, i)}: the part files under {out_dir} "
                f"do not hold exactly one outcome per line ({len(rows)} outcomes)"
            )
    return rows


@dataclass
class MergeResult:
    """What a merge wrote, with the accounting of the run."""

    stats: RunStats
    published_per_level: list[int] = field(default_factory=list)
    restamped: int = 0
    first_error: InputError | None = None


def merge_outcomes(
    out_dir: str | Path,
    output: str | Path,
    *,
    out_format: str = "csv",
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    source: str = "input",
) -> MergeResult:
    """Write the published rows of ``out_dir`` in input order to ``output`` (as ``streamanon z``).

    Under ``on_error=fail`` the rows before the first rejected line are written and the result
    carries that line's :class:`~streamanon.io.InputError` (the caller raises it), exactly as
    the pure-Python path stops; under ``skip`` rejected lines go to ``rejects_path``.
    """
    rows = read_outcomes(out_dir)
    return merge_rows((line for _, line in rows), output, out_format=out_format,
                      on_error=on_error, rejects_path=rejects_path, source=source)


def merge_rows(
    lines: Iterable[str],
    output: str | Path,
    *,
    out_format: str = "csv",
    on_error: OnError = OnError.fail,
    rejects_path: str | Path | None = None,
    source: str = "input",
) -> MergeResult:
    """:func:`merge_outcomes` on outcome lines already in input order."""
    stats = RunStats()
    result = MergeResult(stats)
    per_level = result.published_per_level
    rejects = RejectLog(rejects_path, source)
    try:
        with RecordWriter(output, out_format) as writer:
            for kind, fields in _parse(lines):
                if kind == PUBLISHED:
                    level = int(fields[0])
                    if level >= len(per_level):
                        per_level.extend([0] * (level + 1 - len(per_level)))
                    per_level[level] += 1
                    result.restamped += int(fields[1])
                    t_text, u, a = json.loads(fields[2])
                    writer.write_columns([t_text], [u], [a])
                    stats.count_published()
                elif kind == SUPPRESSED:
                    result.restamped += int(fields[0])
                    stats.count_suppressed()
                elif kind == REJECTED:
                    text, reason = json.loads(fields[1])
                    rejected = Rejected(int(fields[0]), text, reason)
                    if OnError(on_error) is OnError.fail:
                        result.first_error = InputError(rejected, source)
                        break
                    rejects(rejected)
                    stats.count_rejected()
                else:
                    continue
                stats.count_read()
    finally:
        rejects.close()
        rejects.warn_summary()
    return result


def _parse(lines: Iterable[str]) -> Iterator[tuple[str, list[str]]]:
    for line in lines:
        seq, kind, *rest = line.split("\t", 4)
        if kind == REJECTED:
            yield kind, [seq, *rest]
        else:
            yield kind, rest

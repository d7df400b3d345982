"""Input for the batched Flink jobs: a file cut into byte splits, a stream cut into batches.

A file is read as numbered *splits* of ``split_bytes`` bytes: split ``k`` holds the whole
lines whose first byte lies in ``[k * split_bytes, (k + 1) * split_bytes)`` (a line that
crosses the end belongs to the split where it starts), so the splits cover every line once
whatever the line lengths, and any process can read split ``k`` without reading the ones
before it. The job's source emits only the split numbers; the reading step opens the file
itself, so records never cross into Flink one by one.

:func:`line_blocks` turns a split's bytes into blocks of whole lines exactly as
``streamanon z`` reads a file (the same :func:`streamanon.io.readers.line_chunks`: ``\\r\\n``
line ends, a last line without a line end), so the parsers see what the pure path sees.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "x.csv")
>>> _ = open(path, "wb").write(b"t,u,a\\n1,alice,x\\n2,bob,y\\n3,carol,z")
>>> [read_split(path, k, 8) for k in range(split_count(path, 8))]
[b't,u,a\\n1,alice,x\\n', b'', b'2,bob,y\\n', b'3,carol,z', b'']
>>> list(line_blocks(b"a\\r\\nb\\r\\n\\nc"))
[b'a\\nb\\n', b'c']
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path

from streamanon.io.readers import line_chunks

#: the smallest and largest split the client chooses (see :func:`choose_split_bytes`)
MIN_SPLIT_BYTES = 64 << 10
MAX_SPLIT_BYTES = 64 << 20


def split_count(path: str | Path, split_bytes: int) -> int:
    """How many splits of ``split_bytes`` cover the file (at least one)."""
    size = os.path.getsize(path)
    return max(1, -(-size // split_bytes))


def choose_split_bytes(path: str | Path, batch_size: int) -> int:
    """Bytes per split so that a split holds about ``batch_size`` lines (from the mean line
    length of the file's first 64 KiB), within :data:`MIN_SPLIT_BYTES` .. :data:`MAX_SPLIT_BYTES`.
    """
    with open(path, "rb") as fh:
        head = fh.read(64 << 10)
    mean = len(head) / max(1, head.count(b"\n")) if head else 64
    return int(min(MAX_SPLIT_BYTES, max(MIN_SPLIT_BYTES, mean * batch_size)))


def read_split(path: str | Path, index: int, split_bytes: int) -> bytes:
    """The whole lines (with their line ends) that start in split ``index``."""
    start, end = index * split_bytes, (index + 1) * split_bytes
    with open(path, "rb") as fh:
        pos = 0
        if start > 0:
            fh.seek(start - 1)
            pos = start - 1 + len(fh.readline())  # the first line starting at or after start
        if pos >= end:
            return b""
        fh.seek(pos)
        data = fh.read(end - pos)
        if data and not data.endswith(b"\n"):
            data += fh.readline()  # the last line starts in this split: read it whole
        return data


def line_blocks(data: bytes) -> Iterator[bytes]:
    """Blocks of whole lines of ``data`` as the file reader cuts them: ``\\n``-separated,
    ``\\r\\n`` read as ``\\n``; each block counts ``block.count(b"\\n") + 1`` lines."""
    for _, block in line_chunks(io.BytesIO(data)):
        yield block  # type: ignore[misc]


def block_lines(block: bytes | str) -> int:
    """The number of lines in a block of :func:`line_blocks` (or of joined stream lines)."""
    return block.count(b"\n" if isinstance(block, bytes) else "\n") + 1


def write_progress(path: str | None, done: int, total: int) -> None:
    """Record ``done`` of ``total`` splits read in ``path``, for the client's progress bar
    (best effort: replaced atomically, errors ignored; a progress file is not state)."""
    if path is None:
        return
    try:
        tmp = f"{path}.tmp"
        Path(tmp).write_text(f"{done} {total}\n")
        os.replace(tmp, path)
    except OSError:
        pass


def read_progress(path: str | Path) -> tuple[int, int] | None:
    """What :func:`write_progress` wrote: ``(done, total)``, or None."""
    try:
        done, total = Path(path).read_text().split()
        return int(done), int(total)
    except (OSError, ValueError):
        return None

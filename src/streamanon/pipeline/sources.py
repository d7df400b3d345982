"""Sources: where a run's lines come from.

* :class:`FileSource` — a file, stdin (``-``) or an open stream, in large chunks of whole
  lines (:class:`~streamanon.pipeline.chunks.LineChunk`), positioned by line number.
* A ``kafka://`` topic is read by :class:`~streamanon.pipeline.kafka.client.KafkaSource`
  (raw messages, positioned by partition and offset), which the exactly-once runner
  (:mod:`streamanon.pipeline.kafka.exactly_once`) merges into batches.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

from streamanon.io.readers import line_chunks
from streamanon.pipeline.chunks import LineChunk
from streamanon.pipeline.positions import LinePositions


class FileSource:
    """The lines of a file, of stdin (``-``) or of an open stream, in large chunks.

    Files are read ``chunk_chars`` (16 MiB) at a time; a pipe or terminal as data arrives
    (:func:`~streamanon.io.readers.line_chunks`). ``progress`` is told the bytes read.
    """

    def __init__(self, source: str | Path | TextIO | BinaryIO, name: str | None = None,
                 progress: Callable[[int], None] | None = None,
                 chunk_chars: int = 1 << 24) -> None:
        self.source = source
        self.chunk_chars = chunk_chars
        if name is None:
            name = "stdin" if str(source) == "-" else (
                str(source) if isinstance(source, str | Path) else "input")
        self.positions = LinePositions(name)
        self.progress = progress

    @property
    def name(self) -> str:
        return self.positions.name

    @contextlib.contextmanager
    def _open(self) -> Iterator[TextIO | BinaryIO]:
        src = self.source
        if isinstance(src, str | Path):
            if str(src) == "-":
                yield sys.stdin.buffer
                return
            with open(src, "rb") as fh:
                yield fh
        else:
            yield src

    def chunks(self) -> Iterator[LineChunk]:
        with self._open() as fh:
            for first, data in line_chunks(fh, self.progress, self.name, self.chunk_chars):
                yield LineChunk(first, data)




__all__ = ["FileSource"]

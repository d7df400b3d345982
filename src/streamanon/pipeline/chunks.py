"""What flows from a source through a stage to the sinks: chunks of input lines in, output
lines per destination out.

* :class:`LineChunk` — whole input lines and their positions (a file's chunk, or Kafka
  messages turned into lines by :func:`message_chunk`).
* :class:`Lines` — output lines for one destination, with their input positions.
* :class:`Outputs` — what one chunk produced, per destination (:data:`PUBLISHED`,
  :data:`SUPPRESSED`, :data:`REJECTS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamanon.records import Rejected

PUBLISHED, SUPPRESSED, REJECTS = "published", "suppressed", "rejects"


@dataclass
class LineChunk:
    """Whole lines (``\\n``-separated, no final newline), the first numbered ``first``.

    ``codes[i]`` is the position of line ``first + i`` (``None``: a line's position is its
    number, as in files). ``rejected`` are lines refused before parsing, by line number;
    they are blank in ``data``. ``headers`` counts lines recognized as repeated headers.
    """

    first: int
    data: bytes | str
    codes: np.ndarray | None = None
    rejected: list[Rejected] = field(default_factory=list)
    headers: int = 0

    def code_of(self, lines: np.ndarray | Sequence[int] | range) -> np.ndarray:
        idx = np.asarray(lines, dtype=np.int64)
        return idx if self.codes is None else self.codes[idx - self.first]


class Lines:
    """Output lines for one destination: ``text`` (each line ends in a newline), their input
    positions (``codes``), and the CSV header a file gets before its first line (when this is
    the first output of the destination).

    The lines may be given as their UTF-8 bytes (the Arrow lane's CSV, as Arrow wrote it):
    sinks take them as they are (:meth:`data`), and ``text`` decodes them only when asked,
    which saves decoding 40 MB of output and encoding it back on a 2,000,000-tuple run.

    >>> lines = Lines(memoryview(b"1,a,x\\n"), np.array([1]))
    >>> bytes(lines.data()), lines.text, len(lines)
    (b'1,a,x\\n', '1,a,x\\n', 1)
    """

    __slots__ = ("_text", "codes", "header")

    def __init__(self, text: str | bytes | memoryview, codes: np.ndarray,
                 header: str | None = None) -> None:
        self._text = text
        self.codes = codes
        self.header = header

    @property
    def text(self) -> str:
        if not isinstance(self._text, str):
            self._text = str(self._text, "utf-8")
        return self._text

    def data(self) -> str | bytes | memoryview:
        """The lines as given: a string, or their UTF-8 bytes."""
        return self._text

    def utf8(self) -> bytes | memoryview:
        """The lines as UTF-8 bytes."""
        return self._text.encode("utf-8") if isinstance(self._text, str) else self._text

    def __len__(self) -> int:
        return len(self.codes)

    def __reduce__(self) -> tuple[Any, ...]:  # bytes views do not pickle: the text does
        return (Lines, (self.text, self.codes, self.header))

    def __repr__(self) -> str:
        return f"Lines({len(self)} lines, header={self.header!r})"


class Outputs(dict[str, list[Lines]]):
    """What one chunk produced, per destination, in order."""

    def add(self, dest: str, text: str | bytes | memoryview, codes: np.ndarray,
            header: str | None = None) -> None:
        if text or header is not None:
            self.setdefault(dest, []).append(Lines(text, codes, header))


def message_chunk(values: Sequence[bytes], codes: np.ndarray, max_bytes: int,
                  header: bytes | None = None) -> LineChunk:
    """Messages as lines: good ones joined, refused ones blank with their reason.

    A message must be one non-empty line of UTF-8 text of at most ``max_bytes`` bytes
    (:func:`streamanon.pipeline.kafka.client.check_messages`); ``header`` (e.g. ``b"t,u,a"``) is a
    producer's CSV header, skipped and counted. The common case (every message clean) costs
    a join and a few scans of the joined bytes, no Python per message.

    >>> ch = message_chunk([b"1,a,x", b"", b"2,b,y"], np.arange(3), 100)
    >>> ch.data, [(r.line, r.reason) for r in ch.rejected]
    ('1,a,x\\n\\n2,b,y', [(1, 'empty message')])
    """
    from streamanon.pipeline.kafka.client import check_messages

    blob = b"\n".join(values)
    n = len(values)
    if n and _clean(blob, n, min(map(len, values)), max(map(len, values)), max_bytes, header):
        return LineChunk(0, blob, codes)
    good, texts, bad = check_messages(values, max_bytes)
    lines = [""] * n
    headers = 0
    for i, t in zip(good, texts, strict=True):
        if header is not None and t.strip().encode() == header:
            headers += 1
            continue
        lines[i] = t
    rejected = [Rejected(i, text, reason) for i, (text, reason) in sorted(bad.items())]
    return LineChunk(0, "\n".join(lines), codes, rejected, headers)


def joined_values(blob: bytes, sizes: np.ndarray) -> list[bytes]:
    """The messages of ``blob``, their values joined by newlines, ``sizes[i]`` bytes each.

    >>> joined_values(b"1,a,x\\n\\n2\\n,b", np.array([5, 0, 4]))
    [b'1,a,x', b'', b'2\\n,b']
    """
    ends = np.cumsum(np.asarray(sizes, np.int64) + 1) - 1
    starts = ends - np.asarray(sizes, np.int64)
    return [blob[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def message_block(blob: bytes, sizes: np.ndarray, codes: np.ndarray, max_bytes: int,
                  header: bytes | None = None) -> LineChunk:
    """:func:`message_chunk` of messages given as their values joined by newlines
    (``sizes[i]``: the length of value ``i``), as a Flink job's reading step receives them:
    when every message is clean the block is the chunk's lines as it came, with no Python
    per message and no copy.

    >>> ch = message_block(b"1,a,x\\n\\n2,b,y", np.array([5, 0, 5]), np.arange(3), 100)
    >>> ch.data, [(r.line, r.reason) for r in ch.rejected]
    ('1,a,x\\n\\n2,b,y', [(1, 'empty message')])

    Args:
        blob: the values joined by newlines.
        sizes: the length of each value in bytes.
        codes: each message's position.
        max_bytes: the largest value accepted.
        header: a producer's CSV header, skipped and counted (``None``: none).
    """
    n = len(sizes)
    if n and _clean(blob, n, int(sizes.min()), int(sizes.max()), max_bytes, header):
        return LineChunk(0, blob, codes)
    return message_chunk(joined_values(blob, sizes), codes, max_bytes, header)


#: a message that starts with one of these may be blank (``bytes.strip`` removes them)
_BLANK_STARTS = tuple(b"\n" + bytes([c]) for c in b" \t\x0b\x0c")


def _clean(blob: bytes, n: int, shortest: int, longest: int, max_bytes: int,
           header: bytes | None) -> bool:
    """Whether ``n`` messages joined by newlines in ``blob`` pass
    :func:`~streamanon.pipeline.kafka.client.check_messages` all and none is ``header``:
    each is one line (no line break of its own), not empty nor blank (no message starts with
    ASCII white space: a blank one would), at most ``max_bytes`` long, UTF-8; and the header
    is not even part of the blob. Spaces inside a message are text like any other.

    >>> _clean(b"1,Office,a b\\n2,Parking lot,c", 2, 12, 12, 100, None)
    True
    >>> _clean(b"1,a\\n \\n2,b", 3, 1, 3, 100, None)  # a blank message
    False
    """
    return (shortest > 0 and longest <= max_bytes and blob.count(b"\n") == n - 1
            and b"\r" not in blob and not blob[:1].isspace()
            and not any(w in blob for w in _BLANK_STARTS)
            and (header is None or header not in blob) and _utf8(blob))


def _utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


__all__ = ["PUBLISHED", "REJECTS", "SUPPRESSED", "LineChunk", "Lines", "Outputs",
           "joined_values", "message_block", "message_chunk"]

"""Where a record came from: a line number (files, stdin) or a partition and offset (Kafka).

Positions travel with the records (one int64 per record), so a rejected record is named by
its position, and a Kafka output message carries the position of the input record it stands
for in a header (``streamanon-in: PARTITION@OFFSET``, or ``streamanon-in-line: LINE`` for a
file source).
"""

from __future__ import annotations

import numpy as np

HEADER_IN = "streamanon-in"  # PARTITION@OFFSET of the input message an output stands for
HEADER_LINE = "streamanon-in-line"  # the input line (a file source)


# -- positions ---------------------------------------------------------------------------------

class LinePositions:
    """Positions in a file or stdin: a line number (tagged ``streamanon-in-line: 12``).

    >>> pos = LinePositions("trace.csv")
    >>> pos.where(12), pos.tags(np.array([12, 13]))
    ('trace.csv:12', [b'12', b'13'])
    """

    kind = "line"
    tag_name = HEADER_LINE

    def __init__(self, name: str) -> None:
        self.name = name

    def where(self, code: int) -> str:
        return f"{self.name}:{code}"

    def fields(self, code: int) -> dict[str, int]:
        return {"line": int(code)}

    def partitions(self, codes: np.ndarray) -> np.ndarray:
        return np.zeros(len(codes), dtype=np.int64)

    def tags(self, codes: np.ndarray) -> list[bytes]:
        return [b"%d" % c for c in codes.tolist()]


class MessagePositions:
    """Positions in a topic: ``offset << 16 | partition`` in one int64 (tagged
    ``streamanon-in: PARTITION@OFFSET``).

    >>> pos = MessagePositions("kafka://h:9092/readings")
    >>> code = pos.code(3, 1234)
    >>> pos.where(code), pos.tags(np.array([code]))
    ('kafka://h:9092/readings[3]@1234', [b'3@1234'])
    """

    kind = "message"
    tag_name = HEADER_IN

    def __init__(self, name: str) -> None:
        self.name = name

    @staticmethod
    def code(partition: int, offset: int) -> int:
        return (offset << 16) | partition

    def where(self, code: int) -> str:
        return f"{self.name}[{code & 0xFFFF}]@{code >> 16}"

    def fields(self, code: int) -> dict[str, int]:
        return {"partition": int(code) & 0xFFFF, "offset": int(code) >> 16}

    def partitions(self, codes: np.ndarray) -> np.ndarray:
        return codes & 0xFFFF

    def tags(self, codes: np.ndarray) -> list[bytes]:
        parts = codes & 0xFFFF
        offs = (codes >> 16).tolist()
        if len(parts) and bool((parts == parts[0]).all()):  # one input partition: one format
            fmt = b"%d@%%d" % int(parts[0])
            return [fmt % o for o in offs]
        return [b"%d@%d" % po for po in zip(parts.tolist(), offs, strict=True)]


Positions = LinePositions | MessagePositions


__all__ = ["HEADER_IN", "HEADER_LINE", "LinePositions", "MessagePositions", "Positions"]

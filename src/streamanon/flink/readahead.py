"""Parse a file's next splits in a helper process while the job works on the current one,
outside the interpreter lock.

>>> import os, tempfile
>>> from streamanon.flink.zbatch import ZChunkParser
>>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
>>> _ = open(path, "w").write("t,u,a\\n1,alice,x\\n2,bob,x\\n")
>>> ahead = ReadAhead(path, 8, 0, 4, ZChunkParser("csv", key_groups=2))
>>> [(k, meta, len(batches)) for k, meta, batches, state, lines in map(ahead.take, range(4))]
[(0, ['1\\tH'], 1), (1, [], 0), (2, [], 1), (3, [], 0)]
>>> ahead.close()

Design: docs/design/flink.md
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import subprocess
import sys
import threading
from typing import Any, BinaryIO

from streamanon.errors import HelperGone, ProtocolError
from streamanon.flink.splits import block_lines, line_blocks, read_split

log = logging.getLogger(__name__)

#: what the helper sends per split: (split, meta lines, keyed batches, parser state, lines)
SplitResult = tuple[int, list[str], list[tuple[int, Any]], Any, int]


def parse_split(path: str, index: int, split_bytes: int, parser: Any) -> SplitResult:
    """Split ``index`` through ``parser`` (whose state moves on): what the reading step emits."""
    meta: list[str] = []
    batches: list[tuple[int, Any]] = []
    lines = 0
    for block in line_blocks(read_split(path, index, split_bytes)):
        lines += block_lines(block)
        m, b = parser.feed(block)
        meta += m
        batches += b
    return index, meta, batches, parser.state(), lines


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """The helper's loop: one request ``(path, split_bytes, start, stop, parser, send_from)``,
    then one pickled :data:`SplitResult` per split from ``send_from`` on (or
    ``("error", exception)``) until ``stop``; splits before ``send_from`` are parsed for the
    parser's state only (the reading step parses those itself)."""
    path, split_bytes, start, stop, parser, send_from = pickle.load(stdin)
    for index in range(start, stop):
        try:
            result: Any = parse_split(path, index, split_bytes, parser)
        except Exception as exc:  # the reading step raises it, as it would have raised it
            result = ("error", exc)
        if index < send_from and result[0] != "error":
            continue
        try:
            pickle.dump(result, stdout, protocol=pickle.HIGHEST_PROTOCOL)
            stdout.flush()
        except (BrokenPipeError, OSError):
            return  # the reading step is gone
        if result[0] == "error":
            return


def _start(python: str | None) -> tuple[subprocess.Popen, list[bytes]]:
    """A helper process (this module's :func:`serve`) and the list its stderr is drained into
    by a thread (so that a chatty helper never blocks on a full pipe)."""
    proc = subprocess.Popen([python or sys.executable, "-m", "streamanon.flink.readahead"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=os.environ.copy())
    assert proc.stdin is not None and proc.stdout is not None
    stderr: list[bytes] = []
    threading.Thread(target=_drain, args=(proc, stderr), daemon=True).start()
    return proc, stderr


def _drain(proc: subprocess.Popen, into: list[bytes]) -> None:
    assert proc.stderr is not None
    with contextlib.suppress(OSError, ValueError):
        into.append(proc.stderr.read())


def _end(proc: subprocess.Popen) -> None:
    with contextlib.suppress(OSError, ValueError):
        if proc.stdin is not None:
            proc.stdin.close()
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(OSError, ValueError, subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    with contextlib.suppress(OSError, ValueError):
        if proc.stdout is not None:
            proc.stdout.close()


class ReadAhead:
    """The client side: a helper process parsing splits ``start .. stop - 1`` in order and
    sending those from ``send_from`` (default ``start``) on.

    :meth:`take` returns split ``index``'s :data:`SplitResult`; ``index`` must be the next
    one (the reading step asks in order). Raises what the parser raised for that split.

    Args:
        path: the input file.
        split_bytes: the size of a split in bytes.
        start: the first split to parse.
        stop: the split after the last one to parse.
        parser: the chunk parser (a copy goes to the helper).
        python: the helper's interpreter (``None``: this one).
        send_from: the first split to send (``None``: ``start``).
    """

    def __init__(self, path: str, split_bytes: int, start: int, stop: int, parser: Any,
                 python: str | None = None, send_from: int | None = None) -> None:
        send_from = start if send_from is None else send_from
        self.next = send_from
        self.proc, self._stderr = _start(python)
        assert self.proc.stdin is not None
        pickle.dump((path, split_bytes, start, stop, parser, send_from), self.proc.stdin,
                    protocol=pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.flush()  # stdin stays open: closing it (or dying) ends the helper

    def take(self, index: int) -> SplitResult:
        if index != self.next:
            raise ProtocolError(f"read-ahead asked for split {index}, has {self.next} next")
        assert self.proc.stdout is not None
        try:
            result = pickle.load(self.proc.stdout)
        except (EOFError, pickle.UnpicklingError, OSError) as exc:
            self.close()
            raise HelperGone(f"the read-ahead process ended ({exc!r}): "
                             f"{b''.join(self._stderr)[-2000:].decode(errors='replace')}"
                             ) from None
        if result[0] == "error":
            self.close()
            raise result[1]
        if result[0] != index:
            self.close()
            raise ProtocolError(f"read-ahead sent split {result[0]} for {index}")
        self.next = index + 1
        return result  # type: ignore[no-any-return]

    def close(self) -> None:
        """End the helper (it would end by itself after its last split)."""
        _end(self.proc)


def main() -> None:
    """``python -m streamanon.flink.readahead``: results on the original stdout, which
    nothing else may write to (a stray print would corrupt them): fd 1 becomes stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()

"""The one rule by which a reader merges the partitions of a topic into one record order.

Used by the pure path's exactly-once run and by the Flink job's reading step alike.

>>> m = PartitionMerge([0, 1])
>>> m.add(0, np.array([0, 1]), np.array([10, 30]), [b"a", b"c"])
>>> m.add(1, np.array([0]), np.array([20]), [b"b"])
>>> b = m.take(exhausted=lambda p: False)
>>> [bytes(v) for v in b.values]   # b and c wait: partition 1 may still send key 20..29
[b'a']
>>> [bytes(v) for v in m.take(exhausted=lambda p: True).values]   # both partitions ended
[b'b', b'c']

Design: docs/design/kafka.md
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamanon.errors import ProtocolError


@dataclass
class MergedBatch:
    """Records in merge order: ``values[i]`` is message ``offsets[i]`` of ``partitions[i]``."""

    partitions: np.ndarray
    offsets: np.ndarray
    values: list[bytes]

    def __len__(self) -> int:
        return len(self.values)


class PartitionMerge:
    """The deterministic k-way merge of partitions by (running max timestamp, partition, offset).

    ``frontier[p]`` is the offset after the last record of ``p`` released into a batch: where
    a restart resumes. Picklable (part of a snapshot).
    """

    def __init__(self, partitions: Sequence[int]) -> None:
        self.partitions = sorted(partitions)
        self.last_key = {p: -(1 << 62) for p in self.partitions}  # of the last record added
        self.released_key = dict(self.last_key)  # of the last record released into a batch
        self.frontier: dict[int, int] = {}
        self._buf: dict[int, list[tuple[np.ndarray, np.ndarray, list[bytes]]]] = {
            p: [] for p in self.partitions}

    def __getstate__(self) -> dict[str, Any]:
        # buffered records are not part of the state: a restart re-reads them from the
        # frontier, so the running keys restart from the last released record
        state = dict(self.__dict__)
        state["_buf"] = {p: [] for p in self.partitions}
        state["last_key"] = dict(self.released_key)
        return state

    def reset_buffers(self) -> None:
        self._buf = {p: [] for p in self.partitions}

    def to_json(self) -> dict[str, Any]:
        """The state a restart needs, as JSON data (what ``__getstate__`` keeps)."""
        return {"partitions": list(self.partitions),
                "released_key": {str(p): int(k) for p, k in self.released_key.items()},
                "frontier": {str(p): int(o) for p, o in self.frontier.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PartitionMerge:
        merge = cls([int(p) for p in data["partitions"]])
        merge.released_key = {int(p): int(k) for p, k in data["released_key"].items()}
        merge.last_key = dict(merge.released_key)
        merge.frontier = {int(p): int(o) for p, o in data["frontier"].items()}
        return merge

    def with_buffers(self) -> dict[str, Any]:
        """The whole state, the buffered records included: for a reader whose input does
        not re-send them after a restore (a Flink step: its input's positions are past
        them)."""
        return {"partitions": list(self.partitions), "last_key": dict(self.last_key),
                "released_key": dict(self.released_key), "frontier": dict(self.frontier),
                "buffers": {p: list(chunks) for p, chunks in self._buf.items()}}

    @classmethod
    def from_buffers(cls, data: Mapping[str, Any]) -> PartitionMerge:
        """The merge of :meth:`with_buffers`."""
        merge = cls(data["partitions"])
        merge.last_key = dict(data["last_key"])
        merge.released_key = dict(data["released_key"])
        merge.frontier = dict(data["frontier"])
        merge._buf = {p: list(chunks) for p, chunks in data["buffers"].items()}
        return merge

    def add(self, partition: int, offsets: np.ndarray, timestamps: np.ndarray,
            values: list[bytes]) -> None:
        if not len(values):
            return
        keys = np.maximum.accumulate(
            np.concatenate(([self.last_key[partition]], np.asarray(timestamps, np.int64))))[1:]
        self.last_key[partition] = int(keys[-1])
        self._buf[partition].append((keys, np.asarray(offsets, np.int64), values))

    def pass_on(self, partition: int, offsets: np.ndarray, timestamps: np.ndarray) -> None:
        """Records of the one partition of a merge with nothing buffered, released at once:
        what :meth:`add` and :meth:`take` do with them, for a reader that keeps their values
        itself."""
        if len(self.partitions) != 1 or self._buf[partition]:
            raise ProtocolError("pass_on: only a one-partition merge with nothing buffered")
        if not len(offsets):
            return
        key = max(self.last_key[partition], int(np.max(timestamps)))
        self.last_key[partition] = self.released_key[partition] = key
        self.frontier[partition] = int(offsets[-1]) + 1

    def buffered(self, partition: int) -> int:
        return sum(len(v) for _, _, v in self._buf[partition])

    def _pop(self, partition: int, n_or_mask: Callable[[np.ndarray, np.ndarray], int]
             ) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
        chunks = self._buf[partition]
        if not chunks:
            return np.empty(0, np.int64), np.empty(0, np.int64), []
        keys = np.concatenate([c[0] for c in chunks]) if len(chunks) > 1 else chunks[0][0]
        offs = np.concatenate([c[1] for c in chunks]) if len(chunks) > 1 else chunks[0][1]
        vals = [v for c in chunks for v in c[2]] if len(chunks) > 1 else chunks[0][2]
        n = n_or_mask(keys, offs)
        rest = (keys[n:], offs[n:], vals[n:])
        self._buf[partition] = [rest] if len(rest[2]) else []
        if n:
            self.frontier[partition] = int(offs[n - 1]) + 1
            self.released_key[partition] = int(keys[n - 1])
        return keys[:n], offs[:n], vals[:n]

    def take(self, exhausted: Callable[[int], bool],
             idle: Callable[[int], bool] = lambda p: False) -> MergedBatch | None:
        """Release every record no partition can still precede (``idle``: pass over)."""
        parts = self.partitions
        if len(parts) == 1:
            p = parts[0]
            _, offs, vals = self._pop(p, lambda k, o: len(k))
            return MergedBatch(np.full(len(offs), p, np.int64), offs, vals) if vals else None
        horizon = None
        for p in parts:
            if exhausted(p):
                continue
            chunks = self._buf[p]
            if not chunks and idle(p):
                continue
            k = int(chunks[-1][0][-1]) if chunks else self.last_key[p]
            horizon = k if horizon is None else min(horizon, k)
        if horizon is None:
            cut = lambda k, o: len(k)  # noqa: E731 - every partition is done or idle
        else:
            h = horizon
            cut = lambda k, o: int(np.searchsorted(k, h, side="left"))  # noqa: E731
        return self._merge({p: self._pop(p, cut) for p in parts})

    def take_until(self, frontier: Mapping[int, int]) -> MergedBatch | None:
        """Release exactly the buffered records before ``frontier`` (a logged batch)."""
        got = {p: self._pop(p, lambda k, o, f=frontier.get(p, 0):
                            int(np.searchsorted(o, f, side="left"))) for p in self.partitions}
        return self._merge(got)

    def covers(self, frontier: Mapping[int, int], position: Mapping[int, int]) -> bool:
        """True when the records before ``frontier`` have all been read (``position``)."""
        return all(position.get(p, 0) >= f for p, f in frontier.items())

    def _merge(self, got: dict[int, tuple[np.ndarray, np.ndarray, list[bytes]]]
               ) -> MergedBatch | None:
        parts = [p for p, (_, _, v) in got.items() if v]
        if not parts:
            return None
        if len(parts) == 1:
            p = parts[0]
            _, offs, vals = got[p]
            return MergedBatch(np.full(len(offs), p, np.int64), offs, vals)
        keys = np.concatenate([got[p][0] for p in parts])
        offs = np.concatenate([got[p][1] for p in parts])
        pids = np.concatenate([np.full(len(got[p][1]), p, np.int64) for p in parts])
        vals = [v for p in parts for v in got[p][2]]
        order = np.lexsort((offs, pids, keys))
        return MergedBatch(pids[order], offs[order], [vals[i] for i in order.tolist()])


"""The Flink state of a keyed operator: a *snapshot* plus a *redo log* (needs the ``flink``
extra).

Re-pickling a whole operator on every batch would cost O(state) per batch, so the keyed
functions (:class:`~streamanon.flink.functions.ZKeyGroups`,
:class:`~streamanon.flink.castle_partition.CastlePartition`) keep, per key,
a ``ValueState`` holding the operator's last snapshot and a ``ListState`` of what happened
since (one append per batch).
The operators are deterministic, so the snapshot plus a replay of the log rebuilds the
operator of the checkpoint exactly; each function decides when a new snapshot replaces both
(:meth:`KeyedState.rebase`), which bounds the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyflink.common import Types
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor


@dataclass
class KeyedState:
    """The two Flink states of the current key: ``snapshot`` (``ValueState`` of bytes) and
    ``redo`` (``ListState`` of the events since)."""

    snapshot: Any
    redo: Any

    @classmethod
    def open(cls, runtime_context: Any) -> KeyedState:
        """The states of a keyed function (named ``snapshot`` and ``redo`` in checkpoints)."""
        return cls(
            runtime_context.get_state(
                ValueStateDescriptor("snapshot", Types.PICKLED_BYTE_ARRAY())),
            runtime_context.get_list_state(
                ListStateDescriptor("redo", Types.PICKLED_BYTE_ARRAY())))

    def saved(self) -> Any:
        """The current key's snapshot, None before the first."""
        return self.snapshot.value()

    def events(self) -> Iterable[Any]:
        """The current key's events logged since its snapshot, in order."""
        return self.redo.get() or ()

    def log(self, event: Any) -> None:
        """Append one event to the current key's redo log."""
        self.redo.add(event)

    def rebase(self, snapshot: Any) -> None:
        """A new snapshot of the current key, which replaces its redo log."""
        self.snapshot.update(snapshot)
        self.redo.clear()


__all__ = ["KeyedState"]

"""What every store backend shares: the :class:`Store` contract, the row layout, the gateway
name of mix tuples, :class:`~streamanon.errors.StoreUnavailable` and the choice of backend by
the spec's form.

Backends (:mod:`.sqlite`, :mod:`.postgres`) import only this module; the package
(:mod:`streamanon.net.store`) opens the one a spec names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from streamanon.errors import StoreUnavailable
from streamanon.net.framing import WireTuple

# (gateway, incarnation hex, seq, cycle, t, u, a, received)
Row = tuple[str, str, int, int, float, str, str, float]

MIX_GATEWAY = "mix"


class Store(Protocol):
    def store(self, gateway: str, incarnation: bytes, tuples: tuple[WireTuple, ...]) -> int:
        """Commit a batch durably; returns how many tuples were new."""

    def store_mix(self, tuples: list[tuple[bytes, WireTuple]]) -> int:
        """Commit ``(uid, tuple)`` pairs of a mix batch durably, keyed by uid; how many new."""

    def count(self) -> int: ...

    def close(self) -> None: ...


def is_postgres(spec: str | Path) -> bool:
    """``postgresql://...`` or ``postgres://...`` select PostgreSQL; anything else is a path.

    >>> is_postgres("postgresql://ce@127.0.0.1:5432/dezent"), is_postgres("ce.sqlite")
    (True, False)
    """
    return str(spec).startswith(("postgresql://", "postgres://"))


__all__ = ["MIX_GATEWAY", "Row", "Store", "StoreUnavailable", "is_postgres"]

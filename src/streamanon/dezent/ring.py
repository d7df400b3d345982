"""The gateway ring: a pseudo-random order per epoch and the rotating cycle coordinator (CCC).

The order of an epoch is a permutation drawn from ``numpy.random.default_rng([seed, epoch])``,
so every gateway that knows the shared ring seed computes the same ring without talking, and
a gateway cannot choose its neighbours (the collusion argument of the paper, Sec. V-D). The CCC
of cycle ``c`` is the ring member at index ``c mod n``: it rotates to the successor every cycle.

>>> ring = Ring(n=5, seed=1, epoch_cycles=96)
>>> order = ring.order(0)
>>> sorted(order.tolist())
[0, 1, 2, 3, 4]
>>> (ring.ccc(0), ring.ccc(1)) == (int(order[0]), int(order[1]))
True
>>> ring.successor(ring.ccc(3), 3) == ring.ccc(4)
True
>>> ring.from_ccc(3)[:2] == [ring.ccc(3), ring.ccc(4)]
True
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from streamanon.errors import ConfigError


class Ring:
    """Ring order of ``n`` gateways (indices ``0..n-1``), re-drawn every ``epoch_cycles``."""

    def __init__(self, n: int, seed: int, epoch_cycles: int = 96) -> None:
        if n < 1:
            raise ConfigError(f"a ring needs at least one gateway, got n={n}")
        if epoch_cycles < 1:
            raise ConfigError(f"epoch_cycles must be >= 1, got {epoch_cycles}")
        self.n, self.seed, self.epoch_cycles = int(n), int(seed), int(epoch_cycles)

    def epoch(self, cycle: int) -> int:
        return cycle // self.epoch_cycles

    def order(self, cycle: int) -> np.ndarray:
        """Gateway indices in ring order for the epoch of ``cycle``."""
        return _order(self.n, self.seed, self.epoch(cycle))

    def position(self, cycle: int) -> np.ndarray:
        """``position[g]``: where gateway ``g`` stands in the ring of ``cycle``'s epoch."""
        return _position(self.n, self.seed, self.epoch(cycle))

    def ccc(self, cycle: int) -> int:
        """The cycle coordinator of ``cycle`` (rotates to the ring successor each cycle)."""
        return int(self.order(cycle)[cycle % self.n])

    def successor(self, gateway: int, cycle: int) -> int:
        pos = self.position(cycle)
        return int(self.order(cycle)[(pos[gateway] + 1) % self.n])

    def from_ccc(self, cycle: int) -> list[int]:
        """The ring of ``cycle`` as a list starting at its CCC (index = hops after the CCC)."""
        order = self.order(cycle).tolist()
        i = cycle % self.n
        return order[i:] + order[:i]

    def distance_from_ccc(self, cycle: int) -> np.ndarray:
        """Per gateway, its hops after the CCC (0 = the CCC, 1 = its successor, ...)."""
        return (self.position(cycle) - cycle % self.n) % self.n


@lru_cache(maxsize=64)
def _order(n: int, seed: int, epoch: int) -> np.ndarray:
    out = np.random.default_rng([seed, epoch]).permutation(n)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=64)
def _position(n: int, seed: int, epoch: int) -> np.ndarray:
    pos = np.empty(n, dtype=np.int64)
    pos[_order(n, seed, epoch)] = np.arange(n)
    pos.setflags(write=False)
    return pos

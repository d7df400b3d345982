"""The gateway ring: a pseudo-random order fixed at setup and the rotating cycle coordinator.

The order is a permutation drawn from ``numpy.random.default_rng([seed, draw])``, so every
gateway that knows the shared ring seed computes the same ring without talking, and a gateway
cannot choose its neighbours (the collusion argument of the paper, Sec. V-D). As the paper
means it, the ring is built once at setup (``draw`` = 0 for ever); with ``redraw = N`` it is
drawn again every ``N`` cycles (``draw = cycle // N``), which gives colluders a new chance to
flank an honest gateway at every draw (:func:`~streamanon.dezent.collusion.p_ever_flanked`).
``epoch_cycles`` is the period of the pseudonym epochs (:meth:`Ring.epoch`), not of the ring.
The CCC of cycle ``c`` is the ring member at index ``c mod n``: it rotates to the successor
every cycle.

>>> ring = Ring(n=5, seed=1, epoch_cycles=96)
>>> bool((ring.order(0) == ring.order(10_000)).all())
True
>>> Ring(n=5, seed=1, redraw=96).draws(0, 192)
2
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
    """Ring order of ``n`` gateways (indices ``0..n-1``): fixed at setup, or re-drawn every
    ``redraw`` cycles when asked; pseudonym epochs of ``epoch_cycles`` cycles."""

    def __init__(self, n: int, seed: int, epoch_cycles: int = 96, *,
                 redraw: int | None = None) -> None:
        if n < 1:
            raise ConfigError(f"a ring needs at least one gateway, got n={n}")
        if epoch_cycles < 1:
            raise ConfigError(f"epoch_cycles must be >= 1, got {epoch_cycles}")
        if redraw is not None and redraw < 1:
            raise ConfigError(f"the ring's redraw period must be >= 1 cycle, got {redraw}")
        self.n, self.seed, self.epoch_cycles = int(n), int(seed), int(epoch_cycles)
        self.redraw = None if redraw is None else int(redraw)

    def epoch(self, cycle: int) -> int:
        """The pseudonym epoch of ``cycle``."""
        return cycle // self.epoch_cycles

    def draw(self, cycle: int) -> int:
        """Which draw of the ring ``cycle`` uses (0 for ever when the ring is fixed)."""
        return 0 if self.redraw is None else cycle // self.redraw

    def draws(self, start: int, cycles: int) -> int:
        """How many ring draws cycles ``[start, start + cycles)`` see."""
        if cycles < 1:
            return 0
        return self.draw(start + cycles - 1) - self.draw(start) + 1

    def order(self, cycle: int) -> np.ndarray:
        """Gateway indices in ring order for ``cycle``."""
        return _order(self.n, self.seed, self.draw(cycle))

    def position(self, cycle: int) -> np.ndarray:
        """``position[g]``: where gateway ``g`` stands in the ring of ``cycle``."""
        return _position(self.n, self.seed, self.draw(cycle))

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

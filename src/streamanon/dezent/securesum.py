"""Secure sum over a counter array: one independent uniform mask per counter, modulo ``2^b``.

>>> import numpy as np
>>> mask = SecureSumMask(m=4, bits=8)
>>> masked = mask.apply(np.zeros(4, dtype=np.uint64))
>>> masked = (masked + np.array([1, 2, 3, 250], dtype=np.uint64)) % 256
>>> mask.remove(masked).tolist()
[1, 2, 3, 250]

Design: docs/design/dezent.md
"""

from __future__ import annotations

import secrets

import numpy as np

from streamanon.errors import ConfigError, ProtocolError


class SecureSumMask:
    """The coordinator's secret ``R``: ``m`` uniform values modulo ``2^bits`` (OS randomness).

    Masks are never drawn from a seeded generator: a seed would let anyone who knows it unmask.
    """

    def __init__(self, m: int, bits: int) -> None:
        if not 1 <= bits <= 63:
            raise ConfigError(f"bits must be in 1..63, got {bits}")
        if m < 1:
            raise ConfigError(f"m must be >= 1, got {m}")
        self.m, self.bits = int(m), int(bits)
        self._mod_mask = np.uint64((1 << bits) - 1)
        # 2^bits divides 2^64, so the low bits of a uniform 64-bit word are uniform
        raw = np.frombuffer(secrets.token_bytes(8 * self.m), dtype="<u8")
        self._r = raw.astype(np.uint64) & self._mod_mask

    def apply(self, counters: np.ndarray) -> np.ndarray:
        """``counters + R mod 2^bits``."""
        self._check(counters)
        return (counters.astype(np.uint64) + self._r) & self._mod_mask

    def remove(self, counters: np.ndarray) -> np.ndarray:
        """``counters - R mod 2^bits``: the exact sums when none could wrap."""
        self._check(counters)
        return (counters.astype(np.uint64) - self._r) & self._mod_mask

    def _check(self, counters: np.ndarray) -> None:
        if counters.shape != (self.m,):
            raise ProtocolError(f"expected {self.m} counters, got shape {counters.shape}")

    @staticmethod
    def check_capacity(max_true_count: int, bits: int) -> None:
        """Raise if a true counter could reach ``2^bits`` (the masked sum would wrap).

        >>> SecureSumMask.check_capacity(1000, 10)
        >>> SecureSumMask.check_capacity(1024, 10)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        OverflowError: a true counter could reach 1,024 but 10-bit counters hold at most 1,023; ...
        """
        if max_true_count >= 1 << bits:
            need = int(max_true_count).bit_length()
            raise OverflowError(
                f"a true counter could reach {max_true_count:,} but {bits}-bit counters hold at "
                f"most {(1 << bits) - 1:,}; use at least {need} counter bits"
            )

    def __getstate__(self) -> None:
        raise TypeError("a SecureSumMask holds a secret and is never pickled or sent")


def max_true_count(kind: str, k: int, sensors: int, window: int) -> int:
    """The largest value a true (unmasked) counter can take: the bound the counter width and
    :meth:`SecureSumMask.check_capacity` rest on.

    Every sensor node counts at most once per value (distinct sensors) and reports one value per
    cycle, so within Δt it adds 1 to at most ``window`` values. An exact counter holds one value:
    at most ``sensors``. A CBF counter is shared by keys, and each key adds ``1`` to each of its
    ``k`` positions (which may coincide): at most ``k x sensors x window``.

    >>> max_true_count("exact", 1, 250, 9), max_true_count("cbf", 4, 250, 9)
    (250, 9000)
    """
    if sensors < 0 or window < 1 or k < 1:
        raise ConfigError(f"need sensors >= 0, window >= 1, k >= 1 (got {sensors}, {window}, {k})")
    return sensors if kind == "exact" else k * sensors * window


def bits_for(max_count: int) -> int:
    """The smallest counter width whose counters hold ``max_count`` (and whose masks, modulo
    ``2^bits``, never let a true sum wrap): ``max_count < 2^bits``.

    >>> bits_for(250), bits_for(255), bits_for(256), bits_for(9000), bits_for(0)
    (8, 8, 9, 14, 1)
    """
    return max(1, int(max_count).bit_length())

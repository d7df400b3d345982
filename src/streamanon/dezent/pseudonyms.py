"""Rotating pseudonyms: a keyed hash of the sensor ID and the epoch (HMAC-SHA256).

The gateway holds the key (from the OS's secure random source unless given); the central
entity sees a pseudonym that is stable within an epoch (so per-epoch series stay usable) and
unlinkable across epochs without the key. The paper leaves this as future work (Sec. V-C);
masking with the gateway ID (``id_mode="gateway"``) is the other option.

>>> p = Pseudonymizer(key=b"k" * 32)
>>> p.pseudonym("meter-7", 0) == p.pseudonym("meter-7", 0)
True
>>> p.pseudonym("meter-7", 0) == p.pseudonym("meter-7", 1)
False
>>> len(p.pseudonym("meter-7", 0))
16
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from streamanon.errors import ConfigError


class Pseudonymizer:
    """``pseudonym(sensor, epoch)`` = first 64 bits of ``HMAC-SHA256(key, epoch || sensor)``."""

    def __init__(self, key: bytes | None = None, length: int = 16) -> None:
        if key is not None and len(key) < 16:
            raise ConfigError("a pseudonym key needs at least 16 bytes")
        if not 8 <= length <= 64:
            raise ConfigError(f"length must be in 8..64 hex digits, got {length}")
        self._key = key if key is not None else secrets.token_bytes(32)
        self.length = length

    def pseudonym(self, sensor: str, epoch: int) -> str:
        msg = int(epoch).to_bytes(8, "big", signed=True) + str(sensor).encode("utf-8")
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()[: self.length]

    def __repr__(self) -> str:
        return f"Pseudonymizer(length={self.length})"

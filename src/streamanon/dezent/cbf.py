"""Counting structures that travel the gateway ring: a counting Bloom filter and an exact counter.

>>> f = CountingBloomFilter.sized(expected_keys=100, fp_rate=0.01)
>>> (f.m, f.k, f.bits)
(959, 6, 20)
>>> f.add(230); f.add(230); f.add(1870)
>>> f.count(230), f.count(1870), f.count(999)
(2, 1, 0)
>>> CountingBloomFilter.from_bytes(f.to_bytes()) == f
True
>>> e = ExactCounter([0, 10, 20]); e.add(10, 3); e.subtract_clamp(1); e.count(10)
2

Design: docs/design/dezent.md
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Self

import numpy as np

from streamanon.errors import ConfigError, ProtocolError
from streamanon.errors import EncodingError as EncodingError  # re-exported: its historical home

MAGIC = b"DZ"
VERSION = 1
KIND_CBF = 1
KIND_EXACT = 2
_HEADER = struct.Struct("<2sBBBBI")  # magic, version, kind, bits, k, m
HEADER_BYTES = _HEADER.size
MAX_BITS = 63

Key = int | str | bytes


# -- hashing ---------------------------------------------------------------------------------
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_M32 = 0xFFFFFFFF


def key_bytes(key: Key) -> bytes:
    """Canonical bytes of a key: ints as 8-byte little-endian two's complement, str as UTF-8.

    >>> key_bytes(1).hex()
    '0100000000000000'
    """
    if isinstance(key, bool):
        raise TypeError("keys must be int, str or bytes, not bool")
    if isinstance(key, int | np.integer):
        return int(key).to_bytes(8, "little", signed=True)
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, bytes):
        return key
    raise TypeError(f"keys must be int, str or bytes, got {type(key).__name__}")


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32 (Appleby), the hash family of the reference simulation.

    >>> hex(murmur3_32(b"hello", 0))
    '0x248bfa47'
    """
    h = seed & _M32
    n = len(data)
    nblocks = n // 4
    for i in range(nblocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * _C2) & _M32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _M32
        h = (h * 5 + 0xE6546B64) & _M32
    tail = data[4 * nblocks :]
    k = 0
    if len(tail) >= 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if tail:
        k ^= tail[0]
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * _C2) & _M32
        h ^= k
    h ^= n
    return _fmix32(h)


def _fmix32(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def murmur3_32_int64(keys: np.ndarray, seed: int) -> np.ndarray:
    """:func:`murmur3_32` of many int keys at once (each as its 8 little-endian bytes).

    Equal to ``murmur3_32(key_bytes(k), seed)`` for every ``k`` (tested); numpy speed.
    """
    k64 = np.asarray(keys, dtype=np.int64).astype("<i8").view(np.uint64)
    with np.errstate(over="ignore"):
        h = np.full(k64.shape, seed & _M32, dtype=np.uint32)
        for block in (k64 & np.uint64(_M32), k64 >> np.uint64(32)):
            k = block.astype(np.uint32) * np.uint32(_C1)
            k = _rotl(k, 15) * np.uint32(_C2)
            h ^= k
            h = _rotl(h, 13) * np.uint32(5) + np.uint32(0xE6546B64)
        h ^= np.uint32(8)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h


def cbf_parameters(expected_keys: int, fp_rate: float,
                   max_hashes: int | None = 6) -> tuple[int, int]:
    """``(m, k)`` for ``X`` expected distinct keys and false-positive rate ``P``.

    The paper's sizing: ``m = ceil(-X ln P / (ln 2)^2)`` and ``k = round(m / X * ln 2)``
    (with P = 0.05 ``k`` comes out 4). ``max_hashes`` caps ``k``: 6 is the authors' reference
    simulation's choice (it matters only for ``P`` below ~0.01); ``None`` keeps the formula's
    ``k`` whatever it is.

    >>> cbf_parameters(1000, 0.05)
    (6236, 4)
    >>> cbf_parameters(1000, 0.001), cbf_parameters(1000, 0.001, max_hashes=None)
    ((14378, 6), (14378, 10))
    """
    if expected_keys < 1:
        raise ConfigError(f"expected_keys must be >= 1, got {expected_keys}")
    if not 0 < fp_rate < 1:
        raise ConfigError(f"fp_rate must be in (0, 1), got {fp_rate}")
    if max_hashes is not None and max_hashes < 1:
        raise ConfigError(f"max_hashes must be >= 1 or None, got {max_hashes}")
    m = math.ceil(-expected_keys * math.log(fp_rate) / math.log(2) ** 2)
    k = max(1, round(m / expected_keys * math.log(2)))
    return m, k if max_hashes is None else min(max_hashes, k)


# -- the counter array -------------------------------------------------------------------------
class CountingStructure:
    """``m`` counters of ``bits`` bits; subclasses decide where a key lands (``positions``)."""

    kind: ClassVar[int] = 0

    def __init__(self, m: int, k: int, bits: int = 20) -> None:
        if not 1 <= bits <= MAX_BITS:
            raise ConfigError(f"counter bits must be in 1..{MAX_BITS}, got {bits}")
        if not 1 <= m < 2**32:
            raise ConfigError(f"m must be in 1..2^32-1, got {m}")
        if not 1 <= k <= 255:
            raise ConfigError(f"k must be in 1..255, got {k}")
        self.m, self.k, self.bits = int(m), int(k), int(bits)
        self.counters = np.zeros(self.m, dtype=np.uint64)

    # -- where keys land -------------------------------------------------------------------
    def positions(self, key: Key) -> np.ndarray:
        """The ``k`` counter indices of ``key`` (may repeat)."""
        raise NotImplementedError

    def positions_many(self, keys: Sequence[Key] | np.ndarray) -> np.ndarray:
        """Positions of many keys, shape ``(len(keys), k)``."""
        return np.array([self.positions(x) for x in keys], dtype=np.int64).reshape(-1, self.k)

    # -- arithmetic -------------------------------------------------------------------------
    @property
    def modulus(self) -> int:
        return 1 << self.bits

    @property
    def max_count(self) -> int:
        return self.modulus - 1

    def _raise_at(self, pos: np.ndarray, n: int) -> None:
        add = np.bincount(pos, minlength=self.m).astype(np.uint64) * np.uint64(n)
        new = self.counters + add
        if int(new.max(initial=0)) > self.max_count:
            raise OverflowError(
                f"a counter would exceed {self.max_count} ({self.bits} bits); use more counter bits"
            )
        self.counters = new

    def add(self, key: Key, n: int = 1) -> None:
        """Count ``key`` ``n`` more times; raises OverflowError rather than wrapping."""
        if n < 0:
            raise ProtocolError(f"n must be >= 0, got {n}")
        self._raise_at(self.positions(key), n)

    update = add  # datasketch-style alias

    def count(self, key: Key) -> int:
        """Estimated count of ``key``: the minimum of its counters (exact for ExactCounter)."""
        return int(self.counters[self.positions(key)].min())

    def count_many(self, keys: Sequence[Key] | np.ndarray) -> np.ndarray:
        pos = self.positions_many(keys)
        return self.counters[pos].min(axis=1).astype(np.int64)

    def remove(self, key: Key, n: int = 1) -> None:
        """Uncount ``key`` ``n`` times; refuses to go below zero (``count(key) < n``)."""
        pos = self.positions(key)
        if self.count(key) < n:
            raise ProtocolError(f"cannot remove {key!r} {n} time(s): its count is "
                                f"{self.count(key)}")
        dec = np.bincount(pos, minlength=self.m).astype(np.uint64) * np.uint64(n)
        self.counters = self.counters - dec

    def add_counts(self, keys: Sequence[Key] | np.ndarray, counts: Sequence[int] | np.ndarray,
                   *, modular: bool = False) -> None:
        """Add ``counts[i]`` for each ``keys[i]`` at once.

        ``modular=True`` adds modulo ``2^bits``: the secure-sum mode, where counters hold
        masked values and wrapping is expected (the true sums are checked not to wrap, see
        :class:`~streamanon.dezent.securesum.SecureSumMask`).
        """
        counts = np.asarray(counts, dtype=np.int64)
        if len(counts) == 0:
            return
        if int(counts.min()) < 0:
            raise ProtocolError("counts must be >= 0")
        pos = self.positions_many(keys)
        add = np.bincount(pos.ravel(), weights=np.repeat(counts, self.k), minlength=self.m)
        add = add.astype(np.uint64)
        if modular:
            self.counters = (self.counters + add) & np.uint64(self.max_count)
        else:
            new = self.counters + add
            if int(new.max(initial=0)) > self.max_count:
                raise OverflowError(f"a counter would exceed {self.max_count} ({self.bits} bits)")
            self.counters = new

    def subtract_clamp(self, s: int) -> None:
        """Every counter ``C`` becomes ``max(0, C - s)`` (finalization: ``s = z - 1``)."""
        if s < 0:
            raise ProtocolError(f"s must be >= 0, got {s}")
        c = self.counters
        self.counters = np.where(c > np.uint64(s), c - np.uint64(min(s, self.max_count)), 0)
        self.counters = self.counters.astype(np.uint64)

    def _check_compatible(self, other: CountingStructure) -> None:
        if type(other) is not type(self) or (other.m, other.k, other.bits) != (
            self.m, self.k, self.bits
        ) or not self._same_hashing(other):
            raise ProtocolError(
                f"cannot merge {type(other).__name__}(m={other.m}, k={other.k}, "
                f"bits={other.bits}) into {type(self).__name__}(m={self.m}, k={self.k}, "
                f"bits={self.bits})"
            )

    def _same_hashing(self, other: CountingStructure) -> bool:
        return True

    def merge(self, other: CountingStructure) -> None:
        """Add ``other``'s counters (same parameters); raises OverflowError rather than wrap."""
        self._check_compatible(other)
        new = self.counters + other.counters
        if int(new.max(initial=0)) > self.max_count:
            raise OverflowError(f"merge would exceed {self.max_count} ({self.bits} bits)")
        self.counters = new

    def copy(self) -> Self:
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.counters = self.counters.copy()
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CountingStructure) or type(other) is not type(self):
            return NotImplemented
        return (self.m, self.k, self.bits) == (other.m, other.k, other.bits) and bool(
            np.array_equal(self.counters, other.counters)
        ) and self._same_hashing(other)

    __hash__ = None  # type: ignore[assignment]

    # -- wire encoding ------------------------------------------------------------------------
    @staticmethod
    def encoded_size(m: int, bits: int) -> int:
        """Bytes of the encoding: the header, ``m * bits`` bits packed, a CRC-32."""
        return HEADER_BYTES + (m * bits + 7) // 8 + 4

    @property
    def nbytes(self) -> int:
        return self.encoded_size(self.m, self.bits)

    def to_bytes(self) -> bytes:
        """``DZ`` + version + kind + bits + k + m, the counters packed LSB first, then the
        CRC-32 of everything before it (little-endian)."""
        header = _HEADER.pack(MAGIC, VERSION, self.kind, self.bits, self.k, self.m)
        shifts = np.arange(self.bits, dtype=np.uint64)
        bitmat = ((self.counters[:, None] >> shifts) & np.uint64(1)).astype(np.uint8)
        body = header + np.packbits(bitmat.ravel(), bitorder="little").tobytes()
        return body + zlib.crc32(body).to_bytes(4, "little")

    serialize = to_bytes

    @classmethod
    def _decode(cls, data: bytes) -> tuple[int, int, int, np.ndarray]:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise EncodingError(f"expected bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < HEADER_BYTES:
            raise EncodingError(
                f"truncated: {len(data)} bytes, a header alone is {HEADER_BYTES} bytes"
            )
        magic, version, kind, bits, k, m = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise EncodingError(
                f"not a deZent counting structure (magic {magic!r}, want {MAGIC!r})"
            )
        if version != VERSION:
            raise EncodingError(f"unsupported encoding version {version} (this reads {VERSION})")
        if kind != cls.kind:
            raise EncodingError(f"encoded kind {kind} is not {cls.__name__} (kind {cls.kind})")
        if not 1 <= bits <= MAX_BITS or k < 1 or m < 1:
            raise EncodingError(f"invalid parameters in header: bits={bits}, k={k}, m={m}")
        want = cls.encoded_size(m, bits)
        if len(data) != want:
            raise EncodingError(
                f"{'truncated' if len(data) < want else 'trailing bytes'}: {len(data)} bytes, "
                f"m={m} counters of {bits} bits need exactly {want}"
            )
        if zlib.crc32(data[:-4]) != int.from_bytes(data[-4:], "little"):
            raise EncodingError("checksum mismatch: the bytes were corrupted")
        raw = np.frombuffer(data[:-4], dtype=np.uint8, offset=HEADER_BYTES)
        bitvec = np.unpackbits(raw, bitorder="little")
        if bitvec[m * bits :].any():
            raise EncodingError("padding bits after the last counter are not zero")
        bitmat = bitvec[: m * bits].reshape(m, bits).astype(np.uint64)
        counters = (bitmat << np.arange(bits, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
        return bits, k, m, counters


class CountingBloomFilter(CountingStructure):
    """``<m, k, b, H, C>`` of the paper, hashes MurmurHash3 with seeds ``0..k-1`` mod ``m``."""

    kind: ClassVar[int] = KIND_CBF

    @classmethod
    def sized(cls, expected_keys: int, fp_rate: float, bits: int = 20,
              max_hashes: int = 6) -> CountingBloomFilter:
        """A filter for ``expected_keys`` distinct keys at false-positive rate ``fp_rate``."""
        m, k = cbf_parameters(expected_keys, fp_rate, max_hashes)
        return cls(m, k, bits)

    def positions(self, key: Key) -> np.ndarray:
        data = key_bytes(key)
        return np.array([murmur3_32(data, j) % self.m for j in range(self.k)], dtype=np.int64)

    def positions_many(self, keys: Sequence[Key] | np.ndarray) -> np.ndarray:
        arr = np.asarray(keys) if not isinstance(keys, np.ndarray) else keys
        if arr.dtype.kind in "iu" and arr.ndim == 1:
            return int_positions(arr, self.m, self.k)
        return super().positions_many(keys)

    @classmethod
    def from_bytes(cls, data: bytes) -> CountingBloomFilter:
        """Decode :meth:`to_bytes`; raises :class:`EncodingError` saying what is wrong."""
        bits, k, m, counters = cls._decode(data)
        out = cls(m, k, bits)
        out.counters = counters
        return out

    deserialize = from_bytes

    def __repr__(self) -> str:
        return f"CountingBloomFilter(m={self.m}, k={self.k}, bits={self.bits})"


def int_positions(keys: np.ndarray, m: int, k: int) -> np.ndarray:
    """CBF positions of int keys, shape ``(len(keys), k)``: ``murmur3_32(key, j) mod m``."""
    keys = np.asarray(keys, dtype=np.int64)
    out = np.empty((len(keys), k), dtype=np.int64)
    for j in range(k):
        out[:, j] = murmur3_32_int64(keys, j) % np.uint32(m)
    return out


class ExactCounter(CountingStructure):
    """One counter per value of a known domain: exact counts, same interface as the CBF.

    ``domain`` is the agreed list of values (its order is the counter order; both sides of
    the wire must hold the same domain, which :meth:`from_bytes` checks by its size).
    """

    kind: ClassVar[int] = KIND_EXACT

    def __init__(self, domain: Iterable[Key], bits: int = 20) -> None:
        self.domain: list[Key] = list(domain)
        if len(set(self.domain)) != len(self.domain):
            raise ConfigError("the domain of an ExactCounter must not repeat values")
        self._index = {x: i for i, x in enumerate(self.domain)}
        super().__init__(max(1, len(self.domain)), 1, bits)
        ints = [x for x in self.domain if isinstance(x, int)]
        self._sorted: np.ndarray | None = None
        if self.domain and len(ints) == len(self.domain):
            arr = np.asarray(self.domain, dtype=np.int64)
            order = np.argsort(arr, kind="stable")
            self._sorted, self._order = arr[order], order

    def positions(self, key: Key) -> np.ndarray:
        try:
            return np.array([self._index[key]], dtype=np.int64)
        except (KeyError, TypeError):
            raise KeyError(f"{key!r} is not in the ExactCounter's domain") from None

    def positions_many(self, keys: Sequence[Key] | np.ndarray) -> np.ndarray:
        if self._sorted is not None and isinstance(keys, np.ndarray) and keys.dtype.kind in "iu":
            i = np.searchsorted(self._sorted, keys)
            i = np.minimum(i, len(self._sorted) - 1)
            if not np.array_equal(self._sorted[i], keys):
                bad = keys[self._sorted[i] != keys][0]
                raise KeyError(f"{bad!r} is not in the ExactCounter's domain")
            return self._order[i].reshape(-1, 1)
        return super().positions_many(keys)

    def _same_hashing(self, other: CountingStructure) -> bool:
        return isinstance(other, ExactCounter) and other.domain == self.domain

    @classmethod
    def from_bytes(cls, data: bytes, domain: Iterable[Key]) -> ExactCounter:
        """Decode :meth:`to_bytes` for the agreed ``domain``."""
        bits, k, m, counters = cls._decode(data)
        out = cls(domain, bits)
        if (m, k) != (out.m, 1):
            raise EncodingError(f"encoded m={m}, k={k} do not fit a domain of {out.m} values")
        out.counters = counters
        return out

    def __repr__(self) -> str:
        return f"ExactCounter(|domain|={len(self.domain)}, bits={self.bits})"

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)

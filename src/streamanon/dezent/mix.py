"""Unlinkable publication (``publication = "mix"``): sealed, padded tuples shuffled around the
ring, so the central entity (CE) learns a cycle's tuples but not which gateway sent each.

>>> keys = MixKeys.generate()
>>> tup = MixTuple(uid=bytes(16), cycle=7, t=6300.0, id="gw000-sn001", value=230)
>>> item = seal(keys.public_bytes, encode_plaintext(tup))
>>> len(item) == item_bytes(DEFAULT_PADDING) == 112
True
>>> decode_plaintext(open_sealed(keys.private_key, item)) == tup
True
>>> sorted(secure_shuffle([1, 2, 3, 4]))
[1, 2, 3, 4]

Design: docs/design/dezent.md
"""

from __future__ import annotations

import os
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from streamanon.errors import MixError

DEFAULT_PADDING = 64
KEY_BYTES = 32
TAG_BYTES = 16
UID_BYTES = 16
MAX_PADDING = 4096
_INFO = b"streamanon deZent mix v1"
_NONCE = bytes(12)  # every item has its own key (fresh ephemeral X25519): a fixed nonce is safe
_HEAD = struct.Struct("<B16sqdB")  # kind, uid, cycle, t, id length
_INT = struct.Struct("<q")
KIND_INT, KIND_TEXT, KIND_DUMMY = 0, 1, 2

T = TypeVar("T")



@dataclass(frozen=True)
class MixTuple:
    """A published tuple inside a sealed item (``value`` None: a dummy)."""

    uid: bytes
    cycle: int
    t: float
    id: str
    value: int | str | None

    @property
    def dummy(self) -> bool:
        return self.value is None


def item_bytes(padding: int = DEFAULT_PADDING) -> int:
    """Bytes of one sealed item: ephemeral public key + padded plaintext + tag."""
    return KEY_BYTES + padding + TAG_BYTES


def check_padding(padding: int) -> int:
    if not _HEAD.size + 9 <= padding <= MAX_PADDING:
        raise MixError(f"mix padding must be in {_HEAD.size + 9}..{MAX_PADDING} bytes, "
                       f"got {padding}")
    return padding


def encode_plaintext(tup: MixTuple, padding: int = DEFAULT_PADDING) -> bytes:
    """``kind, uid, cycle, t, len(id), id, value`` zero-padded to ``padding`` bytes; raises
    :class:`MixError` naming the tuple when it does not fit."""
    if len(tup.uid) != UID_BYTES:
        raise MixError(f"a mix uid is {UID_BYTES} bytes, got {len(tup.uid)}")
    uid = tup.id.encode("utf-8")
    if tup.value is None:
        kind, value = KIND_DUMMY, b""
    elif isinstance(tup.value, int):
        kind, value = KIND_INT, _INT.pack(tup.value)
    else:
        raw = str(tup.value).encode("utf-8")
        if len(raw) > 255:
            raise MixError(f"text value of {len(raw)} bytes does not fit a sealed tuple")
        kind, value = KIND_TEXT, bytes([len(raw)]) + raw
    if len(uid) > 255:
        raise MixError(f"ID of {len(uid)} bytes does not fit a sealed tuple")
    body = _HEAD.pack(kind, tup.uid, tup.cycle, tup.t, len(uid)) + uid + value
    if len(body) > padding:
        raise MixError(f"tuple (cycle {tup.cycle}, id {tup.id!r}, value {tup.value!r}) needs "
                       f"{len(body)} bytes, more than the mix padding of {padding}; raise "
                       "mix_padding")
    return body + bytes(padding - len(body))


def decode_plaintext(data: bytes) -> MixTuple:
    """Inverse of :func:`encode_plaintext`; raises :class:`MixError` saying what is wrong."""
    try:
        kind, uid, cycle, t, n_id = _HEAD.unpack_from(data)
        off = _HEAD.size
        ident = data[off : off + n_id].decode("utf-8")
        if len(ident.encode("utf-8")) != n_id:
            raise MixError("truncated ID")
        off += n_id
        value: int | str | None
        if kind == KIND_INT:
            (value,) = _INT.unpack_from(data, off)
            off += _INT.size
        elif kind == KIND_TEXT:
            n = data[off]
            value = data[off + 1 : off + 1 + n].decode("utf-8")
            if len(value.encode("utf-8")) != n:
                raise MixError("truncated text value")
            off += 1 + n
        elif kind == KIND_DUMMY:
            value = None
        else:
            raise MixError(f"unknown sealed tuple kind {kind}")
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise MixError(f"malformed sealed tuple: {exc}") from None
    if any(data[off:]):
        raise MixError("non-zero bytes in the padding of a sealed tuple")
    return MixTuple(uid, cycle, t, ident, value)


def _key(shared: bytes, ephemeral: bytes, recipient: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, None, _INFO + ephemeral + recipient).derive(shared)


def seal(public_key: bytes, plaintext: bytes) -> bytes:
    """Encrypt ``plaintext`` to the holder of ``public_key`` (X25519, 32 raw bytes): ephemeral
    public key (32) + ChaCha20-Poly1305 ciphertext and tag (``len(plaintext) + 16``)."""
    return seal_with(ephemeral(public_key), plaintext)


def ephemeral(public_key: bytes) -> tuple[bytes, bytes]:
    """A fresh ephemeral X25519 key agreed with ``public_key``: ``(ephemeral public key,
    item key)``. The expensive half of :func:`seal` (two scalar multiplications), independent
    of the tuple, so a gateway can draw them ahead in idle time (:class:`EphemeralPool`)."""
    try:
        recipient = X25519PublicKey.from_public_bytes(public_key)
    except ValueError as exc:
        raise MixError(f"not an X25519 public key: {exc}") from None
    eph = X25519PrivateKey.generate()
    epub = eph.public_key().public_bytes(serialization.Encoding.Raw,
                                         serialization.PublicFormat.Raw)
    return epub, _key(eph.exchange(recipient), epub, public_key)


def seal_with(eph: tuple[bytes, bytes], plaintext: bytes) -> bytes:
    """:func:`seal` with an ephemeral key from :func:`ephemeral` (each one used once)."""
    epub, key = eph
    return epub + ChaCha20Poly1305(key).encrypt(_NONCE, plaintext, None)


class EphemeralPool:
    """Ephemeral keys for the CE drawn ahead (:meth:`refill`, in idle time), each handed out
    once (:meth:`take`); an empty pool draws a fresh one on the spot. Never pickled: it holds
    item keys."""

    def __init__(self, public_key: bytes) -> None:
        self.public_key = public_key
        self._keys: list[tuple[bytes, bytes]] = []

    def refill(self, size: int) -> int:
        """Draw keys until the pool holds ``size``; returns how many were drawn."""
        drawn = max(0, size - len(self._keys))
        self._keys.extend(ephemeral(self.public_key) for _ in range(drawn))
        return drawn

    def take(self) -> tuple[bytes, bytes]:
        return self._keys.pop() if self._keys else ephemeral(self.public_key)

    def __len__(self) -> int:
        return len(self._keys)

    def __getstate__(self) -> dict[str, object]:
        return {"public_key": self.public_key, "_keys": []}


def open_sealed(private_key: X25519PrivateKey, item: bytes) -> bytes:
    """Decrypt a sealed item; :class:`MixError` when it was not sealed to this key or altered."""
    if len(item) < KEY_BYTES + TAG_BYTES:
        raise MixError(f"sealed item of {len(item)} bytes is too short")
    epub, body = item[:KEY_BYTES], item[KEY_BYTES:]
    me = private_key.public_key().public_bytes(serialization.Encoding.Raw,
                                               serialization.PublicFormat.Raw)
    try:
        shared = private_key.exchange(X25519PublicKey.from_public_bytes(epub))
        return ChaCha20Poly1305(_key(shared, epub, me)).decrypt(_NONCE, body, None)
    except (InvalidTag, ValueError):
        raise MixError("a sealed item does not open with the CE's key (altered, or sealed to "
                       "another key)") from None


def secure_shuffle(items: Sequence[T]) -> list[T]:
    """``items`` in a uniformly random order drawn from the OS's secure source.

    Sorting by 64-bit keys from ``os.urandom`` is a uniform permutation unless two keys tie
    (probability below ``len(items)^2 / 2^65``, ~1e-14 for 1,000 items); it is never seeded.
    """
    keys = np.frombuffer(os.urandom(8 * len(items)), dtype="<u8")
    return [items[i] for i in np.argsort(keys, kind="stable").tolist()]


def new_uid() -> bytes:
    """A tuple's identity for the CE (random: it says nothing about the gateway)."""
    return secrets.token_bytes(UID_BYTES)


def dummy(cycle: int) -> MixTuple:
    return MixTuple(new_uid(), cycle, 0.0, "", None)


def split_items(payload: bytes, size: int) -> list[bytes]:
    """A batch payload cut into its fixed-size items; :class:`MixError` if it does not divide."""
    if size < 1 or len(payload) % size:
        raise MixError(f"a mix batch of {len(payload)} bytes is not a whole number of "
                       f"{size}-byte items")
    return [payload[i : i + size] for i in range(0, len(payload), size)]


class MixKeys:
    """The CE's X25519 key pair for the mix (the private key never leaves the CE)."""

    def __init__(self, private_key: X25519PrivateKey) -> None:
        self.private_key = private_key
        self.public_bytes = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    @classmethod
    def generate(cls) -> MixKeys:
        return cls(X25519PrivateKey.generate())

    def private_bytes(self) -> bytes:
        return self.private_key.private_bytes(serialization.Encoding.Raw,
                                              serialization.PrivateFormat.Raw,
                                              serialization.NoEncryption())

    @classmethod
    def load(cls, path: str | Path) -> MixKeys:
        """A raw 32-byte private key file (as :meth:`save` writes it)."""
        data = Path(path).read_bytes()
        if len(data) != KEY_BYTES:
            raise MixError(f"{path}: a mix private key is {KEY_BYTES} raw bytes, got "
                           f"{len(data)}")
        return cls(X25519PrivateKey.from_private_bytes(data))

    def save(self, private_path: str | Path, public_path: str | Path) -> None:
        """The private key with mode 0600 (refusing to overwrite), the public key 0644."""
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(self.private_bytes())
        Path(public_path).write_bytes(self.public_bytes)
        os.chmod(public_path, 0o644)

    def __getstate__(self) -> None:
        raise TypeError("mix keys hold a secret and are never pickled or sent")


def load_public_key(path: str | Path) -> bytes:
    """The CE's mix public key (32 raw bytes) from the deployment folder."""
    data = Path(path).read_bytes()
    if len(data) != KEY_BYTES:
        raise MixError(f"{path}: a mix public key is {KEY_BYTES} raw bytes, got {len(data)}")
    X25519PublicKey.from_public_bytes(data)
    return data

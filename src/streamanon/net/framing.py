"""Length-prefixed binary frames between the daemons (gateway <-> gateway, gateway -> CE).

>>> f = encode_ring(3, (0, 3, 4), b"C" + bytes(8) + b"payload")
>>> decode_frame(f[4:])
RingFrame(ccc=3, members=(0, 3, 4), message=b'C\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00payload')
>>> len(f) - len(b"payload") == ring_overhead(3, collect=True)
True

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

from streamanon.errors import FrameError

MAX_FRAME = 1 << 20
LEN = struct.Struct(">I")
_U16 = struct.Struct(">H")
_SESSION = struct.Struct(">HH")
_ACK = struct.Struct(">Q")
INCARNATION_BYTES = 16
_TUPLE = struct.Struct(">QqdH")  # seq, cycle, t, id length
_VALUE_INT = b"i"
_VALUE_STR = b"s"
_COLLECT_HEADER = 9
_PUBLISH_HEADER = 23
_MIX_HEADERS = {"M": 15, "K": 9}
_MIX = struct.Struct(">qHI")  # cycle, item size, items


@dataclass(frozen=True)
class Hello:
    fingerprint: bytes


@dataclass(frozen=True)
class RingFrame:
    ccc: int
    members: tuple[int, ...]
    message: bytes


@dataclass(frozen=True)
class WireTuple:
    seq: int
    cycle: int
    t: float
    id: str
    value: int | str


@dataclass(frozen=True)
class Batch:
    incarnation: bytes
    tuples: tuple[WireTuple, ...]


@dataclass(frozen=True)
class MixFrame:
    cycle: int
    items: tuple[bytes, ...]


@dataclass(frozen=True)
class Ack:
    seq: int


@dataclass(frozen=True)
class Refused:
    items: tuple[tuple[int, str], ...]  # (sequence number, reason)


@dataclass(frozen=True)
class Error:
    reason: str


Frame = Hello | RingFrame | Batch | MixFrame | Ack | Refused | Error


def ring_overhead(members: int, *, collect: bool = False, kind: str | None = None) -> int:
    """Bytes of a ring frame beyond its payload (the encoded counting structure, or the mix
    batch's items): ``kind`` ``"M"`` or ``"K"`` for the mix's messages, else ``collect``."""
    header = (_MIX_HEADERS[kind] if kind is not None
              else _COLLECT_HEADER if collect else _PUBLISH_HEADER)
    return LEN.size + 1 + _SESSION.size + 2 * members + header


def _frame(kind: bytes, body: bytes) -> bytes:
    return LEN.pack(1 + len(body)) + kind + body


def encode_hello(fingerprint: bytes) -> bytes:
    if len(fingerprint) != 32:
        raise FrameError("a fingerprint is 32 bytes")
    return _frame(b"H", fingerprint)


def encode_ring(ccc: int, members: tuple[int, ...] | list[int], message: bytes) -> bytes:
    body = _SESSION.pack(ccc, len(members)) + b"".join(_U16.pack(m) for m in members)
    return _frame(b"R", body + message)


def encode_batch(incarnation: bytes, tuples: list[WireTuple] | tuple[WireTuple, ...]
                 ) -> bytes:
    if len(incarnation) != INCARNATION_BYTES:
        raise FrameError(f"an incarnation is {INCARNATION_BYTES} bytes")
    parts = [incarnation, struct.pack(">I", len(tuples))]
    for tp in tuples:
        uid = tp.id.encode("utf-8")
        parts.append(_TUPLE.pack(tp.seq, tp.cycle, tp.t, len(uid)) + uid)
        if isinstance(tp.value, int):
            parts.append(_VALUE_INT + struct.pack(">q", tp.value))
        else:
            raw = str(tp.value).encode("utf-8")
            parts.append(_VALUE_STR + _U16.pack(len(raw)) + raw)
    return _frame(b"B", b"".join(parts))


def encode_mix(cycle: int, items: tuple[bytes, ...] | list[bytes]) -> bytes:
    """A mix batch for the CE: the cycle, then its items (all of one size)."""
    size = len(items[0]) if items else 0
    if any(len(x) != size for x in items):
        raise FrameError("the items of a mix batch must all have one size")
    return _frame(b"M", _MIX.pack(cycle, size, len(items)) + b"".join(items))


def encode_ack(seq: int) -> bytes:
    return _frame(b"A", _ACK.pack(seq))


def encode_refused(items: list[tuple[int, str]] | tuple[tuple[int, str], ...]) -> bytes:
    parts = [struct.pack(">I", len(items))]
    for seq, reason in items:
        raw = reason.encode("utf-8")[:1000]
        parts.append(_ACK.pack(seq) + _U16.pack(len(raw)) + raw)
    return _frame(b"N", b"".join(parts))


def encode_error(reason: str) -> bytes:
    return _frame(b"E", reason.encode("utf-8")[:4000])


def decode_frame(body: bytes) -> Frame:
    """Parse a frame body (after the length prefix); raises :class:`FrameError`."""
    if not body:
        raise FrameError("empty frame")
    kind, rest = body[:1], body[1:]
    try:
        if kind == b"H":
            if len(rest) != 32:
                raise FrameError(f"hello of {len(rest)} bytes (want 32)")
            return Hello(bytes(rest))
        if kind == b"R":
            ccc, n = _SESSION.unpack_from(rest)
            end = _SESSION.size + 2 * n
            if n < 1 or len(rest) < end:
                raise FrameError(f"ring frame with a bad session ({n} members, "
                                 f"{len(rest)} bytes)")
            members = tuple(_U16.unpack_from(rest, _SESSION.size + 2 * i)[0] for i in range(n))
            if ccc not in members or len(set(members)) != n:
                raise FrameError(f"ring session {members} does not hold its coordinator {ccc} "
                                 "once")
            return RingFrame(ccc, members, bytes(rest[end:]))
        if kind == b"B":
            if len(rest) < INCARNATION_BYTES:
                raise FrameError("batch without an incarnation")
            return Batch(bytes(rest[:INCARNATION_BYTES]),
                         _decode_tuples(rest[INCARNATION_BYTES:]))
        if kind == b"N":
            return Refused(_decode_refused(rest))
        if kind == b"M":
            cycle, size, count = _MIX.unpack_from(rest)
            body = rest[_MIX.size :]
            if len(body) != size * count or (count and size == 0):
                raise FrameError(f"mix batch of {count} items of {size} bytes has "
                                 f"{len(body)} bytes")
            return MixFrame(cycle, tuple(bytes(body[i : i + size])
                                         for i in range(0, size * count, size or 1)))
        if kind == b"A":
            if len(rest) != _ACK.size:
                raise FrameError(f"ack of {len(rest)} bytes (want 8)")
            return Ack(_ACK.unpack(rest)[0])
        if kind == b"E":
            return Error(rest.decode("utf-8", errors="replace"))
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"malformed {kind!r} frame: {exc}") from None
    raise FrameError(f"unknown frame kind {kind!r}")


def _decode_refused(data: bytes) -> tuple[tuple[int, str], ...]:
    (count,) = struct.unpack_from(">I", data)
    off, out = 4, []
    for _ in range(count):
        (seq,) = _ACK.unpack_from(data, off)
        (n,) = _U16.unpack_from(data, off + 8)
        off += 10
        if off + n > len(data):
            raise FrameError("truncated refusal")
        out.append((seq, data[off : off + n].decode("utf-8")))
        off += n
    if off != len(data):
        raise FrameError("refusal with trailing bytes")
    return tuple(out)


def _decode_tuples(data: bytes) -> tuple[WireTuple, ...]:
    (count,) = struct.unpack_from(">I", data)
    off = 4
    out = []
    for _ in range(count):
        seq, cycle, t, n_id = _TUPLE.unpack_from(data, off)
        off += _TUPLE.size
        if off + n_id + 1 > len(data):
            raise FrameError("truncated batch")
        uid = data[off : off + n_id].decode("utf-8")
        off += n_id
        tag = data[off : off + 1]
        off += 1
        value: int | str
        if tag == _VALUE_INT:
            (value,) = struct.unpack_from(">q", data, off)
            off += 8
        elif tag == _VALUE_STR:
            (n,) = _U16.unpack_from(data, off)
            value = data[off + 2 : off + 2 + n].decode("utf-8")
            off += 2 + n
        else:
            raise FrameError(f"unknown value tag {tag!r} in a batch")
        out.append(WireTuple(seq, cycle, t, uid, value))
    if off != len(data):
        raise FrameError(f"batch of {count} tuples has {len(data) - off} trailing bytes "
                         "(or is truncated)")
    return tuple(out)


async def read_frame(reader: asyncio.StreamReader, max_frame: int = MAX_FRAME) -> Frame | None:
    """The next frame, or None at a clean end of stream (EOF between frames)."""
    try:
        head = await reader.readexactly(LEN.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise FrameError(f"connection closed inside a length prefix ({len(exc.partial)} of "
                         "4 bytes)") from None
    (n,) = LEN.unpack(head)
    if n == 0:
        raise FrameError("empty frame")
    if n > max_frame:
        raise FrameError(f"oversized frame: {n:,} bytes > max {max_frame:,}")
    try:
        body = await reader.readexactly(n)
    except asyncio.IncompleteReadError as exc:
        raise FrameError(f"connection closed inside a frame ({len(exc.partial)} of {n} "
                         "bytes)") from None
    return decode_frame(body)

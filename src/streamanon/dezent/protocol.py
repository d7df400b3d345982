"""deZent's gateway and coordinator logic for one clock cycle, as a sans-I/O core.

Design: docs/design/dezent.md
"""

from __future__ import annotations

import struct
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from streamanon.dezent import mix as mixing
from streamanon.dezent.cbf import CountingBloomFilter, CountingStructure, ExactCounter, Key
from streamanon.dezent.order import PAPER as PAPER_ORDER
from streamanon.dezent.order import (
    check_order,
    pass_start,
    receiver_position,
    turn_position,
)
from streamanon.dezent.pseudonyms import Pseudonymizer
from streamanon.dezent.ring import Ring
from streamanon.dezent.rules import PAPER, WINDOW, check_rule
from streamanon.dezent.securesum import SecureSumMask, bits_for
from streamanon.dezent.securesum import max_true_count as true_count_bound
from streamanon.errors import (
    ConfigError,
    DuplicateReadingError,
    FrameError,
    ProtocolError,
    PublicationError,
    TimeOrderError,
)

ID_MODES = ("sensor", "gateway", "pseudonym")
DIRECT, MIX = "direct", "mix"
PUBLICATIONS = (DIRECT, MIX)
CE = -1  # Send.to of the mix batch the last gateway delivers to the central entity


@dataclass(frozen=True)
class StructureSpec:
    """What every gateway agrees on at setup: the kind and size of the counting structure."""

    kind: str  # "cbf" or "exact"
    m: int
    k: int
    bits: int
    domain: tuple[Key, ...] = ()

    def new(self) -> CountingStructure:
        if self.kind == "cbf":
            return CountingBloomFilter(self.m, self.k, self.bits)
        if self.kind == "exact":
            return ExactCounter(self.domain, self.bits)
        raise ConfigError(f"unknown structure kind {self.kind!r} (use cbf or exact)")

    def decode(self, payload: bytes) -> CountingStructure:
        if self.kind == "cbf":
            return CountingBloomFilter.from_bytes(payload)
        return ExactCounter.from_bytes(payload, self.domain)

    @property
    def nbytes(self) -> int:
        return CountingStructure.encoded_size(self.m, self.bits)


#: The default probability of publishing in the first publication pass, for every entry point
#: (API, daemons' configs, simulation, CLI): the deZent paper's evaluation value. Below 1 it
#: evens out the bias towards the gateways just after the coordinator, who would otherwise
#: always publish first (docs/guides/dezent-simulation.md measures the publication order).
DEFAULT_P_PUB = 0.5


@dataclass(frozen=True)
class ProtocolConfig:
    """Parameters shared by all gateways of a ring."""

    z: int
    delta_t: float
    structure: StructureSpec
    sensors_total: int
    period: float = 900.0
    t0: float = 0.0
    rule: str = PAPER
    p_pub: float = DEFAULT_P_PUB
    id_mode: str = "sensor"
    min_members: int = 3
    publication: str = DIRECT
    publication_order: str = PAPER_ORDER
    mix_key: bytes | None = None  # the CE's X25519 public key (publication = "mix")
    mix_padding: int = mixing.DEFAULT_PADDING

    def __post_init__(self) -> None:
        if self.z < 1:
            raise ConfigError(f"z must be >= 1, got {self.z}")
        if self.min_members < 1:
            raise ConfigError(f"min_members must be >= 1, got {self.min_members}")
        if not 0 < self.p_pub <= 1:
            raise ConfigError(f"p_pub must be in (0, 1], got {self.p_pub}")
        check_rule(self.rule)
        check_order(self.publication_order)
        if self.id_mode not in ID_MODES:
            raise ConfigError(f"id_mode must be one of {ID_MODES}, got {self.id_mode!r}")
        if self.publication not in PUBLICATIONS:
            raise PublicationError(f"publication must be one of {PUBLICATIONS}, got "
                                   f"{self.publication!r}")
        if self.publication == MIX:
            if self.mix_key is None or len(self.mix_key) != mixing.KEY_BYTES:
                raise mixing.MixError("publication = 'mix' needs the CE's 32-byte X25519 "
                                      "public key (mix_key)")
            if self.id_mode == "gateway":
                raise mixing.MixError("publication = 'mix' with id_mode = 'gateway' would "
                                      "write the sending gateway into every tuple; use "
                                      "'pseudonym'")
            mixing.check_padding(self.mix_padding)
        SecureSumMask.check_capacity(self.max_true_count, self.structure.bits)

    def ring_too_small(self, members: int) -> str | None:
        """Why a ring of ``members`` gateways must not run a cycle, or None when it may.

        >>> cfg = ProtocolConfig(z=2, delta_t=0, structure=StructureSpec("exact", 1, 1, 8, (0,)),
        ...                      sensors_total=4)
        >>> cfg.ring_too_small(2)
        'ring of 2 gateways < min_members 3 (a secure sum hides a share only among >= 3)'
        >>> cfg.ring_too_small(3) is None
        True
        """
        if members >= self.min_members:
            return None
        return (f"ring of {members} gateways < min_members {self.min_members} "
                "(a secure sum hides a share only among >= 3)")

    @property
    def window_cycles(self) -> int:
        """Cycles whose records are within Δt of the current one (current included)."""
        return window_cycles(self.delta_t, self.period)

    @property
    def max_true_count(self) -> int:
        """An upper bound of any true counter (``securesum.max_true_count``)."""
        return true_count_bound(self.structure.kind, self.structure.k, self.sensors_total,
                                self.window_cycles)

    @property
    def min_counter_bits(self) -> int:
        """The narrowest counters that hold :attr:`max_true_count`."""
        return bits_for(self.max_true_count)

    @property
    def mix_item_bytes(self) -> int:
        return mixing.item_bytes(self.mix_padding)


def window_cycles(delta_t: float, period: float) -> int:
    """Cycles ``c' <= c`` with ``(c - c') * period <= delta_t`` (a reading expires strictly
    after Δt, as in z-anonymity).

    >>> window_cycles(7260, 900)
    9
    """
    w = 1
    while w * period <= delta_t:
        w += 1
    return w


# -- messages -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Collect:
    """The masked structure travelling the collection round."""

    cycle: int
    payload: bytes


@dataclass(frozen=True)
class Publish:
    """The cleaned structure travelling a publication pass that started at position ``start``
    (hops after the CCC) and has seen ``turns`` turns (:mod:`~streamanon.dezent.order`)."""

    cycle: int
    pass_no: int
    p_pub: float
    more: bool
    payload: bytes
    start: int = 1
    turns: int = 0


@dataclass(frozen=True)
class MixBatch:
    """The cycle's sealed tuples (fixed-size items), on the ring or to the CE."""

    cycle: int
    items: tuple[bytes, ...]

    @property
    def payload(self) -> bytes:
        return b"".join(self.items)


@dataclass(frozen=True)
class MixAck:
    """The CE stored the mix batch of ``cycle``: sent around the ring by its deliverer."""

    cycle: int
    payload: bytes = b""


Message = Collect | Publish | MixBatch | MixAck


@dataclass(frozen=True)
class Send:
    """Deliver ``msg`` to gateway ``to`` (on the ring), or to the CE when ``to == CE``."""

    to: int
    msg: Message


@dataclass(frozen=True)
class PublishedTuple:
    """A tuple for the central entity: ``(t, id, value)``; ``sensor`` stays with the gateway
    (kept here so that simulations can check the guarantee against the true sensor)."""

    cycle: int
    t: float
    id: str
    value: Key
    sensor: str
    gateway: int
    uid: bytes = b""  # publication = "mix": the CE's key for storing the tuple once


_COLLECT = struct.Struct("<cq")  # b"C", cycle
_PUBLISH = struct.Struct("<cqBdBHH")  # b"P", cycle, pass, p_pub, more, start, turns
_MIX = struct.Struct("<cqHI")  # b"M", cycle, item size, items
_ACK = struct.Struct("<cq")  # b"K", cycle
KINDS = (b"C", b"P", b"M", b"K")


def encode_message(msg: Message) -> bytes:
    """Bytes of a ring message (for the network transport): a fixed header + the payload.

    >>> decode_message(encode_message(Publish(7, 2, 1.0, False, b"xyz", 3, 4)))
    Publish(cycle=7, pass_no=2, p_pub=1.0, more=False, payload=b'xyz', start=3, turns=4)
    >>> decode_message(encode_message(MixBatch(7, (b"ab", b"cd"))))
    MixBatch(cycle=7, items=(b'ab', b'cd'))
    """
    if isinstance(msg, Collect):
        return _COLLECT.pack(b"C", msg.cycle) + msg.payload
    if isinstance(msg, Publish):
        return _PUBLISH.pack(b"P", msg.cycle, msg.pass_no, msg.p_pub, msg.more, msg.start,
                              msg.turns) + msg.payload
    if isinstance(msg, MixBatch):
        size = len(msg.items[0]) if msg.items else 0
        if any(len(x) != size for x in msg.items):
            raise mixing.MixError("the items of a mix batch must all have one size")
        return _MIX.pack(b"M", msg.cycle, size, len(msg.items)) + msg.payload
    return _ACK.pack(b"K", msg.cycle)


def decode_message(data: bytes) -> Message:
    """Inverse of :func:`encode_message`; raises :class:`~streamanon.errors.FrameError` naming
    what is wrong."""
    if not data:
        raise FrameError("empty ring message")
    kind = data[:1]
    if kind == b"C" and len(data) >= _COLLECT.size:
        _, cycle = _COLLECT.unpack_from(data)
        return Collect(cycle, bytes(data[_COLLECT.size :]))
    if kind == b"P" and len(data) >= _PUBLISH.size:
        _, cycle, pass_no, p_pub, more, start, turns = _PUBLISH.unpack_from(data)
        if pass_no not in (1, 2) or more not in (0, 1) or not 0 < p_pub <= 1:
            raise FrameError(f"invalid publication header: pass {pass_no}, p_pub {p_pub}, "
                              f"more {more}")
        return Publish(cycle, pass_no, p_pub, bool(more), bytes(data[_PUBLISH.size :]), start,
                       turns)
    if kind == b"M" and len(data) >= _MIX.size:
        _, cycle, size, count = _MIX.unpack_from(data)
        body = bytes(data[_MIX.size :])
        if len(body) != size * count or (count and not size):
            raise FrameError(f"mix batch of {count} items of {size} bytes has {len(body)} "
                              "bytes")
        return MixBatch(cycle, tuple(mixing.split_items(body, size)) if count else ())
    if kind == b"K" and len(data) == _ACK.size:
        _, cycle = _ACK.unpack_from(data)
        return MixAck(cycle)
    if kind not in KINDS:
        raise FrameError(f"unknown ring message kind {kind!r} (want one of {KINDS})")
    raise FrameError(f"truncated or over-long {kind!r} ring message: {len(data)} bytes")


# -- the publication step (shared with the fast simulation) ---------------------------------
def publish_records(structure: CountingStructure, values: Sequence[Key], done: list[bool],
                    coins: Sequence[float], p_pub: float, rule: str) -> tuple[list[int], bool]:
    """One gateway's turn in a publication pass over its current records, in order.

    Publishes record ``i`` (not ``done``) when its value counts ``> 0`` and ``coins[i] < p_pub``;
    under the ``paper`` rule it then decrements the count. Returns the published indices and
    whether a publishable record was left only because of the coin.

    Args:
        structure: the counting structure of the pass (the ring's counts of the values).
        values: the gateway's current records' values, in order.
        done: per record, whether it is already published (set here for those published now).
        coins: per record, a uniform draw in [0, 1) for the publication coin.
        p_pub: the probability that a publishable record is published in this pass.
        rule: the publication rule (``paper`` or ``window``).
    """
    published: list[int] = []
    more = False
    for i, v in enumerate(values):
        if done[i] or structure.count(v) <= 0:
            continue
        if rule == WINDOW:
            published.append(i)
            done[i] = True
        elif coins[i] < p_pub:
            structure.remove(v)
            published.append(i)
            done[i] = True
        else:
            more = True
    return published, more


# -- the gateway ----------------------------------------------------------------------------
@dataclass
class _CycleState:
    sensors: list[str]
    values: list[Key]
    coins: np.ndarray
    done: list[bool]
    draws: np.ndarray | None = None  # publication-order draws of passes 1 and 2 (at the CCC)
    mask: SecureSumMask | None = None
    published: list[PublishedTuple] = field(default_factory=list)


class Gateway:
    """One gateway: its sensors' recent readings and its part of the ring protocol.

    Args:
        gw_id: the gateway's index in the ring.
        config: the protocol's parameters.
        ring: the ring (the order of the gateways in each epoch).
        rng: the generator of the publication coins and order draws (``None``: a fresh one).
        pseudonymizer: the sensor pseudonyms under ``id_mode = "pseudonym"`` (``None``: a new one).
    """

    def __init__(self, gw_id: int, config: ProtocolConfig, ring: Ring, *,
                 rng: np.random.Generator | None = None,
                 pseudonymizer: Pseudonymizer | None = None) -> None:
        self.id = int(gw_id)
        self.config = config
        self.ring = ring
        self.rng = rng if rng is not None else np.random.default_rng()
        if config.id_mode == "pseudonym" and pseudonymizer is None:
            pseudonymizer = Pseudonymizer()
        self.pseudonymizer = pseudonymizer
        self.ephemerals = (mixing.EphemeralPool(config.mix_key)
                           if config.publication == MIX and config.mix_key else None)
        # sensor -> readings (cycle, value) still within Δt, oldest first
        self.history: dict[str, deque[tuple[int, Key]]] = {}
        self.current: dict[int, _CycleState] = {}

    # -- sensor side --------------------------------------------------------------------
    def measure(self, cycle: int, readings: Sequence[tuple[str, Key]],
                coins: Sequence[float] | None = None,
                order_draws: Sequence[float] | None = None) -> None:
        """Take the cycle's readings ``(sensor, value)`` (one per sensor) and drop old ones.

        ``coins`` (uniform in [0, 1), one per reading) decide pass-1 publications; drawn from
        the gateway's generator when not given (the simulation passes its own to compare
        engines on identical randomness). ``order_draws`` (two uniforms) place the starts of
        the publication passes under ``publication_order = "random"`` when this gateway
        coordinates the cycle; drawn from the generator when not given.
        """
        sensors = [str(s) for s, _ in readings]
        if len(set(sensors)) != len(sensors):
            raise DuplicateReadingError("u", f"gateway {self.id}: a sensor reported twice in "
                                        f"cycle {cycle}")
        for s in sensors:  # refuse before changing anything
            h = self.history.get(s)
            if h and h[-1][0] >= cycle:
                raise TimeOrderError("t", f"gateway {self.id}: cycle {cycle} after {h[-1][0]} "
                                     f"for {s}")
        coin_arr = (self.rng.random(len(readings)) if coins is None
                    else np.asarray(coins, dtype=np.float64))
        if coin_arr.shape != (len(readings),):
            raise ProtocolError("one coin per reading is needed")
        draws = None if order_draws is None else np.asarray(order_draws, dtype=np.float64)
        if draws is not None and draws.shape != (2,):
            raise PublicationError("two publication-order draws (passes 1 and 2) are needed")
        w = self.config.window_cycles
        for s, v in readings:
            self.history.setdefault(str(s), deque()).append((cycle, v))
        for s in list(self.history):  # apply_delta_t
            h = self.history[s]
            while h and cycle - h[0][0] >= w:
                h.popleft()
            if not h:
                del self.history[s]
        self.current[cycle] = _CycleState(sensors, [v for _, v in readings], coin_arr,
                                          [False] * len(readings), draws)
        for old in [c for c in self.current if c < cycle - 1]:
            del self.current[old]

    def local_counts(self, cycle: int) -> Counter[Key]:
        """Per value, this gateway's distinct sensors that reported it within Δt of ``cycle``."""
        w = self.config.window_cycles
        out: Counter[Key] = Counter()
        for h in self.history.values():
            out.update({v for c, v in h if 0 <= cycle - c < w})
        return out

    def _add_counts(self, structure: CountingStructure, cycle: int) -> None:
        counts = self.local_counts(cycle)
        if counts:
            keys = list(counts)
            structure.add_counts(np.asarray(keys) if all(isinstance(k, int) for k in keys)
                                 else keys, [counts[k] for k in keys], modular=True)

    # -- ring side ------------------------------------------------------------------------
    def start_cycle(self, cycle: int) -> tuple[list[Send], list[PublishedTuple]]:
        """At the CCC only: initialise, mask, add own counts, start the collection round."""
        if self.ring.ccc(cycle) != self.id:
            raise ProtocolError(f"gateway {self.id} is not the CCC of cycle {cycle}")
        self._check_ring_size(cycle)
        state = self._state(cycle)
        spec = self.config.structure
        structure = spec.new()
        state.mask = SecureSumMask(structure.m, structure.bits)
        structure.counters = state.mask.apply(structure.counters)
        self._add_counts(structure, cycle)
        if self.ring.n == 1:
            return self._finish_collection(cycle, structure, ())
        return [self._to_successor(cycle, Collect(cycle, structure.to_bytes()))], []

    def handle(self, msg: Message, carry: Sequence[PublishedTuple] = ()
               ) -> tuple[list[Send], list[PublishedTuple]]:
        """Process a message from the ring predecessor: what to send on, what to publish.

        ``carry`` (``publication = "mix"``): tuples of earlier cycles this gateway published
        whose mix batch never reached the CE (the daemon keeps them on disk until an
        acknowledgement); they are sealed afresh into this cycle's batch if this call adds
        the gateway's tuples to one.
        """
        self._check_ring_size(msg.cycle)
        if isinstance(msg, MixBatch):
            return self._on_mix(msg, carry), []
        if isinstance(msg, MixAck):
            return self._on_mix_ack(msg), []
        spec = self.config.structure
        is_ccc = self.ring.ccc(msg.cycle) == self.id
        structure = spec.decode(msg.payload)
        if isinstance(msg, Collect):
            if is_ccc:
                return self._finish_collection(msg.cycle, structure, carry)
            self._add_counts(structure, msg.cycle)
            return [self._to_successor(msg.cycle, Collect(msg.cycle, structure.to_bytes()))], []
        n = self.ring.n
        where = self._position(msg.cycle)
        want = receiver_position(msg.start, msg.turns, n)
        if not 0 <= msg.start < n or not 0 <= msg.turns <= n or where != want:
            raise PublicationError(
                f"gateway {self.id} (position {where}) got a publication message of cycle "
                f"{msg.cycle} for position {want} (start {msg.start}, {msg.turns} turns, ring "
                f"of {n})")
        return self._run_pass(msg.cycle, structure, msg.pass_no, msg.p_pub, msg.more,
                              msg.start, msg.turns, carry)

    def _finish_collection(self, cycle: int, structure: CountingStructure,
                           carry: Sequence[PublishedTuple]
                           ) -> tuple[list[Send], list[PublishedTuple]]:
        """Unmask, subtract z-1 and clamp; begin the first publication pass."""
        state = self._state(cycle)
        if state.mask is None:
            raise ProtocolError(f"gateway {self.id}: a collection round of cycle {cycle} came "
                                "back, but this gateway started none (or already closed it)")
        structure.counters = state.mask.remove(structure.counters)
        state.mask = None
        structure.subtract_clamp(self.config.z - 1)
        return self._run_pass(cycle, structure, 1, self.config.p_pub, False,
                              self._pass_start(cycle, 1), 0, carry)

    def _run_pass(self, cycle: int, structure: CountingStructure, pass_no: int, p_pub: float,
                  more: bool, start: int, turns: int, carry: Sequence[PublishedTuple]
                  ) -> tuple[list[Send], list[PublishedTuple]]:
        """Take this gateway's turn(s) of a pass (the CCC may take a turn and the control in
        one call), then hand the structure to the next position (:mod:`.order`), start pass 2,
        or end the round."""
        n = self.ring.n
        where = self._position(cycle)
        pubs: list[PublishedTuple] = []
        while True:
            if turns < n and turn_position(start, turns, n) == where:
                got, skipped = self._publish_turn(cycle, structure, p_pub)
                pubs += got
                more = more or skipped
                turns += 1
            elif turns == n and where == 0:  # back at the CCC: another pass or the end
                if more and pass_no == 1:
                    pass_no, p_pub, more = 2, 1.0, False
                    start, turns = self._pass_start(cycle, 2), 0
                else:
                    return self._end_round(cycle, carry), pubs
            else:
                to = self.ring.from_ccc(cycle)[receiver_position(start, turns, n)]
                out = Publish(cycle, pass_no, p_pub, more, structure.to_bytes(), start, turns)
                return [Send(to, out)], pubs

    def _pass_start(self, cycle: int, pass_no: int) -> int:
        order = self.config.publication_order
        if order == PAPER_ORDER:
            return pass_start(order, self.ring.n, 0.0)
        draws = self._state(cycle).draws
        draw = float(draws[pass_no - 1]) if draws is not None else float(self.rng.random())
        return pass_start(order, self.ring.n, draw)

    def _publish_turn(self, cycle: int, structure: CountingStructure, p_pub: float
                      ) -> tuple[list[PublishedTuple], bool]:
        state = self._state(cycle)
        idx, more = publish_records(structure, state.values, state.done, state.coins, p_pub,
                                    self.config.rule)
        t = self.config.t0 + cycle * self.config.period
        mix = self.config.publication == MIX
        out = [PublishedTuple(cycle, t, self._public_id(state.sensors[i], cycle),
                              state.values[i], state.sensors[i], self.id,
                              mixing.new_uid() if mix else b"") for i in idx]
        state.published += out
        return out, more

    # -- the mix (publication = "mix") ----------------------------------------------------
    def _end_round(self, cycle: int, carry: Sequence[PublishedTuple]) -> list[Send]:
        """The CCC after the last pass: nothing more (direct), or start the mix batch with its
        own sealed tuples, padded with dummies to its number of current records."""
        if self.config.publication != MIX:
            return []
        items = self._sealed(cycle, carry)
        records = len(self._state(cycle).values)
        items += [self._seal(mixing.dummy(cycle)) for _ in range(records - len(items))]
        return [self._pass_batch(cycle, items)]

    def _on_mix(self, msg: MixBatch, carry: Sequence[PublishedTuple]) -> list[Send]:
        if self.config.publication != MIX:
            raise mixing.MixError(f"gateway {self.id}: a mix batch, but publication is direct")
        if self.ring.ccc(msg.cycle) == self.id:
            raise mixing.MixError(f"gateway {self.id}: the mix batch of cycle {msg.cycle} came "
                                  "back to its coordinator")
        size = self.config.mix_item_bytes
        if any(len(x) != size for x in msg.items):
            raise mixing.MixError(f"mix batch of cycle {msg.cycle} with items that are not "
                                  f"{size} bytes")
        return [self._pass_batch(msg.cycle, list(msg.items) + self._sealed(msg.cycle, carry))]

    def _pass_batch(self, cycle: int, items: list[bytes]) -> Send:
        """Shuffle (fresh secret permutation) and pass on; the CCC's predecessor delivers."""
        batch = MixBatch(cycle, tuple(mixing.secure_shuffle(items)))
        successor = self.ring.successor(self.id, cycle)
        return Send(CE if successor == self.ring.ccc(cycle) or self.ring.n == 1 else successor,
                    batch)

    def _sealed(self, cycle: int, carry: Sequence[PublishedTuple]) -> list[bytes]:
        own = self._state(cycle).published
        mine = {p.uid for p in own}
        return [self._seal(mixing.MixTuple(p.uid, p.cycle, p.t, p.id, p.value))
                for p in [*own, *(c for c in carry if c.uid not in mine)]]

    def _seal(self, tup: mixing.MixTuple) -> bytes:
        assert self.ephemerals is not None
        return mixing.seal_with(self.ephemerals.take(),
                                mixing.encode_plaintext(tup, self.config.mix_padding))

    def prepare_mix(self, carried: int = 64) -> int:
        """Draw the ephemeral keys of the next cycle's sealing ahead (the public-key half of
        it), for twice this gateway's records plus ``carried`` re-sent tuples, so that sealing
        costs no public-key operation while a round or a mix batch waits. The daemon calls it
        when its part of a cycle is over; returns the keys drawn."""
        if self.ephemerals is None:
            return 0
        records = max((len(s.values) for s in self.current.values()), default=0)
        return self.ephemerals.refill(2 * records + carried)

    def mix_committed(self, cycle: int) -> list[Send]:
        """At the deliverer, once the CE stored the batch of ``cycle``: the acknowledgement
        for the other gateways (around the ring, ending before the deliverer)."""
        if self.ring.n == 1:
            return []
        return [self._to_successor(cycle, MixAck(cycle))]

    def _on_mix_ack(self, msg: MixAck) -> list[Send]:
        order = self.ring.from_ccc(msg.cycle)
        deliverer = order[-1]
        if self.ring.successor(self.id, msg.cycle) == deliverer:
            return []
        return [self._to_successor(msg.cycle, msg)]

    # -- helpers --------------------------------------------------------------------------
    def _position(self, cycle: int) -> int:
        """This gateway's hops after the CCC of ``cycle``."""
        return self.ring.from_ccc(cycle).index(self.id)

    def _public_id(self, sensor: str, cycle: int) -> str:
        mode = self.config.id_mode
        if mode == "gateway":
            return f"gw{self.id}"
        if mode == "pseudonym":
            if self.pseudonymizer is None:
                raise ProtocolError(f"gateway {self.id}: id_mode pseudonym without a "
                                    "pseudonymizer")
            return self.pseudonymizer.pseudonym(sensor, self.ring.epoch(cycle))
        return sensor

    def _state(self, cycle: int) -> _CycleState:
        try:
            return self.current[cycle]
        except KeyError:
            raise ProtocolError(f"gateway {self.id} has no readings for cycle {cycle}") from None

    def _check_ring_size(self, cycle: int) -> None:
        why = self.config.ring_too_small(self.ring.n)
        if why is not None:
            raise ProtocolError(f"gateway {self.id}, cycle {cycle}: {why}")

    def _to_successor(self, cycle: int, msg: Message) -> Send:
        return Send(self.ring.successor(self.id, cycle), msg)


# -- the in-process transport ----------------------------------------------------------------
@dataclass
class CycleResult:
    published: list[PublishedTuple] = field(default_factory=list)
    ring_messages: int = 0
    ring_bytes: int = 0
    passes: int = 0
    delivered: list[MixBatch] = field(default_factory=list)  # publication = "mix": to the CE


def run_cycle(gateways: Sequence[Gateway], cycle: int) -> CycleResult:
    """Route one cycle's messages between in-process gateways until the cycle is done.

    Every gateway must have been given its readings for ``cycle`` (:meth:`Gateway.measure`).
    A mix batch for the CE is taken as stored at once: its deliverer's acknowledgement goes
    around the ring like in the daemons (and is counted).
    """
    ring = gateways[0].ring
    ccc = gateways[ring.ccc(cycle)]
    result = CycleResult()
    sends, pubs = ccc.start_cycle(cycle)
    result.published += pubs
    queue: deque[tuple[int, Send]] = deque((ccc.id, s) for s in sends)
    while queue:
        sender, send = queue.popleft()
        if send.to == CE:
            assert isinstance(send.msg, MixBatch)
            result.delivered.append(send.msg)
            queue.extend((sender, s) for s in gateways[sender].mix_committed(cycle))
            continue
        result.ring_messages += 1
        result.ring_bytes += len(send.msg.payload)
        if isinstance(send.msg, Publish) and send.to == ccc.id:
            result.passes = max(result.passes, send.msg.pass_no)
        out, pubs = gateways[send.to].handle(send.msg)
        queue.extend((send.to, s) for s in out)
        result.published += pubs
    if ring.n == 1:
        result.passes = 1
    return result

"""The gateway's ring sessions and the admission rule for ring messages (sans-I/O).

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamanon.dezent.order import receiver_position, sender_position
from streamanon.dezent.protocol import Message, MixAck, MixBatch, ProtocolConfig, Publish
from streamanon.dezent.ring import Ring
from streamanon.errors import StreamanonError

# What the sans-I/O core raises on a message or call it cannot take: its typed errors
# (ProtocolError, EncodingError, BadRecordError: all StreamanonError), and plain ValueError,
# which decoding a peer's bytes can raise from the standard library (a corrupt message from a
# trusted peer is refused, it never stops a gateway). Caught once, by GatewayDaemon.call_core:
# the message (or the cycle) is dropped and the reason logged.
CORE_ERRORS: tuple[type[Exception], ...] = (StreamanonError, ValueError)


class SessionRing(Ring):
    """The ring of each cycle: the shared order restricted to the cycle's members.

    The core asks ``ccc(c)``, ``successor(g, c)`` and ``n``; ``n`` is the size of the session
    selected with :meth:`use` just before the core handles a message of that cycle (the
    daemon is single-threaded, so the selection cannot change under the core).
    """

    def __init__(self, base: Ring) -> None:
        super().__init__(base.n, base.seed, base.epoch_cycles, redraw=base.redraw)
        self.base = base
        self.sessions: dict[int, tuple[int, tuple[int, ...]]] = {}

    def set(self, cycle: int, ccc: int, members: tuple[int, ...]) -> None:
        self.sessions[cycle] = (ccc, members)

    def use(self, cycle: int) -> None:
        self.n = len(self.sessions[cycle][1])

    def order_of(self, cycle: int, ccc: int, members: tuple[int, ...]) -> list[int]:
        """The members in ring order, starting at the coordinator."""
        order = [g for g in self.base.order(cycle).tolist() if g in members]
        i = order.index(ccc)
        return order[i:] + order[:i]

    def members_in_order(self, cycle: int) -> list[int]:
        return self.order_of(cycle, *self.sessions[cycle])

    def from_ccc(self, cycle: int) -> list[int]:
        return self.members_in_order(cycle)

    def ccc(self, cycle: int) -> int:
        return self.sessions[cycle][0]

    def successor(self, gateway: int, cycle: int) -> int:
        order = self.members_in_order(cycle)
        return order[(order.index(gateway) + 1) % len(order)]

    def predecessor(self, gateway: int, cycle: int) -> int:
        order = self.members_in_order(cycle)
        return order[(order.index(gateway) - 1) % len(order)]

    def prune(self, before: int) -> None:
        for c in [c for c in self.sessions if c < before]:
            del self.sessions[c]


@dataclass(frozen=True)
class RingMessage:
    """What admission needs to know of a ring frame: who sent it (from the certificate), the
    session it carries and the decoded protocol message's cycle, kind and pass."""

    sender: int
    ccc: int
    members: tuple[int, ...]
    cycle: int
    kind: str  # "C" collection, "P" publication, "M" mix batch, "K" mix acknowledgement
    pass_no: int
    start: int = 1  # publication: the pass's start position and the turns taken so far
    turns: int = 0

    @classmethod
    def of(cls, sender: int, ccc: int, members: tuple[int, ...], msg: Message) -> RingMessage:
        kind = ("P" if isinstance(msg, Publish) else "M" if isinstance(msg, MixBatch)
                else "K" if isinstance(msg, MixAck) else "C")
        if isinstance(msg, Publish):
            return cls(sender, ccc, tuple(sorted(members)), msg.cycle, kind, msg.pass_no,
                       msg.start, msg.turns)
        return cls(sender, ccc, tuple(sorted(members)), msg.cycle, kind, 0)

    @property
    def key(self) -> tuple[int, str, int, int]:
        return (self.cycle, self.kind, self.pass_no, self.turns)


@dataclass
class Sessions:
    """This gateway's knowledge of the ring sessions of recent cycles."""

    me: int
    peers: frozenset[int]  # every gateway of the ring, this one included
    config: ProtocolConfig
    ring: SessionRing
    coordinated: set[int] = field(default_factory=set)
    seen: set[tuple[int, str, int, int]] = field(default_factory=set)

    def acting_ccc(self, cycle: int, up: set[int] | frozenset[int]) -> int:
        """``Ring.ccc(cycle)`` or, if it is not up, the next gateway in ring order that is
        (this gateway counts as up)."""
        base = self.ring.base
        order = base.order(cycle).tolist()
        start = cycle % base.n
        for i in range(base.n):
            g = order[(start + i) % base.n]
            if g == self.me or g in up:
                return g
        return self.me  # unreachable: we are in the order

    def view_too_small(self, up: set[int] | frozenset[int]) -> str | None:
        """Why no cycle can run with the gateways this one can reach, or None."""
        return self.config.ring_too_small(len({self.me} | set(up)))

    def start(self, cycle: int, up: set[int] | frozenset[int]
              ) -> tuple[tuple[int, ...] | None, str | None]:
        """As the acting coordinator: the session to start (members) and None, or None and
        why not (another session of the cycle is known, or too few gateways are up). Records
        the session when it is started."""
        if cycle in self.ring.sessions:
            ccc, members = self.ring.sessions[cycle]
            return None, f"gw{ccc} already coordinates it (ring {members})"
        members = tuple(sorted({self.me} | set(up)))
        why = self.config.ring_too_small(len(members))
        if why is not None:
            return None, why
        self.ring.set(cycle, self.me, members)
        self.coordinated.add(cycle)
        return members, None

    def accept(self, m: RingMessage) -> None:
        """Record an admitted message (its session and its (cycle, kind, pass))."""
        self.ring.set(m.cycle, m.ccc, m.members)
        self.seen.add(m.key)

    def prune(self, cycle: int) -> None:
        keep = cycle - 3
        self.ring.prune(keep)
        self.seen = {s for s in self.seen if s[0] >= keep}
        self.coordinated = {c for c in self.coordinated if c >= keep}


def admit(m: RingMessage, state: Sessions, wall_cycle: int) -> str | None:
    """Why this gateway must drop ring message ``m``, or None when it may process it.

    Pure: reads ``state``, changes nothing (call :meth:`Sessions.accept` after admitting).
    """
    c = m.cycle
    session = (m.ccc, m.members)
    if not wall_cycle - 1 <= c <= wall_cycle + 1:
        return (f"cycle {c} is outside the live window around {wall_cycle} (one cycle either "
                f"side): this gateway's clock or the sender's is off by more than the margin")
    if state.me not in m.members or any(g not in state.peers for g in m.members):
        return f"session {session} does not hold this gateway or names unknown gateways"
    if m.ccc not in m.members or m.sender not in m.members:
        return f"session {session} does not hold its coordinator and the sender"
    why = state.config.ring_too_small(len(m.members))
    if why is not None:
        return f"session {session}: {why}"
    if m.ccc == state.me and c not in state.coordinated:
        return f"names this gateway coordinator of cycle {c}, which it did not start"
    known = state.ring.sessions.get(c)
    if known is not None and known != session:
        return f"session {session} conflicts with {known}"
    if m.key in state.seen:
        return f"duplicate {m.kind}{m.pass_no} message"
    order = state.ring.order_of(c, m.ccc, m.members)
    n, me = len(order), order.index(state.me)
    if m.kind == "P":
        if not (0 <= m.start < n and 0 <= m.turns <= n):
            return f"publication pass with start {m.start} and {m.turns} turns in a ring of {n}"
        if receiver_position(m.start, m.turns, n) != me:
            return (f"publication message for position {receiver_position(m.start, m.turns, n)}"
                    f", not this gateway's {me}")
        sender = order[sender_position(m.start, m.turns, n)]
        if sender != m.sender:
            return f"from gw{m.sender}, not gw{sender} that the publication order names"
        return None
    if m.kind == "M" and me == 0:
        return "a mix batch for the coordinator (it starts the batch, never receives it)"
    if m.kind == "K" and me == n - 1:
        return "a mix acknowledgement for its deliverer"
    predecessor = order[(me - 1) % n]
    if predecessor != m.sender:
        return f"from gw{m.sender}, not the predecessor in the ring {session}"
    return None

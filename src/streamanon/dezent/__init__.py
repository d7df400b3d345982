"""deZent: decentralized z-anonymity over a ring of gateways (Brunn & Tschorsch).

The pure protocol core (no I/O): counting structures (:mod:`.cbf`), the secure sum
(:mod:`.securesum`), the ring and its rotating coordinator (:mod:`.ring`), the publication
rules (:mod:`.rules`), the publication order (:mod:`.order`), the unlinkable publication
(:mod:`.mix`), the gateway/coordinator cycle logic (:mod:`.protocol`), rotating pseudonyms
(:mod:`.pseudonyms`) and the collusion analysis (:mod:`.collusion`); the domain's cycle and
bucket grids (:mod:`.grid`), shared by the daemons and the simulation.
"""

from streamanon.dezent.cbf import CountingBloomFilter, EncodingError, ExactCounter
from streamanon.dezent.protocol import (
    Gateway,
    ProtocolConfig,
    StructureSpec,
    decode_message,
    encode_message,
    run_cycle,
)
from streamanon.dezent.ring import Ring
from streamanon.dezent.rules import PAPER, WINDOW, publishable
from streamanon.dezent.securesum import SecureSumMask
from streamanon.dezent.stream import DezentRing

__all__ = [
    "PAPER",
    "WINDOW",
    "CountingBloomFilter",
    "DezentRing",
    "EncodingError",
    "ExactCounter",
    "Gateway",
    "ProtocolConfig",
    "Ring",
    "SecureSumMask",
    "StructureSpec",
    "decode_message",
    "encode_message",
    "publishable",
    "run_cycle",
]

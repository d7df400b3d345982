"""streamanon: anonymize data streams (z-anonymity, deZent, CASTLE) with checked guarantees.

>>> from streamanon import ZAnonymizer, Record
>>> ZAnonymizer(z=1, delta_t=60).process(Record(0.0, "alice", "x")).a
'x'
"""

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.records import Record, Rejected, RunStats, Suppressed
from streamanon.zanon import AdaptiveZAnonymizer, ZAnonymizer

__all__ = [
    "AdaptiveZAnonymizer",
    "CastleAnonymizer",
    "Record",
    "Rejected",
    "RuleSet",
    "RunStats",
    "Suppressed",
    "ZAnonymizer",
]
__version__ = "0.1.0"

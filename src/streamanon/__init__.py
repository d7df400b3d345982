"""streamanon: anonymize data streams (z-anonymity, deZent, CASTLE) with checked guarantees.

The public names load lazily (PEP 562): ``import streamanon`` is cheap, and importing an
independent checker never loads the operator it checks.

>>> from streamanon import ZAnonymizer, Record
>>> ZAnonymizer(z=1, delta_t=60).process(Record(0.0, "alice", "x"))[0].a
'x'

The pipeline (read -> operator -> write, for files, stdin and ``kafka://``) loads lazily too,
so importing an operator does not load the readers and writers:

>>> from streamanon import run_z, KafkaOptions
>>> run_z.__module__
'streamanon.pipeline.run'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamanon._lazy import lazy_exports

if TYPE_CHECKING:
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.pipeline.kafka.options import KafkaOptions
    from streamanon.pipeline.run import run_castle, run_z
    from streamanon.records import Record, Rejected, RunStats, Suppressed
    from streamanon.zanon import AdaptiveZAnonymizer, ZAnonymizer

_EXPORTS = {
    "AdaptiveZAnonymizer": "streamanon.zanon.adaptive",
    "CastleAnonymizer": "streamanon.castle.operator",
    "KafkaOptions": "streamanon.pipeline.kafka.options",
    "Record": "streamanon.records",
    "Rejected": "streamanon.records",
    "RuleSet": "streamanon.castle.rules",
    "RunStats": "streamanon.records",
    "Suppressed": "streamanon.records",
    "ZAnonymizer": "streamanon.zanon.operator",
    "run_castle": "streamanon.pipeline.run",
    "run_z": "streamanon.pipeline.run",
}
__all__ = [
    "AdaptiveZAnonymizer",
    "CastleAnonymizer",
    "KafkaOptions",
    "Record",
    "Rejected",
    "RuleSet",
    "RunStats",
    "Suppressed",
    "ZAnonymizer",
    "run_castle",
    "run_z",
]
__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

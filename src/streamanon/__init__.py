"""streamanon: anonymize data streams (z-anonymity, deZent, CASTLE) with checked guarantees.

The public names load lazily (PEP 562): ``import streamanon`` is cheap, and importing an
independent checker never loads the operator it checks.

>>> from streamanon import ZAnonymizer, Record
>>> ZAnonymizer(z=1, delta_t=60).process(Record(0.0, "alice", "x"))[0].a
'x'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.records import Record, Rejected, RunStats, Suppressed
    from streamanon.zanon import AdaptiveZAnonymizer, ZAnonymizer

_EXPORTS = {
    "AdaptiveZAnonymizer": "streamanon.zanon.adaptive",
    "CastleAnonymizer": "streamanon.castle.operator",
    "Record": "streamanon.records",
    "Rejected": "streamanon.records",
    "RuleSet": "streamanon.castle.rules",
    "RunStats": "streamanon.records",
    "Suppressed": "streamanon.records",
    "ZAnonymizer": "streamanon.zanon.operator",
}
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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

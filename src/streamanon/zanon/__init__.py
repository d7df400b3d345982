"""z-anonymity: the operator, its adaptive-z variant and the independent checker.

Names load lazily, so that importing the checker (:mod:`streamanon.zanon.verify`) loads none
of the operator's code (a test asserts it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamanon.zanon.adaptive import AdaptiveZAnonymizer
    from streamanon.zanon.operator import ZAnonymizer, clean_text, hierarchy_levels

_EXPORTS = {
    "AdaptiveZAnonymizer": "streamanon.zanon.adaptive",
    "ZAnonymizer": "streamanon.zanon.operator",
    "clean_text": "streamanon.zanon.operator",
    "hierarchy_levels": "streamanon.zanon.operator",
}
__all__ = [
    "AdaptiveZAnonymizer",
    "ZAnonymizer",
    "clean_text",
    "hierarchy_levels",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

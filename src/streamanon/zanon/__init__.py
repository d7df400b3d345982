"""z-anonymity: the operator, its adaptive-z variant and the independent checker.

Names load lazily, so that importing the checker (:mod:`streamanon.zanon.verify`) loads none
of the operator's code (a test asserts it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamanon._lazy import lazy_exports

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

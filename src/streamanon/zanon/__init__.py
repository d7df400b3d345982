"""z-anonymity: the operator and its adaptive-z variant.

The independent checker is :mod:`streamanon.verify.z`.
"""

from __future__ import annotations

from streamanon.zanon.adaptive import AdaptiveZAnonymizer
from streamanon.zanon.operator import ZAnonymizer, clean_text, hierarchy_levels

__all__ = [
    "AdaptiveZAnonymizer",
    "ZAnonymizer",
    "clean_text",
    "hierarchy_levels",
]

"""z-anonymity: the operator, its adaptive-z variant and the independent checker."""

from streamanon.zanon.adaptive import AdaptiveZAnonymizer
from streamanon.zanon.operator import ZAnonymizer, hierarchy_levels

__all__ = ["AdaptiveZAnonymizer", "ZAnonymizer", "hierarchy_levels"]

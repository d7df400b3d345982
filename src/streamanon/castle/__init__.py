"""CASTLE / Prink: k_s-anonymity with l-diversity and hierarchical generalization for streams.

The independent checker is :mod:`streamanon.verify.castle`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamanon._lazy import lazy_exports

if TYPE_CHECKING:
    from streamanon.castle.cluster import Released, Row
    from streamanon.castle.generalizers import (
        Generalizer,
        HierarchyGeneralizer,
        NoneGeneralizer,
        RangeGeneralizer,
        ReductionGeneralizer,
        register_generalizer,
    )
    from streamanon.castle.hierarchy import Hierarchy
    from streamanon.castle.operator import CastleAnonymizer, Suppression
    from streamanon.castle.rules import AttributeRule, RuleSet

_EXPORTS = {
    "AttributeRule": "streamanon.castle.rules",
    "CastleAnonymizer": "streamanon.castle.operator",
    "Generalizer": "streamanon.castle.generalizers",
    "Hierarchy": "streamanon.castle.hierarchy",
    "HierarchyGeneralizer": "streamanon.castle.generalizers",
    "NoneGeneralizer": "streamanon.castle.generalizers",
    "RangeGeneralizer": "streamanon.castle.generalizers",
    "ReductionGeneralizer": "streamanon.castle.generalizers",
    "Released": "streamanon.castle.cluster",
    "Row": "streamanon.castle.cluster",
    "RuleSet": "streamanon.castle.rules",
    "Suppression": "streamanon.castle.operator",
    "register_generalizer": "streamanon.castle.generalizers",
}
__all__ = [
    "AttributeRule",
    "CastleAnonymizer",
    "Generalizer",
    "Hierarchy",
    "HierarchyGeneralizer",
    "NoneGeneralizer",
    "RangeGeneralizer",
    "ReductionGeneralizer",
    "Released",
    "Row",
    "RuleSet",
    "Suppression",
    "register_generalizer",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

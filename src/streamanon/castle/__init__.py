"""CASTLE / Prink: k_s-anonymity with l-diversity and hierarchical generalization for streams.

The record types are in :mod:`streamanon.castle.records`; the independent checker is
:mod:`streamanon.verify.castle`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamanon._lazy import lazy_exports

if TYPE_CHECKING:
    from streamanon.castle.defaults import Suppression
    from streamanon.castle.generalizers import (
        Generalizer,
        HierarchyGeneralizer,
        NoneGeneralizer,
        RangeGeneralizer,
        ReductionGeneralizer,
        register_generalizer,
    )
    from streamanon.castle.hierarchy import Hierarchy
    from streamanon.castle.operator import CastleAnonymizer
    from streamanon.castle.records import CastleRow, Released
    from streamanon.castle.rules import AttributeRule, RuleSet

# each name is imported from its module when first used: ``streamanon.castle.defaults`` (what
# the command line shows) loads without numpy and the operator
_EXPORTS = {
    "AttributeRule": "streamanon.castle.rules",
    "CastleAnonymizer": "streamanon.castle.operator",
    "CastleRow": "streamanon.castle.records",
    "Generalizer": "streamanon.castle.generalizers",
    "Hierarchy": "streamanon.castle.hierarchy",
    "HierarchyGeneralizer": "streamanon.castle.generalizers",
    "NoneGeneralizer": "streamanon.castle.generalizers",
    "RangeGeneralizer": "streamanon.castle.generalizers",
    "ReductionGeneralizer": "streamanon.castle.generalizers",
    "Released": "streamanon.castle.records",
    "RuleSet": "streamanon.castle.rules",
    "Suppression": "streamanon.castle.defaults",
    "register_generalizer": "streamanon.castle.generalizers",
}

__all__ = [
    "AttributeRule",
    "CastleAnonymizer",
    "CastleRow",
    "Generalizer",
    "Hierarchy",
    "HierarchyGeneralizer",
    "NoneGeneralizer",
    "RangeGeneralizer",
    "ReductionGeneralizer",
    "Released",
    "RuleSet",
    "Suppression",
    "register_generalizer",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

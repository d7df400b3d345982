"""CASTLE / Prink: k_s-anonymity with l-diversity and hierarchical generalization for streams.

The record types are in :mod:`streamanon.castle.records`; the independent checker is
:mod:`streamanon.verify.castle`.
"""

from __future__ import annotations

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
from streamanon.castle.records import CastleRow, Released
from streamanon.castle.rules import AttributeRule, RuleSet

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

"""CASTLE / Prink: k_s-anonymity with l-diversity and hierarchical generalization for streams."""

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

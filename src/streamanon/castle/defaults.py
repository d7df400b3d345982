"""CASTLE's parameter defaults and the :class:`Suppression` modes, without the operator's
imports (numpy, the generalizers): the command line reads them to show its options, and
:class:`~streamanon.castle.operator.CastleAnonymizer` takes its defaults from here.

>>> DEFAULTS["k"], DEFAULTS["suppression"]
(5, <Suppression.drop: 'drop'>)
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Missing(StrEnum):
    """What an empty quasi-identifier does to its tuple: ``reject`` it (an input error),
    ``suppress`` it (counted, not published) or ``star`` (the value counts as the
    attribute's top: the tuple's cluster publishes that attribute fully generalized)."""

    reject = "reject"
    suppress = "suppress"
    star = "star"


#: The reason (and ``suppressed_by_reason`` key) of a tuple suppressed for an empty
#: quasi-identifier under ``missing="suppress"``.
MISSING_REASON = "missing value"


class Suppression(StrEnum):
    """What a suppressed tuple becomes (it is always counted, never lost silently)."""

    drop = "drop"
    null = "null"
    generalize = "generalize"


#: The keyword parameters of the operator and their defaults (one place for every command).
DEFAULTS: dict[str, Any] = {
    "k": 5,
    "l": 2,
    "delta": 200,
    "beta": 50,
    "mu": 10,
    "zeta": 10,
    "suppression": Suppression.drop,
    "max_delay": None,
    "loss_field": None,
    "split": "window",
    "diversity": "distinct",
    "c": None,
    "t": None,
    "reference": None,
    "closeness": "auto",
    "t_hierarchy": None,
    "missing": Missing.reject,
    "dp_epsilon": None,
    "dp_beta": None,
    "dp_rng": None,
    "hierarchy_scope": "shared",
    "static": None,
    "static_ttl": None,
    "static_max": None,
}



def delta_below_k(k: int, delta: int) -> str | None:
    """The warning when δ < k, else ``None``: Prink requires δ >= k (Sect. 4.1.1).

    A tuple leaves when δ newer tuples have arrived, so at most δ + 1 tuples are held
    together, and a cluster needs k individuals: with δ + 1 < k every tuple expires before
    k individuals can have arrived and is suppressed (measured: k 10, δ 5 suppresses all of
    20,000 stand-in tuples); δ = k - 1 can still release (δ 9 released all of them).

    >>> delta_below_k(5, 5) is None
    True
    >>> delta_below_k(10, 5).split(" (")[0]
    'δ = 5 < k = 10: Prink requires δ >= k'
    """
    if delta < k:
        return (f"δ = {delta} < k = {k}: Prink requires δ >= k (at most δ + 1 tuples are "
                "held together; with δ + 1 < k every tuple is suppressed)")
    return None


__all__ = ["DEFAULTS", "MISSING_REASON", "Missing", "Suppression", "delta_below_k"]

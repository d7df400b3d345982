"""The publication rules of deZent: how many current records of a value may be published.

>>> import numpy as np
>>> publishable(np.array([9, 10, 12, 30]), np.array([3, 3, 3, 3]), z=10, rule="paper").tolist()
[0, 1, 3, 3]
>>> publishable(np.array([9, 10, 12, 30]), np.array([3, 3, 3, 3]), z=10, rule="window").tolist()
[0, 3, 3, 3]

Design: docs/design/dezent.md
"""

from __future__ import annotations

from typing import Literal, TypeVar

import numpy as np

from streamanon.errors import ConfigError

PAPER = "paper"
WINDOW = "window"
RULES = (PAPER, WINDOW)
Rule = Literal["paper", "window"]

A = TypeVar("A", int, np.ndarray)


def check_rule(rule: str) -> str:
    if rule not in RULES:
        raise ConfigError(f"unknown publication rule {rule!r} (use {' or '.join(RULES)})")
    return rule


def publishable(count: A, n_current: A, z: int, rule: str = PAPER) -> A:
    """Records of a value that may be published, from its count in Δt and its current records."""
    check_rule(rule)
    if rule == PAPER:
        return np.minimum(n_current, np.maximum(0, count - (z - 1)))  # type: ignore[return-value]
    return np.where(count >= z, n_current, 0)  # type: ignore[return-value]

"""The publication rules of deZent: how many current records of a value may be published.

One place for the rule, used by every scenario of the simulation (centralized with exact
counts, each gateway alone, deZent through the ring) and by the protocol core's coordinator.
With ``D`` the number of distinct sensor nodes that reported value ``v`` within Δt (current
cycle included) and ``n`` the number of current-cycle records of ``v``:

* ``paper`` (the default, Sec. IV-3/IV-4): the coordinator subtracts ``z - 1`` from the count
  and every publication decrements it, so ``min(n, max(0, D - (z - 1)))`` records are published.
* ``window``: every current record of ``v`` is published when ``D >= z``, else none. This is the
  z-anonymity guarantee checked by :func:`streamanon.verify.z.check_z` (``exact=False``):
  at least ``z`` distinct users exposed ``v`` in ``[t - Δt, t]``. It publishes at least as much
  as the paper's rule (``D - (z - 1) <= n`` whenever it limits), with the same guarantee.

Proof sketch (both rules are z-anonymous with exact counts): ``paper`` publishes a record only
when ``D - (z - 1) >= 1``, i.e. ``D >= z``; ``window`` publishes only when ``D >= z``.

>>> import numpy as np
>>> publishable(np.array([9, 10, 12, 30]), np.array([3, 3, 3, 3]), z=10, rule="paper").tolist()
[0, 1, 3, 3]
>>> publishable(np.array([9, 10, 12, 30]), np.array([3, 3, 3, 3]), z=10, rule="window").tolist()
[0, 3, 3, 3]
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

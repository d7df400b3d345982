"""Information-loss metrics of the spec (all in [0, 1], 0 = nothing lost).

* numeric interval ``[lo, hi]`` on domain ``[L, U]``: ``(hi - lo) / (U - L)``;
* GLM for a hierarchy node: ``(leaves under node - 1) / (leaves in tree - 1)``;
* NCP: 0 for a leaf, else ``leaves under node / distinct values of the attribute``;
* PRL: 0 for a leaf, else ``requests of leaves under node / requests of the whole tree``;
* a cluster's loss: the weighted mean over its generalized attributes.

>>> range_loss(2.0, 4.0, 0.0, 10.0)
0.2
>>> glm(1, 9), glm(9, 9), round(glm(3, 9), 3)
(0.0, 1.0, 0.25)
>>> ncp(1, 7), ncp(2, 8)
(0.0, 0.25)
>>> prl(5, 20, leaf=False), prl(5, 20, leaf=True)
(0.25, 0.0)
>>> weighted_mean([0.5, 1.0], [1.0, 0.0])
0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum


class Metric(StrEnum):
    """Loss metric of a hierarchy attribute."""

    glm = "glm"
    ncp = "ncp"
    prl = "prl"


def range_loss(lo: float, hi: float, domain_lo: float, domain_hi: float) -> float:
    """Share of the domain an interval covers; 0 when the domain is a single point."""
    span = domain_hi - domain_lo
    if span <= 0:
        return 0.0
    return min(1.0, (hi - lo) / span)


def glm(leaves_under: int, total_leaves: int) -> float:
    """Generalized Loss Metric of a node covering ``leaves_under`` of ``total_leaves``."""
    if total_leaves <= 1:
        return 0.0
    return (leaves_under - 1) / (total_leaves - 1)


def ncp(leaves_under: int, distinct_values: int) -> float:
    """Normalized Certainty Penalty of a hierarchy node (0 for a leaf), capped at 1."""
    if leaves_under <= 1:
        return 0.0
    return min(1.0, leaves_under / max(1, distinct_values))


def prl(requests_under: float, requests_total: float, *, leaf: bool) -> float:
    """Per Record request Loss: the share of requests a generalized node absorbs."""
    if leaf:
        return 0.0
    if requests_total <= 0:
        return 1.0
    return min(1.0, requests_under / requests_total)


def weighted_mean(losses: Sequence[float], weights: Sequence[float]) -> float:
    """Weighted mean of per-attribute losses; 0 when nothing is generalized."""
    total = sum(weights)
    if total <= 0:
        return 0.0
    return sum(x * w for x, w in zip(losses, weights, strict=True)) / total

"""CASTLEGUARD's differential-privacy step in front of CASTLE: β-sampling and Laplace noise.

A tuple is kept with probability ``beta`` (else it is suppressed, reason :data:`NOT_SAMPLED`);
each range quasi-identifier of a kept tuple gets Laplace noise of scale ``R / epsilon``
before clustering, as CASTLEGUARD does (github.com/hallnath1/CASTLEGUARD, ``src/castle.py``:
``insert`` and ``fudge_tuple``). R is the attribute's configured domain width (values clamped
to the domain, before and after the noise), else the width seen so far (at least 1).

>>> import numpy as np
>>> dp = Perturbation(epsilon=1.0, beta=1.0, rng=np.random.default_rng(1))
>>> dp.epsilon, dp.beta, dp.kept_share()
(1.0, 1.0, 1.0)

The privacy argument (what ε means here, what it does not cover), the randomness and what
``verify castle`` can check: docs/design/dp.md.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from streamanon.errors import ConfigError

#: The reason (and ``suppressed_by_reason`` key) of a tuple left out by β-sampling.
NOT_SAMPLED = "not sampled (dp-beta)"

_BLOCK = 4096  # tuples' worth of random draws taken at once
_U53 = 2.0 ** -53


class OsRandom:
    """Uniform draws in (0, 1] from the operating system's source (``os.urandom``), a
    block at a time. Holds no state worth keeping: a copy (pickle, checkpoint) starts
    with an empty block, so no drawn-but-unused noise is ever written anywhere."""

    def random(self, n: int) -> np.ndarray:
        words = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        return ((words >> np.uint64(11)).astype(np.float64) + 1.0) * _U53

    def __reduce__(self) -> tuple[Any, ...]:
        return (OsRandom, ())


class _Generator:
    """An injected :class:`numpy.random.Generator` as a source of draws in (0, 1]."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def random(self, n: int) -> np.ndarray:
        return 1.0 - self.rng.random(n)


class Perturbation:
    """β-sampling and Laplace perturbation of the range quasi-identifiers of each tuple.

    Args:
        epsilon: the ε of the Laplace noise per attribute (scale = R / ε; > 0), CASTLEGUARD's
            Φ; ``None``: no noise (sampling only).
        beta: the probability that a tuple is kept (0 < β <= 1); ``None``: 1 (no sampling).
        rng: a :class:`numpy.random.Generator` to draw from (tests, reproducible studies);
            ``None`` (the default): the operating system's source, see docs/design/dp.md.
    """

    def __init__(self, *, epsilon: float | None, beta: float | None,
                 rng: np.random.Generator | None = None) -> None:
        if epsilon is not None and not (isinstance(epsilon, int | float)
                                        and math.isfinite(epsilon) and epsilon > 0):
            raise ConfigError(f"dp_epsilon must be a finite number > 0, got {epsilon!r}")
        if beta is not None and not (isinstance(beta, int | float) and 0 < beta <= 1):
            raise ConfigError(f"dp_beta must be a number in (0, 1], got {beta!r}")
        self.epsilon = None if epsilon is None else float(epsilon)
        self.beta = None if beta is None else float(beta)
        self._source: OsRandom | _Generator = OsRandom() if rng is None else _Generator(rng)
        self._keep = 1.0 if beta is None else float(beta)
        # per rule set (object): its domains and observed ranges; a list, so that a pickle
        # of the operator keeps the rule sets and these entries together
        self._by_set: list[tuple[Any, ...]] = []
        self._draws: list[list[float]] = []  # per tuple: the sampling draw, then d Laplace(1) draws
        self._width = 0
        self._next = 0

    def kept_share(self) -> float:
        """The probability that a tuple is kept (β, or 1)."""
        return self._keep

    def _setup(self, cset: Any) -> list[Any]:
        """Per rule set: the configured domains (or the observed range, kept here)."""
        lo = [g.lo if g.configured else math.inf for g in cset.num]
        hi = [g.hi if g.configured else -math.inf for g in cset.num]
        fixed = [bool(g.configured) for g in cset.num]
        entry = [cset, len(fixed), fixed, lo, hi]
        self._by_set.append(entry)
        return entry

    def _row(self, d: int) -> list[float]:
        width = 1 + d if self.epsilon is not None else 1
        if width != self._width or self._next >= len(self._draws):
            u = self._source.random(_BLOCK * (1 + 2 * (width - 1))).reshape(_BLOCK, -1)
            draws = u[:, :width].copy()
            if width > 1:  # Laplace(1) = a random sign times an Exp(1) magnitude
                sign = np.where(u[:, width:] < 0.5, -1.0, 1.0)
                draws[:, 1:] = sign * -np.log(u[:, 1:width])
            self._draws, self._width, self._next = draws.tolist(), width, 0
        row = self._draws[self._next]
        self._next += 1
        return row

    def admit(self, cset: Any, item: Any) -> bool:
        """Sample ``item`` (``False``: leave it out) and perturb its range values in place."""
        entry = next((e for e in reversed(self._by_set) if e[0] is cset), None)
        if entry is None:
            entry = self._setup(cset)
        _, d, fixed, lo, hi = entry
        row = self._row(d)
        if row[0] > self._keep:
            return False
        eps = self.epsilon
        if eps is None or not d:
            return True
        x = item.numbers.tolist()
        out = []
        for j in range(d):
            v = x[j]
            if fixed[j]:
                a, b = lo[j], hi[j]
                v = a if v < a else b if v > b else v  # NaN (a missing value) stays NaN
                v += (b - a) / eps * row[j + 1]
                v = a if v < a else b if v > b else v
            else:  # the observed range, as CASTLEGUARD's global ranges (this tuple included)
                if v < lo[j]:
                    lo[j] = v
                if v > hi[j]:
                    hi[j] = v
                span = hi[j] - lo[j]
                v += (span if span > 1.0 else 1.0) / eps * row[j + 1]
            out.append(v)
        item.numbers = np.array(out)
        return True

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if isinstance(self._source, OsRandom):  # drawn-but-unused noise is not kept
            state["_draws"], state["_width"], state["_next"] = [], 0, 0
        return state

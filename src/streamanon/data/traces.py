"""Seeded synthetic ``(t, u, a)`` traces: Zipf-like values, flat or hierarchical.

Used by the demo, the tests and the benchmarks, so all of them see the same kind of data.

>>> rows = zipf_trace(5, n_users=3, n_values=10, seed=1)
>>> len(rows), rows[0][0] <= rows[-1][0]
(5, True)
>>> zipf_trace(1, n_users=1, n_values=1000, levels=3, seed=2)[0][2].count("*")
2
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def value_name(rank: int, levels: int = 1) -> str:
    """The name of value ``rank``; with levels, coarsest first: ``g0*g0.3*v31``."""
    if levels <= 1:
        return f"v{rank}"
    parts = []
    for level in range(levels - 1, 0, -1):
        parts.append(f"g{level}.{rank // (10 ** level)}")
    parts.append(f"v{rank}")
    return "*".join(parts)


def zipf_trace(
    n: int,
    *,
    n_users: int = 2000,
    n_values: int = 10_000,
    exponent: float = 1.1,
    levels: int = 1,
    duration: float = 86_400.0,
    t0: float = 1_451_606_400.0,
    seed: int = 1,
) -> list[tuple[str, str, str]]:
    """``n`` rows ``(t, u, a)`` as text, times sorted over ``duration`` seconds from ``t0``.

    Value popularity follows ``p(rank) ~ 1 / rank**exponent``; users are uniform.

    Args:
        n: the number of rows.
        n_users: the number of users.
        n_values: the number of distinct values.
        exponent: the Zipf exponent of value popularity.
        levels: levels of the values' hierarchy (1: flat values; see :func:`value_name`).
        duration: seconds the times spread over.
        t0: the first possible time (Unix seconds).
        seed: the seed of the random generator.
    """
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_values + 1) ** exponent
    ranks = rng.choice(n_values, size=n, p=weights / weights.sum())
    users = rng.integers(0, n_users, size=n)
    times = np.sort(np.round(t0 + rng.uniform(0, duration, size=n), 3))
    names = [value_name(r, levels) for r in range(n_values)]
    return [
        (repr(t), f"u{u}", names[r])
        for t, u, r in zip(times.tolist(), users.tolist(), ranks.tolist(), strict=True)
    ]


def write_trace(path: str | Path, rows: list[tuple[str, str, str]]) -> Path:
    """Write rows as CSV with the ``t,u,a`` header."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as fh:
        fh.write("t,u,a\n")
        fh.write("".join(f"{t},{u},{a}\n" for t, u, a in rows))
    return path

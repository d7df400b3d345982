"""The domain's grids, shared by the daemons and the simulation: the time grid (15-minute
cycles) and the bucket grid of readings (the known domain of the exact counter).

A reading in watts is rounded to a bucket whose width grows with the value (:func:`bucket`);
:func:`bucket_grid` lists every bucket value up to a maximum.

>>> bucket(np.array([0.4, 24.6, 25.4, 49.0, 51.0, 240.0, 251.0])).tolist()
[0, 25, 26, 50, 50, 240, 260]
>>> CYCLES_PER_DAY * CYCLE_SECONDS
86400.0
"""

from __future__ import annotations

import math

import numpy as np

CYCLE_SECONDS = 900.0
CYCLES_PER_DAY = 96

_LEVELS = 25.0 * 2.0 ** np.arange(48)  # g = 25 * 2^i
_WIDTHS = np.maximum(1, (25 * 2 ** np.arange(48, dtype=np.int64)) // 20).astype(np.float64)


def bucket(values_w: np.ndarray) -> np.ndarray:
    """Round to a bucket whose width grows with the value (spec): width ``max(1, g // 20)``
    where ``g`` is the smallest ``25 * 2^i`` at least the value; nearest multiple, halves up.
    """
    v = np.maximum(np.asarray(values_w, dtype=np.float64), 0.0)
    width = _WIDTHS[np.searchsorted(_LEVELS, v, side="left")]
    return (np.floor(v / width + 0.5) * width).astype(np.int64)


def bucket_grid(max_w: float) -> np.ndarray:
    """Every bucket value of readings in ``[0, max_w]``: the known domain of the exact counter.

    >>> grid = bucket_grid(120.0)
    >>> bool(np.isin(bucket(np.linspace(0, 120, 10_001)), grid).all())
    True
    """
    values = []
    g, lo = 25, 0.0
    while True:
        w = max(1, g // 20)
        values.extend(range(math.floor(lo / w) * w, g + w, w))
        if g >= max_w:
            break
        lo, g = g, g * 2
    return np.unique(np.asarray(values, dtype=np.int64))


__all__ = ["CYCLES_PER_DAY", "CYCLE_SECONDS", "bucket", "bucket_grid"]

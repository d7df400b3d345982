"""The domain's grids: the bucket of a reading and the bucket grid (the exact counter's domain)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streamanon.dezent.grid import bucket, bucket_grid


@given(st.floats(0, 50_000, allow_nan=False))
def test_bucket_width_and_rounding(v):
    b = int(bucket(np.array([v]))[0])
    g = 25
    while g < v:
        g *= 2
    width = max(1, g // 20)
    assert b % width == 0 and abs(b - v) <= width / 2
    assert b in set(bucket_grid(max(v, 1.0)).tolist())

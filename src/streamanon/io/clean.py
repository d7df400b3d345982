"""The rules a chunk must meet to take a fast lane, whichever parser read it.

A clean chunk's users and values need no stripping and fit the length limit, and its times
are finite and in order: then the fast lanes (:mod:`streamanon.io.lane`, the C parser, and
:mod:`streamanon.io.fastcsv`, Arrow's reader) give exactly what the Python reader would.

Design: docs/design/pipeline.md
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def clean_names(names: Sequence[str], max_len: int) -> bool:
    """No name empty, longer than ``max_len`` or with surrounding whitespace (as ``strip``
    sees it: the Python reader would strip such a user or value, or refuse it)."""
    return bool(names) and min(map(len, names)) > 0 and max(map(len, names)) <= max_len and \
        not any(map(str.__ne__, names, map(str.strip, names)))


def clean_times(t: np.ndarray, clock: float) -> bool:
    """Finite times, none before ``clock`` (the reader's), never going backwards."""
    return bool(np.all(np.isfinite(t))) and t[0] >= clock and bool(np.all(t[1:] >= t[:-1]))

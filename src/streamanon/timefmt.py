"""Timestamps: float seconds or ISO 8601 (naive times are taken as UTC).

Pure (no I/O), so the readers and the operators that read times (CASTLE's ``max_delay``) share
one parser.

>>> parse_time("1451606400.5")
1451606400.5
>>> parse_time("2016-01-01T00:00:00Z")
1451606400.0
>>> parse_time("2016-01-01 01:00:00+01:00")
1451606400.0
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from streamanon.errors import BadValueError


def parse_time(text: str) -> float:
    """Seconds since the epoch from ``text``; raises ``ValueError`` with the reason."""
    s = text.strip()
    try:
        value = float(s)
    except ValueError:
        try:
            dt = datetime.fromisoformat(s)
        except ValueError:
            raise BadValueError(None, "time is neither seconds nor ISO 8601") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()
    if not math.isfinite(value):
        raise BadValueError(None, "time is not a finite number")
    return value

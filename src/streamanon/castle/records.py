"""CASTLE's public record types: an input tuple (:class:`CastleRow`) and a released one
(:class:`Released`), and the identity of an id or sensitive value (:func:`canonical`).

Apart from the cluster engine (:mod:`streamanon.castle.cluster`), so that readers and writers
(:mod:`streamanon.io`, the Flink job) name the records without the engine's code.

>>> CastleRow({"u": "a", "age": 30}, line=2) == CastleRow({"u": "a", "age": 30})
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class CastleRow:
    """One input tuple: its columns, and where it came from (for messages and timing).

    ``t`` is the arrival time in seconds, used only by the ``max_delay`` bound; when absent it
    is read from the rules' ``time`` column.
    """

    values: Mapping[str, Any]
    line: int | None = field(default=None, compare=False)
    t: float | None = None


@dataclass(slots=True)
class Released:
    """One output tuple: the input's columns with quasi-identifiers generalized.

    ``cluster`` numbers the released equivalence group (-1 for a suppressed tuple written by
    the ``null``/``generalize`` strategies); ``loss`` is that group's information loss.
    """

    values: dict[str, Any]
    loss: float
    cluster: int
    line: int | None = None


def canonical(value: Any) -> str:
    """The identity of an id or sensitive value: numbers by value, the rest by text.

    >>> canonical(5), canonical(5.0), canonical("5"), canonical(True)
    ('5.0', '5.0', '5', 'true')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value))
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)

"""streamanon on Apache Flink: PyFlink functions and job builders (the ``flink`` extra).

Importing this package needs nothing beyond the core. Records cross between the JVM and
Python, and between tasks, in batches only; the jobs' outputs are identical to the
commands' (``streamanon z``, ``streamanon castle``).

:func:`z_anonymize` and :func:`castle` are operators for the user's own PyFlink job: a
``DataStream`` of records in, the ``DataStream`` of released records out
(:mod:`streamanon.flink.operator`).

Design: docs/design/flink.md
"""

from __future__ import annotations

from typing import Any

__all__ = ["castle", "z_anonymize"]


def __getattr__(name: str) -> Any:
    if name in __all__:  # imported on first use: PyFlink is an extra
        from streamanon.flink import operator

        return getattr(operator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

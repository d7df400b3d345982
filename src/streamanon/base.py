"""The one contract every streaming operator honours (z, adaptive z, CASTLE, the deZent ring).

>>> from streamanon.zanon import ZAnonymizer
>>> isinstance(ZAnonymizer(z=2, delta_t=60), StreamOperator)
True

Design: docs/design/core.md
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

SUMMARY_KEYS = ("read", "released", "suppressed", "held")


@runtime_checkable
class StreamOperator(Protocol):
    """Structural type of a streaming operator (see the module docstring)."""

    def process(self, record: Any) -> list[Any]: ...

    def advance(self, now: float) -> list[Any]: ...

    def flush(self) -> list[Any]: ...

    def summary(self) -> dict[str, Any]: ...


F = TypeVar("F", bound=Callable[..., Any])


def legacy_positional(*names: str) -> Callable[[F], F]:
    """Let an ``__init__`` whose parameters became keyword-only still take ``names`` by position.

    Calls written before the keyword-only contract (``ZAnonymizer(5, 600)``) keep working and
    get a :class:`DeprecationWarning` naming the keywords to use; ``inspect.signature`` (and
    ``help``) show the keyword-only signature. Remove once no caller passes them by position.
    """

    def wrap(init: F) -> F:
        params = list(inspect.signature(init).parameters.values())
        positional = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                          p.POSITIONAL_OR_KEYWORD))

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            extra = args[positional - 1:]
            if extra:
                if len(extra) > len(names):
                    raise TypeError(f"{type(self).__name__}() takes at most "
                                    f"{positional - 1 + len(names)} positional arguments")
                given = dict(zip(names, extra, strict=False))
                twice = set(given) & set(kwargs)
                if twice:
                    raise TypeError(f"{type(self).__name__}() got multiple values for "
                                    f"{', '.join(sorted(twice))}")
                warnings.warn(
                    f"{type(self).__name__}: pass {', '.join(given)} by keyword "
                    f"({', '.join(f'{k}=...' for k in given)}); positional parameters are "
                    "deprecated", DeprecationWarning, stacklevel=2)
                kwargs.update(given)
                args = args[: positional - 1]
            init(self, *args, **kwargs)

        return __init__  # type: ignore[return-value]

    return wrap


class OperatorBase:
    """What the operators share: their parameters, read back from ``__init__``'s signature.

    >>> from streamanon.zanon import ZAnonymizer
    >>> ZAnonymizer(z=3, delta_t=600).params()
    {'z': 3, 'delta_t': 600.0, 'separator': '*'}
    """

    def params(self) -> dict[str, Any]:
        """The keyword-only parameters of ``__init__``, name -> current value (the attribute
        of the same name), in the signature's order."""
        out: dict[str, Any] = {}
        for name, p in inspect.signature(type(self).__init__).parameters.items():
            if p.kind is p.KEYWORD_ONLY:
                try:
                    out[name] = getattr(self, name)
                except AttributeError:
                    raise AttributeError(f"{type(self).__name__} keeps no attribute {name!r} "
                                         "for its parameter of that name") from None
        return out

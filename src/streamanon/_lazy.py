"""Lazy package exports: a package names what it exports and from which module, and a name's
module is imported on first use (so ``import streamanon`` and the CLI's start-up stay light).

>>> getattr_, dir_ = lazy_exports("demo", {"sqrt": "math"}, {})
>>> getattr_("sqrt")(9.0), "sqrt" in dir_()
(3.0, True)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str], namespace: dict[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``: ``exports`` maps each
    exported name to its module; a loaded name is kept in ``namespace`` (the package's
    ``globals()``), so it is looked up once."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(module), name)
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__


__all__ = ["lazy_exports"]

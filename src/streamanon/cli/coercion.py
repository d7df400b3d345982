"""Option values turned into Python values without loading pydantic, when typer's own answer
is plain (anything else goes to typer's adapter, so errors stay typer's).

Design: docs/design/cli.md
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

try:
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_choice, coerce_cli_path, routes_to_path
except ImportError:  # pragma: no cover - a typer without the pydantic layer
    RuntimeParam = None  # type: ignore[assignment,misc]

_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_UNSURE = object()


def _plain_number(kind: type, value: Any, info: Any) -> Any:
    """``value`` as ``kind`` (int or float) when it is one already or written plainly, and
    within the option's bounds; else :data:`_UNSURE`."""
    if type(value) is kind:
        number = value
    elif isinstance(value, str) and (_INT if kind is int else _FLOAT).fullmatch(value):
        number = kind(value)
    else:
        return _UNSURE
    if info.clamp or (info.min is not None and number < info.min) or (
            info.max is not None and number > info.max):
        return _UNSURE  # typer's adapter clamps or says what is wrong
    return number


def plain_value(annotation: Any, info: Any, value: Any, param: Any, ctx: Any) -> Any:
    """What typer makes of ``value`` for a plain option, or :data:`_UNSURE`.

    Args:
        annotation: the option's type annotation.
        info: typer's parameter info of the option (parser, bounds, choices, path settings).
        value: the value given on the command line (or its default).
        param: the click parameter (for typer's messages).
        ctx: the click context.
    """
    if info.parser is None and get_origin(annotation) is list and get_args(annotation) == (
            str,) and isinstance(value, list | tuple) and all(type(v) is str for v in value):
        return list(value)  # a repeated text option: what typer's list adapter makes of it
    if info.parser is not None or get_origin(annotation) is not None:
        return _UNSURE
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        try:
            return coerce_cli_choice(value, choices=list(annotation),
                                     case_sensitive=info.case_sensitive, ctx=ctx)
        except (ValueError, TypeError):  # typer's adapter says it in its own words
            return _UNSURE
    if annotation is str:
        return value if isinstance(value, str) else _UNSURE
    if annotation is int or annotation is float:
        return _plain_number(annotation, value, info)
    if annotation is not bool and routes_to_path(annotation, info) and isinstance(
            value, str | Path):
        path_type = info.path_type
        if path_type is None and isinstance(annotation, type) and issubclass(annotation, Path):
            path_type = annotation
        if isinstance(value, str) and isinstance(path_type, type) and issubclass(
                path_type, Path):
            # what pydantic's TypeAdapter(path_type) makes of any str (typer would load
            # pydantic for it): the path itself
            value = path_type(value)
        try:
            return coerce_cli_path(value, info, path_type=path_type, param=param, ctx=ctx)
        except (ValueError, TypeError):
            return _UNSURE
    return _UNSURE


if RuntimeParam is not None:
    class PlainCoercion(RuntimeParam):  # type: ignore[misc,valid-type]
        """typer's coercion of one parameter, plain values first (see the module)."""

        def __init__(self, descriptor: Any) -> None:
            object.__setattr__(self, "annotation", descriptor.annotation)
            object.__setattr__(self, "parameter_info", descriptor.parameter_info)
            object.__setattr__(self, "_descriptor", descriptor)
            object.__setattr__(self, "_typer", None)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            plain = plain_value(self.annotation, self.parameter_info, value, param, ctx)
            if plain is not _UNSURE:
                return plain
            return self.typer()._coerce_value(value, param=param, ctx=ctx)

        def typer(self) -> Any:
            """typer's own coercion of this parameter (built when first needed)."""
            if self._typer is None:
                object.__setattr__(self, "_typer", build_runtime_param(self._descriptor))
            return self._typer


def install_one(param: Any) -> None:
    """Give ``param`` a :class:`PlainCoercion`, unless typer has no such layer, built its own
    already, or the parameter opens files."""
    if RuntimeParam is None:  # pragma: no cover
        return
    descriptor = getattr(param, "type_descriptor", None)
    if getattr(param, "_runtime_param", False) is None and descriptor is not None and (
            descriptor.file_annotation is None):
        param._runtime_param = PlainCoercion(descriptor)

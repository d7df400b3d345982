"""Plain option values are coerced without pydantic (streamanon.cli.coercion), exactly as
typer's own adapters coerce them: same value, or the same error, for every parameter of every
command and a range of spellings."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import get_origin

import pytest
import typer.main
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param

from streamanon.cli import app
from streamanon.cli.coercion import PlainCoercion

SPELLINGS = {
    int: ["5", "0", "-3", "007", "+5", " 5", "5.0", "abc", "1e3", "99999999999999999999", 5, 0],
    float: ["600", "0.5", "1e3", "-1", ".5", "5.", "inf", "nan", "1_000", "2E-3", " 7", 1.5],
    str: ["x", "", "kafka://127.0.0.1:9092/t", "é"],
    Path: ["a.csv", "-", "", "dir/b.jsonl"],
    list[str]: [("a",), ("a", "b,c"), (), ["x", ""], ("x", 5), "ab", 5],
}


def parameters() -> list[tuple[str, object, object]]:
    out = []

    def walk(path: str, command: object) -> None:
        for param in getattr(command, "params", ()):
            out.append((f"{path} {param.name}", command, param))
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(f"{path} {name}", sub)

    walk("streamanon", typer.main.get_command(app))
    return out


def outcome(runtime: object, value: object, param: object, ctx: Context) -> object:
    try:
        return ("value", repr(runtime.coerce(value, param=param, ctx=ctx)))  # type: ignore[attr-defined]
    except BadParameter as exc:
        return ("error", exc.message)


@pytest.mark.parametrize(("name", "command", "param"), parameters(),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_plain_coercion_is_typers(name: str, command: object, param: object) -> None:
    runtime = param._runtime_param  # type: ignore[attr-defined]
    descriptor = param.type_descriptor  # type: ignore[attr-defined]
    if descriptor.annotation is bool:
        return  # flags: typer coerces no bool it is given
    assert isinstance(runtime, PlainCoercion), name
    annotation = descriptor.annotation
    values = SPELLINGS.get(annotation, [])
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        values = [*(m.value for m in annotation), *(m.value.upper() for m in annotation),
                  "maybe", next(iter(annotation))]
    if not values:  # lists and other types: typer's adapter from the first value on
        assert get_origin(annotation) is not None, (name, annotation)
    ctx = Context(command)  # type: ignore[arg-type]
    reference = build_runtime_param(descriptor)
    for value in [*values, param.default]:  # type: ignore[attr-defined]
        assert outcome(runtime, value, param, ctx) == outcome(reference, value, param, ctx), (
            name, value)


def test_plain_values_need_no_adapter() -> None:
    """The point of it: `streamanon z --z 5 --delta-t 600 --on-error skip` builds none of
    typer's adapters (so loads no pydantic), and a bad value still gets typer's message."""
    z = typer.main.get_command(app).commands["z"]  # type: ignore[attr-defined]
    params = {p.name: p for p in z.params}
    ctx = Context(z)
    for name, value in (("z", "5"), ("delta_t", "600"), ("on_error", "skip"),
                        ("source", "in.csv"), ("summary_file", "s.json")):
        params[name]._runtime_param.coerce(value, param=params[name], ctx=ctx)
        assert params[name]._runtime_param._typer is None, name
    with pytest.raises(BadParameter, match="greater than or equal to 1"):
        params["z"]._runtime_param.coerce("0", param=params["z"], ctx=ctx)


def test_repeated_text_options_need_no_adapter() -> None:
    """`verify castle --qi a,b --qi c --sa s` (lists of texts) builds no adapter either."""
    castle = typer.main.get_command(app).commands["verify"].commands["castle"]  # type: ignore[attr-defined]
    params = {p.name: p for p in castle.params}
    ctx = Context(castle)
    for name, value in (("qi", ("a,b", "c")), ("sa", ("s",)), ("id_field", "id")):
        got = params[name]._runtime_param.coerce(value, param=params[name], ctx=ctx)
        assert got == (list(value) if isinstance(value, tuple) else value)
        assert params[name]._runtime_param._typer is None, name

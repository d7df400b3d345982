"""MkDocs hook: the CLI reference, generated from the typer app at build time.

A page containing the line ``<!-- cli-reference -->`` gets, in its place, one section per
command (every group and subcommand, in the app's order): its usage line, its help text (with
its example as a code block) and a table of every argument and option with its type, default
and description. The text is exactly what ``--help`` shows, so the two cannot drift apart.
"""

from __future__ import annotations

import re
import typing
from typing import Any

MARKER = "<!-- cli-reference -->"
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|#])")


def _plain(text: str | None) -> str:
    """Help text as written: undo the rich-markup escaping of the app."""
    return (text or "").replace("\\[", "[").replace("\b", "")


def _md(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", text)


def _help_blocks(text: str) -> str:
    """Paragraphs as markdown; indented paragraphs (examples) as bash code blocks."""
    import inspect

    out = []
    for para in inspect.cleandoc(_plain(text)).split("\n\n"):
        lines = para.splitlines()
        if lines and all(line.startswith("    ") for line in lines if line.strip()):
            out.append("```bash\n" + "\n".join(line[4:] for line in lines) + "\n```")
        else:
            out.append(_md(" ".join(line.strip() for line in lines)))
    return "\n\n".join(out)


def _type_of(param: Any) -> str:
    """``int``, ``float >= 0``, ``path``, a choice list or ``flag``, from click or typer."""
    import enum
    from pathlib import PurePath

    ann = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    choices = getattr(getattr(param, "type", None), "choices", None)
    if ann is not None and isinstance(ann, type) and issubclass(ann, enum.Enum):
        choices = [m.value for m in ann]
    if choices:
        return " \\| ".join(f"`{getattr(c, 'value', c)}`" for c in choices)
    if getattr(param, "is_flag", False) or ann is bool:
        return "flag"
    repeat = ""
    if typing.get_origin(ann) in (list, tuple):
        ann, repeat = (typing.get_args(ann) or (str,))[0], " (repeatable)"
    if isinstance(ann, type):
        name = "path" if issubclass(ann, PurePath) else ann.__name__
    else:
        name = str(getattr(getattr(param, "type", None), "name", "") or "text")
        name = name.replace("integer range", "int").replace("float range", "float")
    lo, hi = getattr(param, "min", None), getattr(param, "max", None)
    if lo is not None and hi is not None:
        name += f" in [{lo:g}, {hi:g}]"
    elif lo is not None:
        name += f" >= {lo:g}"
    elif hi is not None:
        name += f" <= {hi:g}"
    return _md(name + repeat)


def _default_of(param: Any) -> str:
    if getattr(param, "required", False):
        return "required"
    default = param.default
    if callable(default) or default is None or (getattr(param, "is_flag", False) and not default):
        return ""
    value = getattr(default, "value", default)
    return f"`{value}`"


def _usage(path: list[str], command: Any) -> str:
    pieces = []
    for param in command.params:
        if param.param_type_name == "argument":
            name = param.metavar or param.name.upper()
            pieces.append(name if param.required else f"[{name}]")
    subs = getattr(command, "commands", None)
    tail = " COMMAND ..." if subs else ""
    return " ".join(["streamanon", *path[1:], "[OPTIONS]", *pieces]) + tail


def _section(path: list[str], command: Any, level: int) -> list[str]:
    title = " ".join(["streamanon", *path[1:]])
    out = [f"{'#' * level} `{title}`", "", f"```\n{_usage(path, command)}\n```", ""]
    if command.help:
        out += [_help_blocks(command.help), ""]
    rows = []
    for param in command.params:
        if param.name == "help" or getattr(param, "hidden", False):
            continue
        if param.param_type_name == "option":
            opts = (*param.opts, *getattr(param, "secondary_opts", []))
            names = ", ".join(f"`{o}`" for o in opts)
        else:
            names = f"`{param.metavar or param.name.upper()}`"
        help_text = _md(" ".join(_plain(getattr(param, "help", "") or "").split()))
        rows.append(f"| {names} | {_type_of(param)} | {_default_of(param)} | {help_text} |")
    if rows:
        out += ["| argument / option | type | default | description |", "|---|---|---|---|",
                *rows, ""]
    for name, sub in (getattr(command, "commands", None) or {}).items():
        out += _section([*path, name], sub, min(level + 1, 4))
    return out


def cli_reference() -> str:
    """The markdown of the whole reference."""
    import typer.main

    from streamanon.cli import app

    root = typer.main.get_command(app)
    lines = _section(["streamanon"], root, 2)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: replace the marker line by the generated reference."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())

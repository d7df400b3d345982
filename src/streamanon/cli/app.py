"""The typer application objects; command modules attach themselves to these.

Help texts are plain text: the root group (:class:`LiteralHelpGroup`) escapes every ``[`` of
every command's and option's help once, so ``[lo,hi]`` or ``[t-Δt, t]`` is shown as written
instead of being eaten as rich markup; it joins the lines of each docstring paragraph (the
terminal wraps them; indented examples keep theirs), and names arguments in upper case in the
usage line as in the prose (``streamanon z [OPTIONS] INPUT``). Command modules therefore write
brackets plainly.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

_UNESCAPED_BRACKET = re.compile(r"(?<!\\)\[")
_EXAMPLE = re.compile(r"(?<=\S)\s+(Examples?( \([^)]*\))?:)$")


def literal(text: str | None) -> str | None:
    r"""``text`` with every ``[`` escaped for rich markup (an escaped one is left alone).

    >>> print(literal("ranges as [lo,hi], extra \\[flink]"))
    ranges as \[lo,hi], extra \[flink]
    """
    return None if text is None else _UNESCAPED_BRACKET.sub(r"\\[", text)


def reflow(text: str | None) -> str | None:
    """Docstring paragraphs as single lines (the terminal wraps them); indented blocks, such
    as examples, keep their lines.

    >>> reflow("First line\\nof a paragraph. Example:\\n\\n    cmd --x 1")
    'First line of a paragraph.\\n\\nExample:\\n\\n\\x08    cmd --x 1'
    """
    if text is None:
        return None
    out = []
    for p in inspect.cleandoc(text).split("\n\n"):
        if p.startswith("\b"):
            out.append(p)
        elif p.startswith(" "):
            # typer dedents the help once more; a leading "\b" (dropped when shown, as rich
            # drops control characters) keeps an example block indented as written
            out.append("\n".join("\b" + line for line in p.splitlines()))
        else:  # a closing "Example:" on its own line keeps the example below it indented
            out.append(_EXAMPLE.sub(r"\n\n\1", " ".join(p.split())))
    return "\n\n".join(out)


def _usage_name(name: str, required: bool) -> Callable[[], str]:
    return lambda: name if required else f"[{name}]"


def _literal_help(command: Any) -> None:
    command.help = reflow(command.help)
    for attr in ("help", "short_help", "epilog"):
        setattr(command, attr, literal(getattr(command, attr, None)))
    for param in command.params:
        if getattr(param, "help", None):
            param.help = literal(param.help)  # type: ignore[attr-defined]
        if param.param_type_name == "argument" and param.name:
            if param.metavar is None:
                param.metavar = param.name.upper()
            if hasattr(param, "_usage_display_name"):  # typer writes a required one as {NAME}
                param._usage_display_name = _usage_name(param.metavar, param.required)
    for sub in getattr(command, "commands", {}).values():
        _literal_help(sub)


class LiteralHelpGroup(TyperGroup):
    """The root command group: built last, it makes every help text below it literal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _literal_help(self)


app = typer.Typer(
    name="streamanon",
    cls=LiteralHelpGroup,
    help=(
        "Anonymize data streams before anyone untrusted sees them.\n\n"
        "z-anonymity (`z`), decentralized z-anonymity (deZent), and CASTLE k_s-anonymity with "
        "l-diversity. Every command prints a summary that adds up (read = published + "
        "suppressed + rejected); add --json for one JSON object instead of the table. "
        "Rows go to stdout only with -o -, and then nothing else does.\n\n"
        "Exit codes: 0 ok, 1 a check found a problem, 2 usage or input error (nothing "
        "written), 70 internal error, 130 interrupted (143 terminated).\n\n"
        "Start with `streamanon demo`: it writes trace.csv, in.csv and rules.toml for the "
        "README's quick tour."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

verify_app = typer.Typer(
    help=(
        "Independent checkers: recompute a guarantee from input and output, exit 1 with the "
        "first counterexample."
    ),
    no_args_is_help=True,
)
app.add_typer(verify_app, name="verify")

experiment_app = typer.Typer(
    help=(
        "Parameter grids: run many configurations (in parallel processes), write one CSV row "
        "per run with every parameter, and draw the PNG plots of each trade-off."
    ),
    no_args_is_help=True,
)
app.add_typer(experiment_app, name="experiment")

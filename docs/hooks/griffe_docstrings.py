"""Griffe extension: the project's docstrings (plain text with doctests) as Markdown.

The docstrings are written for ``help()`` and doctest: bare ``>>>`` examples, reST roles such as
``:class:`~streamanon.io.InputError```, and ``::`` before literal blocks. Rendered as Markdown
those would turn ``[...]`` outputs into broken links. This extension, used by mkdocstrings when
the site is built, fences every doctest block as ``pycon`` code, turns roles into code spans and
``::`` into ``:``; the source docstrings stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`~?([^`]+)`")


def _short(match: re.Match[str]) -> str:
    target = match.group(1)
    full = match.group(0)
    shown = target.rsplit(".", 1)[-1] if ":`~" in full else target
    return f"`{shown}`"


def to_markdown(text: str) -> str:
    """Fence doctest blocks, turn roles into code spans and ``::`` into ``:``."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
                i += 1
            out += [f"{indent}```pycon", *(indent + b for b in block), f"{indent}```"]
            continue
        line = _ROLE.sub(_short, line)
        if line.rstrip().endswith("::") and not line.rstrip().endswith(":::"):
            line = line.rstrip()[:-1]
        out.append(line)
        i += 1
    return "\n".join(out)


class DocstringsAsMarkdown(griffe.Extension):
    """Rewrite every docstring with :func:`to_markdown` as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)

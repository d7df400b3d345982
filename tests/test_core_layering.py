"""The operator cores stand alone: no module of ``zanon``, ``castle``, ``dezent`` or ``sim``
imports an adapter (``io``, ``pipeline``, ``cli``, ``net``, ``flink``, ``harness``), at module
level or inside a function (read from the source, see ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "streamanon"
CORES = ("zanon", "castle", "dezent", "sim")
ADAPTERS = tuple(f"streamanon.{name}" for name in
                 ("io", "pipeline", "cli", "net", "flink", "harness"))


def imported(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_cores_import_no_adapter() -> None:
    found = [f"{path.relative_to(SRC)} imports {name}"
             for core in CORES for path in sorted((SRC / core).rglob("*.py"))
             for name in imported(ast.parse(path.read_text(encoding="utf-8")))
             if name in ADAPTERS or name.startswith(tuple(a + "." for a in ADAPTERS))]
    assert found == []


def test_the_check_sees_an_adapter_import() -> None:
    tree = ast.parse("def f():\n    from streamanon.io.readers import iter_batches\n")
    assert "streamanon.io.readers" in imported(tree)
    assert "streamanon.io.readers".startswith(tuple(a + "." for a in ADAPTERS))

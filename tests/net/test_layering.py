"""The daemons stand on their own: no module of :mod:`streamanon.net` imports the simulation
(:mod:`streamanon.sim`) or the local harnesses, at module level or inside a function, and the
store's backends import only the store's contract (no import cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import streamanon.net

NET = Path(streamanon.net.__file__).parent


def imports_of(path: Path) -> set[str]:
    """Every absolute module an ``import``/``from ... import`` of ``path`` names (relative
    imports resolved against the file's package)."""
    package = ".".join(("streamanon", *path.relative_to(NET.parent).parent.parts))
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
    return found


def test_no_module_of_the_daemons_imports_the_simulation_or_a_harness():
    files = sorted(NET.rglob("*.py"))
    assert len(files) > 10  # the package was found
    offending = {str(p.relative_to(NET)): sorted(m for m in imports_of(p)
                                                 if m.split(".")[:2] in (["streamanon", "sim"],
                                                                         ["streamanon", "harness"]))
                 for p in files}
    assert {k: v for k, v in offending.items() if v} == {}


def test_the_store_backends_import_only_the_contract():
    for name in ("sqlite.py", "postgres.py"):
        store_imports = {m for m in imports_of(NET / "store" / name)
                         if m.startswith("streamanon.net.store")}
        assert store_imports <= {"streamanon.net.store.base",
                                 *(f"streamanon.net.store.base.{n}" for n in
                                   ("MIX_GATEWAY", "Row", "StoreUnavailable"))}, name
    assert not {m for m in imports_of(NET / "store" / "base.py")
                if m.startswith("streamanon.net.store")}

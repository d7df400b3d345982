"""The rules of the house, checked on the source tree (see ARCHITECTURE.md).

Each test reads ``src/streamanon`` as text and syntax trees; none imports the package, so a rule
broken in a module nobody imports still fails here.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "streamanon"


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = ["streamanon", *path.relative_to(SRC).with_suffix("").parts]
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, package)
    return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, (path, _) in MODULES.items()}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for n in ast.walk(node))
    return inside


def _imports(name: str) -> set[str]:
    """Modules of the package that ``name`` imports anywhere (module or function level)."""
    _, package = MODULES[name]
    tree = TREES[name]
    skip = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in MODULES)
    parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return found - parents - {name}


def test_no_import_circle() -> None:
    graph = {name: _imports(name) for name in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in graph:
        if name not in index:
            visit(name)
    assert circles == []


def test_every_raise_is_a_typed_error() -> None:
    bare = []
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                if isinstance(func, ast.Name) and func.id in {"ValueError", "RuntimeError",
                                                               "Exception"}:
                    bare.append(f"{name}:{node.lineno}")
    assert bare == []


def test_error_classes_live_in_errors() -> None:
    """Every exception class is defined in, or re-exported from, ``streamanon.errors``."""
    errors_tree = TREES["streamanon.errors"]
    exported = {node.name for node in ast.walk(errors_tree) if isinstance(node, ast.ClassDef)}
    for node in ast.walk(errors_tree):
        if isinstance(node, ast.ImportFrom):
            exported.update(alias.asname or alias.name for alias in node.names)
    outside = []
    for name, tree in TREES.items():
        if name == "streamanon.errors":
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(base).split(".")[-1].endswith(("Error", "Exception"))
                    or ast.unparse(base) in {"BaseException", "AssertionError"}
                    for base in node.bases) and node.name not in exported:
                outside.append(f"{name}.{node.name}")
    assert outside == []


def test_no_silent_broad_except() -> None:
    silent = []
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if (isinstance(node, ast.ExceptHandler) and node.type is not None
                    and ast.unparse(node.type) in {"Exception", "BaseException"}
                    and all(isinstance(s, ast.Pass) for s in node.body)):
                silent.append(f"{name}:{node.lineno}")
    assert silent == []


def test_no_public_class_name_defined_twice() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for name, tree in TREES.items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(name)
    assert {cls: mods for cls, mods in where.items() if len(mods) > 1} == {}

"""Domain generalization hierarchies (DGH) as real trees that may grow while the stream runs.

Prink builds a hierarchy given as root-to-leaf paths as one chain, so distinct leaves can end up
as ancestors of each other. Here every path is inserted from the root, shared prefixes are
shared nodes, and a name that would get a second parent is refused: the result is a tree.

Paths are written root first. Paths with different first elements hang below an implicit
root (``*`` unless named), so ``[["public", "Education"], ["private", "Lodging"]]`` is a tree
with root ``*`` and two leaves.

>>> h = Hierarchy.from_paths([["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE", "Berlin"]])
>>> h.lca("Paris", "Lyon"), h.lca("Paris", "Berlin"), h.n_leaves
('FR', 'EU', 3)
>>> h.add_path(["EU", "DE", "Munich"]), h.leaves_under("DE")
(True, 2)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from streamanon.errors import ConfigError

DEFAULT_ROOT = "*"
MAX_TABLE_NODES = 4096


class Hierarchy:
    """A named tree; node names are unique, leaves are nodes without children."""

    def __init__(self, root: str = DEFAULT_ROOT) -> None:
        self.root = root
        self.parent: dict[str, str | None] = {root: None}
        self.children: dict[str, list[str]] = {root: []}
        self.depth: dict[str, int] = {root: 0}
        self.version = 0
        self._leaf_count: dict[str, int] | None = None
        self._lca_memo: dict[tuple[str, str], str] = {}
        self._index: dict[str, int] = {root: 0}
        self.names: list[str] = [root]
        self._table: np.ndarray | None = None
        self._table_n = 0

    # -- building ------------------------------------------------------------------------
    @classmethod
    def from_paths(cls, paths: Iterable[Sequence[str]], root: str = DEFAULT_ROOT) -> Hierarchy:
        """A tree from root-first paths (overlapping prefixes are shared)."""
        h = cls(root)
        for p in paths:
            h.add_path(p)
        return h

    @classmethod
    def from_text(cls, text: str, root: str | None = None) -> Hierarchy:
        """A tree from an indented outline: one node per line, children indented deeper.

        A single top-level line names the root; several top-level lines hang below ``*``.
        Siblings share one indentation; a line that goes back to an indentation no
        ancestor has, or indents with tabs, is refused (naming its line). ARX's hierarchy
        CSV (one line per leaf, ``leaf;parent;...;top``) is read as such: see
        :meth:`from_arx`.

        >>> t = Hierarchy.from_text("*\\n  public\\n    Education\\n  private\\n    Lodging\\n")
        >>> t.lca("Education", "Lodging"), t.n_leaves
        ('*', 2)
        """
        entries: list[tuple[int, int, str]] = []
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            if "\t" in raw[: len(raw) - len(raw.lstrip())]:
                raise ConfigError(f"hierarchy line {number}: indent with spaces, not tabs")
            entries.append((number, len(raw) - len(raw.lstrip()), raw.strip()))
        if not entries:
            raise ConfigError("hierarchy outline is empty")
        arx = [number for number, _, name in entries if ";" in name]
        if arx:
            if len(arx) != len(entries):
                plain = next(n for n, _, name in entries if ";" not in name)
                raise ConfigError(f"hierarchy line {plain}: an outline line in an ARX-style "
                                  f"CSV (line {arx[0]} is leaf;parent;...): use one form")
            return cls.from_arx(text, root)
        first = entries[0][1]
        top = [name for _, indent, name in entries if indent == first]
        if root is None:
            root = top[0] if len(top) == 1 else DEFAULT_ROOT
        h = cls(root)
        stack: list[tuple[int, str]] = []
        for number, indent, name in entries:
            if indent < first:
                raise ConfigError(f"hierarchy line {number}: indented less than the first "
                                  f"line ({indent} spaces, not {first})")
            popped = False
            while stack and stack[-1][0] >= indent:
                popped = popped or stack[-1][0] > indent
                sibling = stack.pop()
                if sibling[0] == indent:
                    popped = False
                    break
            if popped and (stack[-1][0] if stack else first) != indent:
                raise ConfigError(f"hierarchy line {number}: inconsistent indentation "
                                  f"({indent} spaces match no enclosing level)")
            path = [s for _, s in stack] + [name]
            h.add_path(path)
            stack.append((indent, name))
        return h

    @classmethod
    def from_arx(cls, text: str, root: str | None = None) -> Hierarchy:
        """A tree from ARX's hierarchy CSV: one line per leaf, ``leaf;parent;...;top``
        (semicolons; every line as many levels). The last column is the root when all lines
        share it, else the tops hang below ``root`` (default ``*``).

        >>> t = Hierarchy.from_arx("Paris;FR;EU\\nLyon;FR;EU\\nBerlin;DE;EU\\n")
        >>> t.root, t.lca("Paris", "Berlin"), t.n_leaves
        ('EU', 'EU', 3)
        """
        rows: list[tuple[int, list[str]]] = []
        for number, raw in enumerate(text.splitlines(), start=1):
            if raw.strip() and not raw.lstrip().startswith("#"):
                rows.append((number, [f.strip() for f in raw.strip().split(";")]))
        if not rows:
            raise ConfigError("hierarchy outline is empty")
        width = len(rows[0][1])
        for number, fields in rows:
            if len(fields) != width:
                raise ConfigError(f"hierarchy line {number}: {len(fields)} levels, the first "
                                  f"line has {width} (ARX CSV: every leaf as many levels)")
            if "" in fields:
                raise ConfigError(f"hierarchy line {number}: an empty level")
        tops = {fields[-1] for _, fields in rows}
        if root is None:
            root = tops.pop() if len(tops) == 1 else DEFAULT_ROOT
        h = cls(root)
        for number, fields in rows:
            try:
                h.add_path(list(reversed(fields)))
            except ConfigError as exc:
                raise ConfigError(f"hierarchy line {number}: {exc}") from None
        return h

    @classmethod
    def from_file(cls, path: str | Path, root: str | None = None) -> Hierarchy:
        """A tree from an outline or ARX CSV file; an error names the file and its line."""
        try:
            return cls.from_text(Path(path).read_text(encoding="utf-8"), root)
        except ConfigError as exc:
            raise ConfigError(f"tree file {path}: {exc}") from None

    def add_path(self, path: Sequence[str]) -> bool:
        """Insert a root-first path; returns True when the tree grew.

        Raises :class:`~streamanon.errors.ConfigError` when a name already hangs below another
        parent (the tree would stop being a tree) or when a name is empty.
        """
        names = [str(p) for p in path]
        if names and names[0] == self.root:
            names = names[1:]
        if any(not n for n in names):
            raise ConfigError(f"hierarchy path {list(path)!r} has an empty name")
        parent = self.root
        grew = False
        for name in names:
            if name in self.parent:
                if self.parent[name] != parent:
                    raise ConfigError(
                        f"hierarchy node {name!r} is already below {self.parent[name]!r}, "
                        f"cannot also be below {parent!r}"
                    )
            else:
                if name == self.root:
                    raise ConfigError(f"hierarchy path {list(path)!r} repeats the root")
                self.parent[name] = parent
                self.children[name] = []
                self.children[parent].append(name)
                self.depth[name] = self.depth[parent] + 1
                self._index[name] = len(self.names)
                self.names.append(name)
                grew = True
            parent = name
        if grew:
            self.version += 1
            self._leaf_count = None
        return grew

    # -- queries -------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self.parent

    def is_leaf(self, name: str) -> bool:
        return not self.children[name]

    def _counts(self) -> dict[str, int]:
        if self._leaf_count is None:
            counts: dict[str, int] = {}
            for name in sorted(self.parent, key=self.depth.__getitem__, reverse=True):
                kids = self.children[name]
                counts[name] = sum(counts[c] for c in kids) if kids else 1
            self._leaf_count = counts
        return self._leaf_count

    def leaves_under(self, name: str) -> int:
        """How many leaves the subtree of ``name`` holds (1 for a leaf)."""
        return self._counts()[name]

    @property
    def n_leaves(self) -> int:
        return self._counts()[self.root]

    def ancestors(self, name: str) -> list[str]:
        """``name`` and its ancestors up to the root."""
        out = [name]
        p = self.parent[name]
        while p is not None:
            out.append(p)
            p = self.parent[p]
        return out

    def lca(self, a: str, b: str) -> str:
        """The lowest common ancestor of two nodes (memoized: growth never changes it)."""
        if a == b:
            return a
        key = (a, b) if a < b else (b, a)
        hit = self._lca_memo.get(key)
        if hit is not None:
            return hit
        x, y = a, b
        while self.depth[x] > self.depth[y]:
            x = self.parent[x]  # type: ignore[assignment]
        while self.depth[y] > self.depth[x]:
            y = self.parent[y]  # type: ignore[assignment]
        while x != y:
            x = self.parent[x]  # type: ignore[assignment]
            y = self.parent[y]  # type: ignore[assignment]
        self._lca_memo[key] = x
        return x

    def covers(self, node: str, value: str) -> bool:
        """True when ``node`` is ``value`` or one of its ancestors."""
        return self.lca(node, value) == node

    # -- vectorized view (used by the operator's hot path) -------------------------------
    def index(self, name: str) -> int:
        return self._index[name]

    def node_indices(self) -> Mapping[str, int]:
        """Every node's index by name: a live view, which sees the nodes added later."""
        return self._index

    def lca_table(self) -> np.ndarray:
        """``table[i, j]`` = index of the LCA of nodes ``i`` and ``j``.

        Grown one row per new node: a node is always added as a leaf, so its row is its
        parent's row with itself on the diagonal (O(nodes) per addition). Trees beyond
        :data:`MAX_TABLE_NODES` nodes are refused, as the table would not fit in memory.
        """
        n = len(self.names)
        table = self._table
        if table is None or len(table) < n:
            if n > MAX_TABLE_NODES:
                raise ConfigError(f"hierarchy has {n} nodes, more than {MAX_TABLE_NODES}")
            old = 0 if table is None else self._table_n
            cap = max(16, 2 * n) if table is None or len(table) < n else len(table)
            new = np.zeros((cap, cap), dtype=np.int32)
            if table is not None and old:
                new[:old, :old] = table[:old, :old]
            table = new
            self._table = table
            self._table_n = old
        for i in range(self._table_n, n):
            p = self.parent[self.names[i]]
            if p is None:
                table[i, i] = i
                continue
            pi = self._index[p]
            table[i, :i] = table[pi, :i]
            table[:i, i] = table[:i, pi]
            table[i, i] = i
        self._table_n = n
        return table

    def leaf_counts_vector(self) -> np.ndarray:
        counts = self._counts()
        return np.array([counts[n] for n in self.names], dtype=np.float64)

"""Independent checker of CASTLE's guarantee, recomputed from the files alone.

>>> spec = columns_spec("u", ["age"], ["dx"])
>>> out = [{"u": "a", "age": "[30,34]", "dx": "flu"}, {"u": "b", "age": "[30,34]", "dx": "cold"}]
>>> check_castle(out, spec, k=2, l=2).ok
True
>>> r = check_castle(out, spec, k=3, l=2)
>>> r.ok, r.k_violations
(False, 1)
>>> rules = rules_from_toml('id = "u"\\n[[attribute]]\\nname = "age"\\ngeneralizer = "range"\\n')
>>> r = check_castle([{"u": "a", "age": "99"}], rules, k=1, inputs=[{"u": "a", "age": 30}])
>>> r.ok, r.not_covered, r.first_problem
(False, 1, "released row 1: age '99' does not contain the input value 30 (input row 1)")

Design: docs/design/verify.md
"""

from __future__ import annotations

import bisect
import copy
import csv
import functools
import io
import json
import math
import re
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from streamanon.errors import ConfigError, InputError
from streamanon.records import Rejected
from streamanon.verify._read import guess_format, json_objects, read_text, source_name

DEFAULT_ROOT = "*"
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf"
_INTERVAL = re.compile(rf"^\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]$")


@functools.lru_cache(maxsize=1 << 16)
def _interval(text: str | None) -> tuple[float, float] | None:
    """``(lo, hi)`` of an interval ``[lo,hi]`` as written, else ``None`` (the rows of a
    class share their intervals: each is parsed once)."""
    m = _INTERVAL.match(text or "")
    return (float(m.group(1)), float(m.group(2))) if m else None


# -- values --------------------------------------------------------------------------------
def _number_text(x: float) -> str:
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def _text(value: Any) -> str | None:
    """A cell as text (``None`` when missing): numbers without a needless ``.0``."""
    if type(value) is str:  # the common case, first
        return value.strip() or None
    if value is None:
        return None
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number_text(float(value))
    if isinstance(value, list | dict):
        return json.dumps(value)
    text = str(value).strip()
    return text or None


def _identity(value: Any) -> str | None:
    """Identity of an individual or a sensitive value; ``None`` when missing."""
    if type(value) is str:
        return value.strip() or None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(float(value))
    return _text(value)


def _number(value: Any) -> float | None:
    if type(value) is str:
        try:
            x = float(value)
        except ValueError:
            return None
        return x if math.isfinite(x) else None
    if value is None or value is True or value is False:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# -- the rules, read here ------------------------------------------------------------------
class _Tree:
    """A hierarchy as a parent map: names are unique, a name has one parent."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.parent: dict[str, str | None] = {root: None}

    def add(self, path: Sequence[str]) -> bool:
        """Add a root-first path; False (and nothing added) when it contradicts the tree."""
        names = [str(p) for p in path]
        if names and names[0] == self.root:
            names = names[1:]
        if any(not n or n == self.root for n in names):
            return False
        parent = self.root
        for name in names:
            if name in self.parent and self.parent[name] != parent:
                return False
            parent = name
        parent = self.root
        for name in names:
            self.parent.setdefault(name, parent)
            parent = name
        return True

    def ancestors(self, name: str) -> list[str]:
        out = []
        node: str | None = name
        while node is not None:
            out.append(node)
            node = self.parent.get(node)
        return out

    @classmethod
    def from_outline(cls, text: str, root: str | None) -> _Tree:
        """An indented outline: one node per line, children deeper; one top line = root.
        Siblings share one indentation (tabs and a return to an indentation no ancestor
        has are refused); an ARX CSV (``leaf;parent;...;top`` per line) is read as such."""
        entries = []
        for number, raw in enumerate(text.splitlines(), start=1):
            if raw.strip() and not raw.lstrip().startswith("#"):
                lead = raw[: len(raw) - len(raw.lstrip())]
                if "\t" in lead:
                    raise ConfigError(f"hierarchy line {number}: indent with spaces, not tabs")
                entries.append((number, len(lead), raw.strip()))
        if not entries:
            raise ConfigError("hierarchy outline is empty")
        semis = [n for n, _, name in entries if ";" in name]
        if semis and len(semis) == len(entries):
            return cls._from_arx([(n, name.split(";")) for n, _, name in entries], root)
        if semis:
            raise ConfigError(f"hierarchy line {semis[0]}: an ARX-style CSV line among "
                              "outline lines: use one form")
        base = entries[0][1]
        top = [name for _, depth, name in entries if depth == base]
        tree = cls(root or (top[0] if len(top) == 1 else DEFAULT_ROOT))
        levels: list[tuple[int, str]] = []  # the lines still open: (depth, name)
        for number, depth, name in entries:
            back = bool(levels) and depth < levels[-1][0]
            while levels and levels[-1][0] > depth:
                levels.pop()
            if levels and levels[-1][0] == depth:
                levels.pop()  # a sibling
            elif back or depth < base:
                raise ConfigError(f"hierarchy line {number}: inconsistent indentation")
            if not tree.add([*(n for _, n in levels), name]):
                raise ConfigError(f"hierarchy line {number}: {name!r} has two parents")
            levels.append((depth, name))
        return tree

    @classmethod
    def _from_arx(cls, rows: list[tuple[int, list[str]]], root: str | None) -> _Tree:
        width = len(rows[0][1])
        tops = {fields[-1].strip() for _, fields in rows}
        tree = cls(root or (next(iter(tops)) if len(tops) == 1 else DEFAULT_ROOT))
        for number, fields in rows:
            names = [f.strip() for f in fields]
            if len(names) != width or "" in names:
                raise ConfigError(f"hierarchy line {number}: every ARX line needs {width} "
                                  "non-empty levels")
            if not tree.add(names[::-1]):
                raise ConfigError(f"hierarchy line {number}: {names[0]!r} has two parents")
        return tree


@dataclass
class AttributeSpec:
    """What the checker knows of one attribute."""

    name: str
    kind: str  # range, reduction, hierarchy, none, a plug-in kind, or "unknown"
    sensitive: bool = False
    domain: tuple[float, float] | None = None
    tree: _Tree | None = None
    grow: bool = False

    @property
    def quasi_identifier(self) -> bool:
        return self.kind != "none"


@dataclass
class CastleSpec:
    """The id column and the attributes, as the checker read them."""

    id_field: str
    attributes: list[AttributeSpec]
    from_rules: bool = True

    @property
    def qi(self) -> list[AttributeSpec]:
        return [a for a in self.attributes if a.quasi_identifier]

    @property
    def sensitive(self) -> list[str]:
        return [a.name for a in self.attributes if a.sensitive]


def rules_from_dict(data: Mapping[str, Any], base_dir: Path | None = None) -> CastleSpec:
    """The checker's reading of a parsed rules TOML (see the module docstring)."""
    id_field = data.get("id")
    if not isinstance(id_field, str) or not id_field:
        raise ConfigError('rules need id = "<column naming the individual>"')
    specs = data.get("attribute", [])
    if not isinstance(specs, list):
        raise ConfigError("attribute must be an array of tables ([[attribute]])")
    attrs: list[AttributeSpec] = []
    for i, spec in enumerate(specs, start=1):
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            raise ConfigError(f"attribute #{i} needs a name")
        name = spec["name"]
        sensitive = spec.get("sensitive", False)
        if not isinstance(sensitive, bool):
            raise ConfigError(f"attribute {name!r}: sensitive must be true or false "
                              f"(unquoted), not {sensitive!r}")
        kind = spec.get("generalizer", "none" if sensitive else None)
        if not isinstance(kind, str):
            raise ConfigError(f"attribute {name!r} needs a generalizer or sensitive = true")
        attr = AttributeSpec(name, kind, sensitive)
        if kind == "range" and spec.get("domain") is not None:
            domain = spec["domain"]
            if not (isinstance(domain, list) and len(domain) == 2 and all(
                    type(x) in (int, float) and math.isfinite(x) for x in domain)
                    and domain[0] <= domain[1]):
                raise ConfigError(f"attribute {name!r}: domain must be [lo, hi], two numbers "
                                  f"with lo <= hi, not {domain!r}")
            attr.domain = (float(domain[0]), float(domain[1]))
        elif kind == "hierarchy":
            attr.grow = spec.get("grow") is True
            root = spec.get("root")
            if spec.get("tree") is not None:
                file = Path(spec["tree"])
                if base_dir is not None and not file.is_absolute():
                    file = base_dir / file
                try:
                    attr.tree = _Tree.from_outline(file.read_text(encoding="utf-8"), root)
                except OSError as exc:
                    raise ConfigError(f"attribute {name!r}: cannot read tree {file}: "
                                      f"{exc.strerror}") from None
                except ConfigError as exc:
                    raise ConfigError(f"tree file {file}: {exc}") from None
            else:
                attr.tree = _Tree(root or DEFAULT_ROOT)
                for path in spec.get("paths") or []:
                    if not attr.tree.add(path):
                        raise ConfigError(f"attribute {name!r}: path {path!r} contradicts "
                                          "the tree")
        attrs.append(attr)
    return CastleSpec(id_field, attrs)


def rules_from_toml(text: str, base_dir: Path | None = None) -> CastleSpec:
    """The checker's reading of rules TOML; an error about an attribute names its line."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"rules are not valid TOML: {exc}") from None
    try:
        return rules_from_dict(data, base_dir)
    except ConfigError as exc:
        line = _line_of(text, str(exc))
        if line is None:
            raise
        raise ConfigError(f"line {line}: {exc}") from None


def _line_of(text: str, message: str) -> int | None:
    """The line of the attribute table ``message`` names (its key's line when it names
    one), or of the top-level ``id``; None otherwise."""
    named = re.match(r"attribute (?:'([^']*)'|#(\d+))", message)
    tables: list[dict[str, int | str]] = []
    top: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if re.fullmatch(r"\[\[\s*attribute\s*\]\]", stripped):
            tables.append({"": number})
        elif (key := re.match(r"([A-Za-z0-9_-]+)\s*=\s*(.*)", stripped)) is not None:
            into = tables[-1] if tables else top
            into.setdefault(key.group(1), number)
            if tables and key.group(1) == "name":
                tables[-1].setdefault("=name", key.group(2).strip().strip("\"'"))
    if named is None:
        return top.get("id") if message.startswith("rules need id") else None
    if named.group(2) is not None:
        index = int(named.group(2)) - 1
        table = tables[index] if 0 <= index < len(tables) else None
    else:
        table = next((t for t in tables if t.get("=name") == named.group(1)), None)
    if table is None:
        return None
    rest = message.split(":", 1)[-1]
    for key, number in table.items():
        if key and not key.startswith("=") and key != "name" and re.search(
                rf"\b{key}\b", rest):
            return int(number)
    return int(table[""])


def load_rules(path: str | Path) -> CastleSpec:
    """The rules file as the checker reads it; tree files are read beside it."""
    path = Path(path)
    return rules_from_toml(path.read_text(encoding="utf-8"), path.parent)


def columns_spec(id_field: str, qi: Sequence[str], sa: Sequence[str] = ()) -> CastleSpec:
    """A spec from column names only: quasi-identifiers of unknown kind (no tree, no domain)."""
    attrs = [AttributeSpec(q, "unknown") for q in qi]
    attrs += [AttributeSpec(s, "none", sensitive=True) for s in sa if s not in qi]
    return CastleSpec(id_field, attrs, from_rules=False)


# -- rows, read here -----------------------------------------------------------------------
def read_released(source: str | Path | TextIO, fmt: str | None = None, *,
                  strict: bool = True, name: str | None = None, delimiter: str = ","
                  ) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """``(line, row)`` pairs of a CSV file with a header (empty cells are missing) or of JSON
    Lines objects, and the number of bad lines (skipped, or :class:`InputError` if
    ``strict``): the released rows, the input, the suppressed rows or the rejects, as the
    checker reads them."""
    name = source_name(source, name)
    if fmt is None:
        fmt = guess_format(source)
    text = read_text(source)
    rows: list[tuple[int, dict[str, Any]]] = []
    bad = 0

    def refuse(line: int, raw: str, why: str) -> None:
        nonlocal bad
        if strict:
            raise InputError(Rejected(line, raw, why), name)
        bad += 1

    if fmt == "jsonl":
        for line, raw, obj, why in json_objects(text.splitlines()):
            if obj is None:
                refuse(line, raw, str(why))
                continue
            rows.append((line, obj))
        return rows, bad
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    header: list[str] | None = None
    start = 1
    for fields in reader:
        line, start = start, reader.line_num + 1
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        if header is None:
            header = [f.strip() for f in fields]
            if "" in header or len(set(header)) != len(header):
                raise InputError(Rejected(line, ",".join(fields), "the CSV header has empty "
                                          "or repeated column names"), name)
            continue
        if len(fields) != len(header):
            refuse(line, ",".join(fields), f"expected {len(header)} fields, got {len(fields)}")
            continue
        rows.append((line, {h: (v if v.strip() else None)
                            for h, v in zip(header, fields, strict=True)}))
    return rows, bad


# -- the report ----------------------------------------------------------------------------
@dataclass
class CastleCheckReport:
    """What the checker found; ``ok`` when every check holds (see the module docstring)."""

    k: int
    l: int  # noqa: E741
    rows: int = 0
    classes: int = 0
    min_individuals: int | None = None
    min_diversity: dict[str, int] = field(default_factory=dict)
    k_violations: int = 0
    l_violations: int = 0
    unmatched: int = 0
    not_covered: int = 0
    unverified: int = 0
    input_rows: int | None = None
    input_rejected: int = 0
    suppressed_rows: int | None = None
    lost: int = 0
    extra_suppressed: int = 0
    empty: bool = False
    why_empty: str | None = None
    first_problem: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.k_violations or self.l_violations or self.unmatched
                    or self.not_covered or self.lost or self.extra_suppressed or self.empty)

    def problem(self, text: str) -> None:
        if self.first_problem is None:
            self.first_problem = text
        if len(self.problems) < 20:
            self.problems.append(text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": {"k": self.k, "l": self.l},
            "ok": self.ok,
            "rows": self.rows,
            "classes": self.classes,
            "min_individuals": self.min_individuals,
            "min_diversity": dict(self.min_diversity),
            "k_violations": self.k_violations,
            "l_violations": self.l_violations,
            "unmatched": self.unmatched,
            "not_covered": self.not_covered,
            "unverified": self.unverified,
            "input_rows": self.input_rows,
            "input_rejected": self.input_rejected,
            "suppressed_rows": self.suppressed_rows,
            "lost": self.lost,
            "extra_suppressed": self.extra_suppressed,
            "empty": self.empty,
            "why_empty": self.why_empty,
            "first_problem": self.first_problem,
        }


# -- the checks ----------------------------------------------------------------------------
def _numbered(rows: Iterable[Any]) -> list[tuple[int, Mapping[str, Any]]]:
    out = []
    for i, r in enumerate(rows, start=1):
        if isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], int):
            out.append(r)
        elif isinstance(r, Mapping):
            out.append((i, r))
        else:  # a Row-like object: its values and its line
            line = getattr(r, "line", None)
            out.append((line if isinstance(line, int) else i, r.values))
    return out


def check_castle(
    rows: Iterable[Any],
    spec: CastleSpec | str,
    qi: Sequence[str] = (),
    sa: Sequence[str] = (),
    *,
    k: int,
    l: int = 0,  # noqa: E741
    inputs: Iterable[Any] | None = None,
    suppressed: Iterable[Any] | None = None,
    rejected_lines: Iterable[int] = (),
    allow_empty: bool = False,
) -> CastleCheckReport:
    """Check released ``rows`` (mappings) against ``spec`` (see the module docstring).

    ``spec`` is a :class:`CastleSpec` (:func:`load_rules`), or, as before rules could be
    read here, the id column name with ``qi`` and ``sa`` (:func:`columns_spec`). ``inputs``
    and ``suppressed`` are mappings or ``(line, mapping)`` pairs.

    Args:
        rows: the released rows (mappings).
        spec: a :class:`CastleSpec`, or the id column's name (with ``qi`` and ``sa``).
        qi: the quasi-identifier columns when ``spec`` is a column name.
        sa: the sensitive columns when ``spec`` is a column name.
        k: distinct individuals every released cluster must hold.
        l: distinct sensitive values every released cluster must hold (``0``: not checked).
        inputs: the input rows (mappings or ``(line, mapping)`` pairs), to check coverage and
            accounting.
        suppressed: the suppressed rows, for the accounting.
        rejected_lines: input lines the run rejected (left out of the accounting).
        allow_empty: accept an output with no released row.
    """
    if isinstance(spec, str):
        spec = columns_spec(spec, qi, sa)
    report = CastleCheckReport(k=k, l=l)
    released = _numbered(rows)
    report.rows = len(released)
    _check_classes(released, spec, report)
    source = _numbered(inputs) if inputs is not None else None
    if source is not None:
        skip = set(rejected_lines)
        source = [(n, r) for n, r in source if n not in skip]
        report.input_rows = len(source)
        owner = _match(released, source, spec, report)
        if suppressed is not None:
            _account(source, owner, _numbered(suppressed), spec, report)
    if not released and not allow_empty and (source is None or source):
        report.empty = True
        report.why_empty = _why_empty(source, spec, k, l)
        report.problem(f"nothing was released: {report.why_empty}")
    return report


def _check_classes(rows: list[tuple[int, Mapping[str, Any]]], spec: CastleSpec,
                   report: CastleCheckReport) -> None:
    qi = [a.name for a in spec.qi]
    sa = spec.sensitive
    people: dict[tuple[str | None, ...], set[str | None]] = defaultdict(set)
    values: dict[tuple[str | None, ...], list[set[str]]] = defaultdict(
        lambda: [set() for _ in sa])
    for _, row in rows:
        cls = tuple(_text(row.get(q)) for q in qi)
        people[cls].add(_identity(row.get(spec.id_field)))
        for i, s in enumerate(sa):
            v = _identity(row.get(s))
            if v is not None:  # a missing sensitive value is no value
                values[cls][i].add(v)
    report.classes = len(people)
    for cls, ids in people.items():
        shown = dict(zip(qi, cls, strict=True))
        n = len(ids)
        report.min_individuals = n if report.min_individuals is None else min(
            report.min_individuals, n)
        if n < report.k:
            report.k_violations += 1
            report.problem(f"class {shown} has {n} distinct individual(s), k = {report.k}")
        for i, s in enumerate(sa):
            d = len(values[cls][i])
            report.min_diversity[s] = min(report.min_diversity.get(s, d), d)
            if report.l > 1 and d < report.l:
                report.l_violations += 1
                report.problem(f"class {shown} has {d} distinct value(s) of {s}, "
                               f"l = {report.l}")


class _Coverage:
    """Does a released quasi-identifier value stand for an input value? (why not, if not)"""

    def __init__(self, spec: CastleSpec, inputs: list[tuple[int, Mapping[str, Any]]]) -> None:
        self.spec = spec
        self.bounds: dict[str, tuple[float, float]] = {}
        self.trees: dict[str, _Tree] = {}
        self.leaf: dict[tuple[int, str], str | None] = {}
        for attr in spec.qi:
            if attr.kind == "range":
                xs = [x for _, r in inputs if (x := _number(r.get(attr.name))) is not None]
                lo, hi = (min(xs), max(xs)) if xs else (math.inf, -math.inf)
                if attr.domain is not None:
                    lo, hi = min(lo, attr.domain[0]), max(hi, attr.domain[1])
                self.bounds[attr.name] = (lo, hi)
            elif attr.kind == "hierarchy" and attr.tree is not None:
                tree = self.trees[attr.name] = copy.deepcopy(attr.tree)  # grown per check
                for n, (_, r) in enumerate(inputs):
                    self.leaf[(n, attr.name)] = self._grow(tree, attr.grow, r.get(attr.name))

    @staticmethod
    def _grow(tree: _Tree, grow: bool, raw: Any) -> str | None:
        """The input's leaf, after adding the path it carries (``None``: not in the tree)."""
        if isinstance(raw, list):
            names = [_text(x) for x in raw]
            if not names or any(x is None for x in names):
                return None
            if not tree.add([str(x) for x in reversed(names)]):  # leaf first, as in Prink
                return None
            return names[0]
        leaf = _text(raw)
        if leaf is None:
            return None
        if leaf not in tree.parent and grow:
            tree.add([leaf])
        return leaf if leaf in tree.parent else None

    def why_not(self, n: int, attr: AttributeSpec, shown: Any, original: Any
                ) -> tuple[str | None, bool]:
        """``(reason or None, unverified)`` for input row ``n``'s value ``original``."""
        name = attr.name
        text, orig = _text(shown), _text(original)
        if attr.kind == "range":
            x = _number(original)
            if x is None:
                return f"the input value {orig!r} is not a number", False
            bounds = _interval(text)
            if bounds is not None:
                lo, hi = bounds
            elif (y := _number(text)) is not None:
                lo = hi = y
            else:
                return f"{name} {text!r} is not an interval", False
            if not lo <= x <= hi:
                return f"{name} {text!r} does not contain the input value {orig}", False
            dlo, dhi = self.bounds[name]
            if lo < dlo or hi > dhi:
                return (f"{name} {text!r} reaches outside the domain "
                        f"[{_number_text(dlo)},{_number_text(dhi)}]"), False
            return None, False
        if attr.kind == "reduction":
            if text is None or orig is None:
                return f"{name} {text!r} does not mask the input value {orig!r}", False
            if len(orig) > len(text) or any(c != "*" and c != o for c, o in zip(
                    text, orig + "*" * (len(text) - len(orig)), strict=True)):
                return f"{name} {text!r} does not mask the input value {orig!r}", False
            return None, False
        tree = self.trees.get(name)
        if tree is not None:
            leaf = self.leaf.get((n, name))
            if leaf is None:
                return f"the input value {orig!r} of {name} is not in its hierarchy", False
            line = tree.ancestors(leaf)
            if text not in line:
                return (f"{name} {text!r} is not {leaf!r} nor one of its ancestors "
                        f"({', '.join(line[1:]) or 'none'})"), False
            return None, False
        # a plug-in generalizer, or no rules: equal values are fine, others unverifiable
        if text == orig:
            return None, False
        bounds = _interval(text)
        x = _number(original)
        if bounds is not None and x is not None:
            ok = bounds[0] <= x <= bounds[1]
            return (None if ok else f"{name} {text!r} does not contain the input value "
                    f"{orig}"), False
        # a mask that agrees, or a hierarchy node, or a plug-in's output: cannot tell
        return None, True


def _match(released: list[tuple[int, Mapping[str, Any]]],
           source: list[tuple[int, Mapping[str, Any]]], spec: CastleSpec,
           report: CastleCheckReport) -> dict[int, int]:
    """Match released rows to input rows one-to-one; returns the matched input indices."""
    qi = spec.qi
    qset = {a.name for a in qi}
    out_cols: list[str] = list(dict.fromkeys(c for _, r in released for c in r))
    in_cols = {c for _, r in source for c in r}
    cols = [c for c in out_cols if c in in_cols and c not in qset]
    if spec.id_field not in cols:
        cols.insert(0, spec.id_field)
    coverage = _Coverage(spec, source)
    pool: dict[tuple[str | None, ...], list[int]] = defaultdict(list)
    for n, (_, r) in enumerate(source):
        pool[tuple(_key(r.get(c)) for c in cols)].append(n)
    groups: dict[tuple[str | None, ...], list[int]] = defaultdict(list)
    for j, (_, row) in enumerate(released):
        groups[tuple(_key(row.get(c)) for c in cols)].append(j)
    # candidates sorted by a numeric quasi-identifier: an interval then selects a slice
    axis = next((a.name for a in qi if a.kind == "range"), None)
    matched: set[int] = set()
    for key, outs in groups.items():
        cands = pool.get(key, [])
        if axis is not None:
            cands = sorted(cands, key=lambda n: _number(source[n][1].get(axis)) or 0.0)
            xs = [_number(source[n][1].get(axis)) or 0.0 for n in cands]
        reasons: dict[int, str] = {}
        edges = []
        for j in outs:
            row = released[j][1]
            ok = []
            near = cands
            m = _INTERVAL.match(_text(row.get(axis)) or "") if axis is not None else None
            if m and len(cands) > 8:
                lo, hi = float(m.group(1)), float(m.group(2))
                near = cands[bisect.bisect_left(xs, lo): bisect.bisect_right(xs, hi)]
                if not near:
                    near = cands[:1]  # for the reason it does not cover
            for n in near:
                why, unsure = None, False
                for attr in qi:
                    why, unsure = coverage.why_not(n, attr, row.get(attr.name),
                                                   source[n][1].get(attr.name))
                    if why is not None:
                        break
                if why is None:
                    ok.append(n)
                    if unsure:
                        report.unverified += 1
                else:
                    reasons.setdefault(j, f"{why} (input row {source[n][0]})")
            edges.append(ok)
        owner = _matching(edges)
        matched.update(owner)
        taken = set(owner.values())
        for idx, j in enumerate(outs):
            if idx in taken:
                continue
            line = released[j][0]
            if j in reasons:
                report.not_covered += 1
                report.problem(f"released row {line}: {reasons[j]}")
            else:
                report.unmatched += 1
                why = ("stands for no input row" if not cands else
                       "stands for an input row another released row already stands for")
                report.problem(f"released row {line} {why} with these values: "
                               f"{_short(released[j][1], cols)}")
    return matched


def _key(value: Any) -> str | None:
    """Pass-through identity for grouping: numbers by value, else text."""
    x = _number(value) if not isinstance(value, bool) else None
    return repr(x) if x is not None else _text(value)


def _short(row: Mapping[str, Any], cols: Sequence[str]) -> str:
    return ", ".join(f"{c}={row.get(c)!r}" for c in cols)


def _matching(edges: list[list[int]]) -> dict[int, int]:
    """Maximum bipartite matching (Kuhn): left j -> candidate; returns candidate -> j."""
    owner: dict[int, int] = {}
    for j in range(len(edges)):
        seen: set[int] = set()
        stack = [(j, iter(edges[j]))]
        path: list[tuple[int, int]] = []
        while stack:
            left, it = stack[-1]
            nxt = next((i for i in it if i not in seen), None)
            if nxt is None:
                stack.pop()
                if path:
                    path.pop()
                continue
            seen.add(nxt)
            path.append((left, nxt))
            if nxt not in owner:
                for a, b in path:
                    owner[b] = a
                break
            stack.append((owner[nxt], iter(edges[owner[nxt]])))
    return owner


def _account(source: list[tuple[int, Mapping[str, Any]]], owner: set[int],
             suppressed: list[tuple[int, Mapping[str, Any]]], spec: CastleSpec,
             report: CastleCheckReport) -> None:
    """Every input row released or suppressed exactly once (counted by pass-through values)."""
    report.suppressed_rows = len(suppressed)
    qset = {a.name for a in spec.qi}
    sup_cols = {c for _, r in suppressed for c in r}
    cols = sorted(c for c in {c for _, r in source for c in r}
                  if c not in qset and c in sup_cols)
    if spec.id_field not in cols:
        cols.insert(0, spec.id_field)
    left: Counter[tuple[str | None, ...]] = Counter()
    lines: dict[tuple[str | None, ...], list[int]] = defaultdict(list)
    for n, (line, r) in enumerate(source):
        if n not in owner:
            key = tuple(_key(r.get(c)) for c in cols)
            left[key] += 1
            lines[key].append(line)
    for line, r in suppressed:
        key = tuple(_key(r.get(c)) for c in cols)
        if left[key] > 0:
            left[key] -= 1
            lines[key].pop(0)
        else:
            report.extra_suppressed += 1
            report.problem(f"suppressed row {line} stands for no input row left: "
                           f"{_short(r, cols)}")
    for key, n in left.items():
        if n > 0:
            report.lost += n
            report.problem(f"input line {lines[key][0]} is neither released nor suppressed "
                           f"({n} such row(s): {dict(zip(cols, key, strict=True))})")


def _why_empty(source: list[tuple[int, Mapping[str, Any]]] | None, spec: CastleSpec,
               k: int, l: int) -> str:  # noqa: E741
    if source is None:
        return "an empty release (give --input to see why, or --allow-empty to accept it)"
    people = {_identity(r.get(spec.id_field)) for _, r in source} - {None}
    if len(people) < k:
        return f"the input holds {len(people)} distinct individual(s), fewer than k = {k}"
    for s in spec.sensitive if l > 1 else []:
        values = {_identity(r.get(s)) for _, r in source} - {None}
        if len(values) < l:
            return f"the input holds {len(values)} distinct value(s) of {s}, fewer than l = {l}"
    return ("k and l could be met on this input, yet nothing was released (all suppressed: "
            "check the operator's summary)")


def check_castle_files(
    output: str | Path | TextIO,
    spec: CastleSpec,
    *,
    k: int,
    l: int = 0,  # noqa: E741
    source: str | Path | TextIO | None = None,
    suppressed: str | Path | TextIO | None = None,
    rejects: str | Path | None = None,
    allow_empty: bool = False,
    out_format: str | None = None,
    in_format: str | None = None,
    in_delimiter: str = ",",
) -> CastleCheckReport:
    """:func:`check_castle` on files read by this module (bad input lines skipped, counted).

    ``rejects`` is the JSON Lines rejects file of the run (its ``line`` fields are excluded
    from the accounting).

    Args:
        output: the released rows' file.
        spec: the :class:`CastleSpec` (:func:`load_rules`).
        k: distinct individuals every released cluster must hold.
        l: distinct sensitive values every released cluster must hold (``0``: not checked).
        source: the input file, to check coverage and accounting.
        suppressed: the suppressed rows' file.
        rejects: the run's JSON Lines rejects file.
        allow_empty: accept an output with no released row.
        out_format: the output's format (``None``: from the name).
        in_format: the input's format (``None``: from the name).
        in_delimiter: the input's CSV field delimiter (outputs are comma CSV).
    """
    released, _ = read_released(output, out_format)
    inputs, bad = (read_released(source, in_format, strict=False, delimiter=in_delimiter)
                   if source is not None
                   else (None, 0))
    sup = read_released(suppressed)[0] if suppressed is not None else None
    lines: set[int] = set()
    if rejects is not None:
        for _, obj in read_released(rejects, "jsonl")[0]:
            if isinstance(obj.get("line"), int):
                lines.add(obj["line"])
    report = check_castle(released, spec, k=k, l=l, inputs=inputs, suppressed=sup,
                          rejected_lines=lines, allow_empty=allow_empty)
    report.input_rejected = bad + len(lines)
    return report

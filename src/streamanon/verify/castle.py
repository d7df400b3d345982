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
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from streamanon.errors import ConfigError, InputError
from streamanon.records import Rejected
from streamanon.verify._read import (
    _arrow,
    _compute,
    _numbers,
    guess_format,
    is_topic,
    json_objects,
    read_text,
    source_name,
)

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
    static: bool = False  # constant per individual: each release covers its first one

    @property
    def quasi_identifier(self) -> bool:
        return self.kind != "none"


@dataclass
class CastleSpec:
    """The id column and the attributes, as the checker read them."""

    id_field: str
    attributes: list[AttributeSpec]
    from_rules: bool = True
    #: k and l of the rules' ``[parameters]`` table, when it gives them (the release's
    #: operator took them over its own; delta and beta are not checkable from the files)
    parameters: dict[str, int] = field(default_factory=dict)

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
        static = spec.get("static", False)
        if not isinstance(static, bool):
            raise ConfigError(f"attribute {name!r}: static must be true or false (unquoted), "
                              f"not {static!r}")
        attr.static = static and not sensitive and kind != "none"
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
    return CastleSpec(id_field, attrs, parameters=_parameters(data.get("parameters", {})))


def _parameters(table: Any) -> dict[str, int]:
    """k and l of a ``[parameters]`` table (its other keys are the operator's business)."""
    if not isinstance(table, Mapping):
        raise ConfigError("parameters must be a table ([parameters])")
    out = {}
    for name, least in (("k", 1), ("l", 0)):
        value = table.get(name)
        if value is None:
            continue
        if type(value) is not int or value < least:
            raise ConfigError(f"parameters: {name} must be an integer >= {least}, not "
                              f"{value!r}")
        out[name] = value
    return out


def rules_from_toml(text: str, base_dir: Path | None = None) -> CastleSpec:
    """The checker's reading of rules TOML; an error about an attribute names its line."""
    import tomllib  # here: a check with --id/--qi reads no TOML

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
    checker reads them.

    Args:
        source: a file, ``-`` or an open text stream (or a ``kafka://`` topic).
        fmt: ``csv`` or ``jsonl`` (``None``: from the name).
        strict: raise at the first bad line instead of counting it.
        name: the source's name in messages (``None``: from ``source``).
        delimiter: the CSV field delimiter.
    """
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
    static_violations: int = 0
    empty: bool = False
    why_empty: str | None = None
    first_problem: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.k_violations or self.l_violations or self.unmatched
                    or self.not_covered or self.lost or self.extra_suppressed or self.empty
                    or self.static_violations)

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
            "static_violations": self.static_violations,
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
    released = _numbered(rows)
    source = _numbered(inputs) if inputs is not None else None
    sup = _numbered(suppressed) if suppressed is not None else None
    skip = set(rejected_lines)
    if source is not None:
        source = [(n, r) for n, r in source if n not in skip]
    tables = [_table_of_rows(x) if x is not None else None
              for x in (released, source, sup)]
    if tables[0] is not None and all(t is not None or x is None for t, x in zip(
            tables, (released, source, sup), strict=True)):
        report = _check_columns(tables[0], spec, k=k, l=l, src=tables[1], sup=tables[2])
        if report is not None:
            return _check_static(released, spec, report)
    return _check_static(released, spec, _check_rows(
        released, spec, k=k, l=l, source=source, suppressed=sup, allow_empty=allow_empty))


def _check_rows(released: list[tuple[int, Mapping[str, Any]]], spec: CastleSpec, *, k: int,
                l: int, source: list[tuple[int, Mapping[str, Any]]] | None,  # noqa: E741
                suppressed: list[tuple[int, Mapping[str, Any]]] | None,
                allow_empty: bool) -> CastleCheckReport:
    """The checks row by row (numbered rows, ``source`` without the rejected lines): every
    problem found and worded."""
    report = CastleCheckReport(k=k, l=l)
    report.rows = len(released)
    _check_classes(released, spec, report)
    if source is not None:
        report.input_rows = len(source)
        owner = _match(released, source, spec, report)
        if suppressed is not None:
            _account(source, owner, suppressed, spec, report)
    if not released and not allow_empty and (source is None or source):
        report.empty = True
        report.why_empty = _why_empty(source, spec, k, l)
        report.problem(f"nothing was released: {report.why_empty}")
    return report


def _check_static(rows: Sequence[tuple[int, Mapping[str, Any]]], spec: CastleSpec,
                  report: CastleCheckReport) -> CastleCheckReport:
    """The bound on the intersection: on each attribute the rules mark ``static``, every
    release of an individual covers its first one (the first of its rows in the file), so
    that intersecting its releases narrows nothing below the class it was first released
    in. A top (``*``, ``[*]``, the tree's root) covers anything."""
    static = [a for a in spec.qi if a.static]
    if not static:
        return report
    first: dict[str | None, tuple[int, list[str | None]]] = {}
    for n, row in sorted(rows, key=lambda r: r[0]):
        person = _identity(row.get(spec.id_field))
        shown = [_text(row.get(a.name)) for a in static]
        if person not in first:
            first[person] = (n, shown)
            continue
        line, was = first[person]
        for a, old, new in zip(static, was, shown, strict=True):
            if not _covers_release(a, old, new):
                report.static_violations += 1
                report.problem(f"line {n}: {a.name} = {new} of individual {person} does not "
                               f"cover its first release {old} (line {line}): intersecting "
                               "its releases narrows it")
    return report


def _covers_release(attr: AttributeSpec, old: str | None, new: str | None) -> bool:
    """Does released value ``new`` cover released value ``old`` of the same attribute?"""
    if new == old:
        return True
    if new is None or old is None:
        return False
    if new in ("*", "[*]") or (attr.tree is not None and new == attr.tree.root):
        return True
    if attr.kind == "hierarchy" and attr.tree is not None:
        return new in attr.tree.ancestors(old)
    def box(text: str) -> tuple[float, float] | None:
        iv = _interval(text)
        if iv is not None:
            return iv
        x = _number(text)
        return None if x is None else (x, x)
    a, b = box(old), box(new)
    return a is not None and b is not None and b[0] <= a[0] and a[1] <= b[1]


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
        # per range attribute with missing input values: the domain as it stood when each
        # input row arrived (running min and max), which a missing value's top must cover
        self.arrived: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for attr in spec.qi:
            if attr.kind == "range":
                xs = [x for _, r in inputs if (x := _number(r.get(attr.name))) is not None]
                lo, hi = (min(xs), max(xs)) if xs else (math.inf, -math.inf)
                if attr.domain is not None:
                    lo, hi = min(lo, attr.domain[0]), max(hi, attr.domain[1])
                self.bounds[attr.name] = (lo, hi)
                if len(xs) < len(inputs) and any(_text(r.get(attr.name)) is None
                                                 for _, r in inputs):
                    col = np.array([np.nan if (x := _number(r.get(attr.name))) is None else x
                                    for _, r in inputs], dtype=np.float64)
                    if attr.domain is not None:
                        col = np.concatenate((list(attr.domain), col))
                    first = 2 if attr.domain is not None else 0
                    self.arrived[attr.name] = (np.fmin.accumulate(col)[first:],
                                               np.fmax.accumulate(col)[first:])
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
        if orig is None:
            return self._why_not_top(n, attr, text)
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

    def _why_not_top(self, n: int, attr: AttributeSpec, text: str | None
                     ) -> tuple[str | None, bool]:
        """A missing input value (``castle --missing star``) stands only under its
        attribute's top: a range's whole domain as it stood when input row ``n`` arrived
        (or ``[*]``), a hierarchy's root, a mask of ``*`` only."""
        name = attr.name
        why = f"{name} {text!r} is not the attribute's top, but the input value is missing"
        stars = text is not None and set(text) == {"*"}
        if attr.kind == "range":
            if text == "[*]":
                return None, False
            bounds = _interval(text)
            if bounds is None:
                return why, False
            lo, hi = bounds
            dlo, dhi = self.bounds[name]
            arrived = self.arrived.get(name)
            alo, ahi = ((float(arrived[0][n]), float(arrived[1][n])) if arrived is not None
                        and 0 <= n < len(arrived[0]) else (dlo, dhi))
            if lo < dlo or hi > dhi or (alo <= ahi and not (lo <= alo and ahi <= hi)):
                return (f"{why} (the whole domain [{_number_text(alo)},{_number_text(ahi)}] "
                        "when the row arrived)"), False
            return None, False
        if attr.kind == "reduction":
            return (None if stars else why), False
        tree = self.trees.get(name)
        if tree is not None:
            return (None if text == tree.root else f"{why} (the root {tree.root!r})"), False
        # a plug-in generalizer, or no rules: a mask of * says nothing, anything else
        # cannot be told
        return None, not (stars or text == "[*]")


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
        loose: list[int] = []  # candidates without a number on the axis: in every slice
        if axis is not None:
            cands = sorted(cands, key=lambda n: _number(source[n][1].get(axis)) or 0.0)
            xs = [_number(source[n][1].get(axis)) or 0.0 for n in cands]
            loose = [n for n in cands if _number(source[n][1].get(axis)) is None]
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
                if loose:
                    near = [*near, *(n for n in loose if n not in set(near))]
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

    def table(path: Any, fmt: str | None) -> _Table | None:
        """The file column-wise, when it is a CSV file Arrow reads as :func:`read_released`
        would (``None``: read it row by row)."""
        if path is None or is_topic(path) or (fmt or guess_format(path)) != "csv":
            return None
        return _read_table(path)

    # each file as before: column-wise when it can be, else row by row (in the same order,
    # so that the first unreadable file is the one named)
    out_t = table(output, out_format)
    released = read_released(output, out_format)[0] if out_t is None else None
    # Arrow's reader is the checker's for comma files only; another delimiter row by row
    in_t = table(source, in_format) if in_delimiter == "," else None
    inputs, bad = (read_released(source, in_format, strict=False, delimiter=in_delimiter)
                   if source is not None and in_t is None else (None, 0))
    sup_t = table(suppressed, None)
    sup = read_released(suppressed)[0] if suppressed is not None and sup_t is None else None
    lines: set[int] = set()
    if rejects is not None:
        for _, obj in read_released(rejects, "jsonl")[0]:
            if isinstance(obj.get("line"), int):
                lines.add(obj["line"])
    if in_t is not None and lines:
        in_t = in_t.take(~np.isin(in_t.lines, sorted(lines)))
    if out_t is not None and (in_t is not None or source is None) and (
            sup_t is not None or suppressed is None):
        report = _check_columns(out_t, spec, k=k, l=l, src=in_t, sup=sup_t)
        if report is not None:
            report.input_rejected = len(lines)
            if any(a.static for a in spec.qi):
                _check_static(out_t.as_rows(), spec, report)
            return report
    if out_t is not None:
        released = out_t.as_rows()
    if in_t is not None:
        inputs = in_t.as_rows()
    elif inputs is not None:
        inputs = [(n, r) for n, r in inputs if n not in lines]
    if sup_t is not None:
        sup = sup_t.as_rows()
    assert released is not None
    report = _check_rows(released, spec, k=k, l=l, source=inputs, suppressed=sup,
                         allow_empty=allow_empty)
    report.input_rejected = bad + len(lines)
    return _check_static(released, spec, report)


# -- the column-wise pass ----------------------------------------------------------------
# The same checks on columns of codes (what makes ``verify castle`` fast).
#
# A column is its distinct cells and one code per row (numpy); every rule above (``_text``,
# ``_identity``, ``_key``, ``_number``, ``_interval``, the coverage rules) is applied once
# per distinct value, or once per distinct pair of released and input values, never once
# per row. The pass proves a release right: the moment it sees anything
# that would make a problem (a class too small, a row not covered, a row without its input
# row, an input row not accounted for) or that it cannot decide column-wise (a non-text cell,
# too many candidates), it returns ``None`` and :func:`check_castle` runs the
# row-by-row checks, which find and word every problem. So its only duty is that of a proof:
# a report it returns is the report the row-by-row checks give (``tests/verify/
# test_castle.py`` compares the two on the genuine release and on every mutation).
#
# Files are read with Arrow's CSV reader (not the operators' reader), only when each row is
# one line (then line numbers are ``2, 3, ...``); anything else is left to the row reader.

#: Candidate pairs (released row, input row) the pass looks at, per released row, at most.
_PAIRS_PER_ROW = 16


class _Values(Sequence[Any]):
    """The distinct cells of a column Arrow read: a list (blank cells as ``None``) made on
    first use only; a column of plain ASCII text is also seen as bytes, without it."""

    def __init__(self, array: Any) -> None:
        self.array = array
        self._list: list[Any] | None = None
        self._bytes: np.ndarray | bool | None = False

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, i: Any) -> Any:
        return self.as_list()[i]

    def __iter__(self) -> Any:
        return iter(self.as_list())

    def __contains__(self, value: object) -> bool:
        return value in self.as_list()

    def as_list(self) -> list[Any]:
        if self._list is None:
            self._list = [v if v.strip() else None for v in self.array.to_pylist()]
        return self._list

    def as_bytes(self) -> np.ndarray | None:
        """The cells as a numpy bytes array when each is 1-64 ASCII characters without NUL
        (then numpy reads them as ``bytes`` holds them); ``None`` otherwise."""
        if self._bytes is False:
            self._bytes = None
            arr = self.array
            n = len(arr)
            buffers = arr.buffers()
            if n and buffers[2] is not None:
                offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1,
                                        offset=arr.offset * 4)
                data = np.frombuffer(buffers[2], dtype=np.uint8)[offsets[0]: offsets[-1]]
                lengths = np.diff(offsets)
                width = int(lengths.max())
                if lengths.min() > 0 and width <= 64 and not (
                        (data >= 128) | (data == 0)).any():
                    at = np.arange(width)
                    inside = at < lengths[:, None]
                    out = np.zeros((n, width), dtype=np.uint8)
                    out[inside] = data[((offsets[:-1] - offsets[0])[:, None] + at)[inside]]
                    self._bytes = out.view(f"S{width}").reshape(n)
        return self._bytes  # type: ignore[return-value]

    def plain_numbers(self) -> np.ndarray | None:
        """The cells as numbers when each is a plain decimal number (digits, point, exponent
        and signs only: Arrow's cast then reads each as ``float`` does, correctly rounded);
        ``None`` otherwise (the caller parses them as ``float`` would)."""
        arr = self.array
        n = len(arr)
        buffers = arr.buffers()
        if not n or arr.null_count or buffers[2] is None or str(arr.type) != "string":
            return None
        offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
        if int(np.diff(offsets).min()) == 0:
            return None
        if buffers[2].to_pybytes()[int(offsets[0]): int(offsets[-1])].translate(
                None, b"0123456789.eE+-"):
            return None
        import pyarrow as pa

        try:
            cast = _arrow("cast", arr, options=_compute().CastOptions.safe(pa.float64()))
        except (pa.ArrowInvalid, pa.ArrowException):  # not a number as Arrow reads one
            return None
        return _numbers(cast, np.float64)

    def plain(self) -> bool:
        """Every cell is ASCII text without surrounding white space (``strip`` keeps it)."""
        cells = self.as_bytes()
        if cells is None:
            return False
        raw = cells.view(np.uint8).reshape(len(cells), -1)
        space = np.zeros(256, dtype=bool)
        space[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True
        last = raw[np.arange(len(cells)), (raw != 0).sum(axis=1) - 1]  # no NUL inside
        return not (space[raw[:, 0]].any() or space[last].any())


class _Table:
    """Rows as columns: ``names`` in order, ``cells[name] = (distinct values, codes)``."""

    def __init__(self, names: list[str], cells: dict[str, tuple[list[Any], np.ndarray]],
                 n: int, lines: np.ndarray) -> None:
        self.names = names
        self.cells = cells
        self.n = n
        self.lines = lines

    def codes(self, name: str, fn: Callable[[Any], Any], space: dict[Any, int]) -> np.ndarray:
        """Each row's code of ``fn(cell)`` in ``space`` (shared by tables); a missing
        column is ``fn(None)`` in every row."""
        if name not in self.cells:
            return np.full(self.n, space.setdefault(fn(None), len(space)), dtype=np.int64)
        values, codes = self.cells[name]
        remap = np.array([space.setdefault(fn(v), len(space)) for v in values] or [0],
                         dtype=np.int64)
        return remap[codes]

    def take(self, keep: np.ndarray) -> _Table:
        cells = {c: (v, codes[keep]) for c, (v, codes) in self.cells.items()}
        return _Table(self.names, cells, int(keep.sum()), self.lines[keep])

    def as_rows(self) -> list[tuple[int, dict[str, Any]]]:
        cols = [(c, *self.cells[c]) for c in self.names]
        return [(int(self.lines[i]), {c: values[codes[i]] for c, values, codes in cols})
                for i in range(self.n)]


def _table_of_rows(rows: Sequence[tuple[int, Mapping[str, Any]]]) -> _Table | None:
    """The rows as a :class:`_Table`; ``None`` when a cell is not text (or missing)."""
    names: dict[str, None] = {}
    for _, r in rows:
        names.update(dict.fromkeys(r))
    cells: dict[str, tuple[list[Any], np.ndarray]] = {}
    for c in names:
        seen: dict[Any, int] = {}
        out = np.empty(len(rows), dtype=np.int64)
        for i, (_, r) in enumerate(rows):
            v = r.get(c)
            if v is not None and type(v) is not str:
                return None
            out[i] = seen.setdefault(v, len(seen))
        cells[c] = (list(seen), out)
    lines = np.array([line for line, _ in rows], dtype=np.int64)
    return _Table(list(names), cells, len(rows), lines)


def _read_table(source: Any) -> _Table | None:
    """A CSV file (a path) read with Arrow when each of its rows is one line and it reads
    as the row reader would read it; ``None`` otherwise (stdin, JSON, anything odd)."""
    if not isinstance(source, str | Path) or str(source) == "-" or str(source).lower(
            ).endswith((".jsonl", ".ndjson", ".json")):
        return None
    with open(source, "rb") as fh:
        data = fh.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
        if b"\r" in data:
            return None
    end = data.find(b"\n")
    head = data if end < 0 else data[:end]
    if not head.strip() or b'"' in head:
        return None
    try:
        names = [h.strip() for h in head.decode("utf-8").split(",")]
    except UnicodeDecodeError:
        return None
    if len(names) < 2 or "" in names or len(set(names)) != len(names):
        return None
    import pyarrow as pa
    import pyarrow.csv as pacsv

    pa.enable_signal_handlers(False)  # a Ctrl-C during the read stays Python's (design/pipeline.md)
    try:  # each column read as dictionary codes straight away
        table = pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1, use_threads=False,
                                           block_size=1 << 22),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.dictionary(pa.int32(), pa.string())),
                strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowException):
        return None
    n = table.num_rows
    lines_in_file = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    if lines_in_file != n + 1:  # a blank line, or a row over several lines
        return None
    table = table.unify_dictionaries()
    cells: dict[str, tuple[list[Any], np.ndarray]] = {}
    for name in names:
        chunks = table.column(name).chunks
        values: Sequence[Any] = _Values(chunks[0].dictionary) if chunks else []
        codes = [np.frombuffer(c.indices.buffers()[1], dtype=np.int32, count=len(c),
                               offset=c.indices.offset * 4) for c in chunks]
        cells[name] = (values, np.concatenate(codes).astype(np.int64) if codes else
                       np.zeros(0, dtype=np.int64))
    return _Table(names, cells, n, np.arange(2, n + 2, dtype=np.int64))


def _key_codes(name: str, tables: Sequence[_Table]) -> list[np.ndarray]:
    """Each table's codes of ``_key(cell)`` for column ``name``, in one space. A column of
    finite numbers only (numpy parses text as ``float`` does) is coded by the numbers' bits
    (``_key`` is their ``repr``: ``-0.0`` is not ``0.0``), without a call per value."""
    parts = [t.cells.get(name) for t in tables]
    nums: list[np.ndarray] | None = None
    if all(p is not None and len(p[0]) for p in parts):
        try:
            nums = [(plain if isinstance(p[0], _Values) and (
                plain := p[0].plain_numbers()) is not None else
                     cells.astype(np.float64) if isinstance(p[0], _Values) and (
                cells := p[0].as_bytes()) is not None else
                     np.array(p[0], dtype=str).astype(np.float64)) for p in parts if p]
        except ValueError:  # a cell that is not a number (or is missing: "None")
            nums = None
    if nums is not None and all(np.isfinite(x).all() for x in nums):
        back = np.unique(np.concatenate(nums).view(np.int64), return_inverse=True)[1]
        out, at = [], 0
        for p, x in zip(parts, nums, strict=True):
            assert p is not None
            out.append(back.reshape(-1)[at: at + len(x)][p[1]])
            at += len(x)
        return out
    space: dict[Any, int] = {}
    return [t.codes(name, _key, space) for t in tables]


def _combine(parts: Sequence[np.ndarray], n: int) -> np.ndarray:
    """One code per row for the tuple of ``parts``' codes (dense, from 0)."""
    out = np.zeros(n, dtype=np.int64)
    span = 1
    for p in parts:
        width = int(p.max()) + 1 if len(p) else 1
        if span * width >= 1 << 62:  # made dense again before it could overflow
            out = np.unique(out, return_inverse=True)[1].reshape(-1).astype(np.int64)
            span = int(out.max()) + 1 if n else 1
        out = out * width + p
        span *= width
    return np.unique(out, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _distinct_per(group: np.ndarray, value: np.ndarray, groups: int) -> np.ndarray:
    """The number of distinct ``value`` codes in each group."""
    if not len(group):
        return np.zeros(groups, dtype=np.int64)
    width = int(value.max()) + 1
    pairs = np.unique(group * width + value)
    return np.bincount(pairs // width, minlength=groups)


def _check_columns(rel: _Table, spec: CastleSpec, *, k: int, l: int,  # noqa: E741
          src: _Table | None, sup: _Table | None) -> CastleCheckReport | None:
    """The report, when every check holds; ``None`` otherwise (or when undecided)."""
    if rel.n == 0:
        return None
    report = CastleCheckReport(k=k, l=l)
    report.rows = rel.n
    # -- classes: k and l --------------------------------------------------------------------
    qi = spec.qi
    texts: dict[Any, int] = {}
    cls = _combine([rel.codes(a.name, _text, texts) for a in qi], rel.n)
    classes = int(cls.max()) + 1
    report.classes = classes
    ident: dict[Any, int] = {}
    people = _distinct_per(cls, rel.codes(spec.id_field, _identity, ident), classes)
    report.min_individuals = int(people.min())
    if report.min_individuals < k:
        return None
    for s in spec.sensitive:
        cells = rel.cells.get(s)
        if cells is not None and isinstance(cells[0], _Values) and cells[0].plain():
            codes = cells[1] + 1  # each distinct cell its own identity
        else:
            codes = rel.codes(s, _identity, {None: 0})
        present = codes != 0
        d = _distinct_per(cls[present], codes[present], classes)
        report.min_diversity[s] = int(d.min())
        if l > 1 and report.min_diversity[s] < l:
            return None
    if src is None:
        return report
    report.input_rows = src.n
    owner = _match_columns(rel, src, spec, report)
    if owner is None:
        return None
    if sup is not None:
        report.suppressed_rows = sup.n
        qset = {a.name for a in qi}
        cols = sorted(c for c in src.names if c not in qset and c in sup.names)
        if spec.id_field not in cols:
            cols.insert(0, spec.id_field)
        both = _combine([np.concatenate(_key_codes(c, [src, sup])) for c in cols],
                        src.n + sup.n)
        rest = np.ones(src.n, dtype=bool)
        rest[owner] = False
        width = int(both.max()) + 1 if len(both) else 1
        if not np.array_equal(np.bincount(both[: src.n][rest], minlength=width),
                              np.bincount(both[src.n:], minlength=width)):
            return None
    return report


def _match_columns(rel: _Table, src: _Table, spec: CastleSpec, report: CastleCheckReport
           ) -> np.ndarray | None:
    """The input rows the released rows stand for (a one-to-one matching); ``None`` when
    a released row stands for none of its own (or the pass cannot tell)."""
    qi = spec.qi
    qset = {a.name for a in qi}
    cols = [c for c in rel.names if c in set(src.names) and c not in qset]
    if spec.id_field not in cols:
        cols.insert(0, spec.id_field)
    both = _combine([np.concatenate(_key_codes(c, [rel, src])) for c in cols],
                    rel.n + src.n)
    g_rel, g_src = both[: rel.n], both[rel.n:]
    groups = int(both.max()) + 1
    count = np.bincount(g_src, minlength=groups)
    if not count[g_rel].all():
        return None  # a released row without a candidate
    axis = next((a.name for a in qi if a.kind == "range"), None)
    if axis is not None:
        x = np.zeros(src.n)
        if axis in src.cells:  # as the row-by-row checks sort: ``_number(v) or 0.0``
            values, codes = src.cells[axis]
            x = np.array([_number(v) or 0.0 for v in values] or [0.0])[codes]
        order = np.lexsort((np.arange(src.n), x, g_src))
    else:
        order = np.argsort(g_src, kind="stable")
    start = np.concatenate([[0], np.cumsum(count)[:-1]])[g_rel]
    left, right = start.copy(), start + count[g_rel]
    if axis is not None:
        bounds: list[tuple[float, float]] = []
        values, codes = rel.cells.get(axis, ([None], np.zeros(rel.n, dtype=np.int64)))
        for v in values:
            m = _INTERVAL.match(_text(v) or "")
            bounds.append((float(m.group(1)), float(m.group(2))) if m else (np.nan, np.nan))
        lohi = np.array(bounds or [(np.nan, np.nan)])[codes]
        wide = ~np.isnan(lohi[:, 0]) & (count[g_rel] > 8)
        if wide.any():
            xu = np.unique(x)
            rank = np.searchsorted(xu, x)
            key = g_src[order] * (len(xu) + 1) + rank[order]
            base = g_rel[wide] * (len(xu) + 1)
            lo = np.searchsorted(key, base + np.searchsorted(xu, lohi[wide, 0], "left"), "left")
            hi = np.searchsorted(key, base + np.searchsorted(xu, lohi[wide, 1], "right"),
                                 "left")
            hi = np.where(hi > lo, hi, start[wide] + 1)  # none: the first, for its reason
            lo = np.where(hi > lo, lo, start[wide])
            left[wide], right[wide] = lo, hi
    span = right - left
    total = int(span.sum())
    if total > _PAIRS_PER_ROW * rel.n + 1000:
        return None
    jj = np.repeat(np.arange(rel.n), span)
    within = np.arange(total) - np.repeat(np.cumsum(span) - span, span)
    nn = order[np.repeat(left, span) + within]
    ok = np.ones(total, dtype=bool)
    unsure = np.zeros(total, dtype=bool)
    coverage = _Coverage(spec, [])  # its rules; the bounds and trees are made here
    for attr in qi:
        ok_a, unsure = _covered_columns(attr, rel, src, jj, nn, coverage)
        ok &= ok_a
    report.unverified += int((ok & unsure).sum())
    edges_per_row = np.bincount(jj[ok], minlength=rel.n)
    if not edges_per_row.all():
        return None  # a released row that covers none of its candidates
    jj, nn = jj[ok], nn[ok]
    taken = np.bincount(nn, minlength=src.n)
    if (edges_per_row == 1).all() and (taken <= 1).all():
        return nn  # one candidate each, no two alike: the matching itself
    # the groups where a row has a choice: the same matching as the row-by-row checks
    hard_rows = (edges_per_row > 1) | np.isin(np.arange(rel.n), jj[taken[nn] > 1])
    hard = np.zeros(groups, dtype=bool)
    hard[g_rel[hard_rows]] = True
    owner = nn[~hard[g_rel[jj]]].tolist()
    pick = hard[g_rel[jj]]
    cuts = np.flatnonzero(np.diff(jj[pick])) + 1
    edges_of = dict(zip(jj[pick][np.concatenate([[0], cuts])].tolist() if pick.any() else [],
                        np.split(nn[pick], cuts) if pick.any() else [], strict=True))
    members: dict[int, list[int]] = {}
    for j in np.flatnonzero(hard[g_rel]).tolist():
        members.setdefault(int(g_rel[j]), []).append(j)
    for outs in members.values():
        got = _matching([edges_of[j].tolist() for j in outs])
        if len(got) != len(outs):
            return None
        owner.extend(got)
    return np.array(owner, dtype=np.int64)


def _covered_columns(attr: AttributeSpec, rel: _Table, src: _Table, jj: np.ndarray, nn: np.ndarray,
             coverage: _Coverage) -> tuple[np.ndarray, np.ndarray]:
    """``(covered, unverified)`` per candidate pair for ``attr`` (as ``why_not`` decides)."""
    name = attr.name
    shown_values, shown_codes = rel.cells.get(name, ([None], np.zeros(rel.n, np.int64)))
    orig_values, orig_codes = src.cells.get(name, ([None], np.zeros(src.n, np.int64)))
    if attr.kind == "range":
        xs = np.array([x if (x := _number(v)) is not None else np.nan for v in orig_values])
        finite = xs[~np.isnan(xs)]
        lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (np.inf,
                                                                                  -np.inf)
        if attr.domain is not None:
            lo, hi = min(lo, attr.domain[0]), max(hi, attr.domain[1])
        coverage.bounds[name] = (lo, hi)
        spans = []
        for v in shown_values:
            text = _text(v)
            b = _interval(text)
            y = _number(text) if b is None else None
            spans.append(b if b is not None else (y, y) if y is not None else (np.nan, np.nan))
        s = np.array(spans, dtype=float)[shown_codes[jj]]
        x = xs[orig_codes[nn]]
        with np.errstate(invalid="ignore"):
            ok = ((s[:, 0] <= x) & (x <= s[:, 1]) & (s[:, 0] >= lo) & (s[:, 1] <= hi))
        return ok, np.zeros(len(jj), dtype=bool)
    if attr.kind == "hierarchy" and attr.tree is not None:
        tree = coverage.trees[name] = copy.deepcopy(attr.tree)
        leaves = [coverage._grow(tree, attr.grow, v) for v in orig_values]
    width = len(orig_values)
    pair = shown_codes[jj] * width + orig_codes[nn]
    if len(shown_values) * width <= 1 << 22:  # the pairs found without sorting them
        seen = np.zeros(len(shown_values) * width, dtype=bool)
        seen[pair] = True
        distinct = np.flatnonzero(seen)
        back = np.cumsum(seen)[pair] - 1
    else:
        distinct, back = np.unique(pair, return_inverse=True)
    if attr.kind not in ("range", "reduction") and not (attr.kind == "hierarchy"
                                                         and attr.tree is not None):
        table = _unruled_verdicts(attr, distinct // width, distinct % width, shown_values,
                                  orig_values, coverage)
        return table[back.reshape(-1), 0], table[back.reshape(-1), 1]
    verdicts = []
    for p in distinct.tolist():
        shown, original = shown_values[p // width], orig_values[p % width]
        if attr.kind == "hierarchy" and attr.tree is not None:
            leaf = leaves[p % width]
            verdicts.append((leaf is not None and _text(shown) in tree.ancestors(leaf),
                             False))
        else:
            why, unsure = coverage.why_not(-1, attr, shown, original)
            verdicts.append((why is None, unsure))
    table = np.array(verdicts or [(False, False)], dtype=bool).reshape(-1, 2)
    return table[back.reshape(-1), 0], table[back.reshape(-1), 1]


def _unruled_verdicts(attr: AttributeSpec, shown: np.ndarray, original: np.ndarray,
                      shown_values: Sequence[Any], orig_values: Sequence[Any],
                      coverage: _Coverage) -> np.ndarray:
    """``(covered, unverified)`` per pair ``(shown_values[shown[i]], orig_values[original[i]])``
    of an attribute no rule describes, as ``why_not`` decides, column-wise: equal texts are
    covered; else an interval covers a number inside it only; anything else is unverifiable.
    A missing input value is left to ``why_not`` itself."""
    if not len(shown):
        return np.zeros((1, 2), dtype=bool)
    used_s, shown = np.unique(shown, return_inverse=True)  # only the values the pairs use
    used_o, original = np.unique(original, return_inverse=True)
    shown, original = shown.reshape(-1), original.reshape(-1)
    shown_raw = [shown_values[i] for i in used_s.tolist()]
    orig_raw = [orig_values[i] for i in used_o.tolist()]
    shown_text = [_text(v) for v in shown_raw]
    orig_text = [_text(v) for v in orig_raw]
    ids: dict[str | None, int] = {}
    shown_id = np.array([ids.setdefault(x, len(ids)) for x in shown_text])
    orig_id = np.array([ids.setdefault(x, len(ids)) for x in orig_text])
    spans = [_interval(x) for x in shown_text]
    has_span = np.array([b is not None for b in spans])
    span = np.array([b if b is not None else (0.0, 0.0) for b in spans],
                    dtype=np.float64).reshape(-1, 2)
    numbers = [_number(v) for v in orig_raw]
    has_x = np.array([x is not None for x in numbers])
    xs = np.array([x if x is not None else 0.0 for x in numbers], dtype=np.float64)
    equal = shown_id[shown] == orig_id[original]
    numeric = has_span[shown] & has_x[original]
    x = xs[original]
    inside = (span[shown, 0] <= x) & (x <= span[shown, 1])
    out = np.empty((len(shown), 2), dtype=bool)
    out[:, 0] = equal | ~numeric | inside
    out[:, 1] = ~equal & ~numeric
    missing = np.array([x is None for x in orig_text])
    for i in np.flatnonzero(missing[original]).tolist():
        why, unsure = coverage.why_not(-1, attr, shown_raw[shown[i]], orig_raw[original[i]])
        out[i] = (why is None, unsure)
    return out

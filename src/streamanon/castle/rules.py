"""Rules: which attribute is the individual, which are generalized (how), which are sensitive.

>>> rs = RuleSet.from_dict({"id": "u", "attribute": [
...     {"name": "age", "generalizer": "range"}, {"name": "disease", "sensitive": True}]})
>>> rs.quasi_identifiers, rs.sensitive
(['age'], ['disease'])

Design: docs/design/castle.md
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamanon.castle.generalizers import (
    Generalizer,
    HierarchyGeneralizer,
    generalizer_factory,
    register_generalizer,
)
from streamanon.castle.hierarchy import DEFAULT_ROOT, Hierarchy
from streamanon.castle.loss import Metric
from streamanon.errors import ConfigError

_KNOWN_KEYS = {
    "range": {"domain"},
    "reduction": set(),
    "none": set(),
    "hierarchy": {"paths", "tree", "root", "metric", "grow", "prl_reset"},
}
_COMMON_KEYS = {"name", "generalizer", "sensitive", "weight", "static"}
#: the operator parameters a ``[parameters]`` table may set, each with its least value
PARAMETERS = {"k": 1, "l": 0, "delta": 1, "beta": 1}


def _parameters(raw: Any) -> dict[str, int]:
    """A ``[parameters]`` table: some of k, l, delta, beta, each an integer >= its least."""
    if not isinstance(raw, Mapping):
        raise ConfigError("parameters must be a table ([parameters]) of k, l, delta, beta")
    unknown = set(raw) - set(PARAMETERS)
    if unknown:
        raise ConfigError(f"unknown key(s) in parameters: {', '.join(sorted(unknown))} "
                          "(k, l, delta, beta)")
    out = {}
    for name, least in PARAMETERS.items():
        if name not in raw:
            continue
        value = raw[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"parameters: {name} must be an integer >= {least}, "
                              f"not {value!r}")
        out[name] = value
    return out


HIERARCHY_SCOPES = ("shared", "cluster")


def check_hierarchy_scope(scope: Any) -> str:
    """``scope`` if it is one of :data:`HIERARCHY_SCOPES`, else a ConfigError."""
    if scope not in HIERARCHY_SCOPES:
        raise ConfigError(f"hierarchy_scope must be one of {', '.join(HIERARCHY_SCOPES)}, "
                          f"not {scope!r}")
    return str(scope)


def _hierarchy_factory(
    name: str,
    *,
    paths: list[list[str]] | None = None,
    tree: str | None = None,
    root: str | None = None,
    metric: str = "glm",
    grow: bool = False,
    prl_reset: int = 10_000,
    base_dir: Path | None = None,
) -> HierarchyGeneralizer:
    if (paths is None) == (tree is None):
        raise ConfigError(f"attribute {name!r}: a hierarchy needs exactly one of paths or tree")
    if tree is not None:
        file = Path(tree)
        if base_dir is not None and not file.is_absolute():
            file = base_dir / file
        h = Hierarchy.from_file(file, root)
    else:
        if not isinstance(paths, list) or not all(isinstance(p, list) and p for p in paths):
            raise ConfigError(f"attribute {name!r}: paths must be a list of non-empty lists")
        h = Hierarchy.from_paths(paths, root or DEFAULT_ROOT)
    if metric not in Metric.__members__:
        raise ConfigError(f"attribute {name!r}: metric must be glm, ncp or prl, not {metric!r}")
    return HierarchyGeneralizer(name, h, Metric(metric), grow=bool(grow), prl_reset=prl_reset)


register_generalizer("hierarchy", _hierarchy_factory)


def _domain(name: str, domain: Any) -> tuple[float, float]:
    """A range attribute's ``domain = [lo, hi]``: two finite numbers, lo <= hi."""
    if (not isinstance(domain, list) or len(domain) != 2
            or any(isinstance(v, bool) or not isinstance(v, int | float) for v in domain)):
        raise ConfigError(f"attribute {name!r}: domain must be [lo, hi], two numbers, not "
                          f"{domain!r}")
    lo, hi = float(domain[0]), float(domain[1])
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise ConfigError(f"attribute {name!r}: domain must be [lo, hi] with lo <= hi, not "
                          f"{domain!r}")
    return lo, hi


_ATTRIBUTE_TABLE = re.compile(r"^\s*\[\[\s*attribute\s*\]\]")
_PARAMETERS_TABLE = re.compile(r"^\s*\[\s*parameters\s*\]")
_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")
_NAME = re.compile(r"""^\s*name\s*=\s*["']([^"']*)["']""")


def rules_line(text: str, message: str) -> int | None:
    """The line of a rules file that ``message`` (an error about it) is about: the key it
    names in the attribute table it names (by name or number), else that table's header;
    a top-level key (``id``, ``time``); None when the message names neither.

    >>> text = 'id = "u"\\n[[attribute]]\\nname = "age"\\ndomain = [1, 2, 3]\\n'
    >>> rules_line(text, "attribute 'age': domain must be [lo, hi]"), rules_line(text, "x")
    (4, None)
    """
    lines = text.splitlines()
    tables: list[tuple[int, str | None, dict[str, int]]] = []  # header line, name, key lines
    top: dict[str, int] = {}
    params: dict[str, int] | None = None  # the [parameters] table's header and key lines
    in_params = False
    for number, raw in enumerate(lines, start=1):
        if _ATTRIBUTE_TABLE.match(raw):
            tables.append((number, None, {}))
            in_params = False
            continue
        if _PARAMETERS_TABLE.match(raw):
            params, in_params = {"": number}, True
            continue
        key = _KEY.match(raw)
        if key is None:
            continue
        if in_params and params is not None:
            params.setdefault(key.group(1), number)
            continue
        if not tables:
            top.setdefault(key.group(1), number)
            continue
        header, name, keys = tables[-1]
        keys.setdefault(key.group(1), number)
        named = _NAME.match(raw)
        if named is not None and name is None:
            tables[-1] = (header, named.group(1), keys)
    if params is not None and re.match(r"(unknown key\(s\) in )?parameters\b", message):
        words = set(re.findall(r"[a-z_]+", message.split(":", 1)[-1].split("(")[0]))
        return next((params[k] for k in params if k and k in words), params[""])
    table = None
    by_name = re.match(r"attribute\(?s?\)? '([^']*)'", message) or re.search(
        r"attribute '([^']*)'", message)
    by_number = re.match(r"attribute #(\d+)", message)
    if by_number is not None and 0 < int(by_number.group(1)) <= len(tables):
        table = tables[int(by_number.group(1)) - 1]
    elif by_name is not None:
        table = next((t for t in tables if t[1] == by_name.group(1)), None)
    if table is not None:
        header, _, keys = table
        words = set(re.findall(r"[a-z_]+", message.split(":", 1)[-1]))
        return next((keys[k] for k in keys if k in words and k != "name"), header)
    for key in ("time", "id"):
        if re.search(rf"\b{key}\b", message) and key in top:
            return top[key]
    return None


@dataclass(frozen=True)
class AttributeRule:
    """One attribute: its generalizer, whether it is sensitive, its weight in the loss."""

    name: str
    generalizer: Generalizer
    sensitive: bool = False
    weight: float = 1.0
    #: constant per individual: every release of an individual covers its first one
    #: (:mod:`streamanon.castle.anchors`)
    static: bool = False


class RuleSet:
    """A set of attribute rules plus the individual (and optional time) column.

    The list of rules is fixed once built; the generalizers inside carry run-time state
    (adaptive domains, grown hierarchies, request counts), so :class:`CastleAnonymizer`
    installs its own deep copy of every rule set it is given.
    """

    #: the operator parameters these rules set (``[parameters]``: some of k, l, delta,
    #: beta); the operator's own values hold for the others (a class default: rule sets
    #: pickled before there were parameters)
    parameters: dict[str, int] = {}  # noqa: RUF012 (never mutated: replaced per instance)
    #: ``hierarchy_scope``: "shared" (one growing tree per rule set) or "cluster" (each
    #: cluster's own tree); ``None``: the operator's value
    hierarchy_scope: str | None = None

    def __init__(self, id_field: str, attributes: list[AttributeRule],
                 time_field: str | None = None,
                 parameters: Mapping[str, int] | None = None, *,
                 hierarchy_scope: str | None = None) -> None:
        """Rules from their parts (:meth:`from_toml` reads them from a file's text).

        Args:
            id_field: the column naming the individual.
            attributes: one rule per attribute.
            time_field: the column of event time, if any.
            parameters: some of k, l, delta, beta these rules set (``[parameters]``).
            hierarchy_scope: ``"shared"`` or ``"cluster"`` (``None``: the operator's).
        """
        if not id_field:
            raise ConfigError("rules need an id field naming the individual")
        names = [a.name for a in attributes]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ConfigError(f"attribute(s) {', '.join(sorted(dup))} given twice in the rules")
        if id_field in names:
            raise ConfigError(f"the id field {id_field!r} cannot also have an attribute rule")
        for a in attributes:
            if not 0.0 <= a.weight <= 1.0:
                raise ConfigError(f"attribute {a.name!r}: weight must be in [0, 1]")
            if a.sensitive and a.generalizer.quasi_identifier:
                raise ConfigError(f"attribute {a.name!r} is sensitive: it is released as is, "
                                 "so it cannot have a generalizer")
        self.id_field = id_field
        self.time_field = time_field
        if parameters:
            self.parameters = _parameters(parameters)
        if hierarchy_scope is not None:
            self.hierarchy_scope = check_hierarchy_scope(hierarchy_scope)
        #: the columns an input must have: the id and, when the rules name one, the time (a
        #: misspelt time column is refused even where no max_delay reads it)
        self.required_columns = [id_field, *([time_field] if time_field else [])]
        self.attributes = list(attributes)
        self.qi_rules = [a for a in attributes if a.generalizer.quasi_identifier]
        self.sensitive = [a.name for a in attributes if a.sensitive]
        #: the configured domain of each range attribute that has one: values outside it
        #: widen the generalizer's domain (:meth:`widened` tells how far)
        self.domains = {a.name: (a.generalizer.lo, a.generalizer.hi) for a in self.qi_rules
                        if getattr(a.generalizer, "configured", False)}

    def widened(self) -> dict[str, list[float]]:
        """The range attributes whose data went beyond the configured domain: the domain the
        loss is now measured on (a generalizer widens it so the loss stays within [0, 1]; a
        domain too narrow for the data makes every loss relative to the wider one)."""
        out = {}
        for a in self.qi_rules:
            if a.name in getattr(self, "domains", {}):
                now = (a.generalizer.lo, a.generalizer.hi)  # type: ignore[attr-defined]
                if now != self.domains[a.name]:
                    out[a.name] = [now[0], now[1]]
        return out

    def with_static(self, names: Iterable[str]) -> RuleSet:
        """These rules with the quasi-identifiers ``names`` marked ``static`` as the rules'
        ``static = true`` key marks them (the others as they are): the ``--static`` option's
        rules. A name that is not a quasi-identifier of the rules is refused."""
        wanted = list(names)
        by_name = {a.name: a for a in self.attributes}
        for name in wanted:
            a = by_name.get(name)
            if a is None:
                raise ConfigError(f"static {name!r}: no attribute of that name in the rules")
            if not a.generalizer.quasi_identifier:
                raise ConfigError(f"attribute {name!r}: static needs a quasi-identifier "
                                  "(not a sensitive or released-as-is attribute)")
        if all(by_name[n].static for n in wanted):
            return self
        out = copy.copy(self)
        out.attributes = [dataclasses.replace(a, static=True) if a.name in wanted else a
                          for a in self.attributes]
        out.qi_rules = [a for a in out.attributes if a.generalizer.quasi_identifier]
        return out

    @property
    def quasi_identifiers(self) -> list[str]:
        return [a.name for a in self.qi_rules]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base_dir: Path | None = None) -> RuleSet:
        """Rules from the parsed TOML structure (see the module docstring)."""
        unknown = set(data) - {"id", "time", "attribute", "parameters", "hierarchy_scope"}
        if unknown:
            raise ConfigError(f"unknown top-level key(s) in rules: {', '.join(sorted(unknown))}")
        if not isinstance(data.get("id"), str):
            raise ConfigError('rules need id = "<column naming the individual>"')
        attrs: list[AttributeRule] = []
        raw_attrs = data.get("attribute", [])
        if not isinstance(raw_attrs, list):
            raise ConfigError("attribute must be an array of tables ([[attribute]])")
        for i, spec in enumerate(raw_attrs, start=1):
            if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
                raise ConfigError(f"attribute #{i} needs a name")
            name = spec["name"]
            sensitive = spec.get("sensitive", False)
            if not isinstance(sensitive, bool):
                raise ConfigError(f"attribute {name!r}: sensitive must be true or false "
                                 f"(unquoted), not {sensitive!r}")
            kind = spec.get("generalizer", "none" if sensitive else None)
            if kind is None:
                raise ConfigError(f"attribute {name!r} needs a generalizer (range, reduction, "
                                 "hierarchy, none) or sensitive = true")
            options = {k: v for k, v in spec.items() if k not in _COMMON_KEYS}
            if kind in _KNOWN_KEYS:
                extra = set(options) - _KNOWN_KEYS[kind]
                if extra:
                    raise ConfigError(f"attribute {name!r}: unknown key(s) for {kind}: "
                                     f"{', '.join(sorted(extra))}")
            if kind == "hierarchy":
                options["base_dir"] = base_dir
            if kind == "range" and options.get("domain") is not None:
                options["domain"] = _domain(name, options["domain"])
            weight = spec.get("weight", 1.0)
            if isinstance(weight, bool) or not isinstance(weight, int | float):
                raise ConfigError(f"attribute {name!r}: weight must be a number")
            static = spec.get("static", False)
            if not isinstance(static, bool) or (static and sensitive):
                raise ConfigError(f"attribute {name!r}: static must be true or false "
                                  "(unquoted), on a quasi-identifier")
            attrs.append(AttributeRule(name, generalizer_factory(kind)(name, **options),
                                       sensitive, float(weight), static))
        time_field = data.get("time")
        if time_field is not None and not isinstance(time_field, str):
            raise ConfigError("time must name a column")
        parameters = _parameters(data["parameters"]) if "parameters" in data else None
        return cls(data["id"], attrs, time_field, parameters,
                   hierarchy_scope=data.get("hierarchy_scope"))

    @classmethod
    def from_toml(cls, text: str, base_dir: Path | None = None) -> RuleSet:
        """Rules from TOML text; an error names the line of the table (or key) it is about."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"rules are not valid TOML: {exc}") from None
        try:
            return cls.from_dict(data, base_dir)
        except ConfigError as exc:
            line = rules_line(text, str(exc))
            if line is None:
                raise
            raise ConfigError(f"line {line}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> RuleSet:
        """Rules from a TOML file; relative hierarchy tree files are read beside it."""
        path = Path(path)
        return cls.from_toml(path.read_text(encoding="utf-8"), path.parent)

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id_field,
            "quasi_identifiers": {a.name: type(a.generalizer).__name__ for a in self.qi_rules},
            "sensitive": self.sensitive,
            **({"parameters": dict(self.parameters)} if self.parameters else {}),
            **({"hierarchy_scope": self.hierarchy_scope} if self.hierarchy_scope else {}),
        }

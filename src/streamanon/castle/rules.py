"""Rules: which attribute is the individual, which are generalized (how), which are sensitive.

>>> rs = RuleSet.from_dict({"id": "u", "attribute": [
...     {"name": "age", "generalizer": "range"}, {"name": "disease", "sensitive": True}]})
>>> rs.quasi_identifiers, rs.sensitive
(['age'], ['disease'])

Design: docs/design/castle.md
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
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
_COMMON_KEYS = {"name", "generalizer", "sensitive", "weight"}


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


@dataclass(frozen=True)
class AttributeRule:
    """One attribute: its generalizer, whether it is sensitive, its weight in the loss."""

    name: str
    generalizer: Generalizer
    sensitive: bool = False
    weight: float = 1.0


class RuleSet:
    """A set of attribute rules plus the individual (and optional time) column.

    The list of rules is fixed once built; the generalizers inside carry run-time state
    (adaptive domains, grown hierarchies, request counts), so :class:`CastleAnonymizer`
    installs its own deep copy of every rule set it is given.
    """

    def __init__(self, id_field: str, attributes: list[AttributeRule],
                 time_field: str | None = None) -> None:
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
        self.attributes = list(attributes)
        self.qi_rules = [a for a in attributes if a.generalizer.quasi_identifier]
        self.sensitive = [a.name for a in attributes if a.sensitive]

    @property
    def quasi_identifiers(self) -> list[str]:
        return [a.name for a in self.qi_rules]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base_dir: Path | None = None) -> RuleSet:
        """Rules from the parsed TOML structure (see the module docstring)."""
        unknown = set(data) - {"id", "time", "attribute"}
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
            sensitive = bool(spec.get("sensitive", False))
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
            weight = spec.get("weight", 1.0)
            if isinstance(weight, bool) or not isinstance(weight, int | float):
                raise ConfigError(f"attribute {name!r}: weight must be a number")
            attrs.append(AttributeRule(name, generalizer_factory(kind)(name, **options),
                                       sensitive, float(weight)))
        time_field = data.get("time")
        if time_field is not None and not isinstance(time_field, str):
            raise ConfigError("time must name a column")
        return cls(data["id"], attrs, time_field)

    @classmethod
    def from_toml(cls, text: str, base_dir: Path | None = None) -> RuleSet:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"rules are not valid TOML: {exc}") from None
        return cls.from_dict(data, base_dir)

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
        }

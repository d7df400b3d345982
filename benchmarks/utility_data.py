"""The utility benchmark's parts: an Adult-schema generator, a textbook Mondrian, one loss metric.

* :func:`adult_rows`: rows with UCI Adult's schema (age, sex, race, marital status, education,
  native country, hours per week; occupation as the sensitive attribute) drawn from marginals
  close to the real table's (rounded shares of the 32,561 training rows; age skewed right with
  mean ~38, most people working 40 hours, the young mostly never married). No PyPI wheel ships
  the table offline here, so this is a generator, not the data set.
* :func:`mondrian`: strict multidimensional Mondrian (LeFevre et al. 2006): the widest attribute
  (normalized) is cut at its median while both halves keep >= k (rows or distinct ids) and >= l
  distinct sensitive values; a category is ordered by its hierarchy's leaves and released as
  the lowest common ancestor of the values in the class.
* :func:`loss`: the one metric for every tool's output: NCP for numeric intervals over the
  input's range, GLM ((leaves under the node - 1) / (leaves - 1)) for hierarchy nodes, 1 for
  anything else (``*``, a suppressed row); the mean over rows (suppressed rows included) and
  quasi-identifiers.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamanon.attack import parse_interval

SEX = {"Male": .67, "Female": .33}
RACE = {"White": .854, "Black": .096, "Asian-Pac-Islander": .031, "Amer-Indian-Eskimo": .0096,
        "Other": .0084}
MARITAL = {"Married-civ-spouse": .46, "Never-married": .33, "Divorced": .136, "Separated": .031,
           "Widowed": .030, "Married-spouse-absent": .013, "Married-AF-spouse": .001}
EDUCATION = {"HS-grad": .32, "Some-college": .22, "Bachelors": .16, "Masters": .053,
             "Assoc-voc": .042, "11th": .036, "Assoc-acdm": .033, "10th": .029, "7th-8th": .02,
             "Prof-school": .018, "9th": .016, "12th": .013, "Doctorate": .013, "5th-6th": .010,
             "1st-4th": .005, "Preschool": .002}
COUNTRY = {"United-States": .913, "Mexico": .020, "Philippines": .006, "Germany": .0045,
           "Canada": .0040, "Puerto-Rico": .0037, "El-Salvador": .0035, "India": .0033,
           "Cuba": .0031, "England": .0030, "China": .0025, "Italy": .0025, "Other": .0294}
OCCUPATION = {"Prof-specialty": .127, "Craft-repair": .126, "Exec-managerial": .125,
              "Adm-clerical": .116, "Sales": .112, "Other-service": .101,
              "Machine-op-inspct": .061, "Unknown": .057, "Transport-moving": .049,
              "Handlers-cleaners": .042, "Farming-fishing": .031, "Tech-support": .028,
              "Protective-serv": .020, "Priv-house-serv": .005}
PATHS: dict[str, list[list[str]]] = {
    "sex": [["Male"], ["Female"]],
    "race": [["White"], ["Non-White", "Black"], ["Non-White", "Asian-Pac-Islander"],
             ["Non-White", "Amer-Indian-Eskimo"], ["Non-White", "Other"]],
    "marital_status": [["Married", "Married-civ-spouse"], ["Married", "Married-AF-spouse"],
                       ["Married", "Married-spouse-absent"], ["Not-married", "Never-married"],
                       ["Not-married", "Divorced"], ["Not-married", "Separated"],
                       ["Not-married", "Widowed"]],
    "education": [["No-diploma", "Primary", v] for v in ("Preschool", "1st-4th", "5th-6th",
                                                         "7th-8th")]
    + [["No-diploma", "Secondary", v] for v in ("9th", "10th", "11th", "12th")]
    + [["High-school", "HS-grad"], ["High-school", "Some-college"],
       ["Higher", "Associate", "Assoc-voc"], ["Higher", "Associate", "Assoc-acdm"],
       ["Higher", "Bachelors"], ["Higher", "Graduate", "Masters"],
       ["Higher", "Graduate", "Prof-school"], ["Higher", "Graduate", "Doctorate"]],
    "native_country": [["North-America", "United-States"], ["North-America", "Canada"]]
    + [["Latin-America", v] for v in ("Mexico", "Puerto-Rico", "El-Salvador", "Cuba")]
    + [["Asia", v] for v in ("Philippines", "India", "China")]
    + [["Europe", v] for v in ("Germany", "England", "Italy")] + [["Other"]],
}
ADULT_NUMERIC = ["age", "hours_per_week"]
ADULT_QI = ["age", "sex", "race", "marital_status", "education", "native_country",
            "hours_per_week"]


def _pick(rng: np.random.Generator, shares: Mapping[str, float], n: int) -> list[str]:
    p = np.array(list(shares.values()))
    return [list(shares)[i] for i in rng.choice(len(shares), size=n, p=p / p.sum())]


def adult_rows(n: int, *, per_individual: int = 1, seed: int = 1) -> list[dict[str, Any]]:
    """``n`` rows in stream order, ``per_individual`` rows per person (column ``pid``).

    A person's demographics and occupation are fixed; hours per week vary between a person's
    rows (different weeks); the rows of all people are shuffled into one stream.
    """
    rng = np.random.default_rng(seed)
    people = -(-n // per_individual)
    age = np.clip(17 + rng.gamma(2.2, 9.8, people), 17, 90).astype(int)
    marital = _pick(rng, MARITAL, people)
    young = (age < 25) & (rng.random(people) < 0.85)
    marital = ["Never-married" if y else m for y, m in zip(young, marital, strict=True)]
    cols = {"sex": _pick(rng, SEX, people), "race": _pick(rng, RACE, people),
            "education": _pick(rng, EDUCATION, people),
            "native_country": _pick(rng, COUNTRY, people),
            "occupation": _pick(rng, OCCUPATION, people)}
    base_hours = np.where(rng.random(people) < 0.47, 40, rng.normal(40, 12, people))
    rows = []
    for p in range(people):
        for w in range(per_individual):
            hours = base_hours[p] + (rng.normal(0, 4) if w else 0.0)
            rows.append({"pid": f"p{p}", "age": int(age[p]), "marital_status": marital[p],
                         **{c: v[p] for c, v in cols.items()},
                         "hours_per_week": int(np.clip(round(hours), 1, 99))})
    order = rng.permutation(len(rows))
    return [rows[i] for i in order[:n]]


def adult_rules(id_field: str = "pid") -> dict[str, Any]:
    attrs: list[dict[str, Any]] = []
    for name in ADULT_QI:
        if name in ADULT_NUMERIC:
            attrs.append({"name": name, "generalizer": "range"})
        else:
            attrs.append({"name": name, "generalizer": "hierarchy", "paths": PATHS[name]})
    attrs.append({"name": "occupation", "sensitive": True})
    return {"id": id_field, "attribute": attrs}


# -- hierarchies -------------------------------------------------------------------------------
@dataclass
class Tree:
    """A hierarchy given as root-first paths below an implicit root ``*``."""

    paths: list[list[str]]
    parent: dict[str, str] = field(default_factory=dict)
    leaves: list[str] = field(default_factory=list)
    under: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.under["*"] = set()
        for path in self.paths:
            chain = ["*", *path]
            for a, b in itertools.pairwise(chain):
                self.parent[b] = a
            self.leaves.append(path[-1])
            for node in chain:
                self.under.setdefault(node, set()).add(path[-1])

    def ancestors(self, leaf: str) -> list[str]:
        out = [leaf]
        while out[-1] in self.parent:
            out.append(self.parent[out[-1]])
        return out

    def lca(self, values: Iterable[str]) -> str:
        vals = set(values)
        for node in self.ancestors(next(iter(vals))):
            if vals <= self.under.get(node, {node}):
                return node
        return "*"

    def glm(self, node: Any) -> float:
        n = len(self.leaves)
        got = self.under.get(str(node))
        if got is None or n <= 1:
            return 1.0
        return (len(got) - 1) / (n - 1)


# -- the metric --------------------------------------------------------------------------------
@dataclass
class Schema:
    """What the metric and Mondrian need: the id, QIs (numeric ranges or trees), the SA."""

    id_field: str
    numeric: dict[str, tuple[float, float]]  # name -> the input's (min, max)
    trees: dict[str, Tree]
    sensitive: str

    @property
    def qi(self) -> list[str]:
        return [*self.numeric, *self.trees]


def schema_of(rows: Sequence[Mapping[str, Any]], rules: Mapping[str, Any]) -> Schema:
    numeric: dict[str, tuple[float, float]] = {}
    trees: dict[str, Tree] = {}
    sens = ""
    for a in rules["attribute"]:
        if a.get("sensitive"):
            sens = a["name"]
        elif a.get("generalizer") == "hierarchy":
            trees[a["name"]] = Tree(a["paths"])
        else:
            x = np.array([float(r[a["name"]]) for r in rows])
            numeric[a["name"]] = (float(x.min()), float(x.max()))
    return Schema(rules["id"], numeric, trees, sens)


def loss(released: Iterable[Mapping[str, Any]], suppressed: int, schema: Schema) -> float:
    """Mean loss per row and quasi-identifier (a suppressed row: 1 on every attribute)."""
    total, n = 0.0, 0
    qi = len(schema.qi)
    for row in released:
        s = 0.0
        for name, (lo, hi) in schema.numeric.items():
            iv = parse_interval(row[name])
            s += 1.0 if iv is None else ((iv[1] - iv[0]) / (hi - lo) if hi > lo else 0.0)
        for name, tree in schema.trees.items():
            s += tree.glm(row[name])
        total += s / qi
        n += 1
    return (total + suppressed) / max(1, n + suppressed)


# -- Mondrian ----------------------------------------------------------------------------------
def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def mondrian(rows: Sequence[Mapping[str, Any]], schema: Schema, *, k: int, l: int,  # noqa: E741
             by_ids: bool) -> list[dict[str, Any]]:
    """Strict multidimensional Mondrian; returns the released rows (nothing is suppressed)."""
    n = len(rows)
    names = schema.qi
    cols: dict[str, np.ndarray] = {}
    width: dict[str, float] = {}
    for name, (lo, hi) in schema.numeric.items():
        cols[name] = np.array([float(r[name]) for r in rows])
        width[name] = hi - lo or 1.0
    for name, tree in schema.trees.items():
        index = {leaf: i for i, leaf in enumerate(tree.leaves)}
        cols[name] = np.array([index[str(r[name])] for r in rows], dtype=float)
        width[name] = max(1, len(tree.leaves) - 1)
    _, ids = np.unique([str(r[schema.id_field]) for r in rows], return_inverse=True)
    _, sens = np.unique([str(r[schema.sensitive]) for r in rows], return_inverse=True)

    def allowed(part: np.ndarray) -> bool:
        if (len(np.unique(ids[part])) if by_ids else len(part)) < k:
            return False
        return l <= 1 or len(np.unique(sens[part])) >= l

    out: list[dict[str, Any]] = [{} for _ in range(n)]
    stack = [np.arange(n)]
    while stack:
        part = stack.pop()
        spans = sorted(((np.ptp(cols[c][part]) / width[c], c) for c in names), reverse=True)
        cut = False
        for span, c in spans:
            if span <= 0:
                break
            x = cols[c][part]
            med = float(np.median(x))
            left = x <= med if med < x.max() else x < med
            a, b = part[left], part[~left]
            if len(a) and len(b) and allowed(a) and allowed(b):
                stack += [a, b]
                cut = True
                break
        if not cut:
            values: dict[str, Any] = {}
            for name in schema.numeric:
                x = cols[name][part]
                values[name] = f"[{_fmt(x.min())},{_fmt(x.max())}]"
            for name, tree in schema.trees.items():
                leaves = {tree.leaves[int(i)] for i in np.unique(cols[name][part])}
                values[name] = tree.lca(leaves)
            for i in part.tolist():
                out[i] = {**rows[i], **values}
    return out

"""Generalizers: how one attribute's values are summarized when a cluster is released.

A generalizer turns the values of a cluster into one released value and says how much
information that loses. The interface is small so users can add their own
(:func:`register_generalizer`); states are immutable, so the enlargement of a cluster by a
tuple is ``loss(add(state, v)) - loss(state)`` without touching the cluster.

* :class:`RangeGeneralizer` numeric ``[lo,hi]``, domain configured or adaptive;
* :class:`ReductionGeneralizer` masks trailing characters with ``*`` until all values agree;
* :class:`HierarchyGeneralizer` the lowest common node of a (growing) DGH;
* :class:`NoneGeneralizer` passes values through (not a quasi-identifier).

>>> g = RangeGeneralizer("x", domain=(0.0, 10.0))
>>> s = g.add(g.add(None, 2.0), 4.0)
>>> g.output(s), g.loss(s)
('[2,4]', 0.2)
>>> r = ReductionGeneralizer("zip")
>>> r.output(r.add(r.add(None, "75001"), "75013"))
'750**'
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from streamanon.castle.hierarchy import MAX_TABLE_NODES, Hierarchy
from streamanon.castle.loss import Metric, glm, ncp, prl, range_loss
from streamanon.errors import BadValueError, ConfigError, MissingFieldError, UnknownCategoryError


def format_number(x: float) -> str:
    """Shortest text of a number: integral values without ``.0``.

    >>> format_number(3.0), format_number(-2.5), format_number(1e20)
    ('3', '-2.5', '1e+20')
    """
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


class Generalizer(ABC):
    """One attribute's generalization; subclass and :func:`register_generalizer` to plug in.

    ``quasi_identifier`` is False for pass-through generalizers. A *state* summarizes the values
    of a cluster (``None`` = empty); it must be immutable and picklable.
    """

    quasi_identifier: ClassVar[bool] = True

    def __init__(self, name: str) -> None:
        self.name = name

    @abstractmethod
    def parse(self, raw: Any) -> Any:
        """Validate a raw input value and return it ready for :meth:`observe`.

        Raises :class:`~streamanon.errors.BadRecordError` (``field`` = the attribute) saying
        what is wrong; must not change the generalizer.
        """

    def observe(self, value: Any) -> Any:
        """Account for an accepted value (domains, counts, growth); returns the value to add."""
        return value

    @abstractmethod
    def add(self, state: Any, value: Any) -> Any:
        """The state of a cluster after adding ``value``."""

    @abstractmethod
    def merge(self, a: Any, b: Any) -> Any:
        """The state of the union of two clusters."""

    @abstractmethod
    def loss(self, state: Any) -> float:
        """Information loss in [0, 1] of releasing ``state``."""

    @abstractmethod
    def output(self, state: Any) -> Any:
        """The released value of ``state``."""

    @abstractmethod
    def covers(self, state: Any, value: Any) -> bool:
        """True when releasing ``value`` as ``output(state)`` is a correct generalization."""

    @abstractmethod
    def maximal(self) -> Any:
        """The released value that says nothing (used by the ``generalize`` suppression)."""


class NoneGeneralizer(Generalizer):
    """Pass-through: the attribute is not a quasi-identifier."""

    quasi_identifier = False

    def parse(self, raw: Any) -> Any:
        return raw

    def add(self, state: Any, value: Any) -> Any:
        return None

    def merge(self, a: Any, b: Any) -> Any:
        return None

    def loss(self, state: Any) -> float:
        return 0.0

    def output(self, state: Any) -> Any:
        return None

    def covers(self, state: Any, value: Any) -> bool:
        return True

    def maximal(self) -> Any:
        return None


class RangeGeneralizer(Generalizer):
    """Numeric values released as ``[lo,hi]``; loss is the share of the domain covered.

    With ``domain`` the loss is measured on it (values outside widen it, so the loss stays
    within [0, 1]); without, the domain is the running min/max of the values seen.
    """

    def __init__(self, name: str, domain: Sequence[float] | None = None) -> None:
        super().__init__(name)
        if domain is not None:
            try:
                lo, hi = (float(v) for v in domain)
            except (TypeError, ValueError):  # not two numbers
                raise ConfigError(f"attribute {name!r}: domain must be [lo, hi] with lo <= hi"
                                  ) from None
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ConfigError(f"attribute {name!r}: domain must be [lo, hi] with lo <= hi")
            self.lo, self.hi = lo, hi
        else:
            self.lo, self.hi = math.inf, -math.inf
        self.configured = domain is not None

    def parse(self, raw: Any) -> float:
        if isinstance(raw, bool) or raw is None:
            raise BadValueError(self.name, f"attribute {self.name!r} needs a number, got {raw!r}")
        try:
            x = float(raw)
        except (TypeError, ValueError):
            raise BadValueError(self.name, f"attribute {self.name!r} needs a number, got "
                                f"{raw!r}") from None
        if not math.isfinite(x):
            raise BadValueError(self.name, f"attribute {self.name!r} is not a finite number: "
                                f"{raw!r}")
        return x

    def observe(self, value: float) -> float:
        if value < self.lo:
            self.lo = value
        if value > self.hi:
            self.hi = value
        return value

    @property
    def span(self) -> float:
        return self.hi - self.lo if self.hi > self.lo else 0.0

    def add(self, state: tuple[float, float] | None, value: float) -> tuple[float, float]:
        if state is None:
            return (value, value)
        return (min(state[0], value), max(state[1], value))

    def merge(self, a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
        return (min(a[0], b[0]), max(a[1], b[1]))

    def loss(self, state: tuple[float, float]) -> float:
        return range_loss(state[0], state[1], self.lo, self.hi)

    def output(self, state: tuple[float, float]) -> str:
        return f"[{format_number(state[0])},{format_number(state[1])}]"

    def covers(self, state: tuple[float, float], value: float) -> bool:
        return state[0] <= value <= state[1]

    def maximal(self) -> str:
        if self.hi < self.lo:
            return "[*]"
        return self.output((self.lo, self.hi))


class ReductionGeneralizer(Generalizer):
    """Mask trailing characters with ``*`` until all values agree; loss = masked / length."""

    def parse(self, raw: Any) -> str:
        if raw is None or isinstance(raw, list | dict):
            raise BadValueError(self.name, f"attribute {self.name!r} needs a text value, got "
                                f"{raw!r}")
        return raw if isinstance(raw, str) else format_number(float(raw)) if isinstance(
            raw, int | float) else str(raw)

    def add(self, state: tuple[str, int] | None, value: str) -> tuple[str, int]:
        if state is None:
            return (value, len(value))
        prefix, n = state
        return (_common_prefix(prefix, value), max(n, len(value)))

    def merge(self, a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:
        return (_common_prefix(a[0], b[0]), max(a[1], b[1]))

    def loss(self, state: tuple[str, int]) -> float:
        prefix, n = state
        return (n - len(prefix)) / n if n else 0.0

    def output(self, state: tuple[str, int]) -> str:
        prefix, n = state
        return prefix + "*" * (n - len(prefix))

    def covers(self, state: tuple[str, int], value: str) -> bool:
        return value.startswith(state[0]) and len(value) <= state[1]

    def maximal(self) -> str:
        return "*"


def _common_prefix(a: str, b: str) -> str:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return a[:i]


class _NewPath(tuple):
    """A root-first path a record brought along (parsed, not yet inserted)."""

    __slots__ = ()


class HierarchyGeneralizer(Generalizer):
    """Categorical values released as their lowest common node in a DGH.

    A record may carry its own path as a list, leaf first as in Prink (``["Paris", "France",
    "EU"]``): missing nodes are added. A plain value not in the tree is refused unless
    ``grow`` is set (then it becomes a new leaf below the root).

    Args:
        name: the attribute (column) name.
        hierarchy: the DGH the values are generalized in.
        metric: the loss of a node (a :class:`Metric` or its name).
        grow: add a plain value not in the tree as a new leaf below the root (else refuse it).
        prl_reset: observations after which the PRL request counts start again (at least 1).
    """

    def __init__(
        self,
        name: str,
        hierarchy: Hierarchy,
        metric: Metric | str = Metric.glm,
        *,
        grow: bool = False,
        prl_reset: int = 10_000,
    ) -> None:
        super().__init__(name)
        self.tree = hierarchy
        try:
            self.metric = Metric(metric)
            self.grow = grow
            self.prl_reset = max(1, int(prl_reset))
        except ValueError as exc:  # an unknown metric, a prl_reset that is not a number
            raise ConfigError(f"attribute {name!r}: {exc}") from None
        self.seen: set[str] = set()
        self.requests: dict[str, int] = {}
        self._requests_total = 0
        self._observed = 0
        self._changes = 0  # observations that changed NCP/PRL losses
        self._vec_key: tuple[int, int] | None = None
        self._vec: np.ndarray | None = None
        self._stamp = 0  # bumped on every rebuild of the loss vector
        # nodes are only ever appended: the first ones are the tree as configured
        self._configured_n = len(hierarchy.names)
        self._configured_leaves: list[int] | None = None

    def _check_path(self, path: Sequence[str]) -> None:
        parent = self.tree.root
        for name in path:
            if name in self.tree and self.tree.parent[name] != parent:
                raise UnknownCategoryError(
                    self.name, f"attribute {self.name!r}: path {list(path)!r} puts {name!r} below "
                    f"{parent!r} but the hierarchy has it below {self.tree.parent[name]!r}"
                )
            parent = name

    def _check_room(self, path: Sequence[str]) -> None:
        new = sum(1 for name in path if name not in self.tree)
        if len(self.tree.names) + new > MAX_TABLE_NODES:
            raise UnknownCategoryError(self.name, f"attribute {self.name!r}: the hierarchy "
                                       f"would exceed {MAX_TABLE_NODES} nodes")

    def parse(self, raw: Any) -> str | _NewPath:
        if isinstance(raw, list | tuple):
            if not raw or not all(isinstance(x, str | int) and str(x) for x in raw):
                raise BadValueError(self.name, f"attribute {self.name!r}: a path must list "
                                    "non-empty names")
            path = [str(x) for x in reversed(raw)]
            if path[0] == self.tree.root:
                path = path[1:]
            if not path:  # just the root
                return self.tree.root
            if path[-1] in self.tree and self.tree.ancestors(path[-1])[::-1][1:] == path:
                return path[-1]
            self._check_path(path)
            self._check_room(path)
            return _NewPath(path)
        if raw is None or isinstance(raw, dict | bool):
            raise BadValueError(self.name, f"attribute {self.name!r} needs a category, got "
                                f"{raw!r}")
        value = raw if type(raw) is str else format_number(float(raw)) if isinstance(
            raw, int | float) else str(raw)
        if value in self.tree.parent:
            return value
        if not value:
            raise MissingFieldError(self.name, f"attribute {self.name!r} is empty")
        if self.grow:
            self._check_room((value,))
            return _NewPath((value,))
        raise UnknownCategoryError(self.name, f"attribute {self.name!r}: unknown category "
                                   f"{value!r} (not in its hierarchy; give a path or set "
                                   "grow = true)")

    def observe(self, value: str | _NewPath) -> str:
        if type(value) is _NewPath:
            self.tree.add_path(value)
            value = value[-1]
        if self.metric is Metric.ncp:
            if value not in self.seen:
                self.seen.add(value)
                self._changes += 1
        elif self.metric is Metric.prl:
            self._changes += 1
            if self._observed >= self.prl_reset:
                self.requests.clear()
                self._requests_total = 0
                self._observed = 0
            self._observed += 1
            for node in self.tree.ancestors(value):
                self.requests[node] = self.requests.get(node, 0) + 1
            self._requests_total += 1
        return value

    def add(self, state: str | None, value: str) -> str:
        return value if state is None else self.tree.lca(state, value)

    def merge(self, a: str, b: str) -> str:
        return self.tree.lca(a, b)

    def loss(self, state: str) -> float:
        t = self.tree
        if self.metric is Metric.glm:
            return glm(t.leaves_under(state), t.n_leaves)
        if self.metric is Metric.ncp:
            return 0.0 if t.is_leaf(state) else ncp(t.leaves_under(state), len(self.seen))
        return prl(self.requests.get(state, 0), self.requests.get(t.root, 0),
                   leaf=t.is_leaf(state))

    #: trees pickled before the configured part was recorded: all their nodes count as such
    _configured_n: int | None = None
    _configured_leaves: list[int] | None = None

    def cluster_loss(self, node: str, values: Iterable[str]) -> float:
        """GLM of releasing ``node`` in the cluster's own tree (Prink's DGH per cluster):
        the tree as configured plus the paths of the ``values`` the cluster holds, so the
        values other clusters grew do not count. ``node`` covers ``values``.

        >>> g = HierarchyGeneralizer("c", Hierarchy.from_paths([["A", "a1"], ["A", "a2"]]),
        ...                          grow=True)
        >>> for v in ("x", "y"): _ = g.observe(g.parse(v))
        >>> g.loss("*"), g.cluster_loss("*", ["a1", "x"])
        (1.0, 1.0)
        >>> round(g.loss("A"), 3), g.cluster_loss("A", ["a1", "a2"])
        (0.333, 1.0)
        """
        t = self.tree
        n0 = len(t.names) if self._configured_n is None else self._configured_n
        conf = self._configured_leaves
        if conf is None or len(conf) != n0:
            conf = [0] * n0
            for i in range(n0 - 1, -1, -1):  # children come after their parents
                name = t.names[i]
                kids = [t.index(c) for c in t.children[name] if t.index(c) < n0]
                conf[i] = sum(conf[c] for c in kids) if kids else 1
            self._configured_leaves = conf
        extra: set[str] = set()  # the cluster's nodes outside the configured tree
        for v in set(values):
            for a in t.ancestors(v):
                if t.index(a) < n0 or a in extra:
                    break
                extra.add(a)
        attached = {t.parent[a] for a in extra}
        extra_leaves = [a for a in extra if a not in attached]
        # configured leaves a grown path hangs below stop being leaves
        hidden = [p for p in attached if p is not None and t.index(p) < n0
                  and conf[t.index(p)] == 1 and not any(
                      t.index(c) < n0 for c in t.children[p])]
        total = conf[0] - len(hidden) + len(extra_leaves)
        under = sum(1 for a in extra_leaves if t.covers(node, a))
        if t.index(node) < n0:
            under += conf[t.index(node)] - sum(1 for p in hidden if t.covers(node, p))
        return glm(under, total)

    def loss_vector(self) -> np.ndarray:
        """Loss of every node, indexed like :meth:`Hierarchy.index` (for vectorized search).

        Rebuilt only when the tree grew or an observation changed the losses; callers that
        cache values derived from it key them on :attr:`loss_stamp`, never on ``id()`` of the
        array (a freed array's address can be reused by the next one).
        """
        key = (self.tree.version, self._changes)
        if self._vec is None or key != self._vec_key:
            self._vec = np.array([self.loss(n) for n in self.tree.names], dtype=np.float64)
            self._vec_key = key
            self._stamp += 1
        return self._vec

    @property
    def loss_version(self) -> tuple[int, int]:
        """Equal while neither the tree nor the losses of its nodes changed (cheaper than
        :attr:`loss_stamp`, which rebuilds the loss vector when they did)."""
        return (self.tree.version, self._changes)

    @property
    def loss_stamp(self) -> int:
        """Changes whenever :meth:`loss_vector` changes (a cache key for derived tables)."""
        self.loss_vector()
        return self._stamp

    def output(self, state: str) -> str:
        return state

    def covers(self, state: str, value: str) -> bool:
        return self.tree.covers(state, value)

    def maximal(self) -> str:
        return self.tree.root


GeneralizerFactory = Callable[..., Generalizer]
_REGISTRY: dict[str, GeneralizerFactory] = {}


def register_generalizer(kind: str, factory: GeneralizerFactory) -> None:
    """Make ``generalizer = "<kind>"`` usable in rules files.

    ``factory(name, **options)`` receives the attribute name and the other keys of the
    attribute's table (except ``sensitive`` and ``weight``).
    """
    _REGISTRY[kind] = factory


def generalizer_factory(kind: str) -> GeneralizerFactory:
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise ConfigError(f"unknown generalizer {kind!r} (known: "
                         f"{', '.join(sorted(_REGISTRY))})") from None


register_generalizer("none", lambda name, **_: NoneGeneralizer(name))
register_generalizer("range", lambda name, domain=None, **_: RangeGeneralizer(name, domain))
register_generalizer("reduction", lambda name, **_: ReductionGeneralizer(name))

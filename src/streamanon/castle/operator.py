"""CASTLE with Prink's extensions: k_s-anonymity with l-diversity over a stream of rows.

>>> from streamanon.castle.rules import RuleSet
>>> rules = RuleSet.from_dict({"id": "u", "attribute": [
...     {"name": "age", "generalizer": "range"}, {"name": "dx", "sensitive": True}]})
>>> rows = [{"u": "a", "age": 30, "dx": "flu"}, {"u": "b", "age": 34, "dx": "cold"},
...         {"u": "c", "age": 70, "dx": "flu"}]
>>> op = CastleAnonymizer(rules, k=2, l=2, delta=3)  # the window release
>>> out = [r for row in rows for r in op.process(row)] + op.flush()
>>> sorted((r.values["u"], r.values["age"]) for r in out if isinstance(r, Released))
[('a', '[30,70]'), ('b', '[30,70]'), ('c', '[30,70]')]

With Prink's clustering, the first two leave as a cluster and the third, alone, is suppressed:

>>> op = CastleAnonymizer(rules, k=2, l=2, delta=3, split="prink")
>>> out = [r for row in rows for r in op.process(row)] + op.flush()
>>> sorted((r.values["u"], r.values["age"]) for r in out if isinstance(r, Released))
[('a', '[30,34]'), ('b', '[30,34]')]
>>> [type(r).__name__ for r in out].count("Suppressed")
1

Design: docs/design/castle.md
"""

from __future__ import annotations

import copy
import math
from collections import Counter, deque, namedtuple
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from numbers import Integral
from time import perf_counter
from typing import TYPE_CHECKING, Any

import numpy as np

from streamanon.base import OperatorBase, legacy_positional
from streamanon.castle.anchors import Anchors, static_columns
from streamanon.castle.cluster import Cluster as _Cluster
from streamanon.castle.cluster import ClusterSet, Item, State
from streamanon.castle.defaults import MISSING_REASON, Missing, Suppression
from streamanon.castle.diversity import Closeness, Diversity
from streamanon.castle.dp import NOT_SAMPLED, Perturbation
from streamanon.castle.loss import Metric
from streamanon.castle.records import CastleRow, Released, ReleasedFields
from streamanon.castle.rules import RuleSet, check_hierarchy_scope
from streamanon.castle.split import SPLITS, median_split
from streamanon.castle.window import (
    History,
    Part,
    WindowCache,
    part_states,
    reuse_rest,
    window_held,
    window_parts,
)
from streamanon.errors import (
    BadRecordError,
    BadValueError,
    ConfigError,
    MissingFieldError,
    ProtocolError,
)
from streamanon.records import Suppressed

if TYPE_CHECKING:
    from streamanon.risk import RunningRisk

_EPS = 1e-12


@dataclass
class _Kept:
    """A released cluster kept for reuse (Ω)."""

    cset: ClusterSet
    state: State
    values: dict[str, Any]
    loss: float
    attr_losses: dict[str, float]
    cluster: int
    counts: list[Counter[str]] | None = None  # sensitive values of its class (non-distinct)


#: a row of a block taken by :meth:`CastleAnonymizer.process_block` as its values and line:
#: what a release needs of it, built without a :class:`CastleRow` (a record is built for a
#: row that is suppressed); a tuple, built by ``tuple.__new__`` without Python code. Its
#: ``values`` are the row's fields in the order of ``header`` (a tuple: no dict is built
#: before the release, which builds one from its cluster's), or, when ``header`` is
#: ``None``, a dict of them
_BlockRow = namedtuple("_BlockRow", ("values", "line", "t", "header"), defaults=(None,))
_new_tuple = tuple.__new__
_released_fields = ReleasedFields.of


def _values_of(row: Any) -> dict[str, Any]:
    """The values of a :class:`_BlockRow` as a dict (a new one when given as fields)."""
    return row.values if row.header is None else dict(zip(row.header, row.values, strict=True))


class _Template:
    """What a released block row's values are made of (:class:`ReleasedFields`): the dict of
    a class's columns in ``header``'s order with the class's values in place (the columns of
    ``header`` it does not generalize still empty, then the columns that only it has), and per
    header column the index of the row's field that gives it (-1: the class's value)."""

    __slots__ = ("base", "header", "slots")

    def __init__(self, header: Sequence[str], extra: Mapping[str, Any]) -> None:
        self.header = header
        base = dict.fromkeys(header)
        base.update(extra)
        self.base = base
        self.slots = tuple(-1 if h in extra else i for i, h in enumerate(header))


def _summed(counts: Mapping[str, list[Counter[str]]], pids: list[str],
            n_sensitive: int) -> list[Counter[str]]:
    """The sensitive value counts of the individuals ``pids`` together, per attribute."""
    out: list[Counter[str]] = [Counter() for _ in range(n_sensitive)]
    for p in pids:
        for o, c in zip(out, counts[p], strict=True):
            o.update(c)
    return out


@dataclass(frozen=True)
class Parameters:
    """The parameters one rule set's clusters are formed under: its rules' ``[parameters]``
    over the operator's own (constructor) values. A cluster keeps those of the rule set it
    was created under; a tuple keeps the ``delta`` in force when it arrived."""

    k: int
    l: int  # noqa: E741
    delta: int
    beta: int
    #: the l-diversity (and t-closeness) rule with this ``l``
    rule: Diversity

    def as_dict(self) -> dict[str, int]:
        return {"k": self.k, "l": self.l, "delta": self.delta, "beta": self.beta}


def _time_of_row(row: CastleRow) -> float:
    return float(row.values["t"])


class CastleAnonymizer(OperatorBase):
    """The CASTLE operator (pure: rows in, released rows and :class:`Suppressed` out).

    ``rules`` may be ``None``: tuples are then held (and counted) until :meth:`set_rules`.
    ``l <= 1`` turns l-diversity off. ``max_delay`` (seconds, optional) bounds the wait of a
    tuple by time as well as by ``delta`` positions. ``loss_field`` names an output column that
    receives each tuple's cluster loss. Parameters other than the rules are keyword-only; the
    operator follows the contract of :mod:`streamanon.base`.

    >>> from streamanon.castle.rules import RuleSet
    >>> rules = RuleSet.from_dict({"id": "u", "attribute": [
    ...     {"name": "age", "generalizer": "range"}]})
    >>> op = CastleAnonymizer(rules, k=2, l=0, delta=1)
    >>> op.process({"u": "a", "age": 30}), op.summary()["held"]
    ([], 1)
    >>> [r.values["age"] for r in op.process({"u": "b", "age": 34})]
    ['[30,34]', '[30,34]']
    >>> {key: op.summary()[key] for key in ("read", "released", "suppressed", "held")}
    {'read': 2, 'released': 2, 'suppressed': 0, 'held': 0}

    Args:
        rules: the :class:`~streamanon.castle.rules.RuleSet`, or ``None`` to hold tuples until
            :meth:`set_rules`.
        k: distinct individuals every released cluster holds (k_s-anonymity).
        l: distinct values of each sensitive attribute in a released cluster; ``l <= 1`` turns
            l-diversity off.
        delta: the most tuples a tuple may wait behind before it must leave.
        beta: the most non-k_s-anonymized clusters kept open.

            ``k``, ``l``, ``delta`` and ``beta`` are defaults: a rule set's ``[parameters]``
            table overrides them for the clusters formed under it (:meth:`set_rules`).
        mu: how many recently released clusters' losses set the threshold tau.
        zeta: the most k_s-anonymized clusters kept for reuse.
        suppression: what happens to a tuple that cannot leave in a k_s-anonymous cluster
            (:class:`Suppression`).
        max_delay: seconds a tuple may wait, besides ``delta`` positions (``None``: no bound).
        loss_field: an output column that receives each tuple's cluster loss (``None``: none).
        split: what is released when a tuple expires: ``"window"`` (the default: median
            cuts over every held tuple, all released at once, released classes reused:
            :mod:`streamanon.castle.window`; the least loss at a bounded delay), or CASTLE's
            cluster with one of >= 2k individuals split by ``"prink"`` (groups of whole
            individuals, the papers' behaviour) or ``"median"`` (Mondrian's median cuts; an
            individual's tuples may go to different classes): :mod:`streamanon.castle.split`.
        diversity: the l-diversity rule, ``"distinct"``, ``"entropy"`` or ``"recursive"``
            (:class:`~streamanon.castle.diversity.Diversity`).
        c: the c of recursive (c,l)-diversity (only with ``diversity="recursive"``).
        t: t-closeness of every sensitive attribute to ``reference`` (``None``: none;
            :class:`~streamanon.castle.diversity.Closeness`).
        reference: per sensitive attribute, the weights of its values (counts or shares):
            the distribution t-closeness measures against (needed with ``t``).
        closeness: t-closeness's ground distance: ``"auto"`` (ordered for numbers, else
            equal), ``"equal"``, ``"ordered"`` or ``"hierarchical"`` (needs ``t_hierarchy``).
        t_hierarchy: per sensitive attribute, the hierarchy of its values as paths (root
            side first, the value last, as a hierarchy generalizer's ``paths``).
        missing: what an empty quasi-identifier does (:class:`Missing`): ``"reject"`` the
            tuple (a :class:`~streamanon.errors.MissingFieldError`, the default),
            ``"suppress"`` it (counted as suppressed, reason ``"missing value"``) or
            ``"star"``: the value counts as its attribute's top (a range's whole domain, a
            hierarchy's root, a plug-in's ``maximal()``), so the tuple's cluster releases
            that attribute fully generalized and only a kept cluster that does may be reused
            for it. An empty id, sensitive value or time is refused whatever this says.
        dp_epsilon: CASTLEGUARD's differential privacy: Laplace noise of scale R / ε on every
            range quasi-identifier before clustering (``None``: none;
            :mod:`streamanon.castle.dp`, docs/design/dp.md).
        dp_beta: CASTLEGUARD's β-sampling: each tuple is kept with this probability, else
            suppressed (reason ``"not sampled (dp-beta)"``; ``None``: every tuple is kept).
        dp_rng: a :class:`numpy.random.Generator` for the noise and the sampling (tests);
            ``None``: the operating system's source.
        hierarchy_scope: ``"shared"``: a categorical's GLM is measured in one tree per rule
            set, grown by every cluster's values; ``"cluster"``: in the released cluster's
            own tree (the configured tree and the paths of the values it holds), Prink's
            DGH per cluster. The released node is the same; rules' ``hierarchy_scope`` wins.
        static: quasi-identifiers to mark ``static`` as the rules' ``static = true`` does
            (every rule set installed gets them; :meth:`RuleSet.with_static`).
        static_ttl: forget an individual's anchor after this much stream time (the rules'
            time column) without a release or a held tuple of it (``None``: never). Its
            next release gets a new anchor: its releases before and after can be
            intersected (:mod:`streamanon.castle.anchors`).
        static_max: keep at most this many anchors, the least recently used forgotten
            first (``None``: no bound; the same caveat).
    """

    hierarchy_scope = "shared"  # operators pickled before the option
    _window: WindowCache | None = None  # split="window": the remembered classes
    #: split="window", during a cut's releases: the individuals of its parts not released yet
    _releasing: Counter[str] | None = None
    #: some held tuples of an older rule set have a larger delta than the current one's, so
    #: the oldest held tuple is not always the first to expire (see :meth:`_expire`)
    _vary = False
    _anchors: Anchors | None = None  # each individual's first release on static attributes
    _timed = False  # every tuple's time is read (max_delay or static_ttl)
    #: counts the released classes for live risk figures (a metrics port); None: not kept
    release_risk: RunningRisk | None = None

    @classmethod
    def _conformance_params(cls) -> dict[str, Any]:
        """This operator's case of the contract checks, as data (keys: see
        :mod:`streamanon.conformance`): rows over a range, a hierarchy, a reduction and a
        sensitive attribute, and rows it must refuse."""
        import random

        from streamanon.errors import MissingFieldError, UnknownCategoryError

        rules = RuleSet.from_dict({"id": "u", "time": "t", "attribute": [
            {"name": "age", "generalizer": "range", "domain": [0, 100]},
            {"name": "city", "generalizer": "hierarchy",
             "paths": [["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE"], ["US"]]},
            {"name": "zip", "generalizer": "reduction"},
            {"name": "dx", "sensitive": True}]})
        rnd = random.Random(5)
        rows = [CastleRow({"u": f"p{rnd.randrange(10)}", "t": i * 10.0,
                           "age": rnd.randint(20, 60),
                           "city": rnd.choice(["Paris", "Lyon", "DE", "US"]),
                           "zip": rnd.choice(["75013", "75001", "6900"]),
                           "dx": rnd.choice("abc")}, i + 2)
                for i in range(160)]
        bad = [(CastleRow({"u": "p1", "t": 0, "city": "US", "zip": "1", "dx": "a"}),
                MissingFieldError, "age"),
               (CastleRow({"u": "p1", "t": 0, "age": "old", "city": "US", "zip": "1",
                           "dx": "a"}), BadValueError, "age"),
               (CastleRow({"u": "p1", "t": 0, "age": 3, "city": "Rome", "zip": "1",
                           "dx": "a"}), UnknownCategoryError, "city"),
               (CastleRow({"t": 0, "age": 3, "city": "US", "zip": "1", "dx": "a"}),
                MissingFieldError, "u"),
               (CastleRow({"u": "p1", "t": 0, "age": 3, "city": "US", "zip": "1"}),
                MissingFieldError, "dx")]
        return {"name": "castle", "positional": ("rules",),
                "params": {"rules": rules, "k": 3, "l": 2, "delta": 25, "beta": 6,
                           "max_delay": 200},
                "records": rows, "bad": bad, "time_of": _time_of_row}

    @legacy_positional("k", "l", "delta", "beta", "mu", "zeta")
    def __init__(
        self,
        rules: RuleSet | None,
        *,
        k: int = 5,
        l: int = 2,  # noqa: E741
        delta: int = 200,
        beta: int = 50,
        mu: int = 10,
        zeta: int = 10,
        suppression: Suppression | str = Suppression.drop,
        max_delay: float | None = None,
        loss_field: str | None = None,
        split: str = "window",
        diversity: str = "distinct",
        c: float | None = None,
        t: float | None = None,
        reference: Mapping[str, Mapping[str, float]] | None = None,
        closeness: str = "auto",
        t_hierarchy: Mapping[str, Sequence[Sequence[str]]] | None = None,
        missing: Missing | str = Missing.reject,
        dp_epsilon: float | None = None,
        dp_beta: float | None = None,
        dp_rng: np.random.Generator | None = None,
        hierarchy_scope: str = "shared",
        static: Sequence[str] | None = None,
        static_ttl: float | None = None,
        static_max: int | None = None,
    ) -> None:
        for name, value, least in (("k", k, 1), ("l", l, 0), ("delta", delta, 1),
                                   ("beta", beta, 1), ("mu", mu, 1), ("zeta", zeta, 0)):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < least:
                extra = " (0 or 1 = no l-diversity)" if name == "l" else ""
                raise ConfigError(f"{name} must be an integer >= {least}{extra}, got {value!r}")
        if max_delay is not None and not (max_delay >= 0 and math.isfinite(max_delay)):
            raise ConfigError("max_delay must be a finite number of seconds >= 0")
        try:
            suppression = Suppression(suppression)
        except ValueError:
            raise ConfigError(f"suppression must be one of "
                              f"{', '.join(s.value for s in Suppression)}, got {suppression!r}"
                              ) from None
        try:
            missing = Missing(missing)
        except ValueError:
            raise ConfigError(f"missing must be one of {', '.join(m.value for m in Missing)}, "
                              f"got {missing!r}") from None
        self.missing = missing
        self.hierarchy_scope = check_hierarchy_scope(hierarchy_scope)
        if isinstance(static, str):
            static = [static]
        self.static = list(static) if static else None
        if static_ttl is not None and not (static_ttl >= 0 and math.isfinite(static_ttl)):
            raise ConfigError("static_ttl must be a finite stream time >= 0")
        if static_max is not None and (isinstance(static_max, bool) or not isinstance(
                static_max, Integral) or static_max < 1):
            raise ConfigError(f"static_max must be an integer >= 1, got {static_max!r}")
        self.static_ttl = None if static_ttl is None else float(static_ttl)
        self.static_max = None if static_max is None else int(static_max)
        self._timed = max_delay is not None or static_ttl is not None
        self.dp_epsilon, self.dp_beta, self.dp_rng = dp_epsilon, dp_beta, dp_rng
        self._dp = None if dp_epsilon is None and dp_beta is None else Perturbation(
            epsilon=dp_epsilon, beta=dp_beta, rng=dp_rng)
        if split not in SPLITS:
            raise ConfigError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        self.split = split
        self.k, self.l, self.delta = int(k), int(l), int(delta)
        self.diversity, self.c, self.t, self.reference = diversity, c, t, reference
        if (t is None) != (reference is None):
            raise ConfigError("t-closeness needs both t and a reference distribution")
        self.closeness, self.t_hierarchy = closeness, t_hierarchy
        if t is None and (closeness != "auto" or t_hierarchy):
            raise ConfigError("closeness and t_hierarchy go with t (t-closeness)")
        self._rule = Diversity(diversity, l=self.l, c=c, closeness=None if t is None else
                               Closeness(t, reference or {}, distance=closeness,
                                         hierarchies=t_hierarchy))
        self.beta, self.mu, self.zeta = int(beta), int(mu), int(zeta)
        self.suppression = suppression
        self.max_delay = max_delay
        self.loss_field = loss_field
        self.tau = 0.0
        self._recent: deque[float] = deque(maxlen=mu)
        self._kept: deque[_Kept] = deque(maxlen=zeta) if zeta else deque(maxlen=0)
        self._sets: list[ClusterSet] = []
        self._current: ClusterSet | None = None
        self._held: deque[Item] = deque()
        self._pending: list[CastleRow] = []
        self._pos = 0
        self._clock = -math.inf
        self._next_cluster = 0
        self.read = 0
        self.released = 0
        self.suppressed_by_reason: Counter[str] = Counter()
        self.clusters_released = 0
        self.loss_sum: dict[str, float] = {}
        self.timing = {"best_selection": 0.0, "delay_constraint": 0.0}
        self._anchors = Anchors(ttl=self.static_ttl, max_count=self.static_max)
        if rules is not None:
            self._install(rules)

    # -- rules -----------------------------------------------------------------------------
    def _parameters_of(self, rules: RuleSet) -> Parameters:
        """The parameters of ``rules``: its ``[parameters]`` over the constructor's values."""
        given = getattr(rules, "parameters", {})
        k, l, delta, beta = (given.get(name, getattr(self, name))  # noqa: E741
                             for name in ("k", "l", "delta", "beta"))
        rule = self._rule
        if l != self.l:
            rule = Diversity(self.diversity, l=l, c=self.c, closeness=self._rule.closeness)
        return Parameters(k, l, delta, beta, rule)

    @property
    def parameters(self) -> Parameters:
        """The parameters in force for tuples arriving now (the current rule set's)."""
        if self._current is not None:
            return self._current.params
        return Parameters(self.k, self.l, self.delta, self.beta, self._rule)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for cset in [*self._sets, *(kept.cset for kept in self._kept)]:
            if "params" not in cset.__dict__:  # pickled before rules carried parameters
                cset.params = self._parameters_of(cset.rules)

    def _install(self, rules: RuleSet) -> None:
        # generalizers carry run-time state (adaptive domains, grown hierarchies, request
        # counts): each operator works on its own copy, so two operators given one RuleSet
        # never influence each other
        rules = copy.deepcopy(rules.with_static(self.static) if self.static else rules)
        if self.static_ttl is not None and not rules.time_field:
            raise ConfigError("static_ttl is stream time: the rules need a time column")
        params = self._parameters_of(rules)
        if params.l > 1 and not rules.sensitive:
            raise ConfigError(f"l = {params.l} needs at least one sensitive attribute in the "
                              "rules (l-diversity of nothing cannot be met)")
        close = self._rule.closeness
        if close is not None:
            missing = [s for s in rules.sensitive if s not in close.attributes()]
            if missing or not rules.sensitive:
                raise ConfigError("t-closeness needs a sensitive attribute and a reference "
                                  f"for each (missing: {', '.join(missing) or 'all'})")
        cset = ClusterSet(rules)
        cset.params = params
        scope = rules.hierarchy_scope or self.hierarchy_scope
        if scope != "shared":  # an attribute of the set only when it differs (old pickles)
            glm_only = [g.name for g in cset.hier if g.metric is not Metric.glm]
            if glm_only:
                raise ConfigError(f"hierarchy_scope = cluster measures GLM only; "
                                  f"{', '.join(glm_only)} use another metric")
            cset.hierarchy_scope = scope
        static_columns(cset)  # refuses a static attribute it cannot bound
        self._sets.append(cset)
        self._current = cset
        self._vary_check()
        for r in rules.qi_rules:
            self.loss_sum.setdefault(r.name, 0.0)

    @property
    def rules(self) -> RuleSet | None:
        return self._current.rules if self._current else None

    def set_rules(self, rules: RuleSet) -> list[Any]:
        """Use ``rules`` for tuples from now on; open clusters keep their own rules.

        Tuples held because no rules had arrived are processed now; returns what that releases.
        A held tuple the new rules refuse is suppressed with the reason (it was already read).
        """
        self._install(rules)
        self._drop_empty_sets()
        pending, self._pending = self._pending, []
        out: list[Any] = []
        for row in pending:
            self.read -= 1
            try:
                out.extend(self.process(row))
            except BadRecordError as exc:
                self.read += 1
                self.suppressed_by_reason["refused by the rules"] += 1
                out.append(Suppressed(row, f"refused by the rules: {exc}"))
        return out

    def _drop_empty_sets(self) -> None:
        self._sets = [s for s in self._sets if s is self._current or s.holds]
        self._vary_check()

    def _vary_check(self) -> None:
        """Set :attr:`_vary`: does an older rule set with a larger delta still hold tuples?"""
        now = self._current.params.delta if self._current else 0
        self._vary = any(s.params.delta > now for s in self._sets
                         if s is not self._current and s.holds)

    # -- the stream ------------------------------------------------------------------------
    def process(self, row: CastleRow | Mapping[str, Any]) -> list[Any]:
        """Take one tuple; return the tuples this arrival releases or suppresses.

        Raises :class:`~streamanon.errors.BadRecordError` (naming the field, carrying the row)
        for a tuple that cannot be anonymized; the operator is then unchanged.
        """
        given = row
        if not isinstance(row, CastleRow):
            if not isinstance(row, Mapping):
                raise BadValueError(None, f"expected a CastleRow or a mapping of columns, got "
                                    f"{type(row).__name__}", record=row)
            row = CastleRow(dict(row))
        if self._current is None:
            self._pending.append(row)
            self.read += 1
            return []
        cset = self._current
        try:
            item, hier_raw, other_raw = cset.parse(row, self._pos + 1, self._timed)
        except BadRecordError as exc:
            if (self.missing is Missing.reject or not isinstance(exc, MissingFieldError)
                    or not cset.is_qi(exc.field)):
                raise exc.about(given) from None
            try:  # an empty quasi-identifier: the rest of the tuple must still be valid
                item, hier_raw, other_raw = cset.parse_star(
                    row, self._pos + 1, self._timed,
                    observe=self.missing is Missing.star)
            except BadRecordError as again:
                raise again.about(given) from None
            if self.missing is Missing.suppress:
                self.read += 1
                self.suppressed_by_reason[MISSING_REASON] += 1
                return [self._suppressed(cset, row, MISSING_REASON)]
        if self._timed and math.isnan(item.t):
            raise ConfigError(f"{'max_delay' if self.max_delay is not None else 'static_ttl'}"
                              " needs a time per tuple: set time = \"<column>\" in the "
                              "rules or pass CastleRow(t=...)")
        if self._dp is not None and not self._dp.admit(cset, item):
            return [self._not_sampled(cset, row)]
        if hier_raw or other_raw:
            cset.observe(item, hier_raw, other_raw)
        self.read += 1
        return self._take(cset, item)

    def process_block(self, rows: Iterable[CastleRow] | Iterable[dict[str, Any]], *, n: int,
                      numbers: Mapping[str, Sequence[float]],
                      texts: Mapping[str, tuple[Sequence[str | None], Sequence[int]]],
                      start: int = 0, lines: int | Sequence[int] | None = None,
                      header: Sequence[str] | None = None
                      ) -> tuple[list[Any], int, BadRecordError | None]:
        """:meth:`process` for rows ``start..n-1`` of a block given also as columns (a
        reader's clean block, see :meth:`ClusterSet.parse_columns`): the same outcomes, with
        the values the rules need taken from the columns instead of each row's mapping.

        Rows the columns cannot vouch for go through :meth:`process` (and so does the rest
        of the block after one of them). Returns what the rows release or suppress, how many
        rows were taken, and the error of the row that stopped the block (``None``: all
        were taken); the operator is then as after the rows before it.

        Args:
            rows: the block's rows from ``start`` on, in order.
            n: the number of rows in the block.
            numbers: the numeric columns, a float per row.
            texts: the text columns, as distinct values (``None`` for blank) and a code per row.
            start: the first row of the block that ``rows`` gives.
            lines: when given, ``rows`` gives each row's values (a dict), not a
                :class:`CastleRow`, and row ``i`` of the block is on line ``lines + i`` (no
                time besides the rules' column): a record is built only for a row that needs
                one (a suppressed row, a row that goes through :meth:`process`). Each dict
                is taken over: a released row's dict becomes its :class:`Released` values.
                A sequence instead of a number gives each row's line (``lines[i]``: a Kafka
                message's position).
            header: with ``lines``: ``rows`` gives each row's fields as a tuple in the order
                of ``header``'s columns instead of a dict; a dict is built only when the row
                is released (from its class's values), suppressed or processed alone.
        """
        out: list[Any] = []
        cset = self._current
        parsed = (None if cset is None or self._timed
                  else cset.parse_columns(n, numbers, texts))
        taken = 0
        it = iter(rows)
        line_of = range(lines, lines + n) if isinstance(lines, int) else lines
        if parsed is not None and cset is not None:
            mat, ids, cats, sens, ok = parsed
            take, dp, nan, step = self._take, self._dp, math.nan, next
            for i in range(start, n):
                if not ok[i]:
                    break
                if lines is None:
                    row = step(it)
                    t = nan if row.t is None else row.t
                else:
                    row = _new_tuple(_BlockRow, (step(it), line_of[i], None, header))
                    t = nan
                item = Item(row, self._pos + 1, ids[i], mat[i], cats[i], (), sens[i], t)
                if dp is not None and not dp.admit(cset, item):
                    if type(row) is _BlockRow:
                        row = CastleRow(_values_of(row), row.line)
                    out.append(self._not_sampled(cset, row))
                    taken += 1
                    continue
                self.read += 1
                take(cset, item, out)
                taken += 1
        if lines is not None and header is not None:
            it = map(dict, map(zip, repeat(header), it))
        rest: Iterator[CastleRow] = (it if lines is None else  # type: ignore[assignment]
                                     map(CastleRow, it, line_of[start + taken:n]))
        for row in rest:
            try:
                out += self.process(row)
            except BadRecordError as exc:
                return out, taken, exc
            taken += 1
        return out, taken, None

    def _take(self, cset: ClusterSet, item: Item, out: list[Any] | None = None) -> list[Any]:
        """Place a parsed tuple and release what its arrival releases (appended to ``out``,
        a new list when not given, which is returned)."""
        pos = self._pos = self._pos + 1
        if item.t == item.t:  # not NaN: a time was given
            self._clock = max(self._clock, item.t)
            item.t = self._clock
        if out is None:
            out = []
        t0 = perf_counter()
        if self.split == "window":  # placed only if CASTLE's rules need it (see wait)
            cset.wait(item, self.tau)
        else:
            cset.place(item, self.tau, cset.params.beta, _EPS)  # the best selection
        held = self._held
        held.append(item)
        t1 = perf_counter()
        head = held[0]
        c = head.cluster  # the delta in force when the head arrived (see _delta_of)
        if (head.done or pos - head.pos >= (self.delta if c is None else c.owner.params.delta)
                or self.max_delay is not None or self._vary):
            self._expire(out, self._clock)
        timing = self.timing
        timing["best_selection"] += t1 - t0
        timing["delay_constraint"] += perf_counter() - t1
        return out

    def advance(self, now: float) -> list[Any]:
        """Tell the operator the time is ``now`` (no tuple arrived): enforce ``max_delay``."""
        self._clock = max(self._clock, now)
        out: list[Any] = []
        self._expire(out, self._clock)
        return out

    def flush(self) -> list[Any]:
        """End of stream: every held tuple leaves now, under the same guarantees."""
        out: list[Any] = []
        while self._held:
            item = self._held.popleft()
            if not item.done:
                self._delay_constraint(item, out)
        for row in self._pending:
            out.append(Suppressed(row, "no rules arrived before the end of the stream"))
            self.suppressed_by_reason["no rules"] += 1
        self._pending = []
        self._drop_empty_sets()
        return out

    def _delta_of(self, item: Item) -> int:
        """The delta of held tuple ``item``: the one in force when it arrived (its cluster's
        rule set's)."""
        c = item.cluster
        return self.delta if c is None else c.owner.params.delta

    def _expire(self, out: list[Any], now: float) -> None:
        held = self._held
        timed = self.max_delay is not None
        while held:
            item = held[0]
            if item.done:
                held.popleft()
            elif self._pos - item.pos >= self._delta_of(item) or (
                    timed and now - item.t >= self.max_delay):  # type: ignore[operator]
                held.popleft()
                self._delay_constraint(item, out)
            else:
                break
        if self._vary:
            # a newer rule set's smaller delta: tuples behind the oldest may be due first
            for item in [it for it in held if not it.done
                         and self._pos - it.pos >= self._delta_of(it)]:
                if not item.done:
                    self._delay_constraint(item, out)
            self._drop_empty_sets()

    # -- CASTLE ------------------------------------------------------------------------------
    @staticmethod
    def _meets(p: Parameters, ids: Mapping[str, int], sens: list[Counter[str]],
               names: list[str]) -> bool:
        if len(ids) < p.k:
            return False
        if p.rule.distinct:
            return p.l <= 1 or all(len(s) >= p.l for s in sens)
        return p.rule.all_hold(sens, names)

    def _delay_constraint(self, item: Item, out: list[Any]) -> None:
        c = item.cluster
        if c is None:
            raise ProtocolError(f"tuple at position {item.pos} expired outside any cluster")
        cset = c.owner
        p = cset.params
        names = cset.rules.sensitive
        if self.split == "window":
            if self._window_release(cset, item, out):
                return
            c = item.cluster  # placed now (ClusterSet.settle)
            if c is None or c is c.owner._waiting:
                raise ProtocolError(f"tuple at position {item.pos} was not placed")
        if self._meets(p, c.individuals, c.sensitive_counts, names):
            self._output(cset, c, out)
            return
        kept = self._covering(cset, item)
        if kept is not None:
            cset.remove_item(item)
            self._emit(cset, [item], kept.values, kept.loss, kept.attr_losses, kept.cluster, out)
            return
        size = len(c.individuals)
        larger = sum(1 for x in cset.clusters if len(x.individuals) > size)
        if larger > len(cset.clusters) / 2:
            self._suppress(cset, item, "outlier", out)
            return
        if not cset.pool_meets(p.k, p.rule):
            self._suppress(cset, item, "too few individuals or sensitive values held", out)
            return
        while not self._meets(p, c.individuals, c.sensitive_counts, names):
            cset.absorb_nearest(c)
        self._output(cset, c, out)

    def _covering(self, cset: ClusterSet, item: Item) -> _Kept | None:
        best: _Kept | None = None
        for kept in self._kept:
            if (kept.cset is cset and cset.covers(kept.state, item)
                    and (best is None or kept.loss < best.loss)
                    and self._still_diverse(kept, item)
                    and self._anchor_fits(cset, kept.state, item, record=False)):
                best = kept
        if best is not None:
            self._anchor_fits(cset, best.state, item)  # its anchor, when it has none yet
        if best is not None and best.counts is not None:
            for cnt, v in zip(best.counts, item.sensitive, strict=True):
                cnt[v] += 1
        return best

    def _still_diverse(self, kept: _Kept, item: Item) -> bool:
        """Does ``kept``'s class still meet the rule with ``item`` added? (Always for the
        distinct rule; the other rules can fail when a tuple of a frequent value joins.)"""
        if kept.counts is None:
            return True
        for counts, v in zip(kept.counts, item.sensitive, strict=True):
            counts[v] += 1
        ok = kept.cset.params.rule.all_hold(kept.counts, kept.cset.rules.sensitive)
        for counts, v in zip(kept.counts, item.sensitive, strict=True):
            counts[v] -= 1
            if not counts[v]:
                del counts[v]
        return ok

    def _output(self, cset: ClusterSet, c: _Cluster, out: list[Any]) -> None:
        whole = cset.cluster_state(c)
        cset.detach(c)
        groups = [c.items]
        p = cset.params
        if len(c.individuals) >= 2 * p.k:
            groups = (median_split(cset, c.items, k=p.k, rule=p.rule)
                      if self.split != "prink" else self._split(cset, c.items))
        for items in groups:
            self._release(cset, items, whole if items is c.items else cset.state_of(items),
                          out)

    def _anchor_fits(self, cset: ClusterSet, st: State, item: Item, *,
                     record: bool = True) -> bool:
        """May ``item`` leave in an already released class of state ``st``? Always, unless
        the rules have static attributes: then ``st`` must cover ``item``'s individual's
        anchor (with ``record``, the class becomes its anchor when it has none yet)."""
        cols = static_columns(cset)
        if not cols:
            return True
        if self._anchors is None:
            self._anchors = Anchors()
        if not self._anchors.covers(cset, cols, st, item.individual):
            return False
        if record:
            self._anchors.record(cset, cols, (item.individual,), st, self._clock)
            self._anchors_used((item.individual,))
        return True

    def _anchors_used(self, individuals: Sequence[str]) -> None:
        """The anchors of ``individuals`` were used now; forget those past their bounds."""
        anchors = self._anchors
        if anchors is None or not anchors.bounded:
            return
        anchors.touch(individuals, self._clock)
        sets = self._sets
        releasing = self._releasing
        anchors.forget(self._clock, lambda p: any(s.holds_individual(p) for s in sets)
                       or (releasing is not None and p in releasing))

    def _release(self, cset: ClusterSet, items: list[Item], st: State, out: list[Any],
                 attr: dict[str, float] | None = None
                 ) -> tuple[dict[str, Any], float, dict[str, float], int, State]:
        """Release ``items`` as one class generalized to ``st`` (widened to the anchors of
        its individuals on the static attributes); keep it for reuse (Ω) when its loss is
        below τ. Returns its values, loss, losses per attribute, id and state. ``attr``:
        ``cset.attr_losses(st, items)``, when the caller has it."""
        cols = static_columns(cset)
        if cols:
            if self._anchors is None:
                self._anchors = Anchors()
            ids = [it.individual for it in items]
            st = self._anchors.widen(cset, cols, ids, st)
            self._anchors.record(cset, cols, ids, st, self._clock)
            self._anchors_used(ids)
            attr = None  # st was widened
        if attr is None:
            attr = cset.attr_losses(st, items)
        loss = cset.weighted(attr)
        cid = self._next_cluster
        self._next_cluster += 1
        values = cset.output_values(st)
        self._emit(cset, items, values, loss, attr, cid, out)
        self.clusters_released += 1
        self._recent.append(loss)
        self.tau = sum(self._recent) / len(self._recent)
        if self.zeta and loss < self.tau:
            counts = None if cset.params.rule.distinct else [
                Counter(it.sensitive[j] for it in items) for j in range(cset.n_sensitive)]
            self._kept.append(_Kept(cset, st, values, loss, attr, cid, counts))
        return values, loss, attr, cid, st

    def _window_release(self, cset: ClusterSet, item: Item, out: list[Any]) -> bool:
        """``split="window"``: release every class of the median cuts of the held tuples
        (:func:`~streamanon.castle.window.window_parts`), ``item``'s first, or ``item``
        alone into a released class it fits in that loses less; ``False`` when neither can
        be (the held tuples together fail k or the diversity rule)."""
        if self._window is None:
            self._window = WindowCache()
        names = cset.rules.sensitive
        p = cset.params

        def meets(items: list[Item]) -> bool:
            if p.rule.distinct:  # the distinct rule counts distinct values: sets say as much
                ids: Any = dict.fromkeys(it.individual for it in items)
                sens: list[Any] = [{it.sensitive[j] for it in items}
                                   for j in range(cset.n_sensitive)]
            else:
                ids = Counter(it.individual for it in items)
                sens = [Counter(it.sensitive[j] for it in items)
                        for j in range(cset.n_sensitive)]
            return self._meets(p, ids, sens, names)

        history = self._window.history_of(cset)
        pending = window_held(cset, self._held, item)
        if meets(pending):  # the cut releases them all: no cluster is needed
            cset.widen_to_waiting()
        else:  # CASTLE's rules may apply: the clusters as placing each on arrival builds them
            cset.settle(p.beta, _EPS)
        parts = window_parts(self._window, cset, pending, k=p.k, rule=p.rule)
        if len(parts) == 1 and not meets(parts[0]):  # more than one: each meets the rule
            reuse = history.best(item) if p.rule.distinct else None
            if reuse is None or not self._anchor_fits(cset, reuse[1][4], item):
                return False
            cset.remove_item(item)
            self._emit(cset, [item], *reuse[1][:4], out)
            return True
        # the parts hold every tuple of the set's clusters: they all leave now
        held = cset.close_all()
        if len(held) != sum(map(len, parts)):
            raise ProtocolError(f"the window's cuts hold {sum(map(len, parts))} tuples, the "
                                f"clusters {len(held)}")
        known_parts = part_states(cset, parts)
        # with bounded anchors: the individuals of the parts not released yet are still
        # held (an anchor in use is not forgotten: _anchors_used)
        bounded = self._anchors is not None and self._anchors.bounded
        releasing = self._releasing = Counter(it.individual for it in held) if bounded else None
        try:
            for i, leaf in enumerate(parts):
                if releasing is not None:
                    for it in leaf:
                        releasing[it.individual] -= 1
                        if not releasing[it.individual]:
                            del releasing[it.individual]
                self._release_part(cset, history, leaf, meets, out,
                                   None if known_parts is None else known_parts[i])
        finally:
            self._releasing = None
        return True

    def _release_part(self, cset: ClusterSet, history: History, leaf: list[Item],
                      meets: Callable[[list[Item]], bool], out: list[Any],
                      part: Part | None) -> None:
        """Release one class of the window's cuts (its tuples already out of the clusters):
        the tuples that fit a remembered class losing less join it, the rest is released as
        a class and remembered. ``part``: its state and losses, when known."""
        st = cset.state_of(leaf) if part is None else part.state
        gone: list[tuple[Item, Any]] = []
        attr = None
        if cset.params.rule.distinct:
            leaf, st, gone, known = self._reuse_history(cset, history, leaf, st, meets, part)
            rest = reuse_rest(history, leaf, st, lambda s, it, r: self._anchor_fits(
                cset, s, it, record=r), known and known[:2])
            leaf, gone = ([], gone + rest) if rest else (leaf, gone)
            attr = None if known is None else known[2]
        for it, reused in gone:
            self._emit(cset, [it], *reused[:4], out)
        if leaf:
            payload = self._release(cset, leaf, st, out, attr)
            history.add(payload[4], payload[1], payload)

    def _reuse_history(self, cset: ClusterSet, history: History, leaf: list[Item], st: State,
                       meets: Any, part: Part | None = None
                       ) -> tuple[list[Item], State, list[tuple[Item, Any]],
                                  tuple[float, list[Any], dict[str, float]] | None]:
        """The tuples of ``leaf`` that fit in a remembered class losing less than the leaf's
        own generalization ``st``, the largest gain first, while the rest still meets the
        rule, each with its class's payload (the caller releases them into it); returns the
        rest, its generalization, those, and, when none moved, the leaf's loss per tuple and
        its fit test up to its total loss (:func:`~streamanon.castle.window.reuse_rest`'s
        ``known``: the same question, asked once) and its losses per attribute (for its
        release). ``part``: the leaf's losses and rows, when known."""
        if part is None:
            attr = cset.attr_losses(st, leaf)
            own = cset.weighted(attr)
        else:
            attr, own = part.attr, part.loss
        # up to the leaf's total loss, which reuse_rest asks of the same tuples when none
        # moves: an answer losing less than ``own`` is the answer below ``own``
        hits = history.best_of(leaf, below=own * len(leaf),
                               rows=None if part is None else part.rows)
        moves = []
        for it, hit in zip(leaf, hits, strict=True):
            if hit is not None and hit[0] < own:
                moves.append((hit[0], it.pos, it, hit[1]))
        if not moves:
            return leaf, st, [], (own, hits, attr)
        moves.sort(key=lambda m: (m[0], m[1]))
        rest = list(leaf)
        gone = []
        for _, _, it, payload in moves:
            trial = [x for x in rest if x is not it]
            if meets(trial) and self._anchor_fits(cset, payload[4], it):
                rest = trial
                gone.append((it, payload))
        if not gone:
            return leaf, st, [], (own, hits, attr)
        return rest, cset.state_of(rest), gone, None

    def _emit(self, cset: ClusterSet, items: list[Item], values: dict[str, Any], loss: float,
              attr: dict[str, float], cid: int, out: list[Any]) -> None:
        line_loss = round(loss, 6)
        extra = {**values, self.loss_field: line_loss} if self.loss_field else values
        append = out.append
        template: _Template | None = None
        for it in items:
            it.done = True
            it.cluster = None
            row = it.row
            if type(row) is _BlockRow:
                if row.header is None:  # its values were made for this tuple alone
                    released = row.values
                    released.update(extra)  # the same keys in the same order as the merge
                else:  # the class's values with the row's other fields, built when read
                    if template is None or template.header is not row.header:
                        template = _Template(row.header, extra)
                    append(_released_fields(template.base, template.slots, row.values, loss,
                                            cid, row.line))
                    continue
            else:
                released = {**row.values, **extra}
            append(Released(released, loss, cid, row.line))
        n = len(items)
        self.released += n
        if self.release_risk is not None:
            self.release_risk.add(values, n)
        for name, v in attr.items():
            self.loss_sum[name] = self.loss_sum.get(name, 0.0) + v * n

    def _suppress(self, cset: ClusterSet, item: Item, reason: str, out: list[Any]) -> None:
        cset.remove_item(item)
        item.done = True
        self.suppressed_by_reason[reason] += 1
        row = item.row
        if type(row) is _BlockRow:  # a row of a block: the suppressed record is a CastleRow
            row = CastleRow(_values_of(row), row.line)
        out.append(self._suppressed(cset, row, reason))

    def _not_sampled(self, cset: ClusterSet, row: CastleRow) -> Suppressed:
        """A tuple β-sampling left out: read, and counted as suppressed (never lost)."""
        self.read += 1
        self.suppressed_by_reason[NOT_SAMPLED] += 1
        return self._suppressed(cset, row, NOT_SAMPLED)

    def _suppressed(self, cset: ClusterSet, given: CastleRow, reason: str) -> Suppressed:
        """What the suppression mode makes of suppressed tuple ``given``."""
        if self.suppression is Suppression.drop:
            return Suppressed(given, reason)
        row = dict(given.values)
        if self.suppression is Suppression.null:
            row.update({r.name: None for r in cset.rules.qi_rules})
        else:
            row.update(cset.maximal_values())
        if self.loss_field:
            row[self.loss_field] = 1.0
        return Suppressed(Released(row, 1.0, -1, given.line), reason)

    def _split(self, cset: ClusterSet, items: list[Item]) -> list[list[Item]]:
        """Split into groups of whole individuals, each meeting k and l.

        Groups grow from the oldest remaining individual by nearest individuals (distance:
        loss of generalizing their first tuples together), first to k individuals, then by
        individuals that bring a missing sensitive value, while the remaining individuals can
        still form a group; leftover individuals join the group with the nearest seed.
        """
        buckets: dict[str, list[Item]] = {}
        for it in items:
            buckets.setdefault(it.individual, []).append(it)
        pool = list(buckets)
        values = {pid: [{it.sensitive[j] for it in b} for j in range(cset.n_sensitive)]
                  for pid, b in buckets.items()}

        par = cset.params
        rule = par.rule
        counts = None if rule.distinct else {
            pid: [Counter(it.sensitive[j] for it in b) for j in range(cset.n_sensitive)]
            for pid, b in buckets.items()}

        names = cset.rules.sensitive

        def meets(pids: list[str]) -> bool:
            if len(pids) < par.k:
                return False
            if counts is not None:
                return rule.all_hold(_summed(counts, pids, cset.n_sensitive), names)
            if par.l <= 1:
                return True
            return all(len(set().union(*(values[p][j] for p in pids))) >= par.l
                       for j in range(cset.n_sensitive))

        groups: list[list[str]] = []
        seeds: list[Item] = []
        while meets(pool):
            seed = buckets[pool[0]][0]
            dist = cset.pair_distance([buckets[p][0] for p in pool], seed)
            order = [pool[i] for i in np.argsort(dist, kind="stable")]
            group = [pool[0]]
            rest = [p for p in order if p != pool[0]]
            while len(group) < par.k:
                group.append(rest.pop(0))
            if counts is not None:
                self._grow_diverse(group, rest, counts, names, rule)
            for j in range(cset.n_sensitive if counts is None and par.l > 1 else 0):
                have = set().union(*(values[p][j] for p in group))
                while len(have) < par.l:
                    nxt = next(p for p in rest if values[p][j] - have)
                    rest.remove(nxt)
                    group.append(nxt)
                    have |= values[nxt][j]
            groups.append(group)
            seeds.append(seed)
            chosen = set(group)
            pool = [p for p in pool if p not in chosen]
        if len(groups) <= 1:
            return [items]
        for pid in pool:
            d = cset.pair_distance(seeds, buckets[pid][0])
            groups[int(np.argmin(d))].append(pid)
        if counts is not None:  # a leftover can break a non-distinct rule: merge such groups
            groups, seeds = self._merge_failing(cset, groups, seeds, meets, buckets)
            if len(groups) <= 1:
                return [items]
        return [[it for p in g for it in buckets[p]] for g in groups]

    def _grow_diverse(self, group: list[str], rest: list[str],
                      counts: dict[str, list[Counter[str]]], names: list[str],
                      rule: Diversity) -> None:
        """Grow ``group`` (individuals) from ``rest`` (nearest first) until it meets the rule:
        each step adds, among the nearest individuals, the one that brings the group closest
        to it (its :meth:`~streamanon.castle.diversity.Diversity.gap`). Ends, at worst, with
        the whole pool, which meets the rule."""
        have = _summed(counts, group, len(names))
        while not rule.all_hold(have, names) and rest:
            best, best_gap = 0, math.inf
            for i, pid in enumerate(rest[:16]):
                gap = rule.gap([h + c for h, c in zip(have, counts[pid], strict=True)], names)
                if gap < best_gap:
                    best, best_gap = i, gap
            pid = rest.pop(best)
            group.append(pid)
            for h, c in zip(have, counts[pid], strict=True):
                h.update(c)

    @staticmethod
    def _merge_failing(cset: ClusterSet, groups: list[list[str]], seeds: list[Item],
                       meets: Any, buckets: dict[str, list[Item]]
                       ) -> tuple[list[list[str]], list[Item]]:
        """Merge each group that fails the rule into the group with the nearest seed, until
        every group meets it (at worst one group: the whole cluster, which meets it)."""
        while len(groups) > 1:
            bad = next((i for i, g in enumerate(groups) if not meets(g)), None)
            if bad is None:
                break
            g, seed = groups.pop(bad), seeds.pop(bad)
            d = cset.pair_distance(seeds, seed)
            groups[int(np.argmin(d))].extend(g)
        return groups, seeds

    # -- reporting -------------------------------------------------------------------------
    @property
    def suppressed(self) -> int:
        """Tuples suppressed so far (every reason; see ``suppressed_by_reason``)."""
        return sum(self.suppressed_by_reason.values())

    @property
    def held(self) -> int:
        """Tuples held now (in open clusters or waiting for rules)."""
        return sum(s.holds for s in self._sets) + len(self._pending)

    def summary(self) -> dict[str, Any]:
        """Accounting and mean information loss per attribute over released tuples."""
        n = max(1, self.released)
        per_attr = {name: round(v / n, 6) for name, v in self.loss_sum.items()}
        widened: dict[str, list[float]] = {}
        for cset in self._sets:
            widened.update(cset.rules.widened())
        return {
            "read": self.read,
            "released": self.released,
            "suppressed": self.suppressed,
            "suppressed_by_reason": dict(self.suppressed_by_reason),
            "held": self.held,
            "clusters_released": self.clusters_released,
            "tau": round(self.tau, 6),
            "info_loss": per_attr,
            "mean_info_loss": round(sum(per_attr.values()) / len(per_attr), 6) if per_attr
            else 0.0,
            "domains_widened": widened,
            "parameters": self.parameters.as_dict(),
            **({"anchors": self._anchors.figures()} if self._anchors is not None and (
                self._anchors.bounded or len(self._anchors)) else {}),
        }

"""Tuples and clusters of one rule set, with the numeric state kept in numpy arrays.

The hot path of CASTLE is the enlargement of every open cluster by each arriving tuple. The
:class:`ClusterSet` keeps each cluster's state in arrays, one row per open cluster (rows
``0..n-1`` of buffers that grow by doubling, so opening and closing clusters allocates
nothing): ``(-lo, hi)`` for the numeric ranges (adding a tuple ``x`` is a ``maximum`` with
``(-x, x)`` and the range loss a product with ``(w/span, w/span)``), node indices for
hierarchies (the loss of the lowest common node of any two nodes is a table). The best
selection over all of them is one compiled loop (:mod:`streamanon.castle._native`, C built on
first use, else :mod:`streamanon.castle._kernel`, numba),
which also grows the chosen row in place; plug-in generalizers add their part from a Python
loop over their immutable states (cached per cluster, updated on insertion). Everything that
decides by exact ties (merges, splits) keeps numpy's formulas, so results stay bit for bit.
"""

from __future__ import annotations

import gc
import math
import operator
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from streamanon.castle.generalizers import Generalizer, HierarchyGeneralizer, RangeGeneralizer
from streamanon.castle.loss import Metric
from streamanon.castle.records import CastleRow, canonical
from streamanon.castle.rules import RuleSet
from streamanon.errors import BadRecordError, BadValueError, MissingFieldError, ProtocolError
from streamanon.timefmt import parse_time

if TYPE_CHECKING:
    from streamanon.castle.diversity import Diversity


def _canonical(value: Any) -> str:
    """:func:`canonical`, with the common types (text, int, float) tested first."""
    tp = type(value)
    if tp is str:
        return value  # type: ignore[no-any-return]
    if tp is float or tp is int:
        return repr(float(value))
    return canonical(value)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


class Item:
    """A tuple held by the operator, with its parsed values and its current cluster.

    Args:
        row: the input tuple.
        pos: the tuple's position in the stream (arrival order, from 0).
        individual: the id column's value, as its identity.
        numbers: the numeric (range) attributes' values.
        nodes: the node index of each hierarchy attribute's value.
        plugin_values: each plug-in generalizer's observed value.
        sensitive: the sensitive values, as their identities.
        t: the arrival time in seconds (NaN when the tuple has none).
    """

    __slots__ = ("cluster", "done", "individual", "missing", "nodes", "numbers",
                 "plugin_values", "pos", "row", "sensitive", "t")

    def __init__(self, row: CastleRow, pos: int, individual: str, numbers: np.ndarray,
                 nodes: list[int], plugin_values: tuple[Any, ...], sensitive: tuple[str, ...],
                 t: float) -> None:
        self.row = row
        self.pos = pos
        self.individual = individual  # the id column's value, as its identity
        self.numbers = numbers  # the numeric (range) attributes
        self.nodes = nodes  # the node index of each hierarchy attribute
        self.plugin_values = plugin_values  # each plug-in generalizer's observed value
        self.sensitive = sensitive  # the sensitive values, as their identities
        self.t = t
        self.cluster: Cluster | None = None
        self.done = False
        # the range attributes (indices) whose value is missing (NaN in numbers): each counts
        # as its whole domain (``missing="star"``, :meth:`ClusterSet.parse_star`)
        self.missing: tuple[int, ...] = ()

    @property
    def bounds_row(self) -> np.ndarray:
        """``(-x, x)`` of the numbers ``x``: the tuple as a row of :attr:`ClusterSet.bounds`."""
        return np.concatenate((-self.numbers, self.numbers))


class Cluster:
    """Open cluster: its tuples, distinct individuals and sensitive values (counted)."""

    __slots__ = ("individuals", "items", "owner", "plugin_states", "sensitive_counts")

    def __init__(self, n_sensitive: int, owner: ClusterSet) -> None:
        self.owner = owner
        self.items: list[Item] = []
        self.individuals: Counter[str] = Counter()
        self.sensitive_counts: list[Counter[str]] = [Counter() for _ in range(n_sensitive)]
        self.plugin_states: list[Any] = []  # each plug-in generalizer's state


@dataclass
class State:
    """The generalization of a set of tuples (what gets released)."""

    lo: np.ndarray
    hi: np.ndarray
    nodes: np.ndarray
    plugin_states: list[Any]


class ClusterSet:
    """The open clusters of one rule set, with their states as arrays (one row per cluster)."""

    _star = False  # (also for a set pickled before there was missing="star")
    # the window release's tuples not placed in a cluster yet, each with the τ it arrived
    # under (see wait); ``None``: none (also for a set pickled before there were any)
    _waiting: Cluster | None = None
    _waiting_tau: list[float]
    _waiting_ids: dict[str, int]  # the waiting tuples' individuals, counted

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self.num: list[RangeGeneralizer] = []
        self.hier: list[HierarchyGeneralizer] = []
        self.other: list[Generalizer] = []
        self.kind: list[tuple[str, int]] = []  # per QI rule: (kind, index in its list)
        w_num, w_hier, w_other = [], [], []
        for rule in rules.qi_rules:
            g = rule.generalizer
            if type(g) is RangeGeneralizer:
                self.kind.append(("num", len(self.num)))
                self.num.append(g)
                w_num.append(rule.weight)
            elif type(g) is HierarchyGeneralizer:
                self.kind.append(("hier", len(self.hier)))
                self.hier.append(g)
                w_hier.append(rule.weight)
            else:
                self.kind.append(("other", len(self.other)))
                self.other.append(g)
                w_other.append(rule.weight)
        total = sum(w_num) + sum(w_hier) + sum(w_other)
        norm = 1.0 / total if total > 0 else 0.0
        self.w_num = np.array(w_num, dtype=np.float64) * norm
        self.w_hier = [w * norm for w in w_hier]
        self.w_other = [w * norm for w in w_other]
        self.n_sensitive = len(rules.sensitive)
        self._num_names = [g.name for g in self.num]
        self._all = [(r.name, r.generalizer, k)
                     for r, (k, _) in zip(rules.qi_rules, self.kind, strict=True)]
        self._slow = [(name, g, k) for name, g, k in self._all if k != "num"]
        # hierarchies whose observation changes nothing (GLM) and no plug-ins: a known value
        # is its node index at once (parse and observe in one dictionary lookup)
        self._known: list[tuple[str, Mapping[str, int]]] | None = [
            (name, g.tree.node_indices()) for name, g, _ in self._slow
        ] if self._slow and all(type(g) is HierarchyGeneralizer and g.metric is _GLM
                                for _, g, _ in self._slow) else None
        self._id_field = rules.id_field
        self._sens_names = list(rules.sensitive)
        d = len(self.num)
        # one call fetches all numeric columns (itemgetter gives a tuple for >= 2 names)
        self._get_num = operator.itemgetter(*self._num_names) if d > 1 else None
        # the range domains, [lo, hi] per numeric attribute (rows: lo, hi)
        self._dom = np.array([[g.lo for g in self.num], [g.hi for g in self.num]],
                             dtype=np.float64).reshape(2, d)
        # the kernel's copy of item.nodes
        self._item_nodes = np.zeros(len(self.hier), dtype=np.int64)
        self._inv = np.zeros(2 * d)
        self._inv_version = 0
        self._refresh_inv()
        self.clusters: list[Cluster] = []
        # the individuals and sensitive values of all open clusters together (pool_meets)
        # (plain dicts: a Counter's deletion and missing keys run Python code)
        self._pool_ids: dict[str, int] = {}
        self._pool_sens: list[dict[str, int]] = [{} for _ in range(self.n_sensitive)]
        # one row per open cluster, in the rows 0..n-1 of buffers that grow by doubling:
        # (-lo, hi), so that adding x is a maximum with (-x, x) and the range part of the loss
        # is a product with (w/span, w/span); the hierarchy nodes
        self._bounds = np.empty((8, 2 * d))
        self._nodes = np.empty((8, len(self.hier)), dtype=np.int64)
        self._work = np.zeros((4, 8))
        self._merged = np.empty((0, 2 * d))  # scratch of merge_enlargement
        self._picks = np.empty(8, dtype=np.int64)
        # plug-ins' part of every open cluster's loss, cached while _other_key matches
        self._other_cur: np.ndarray | None = None
        self._other_key: tuple[int, ...] | None = None
        # what the kernel reads besides the rows (see _kernel.best_selection), rebuilt when
        # beta, a domain, a weight or a hierarchy's losses change
        self._kernel_floats = np.empty(0)
        self._beta, self._eps = -1, -1.0  # as packed into _kernel_floats
        self._kernel_ints = np.empty(0, dtype=np.int64)
        self._packed: tuple[Any, ...] | None = None
        self._stale = True  # a hierarchy's losses or tree may have changed: compare versions
        self._star = False  # a tuple with a missing range value was taken (parse_star)

    # -- tuples ----------------------------------------------------------------------------
    def parse(self, row: CastleRow, pos: int, need_time: bool = False
              ) -> tuple[Item, list[Any], list[Any]]:
        """Validate ``row`` without changing anything; raises ``BadRecordError`` naming the field.

        The time column is read only when ``need_time`` (the ``max_delay`` bound needs it).
        """
        values = row.values
        rules = self.rules
        pid = values.get(self._id_field)
        tp = type(pid)
        if tp is str:
            if not pid.strip():
                raise MissingFieldError(rules.id_field,
                                        f"missing field {rules.id_field} (the individual)")
            cpid = pid
        else:
            if _missing(pid):
                raise MissingFieldError(rules.id_field,
                                        f"missing field {rules.id_field} (the individual)")
            if isinstance(pid, float) and not math.isfinite(pid):
                raise BadValueError(rules.id_field,
                                    f"field {rules.id_field} is not a finite number")
            cpid = _canonical(pid)
        num = self._fast_numbers(values)
        hier_raw: list[Any] = []
        other_raw: list[Any] = []
        cat = _NO_CAT
        if num is not None and self._known is not None:
            cat = []
            for name, nodes in self._known:
                raw = values.get(name)
                node = nodes.get(raw) if type(raw) is str else None
                if node is None or not raw.strip():  # unknown, blank or not text: said below
                    cat = _NO_CAT
                    break
                cat.append(node)
        for name, g, kind in () if cat else self._slow if num is not None else self._all:
            raw = values.get(name)
            if (not raw.strip()) if type(raw) is str else _missing(raw):
                raise MissingFieldError(name)
            if kind == "hier":
                hier_raw.append(g.parse(raw))
            elif kind == "num":
                g.parse(raw)  # raises with the reason
            else:
                other_raw.append(g.parse(raw))
        if num is None:  # pragma: no cover - the loop above raised
            raise ProtocolError("numeric attributes could not be parsed")
        sens = []
        for name in self._sens_names:
            raw = values.get(name)
            if type(raw) is str and raw.strip():
                sens.append(raw)
                continue
            if _missing(raw):
                raise MissingFieldError(name, f"missing field {name} (sensitive)")
            if isinstance(raw, float) and not math.isfinite(raw):
                raise BadValueError(name, f"field {name} is not a finite number")
            sens.append(_canonical(raw))
        t = row.t
        if t is None and need_time and rules.time_field is not None:
            raw_t = values.get(rules.time_field)
            t = _parse_time(raw_t, rules.time_field)
        item = Item(row, pos, cpid, num, cat, (), tuple(sens), t if t is not None else math.nan)
        return item, hier_raw, other_raw

    def parse_columns(self, n: int, numbers: Mapping[str, Sequence[float]],
                      texts: Mapping[str, tuple[Sequence[str | None], Sequence[int]]]
                      ) -> tuple[np.ndarray, list[str], list[list[int]], list[tuple[str, ...]],
                                 list[bool]] | None:
        """What :meth:`parse` takes from each of ``n`` rows given as columns (a reader's clean
        block: numeric columns as finite floats, text columns as distinct values, ``None``
        for blank, and codes into them), a block at a time: the numbers (a row per tuple),
        ids, hierarchy nodes and sensitive values, and per row whether it is one that
        :meth:`parse`'s fast branch takes as given (a non-blank id, known non-blank hierarchy
        values, non-blank sensitive values). Any other row must go through :meth:`parse`,
        which says what is wrong. ``None``: the rules need :meth:`parse` for every row
        (plug-ins, hierarchies that observe, a column not given as expected).
        """
        if self._slow and self._known is None:
            return None
        try:
            mat = np.empty((n, len(self._num_names)))
            for j, name in enumerate(self._num_names):
                mat[:, j] = numbers[name]
            ids, id_codes = texts[self._id_field]
            hier = [(texts[name], nodes) for name, nodes in self._known or ()]
            sens = [texts[name] for name in self._sens_names]
        except KeyError:
            return None
        ok = np.ones(n, dtype=bool)

        def column(names: Sequence[str | None], codes: Sequence[int],
                   value: Any) -> list[Any]:
            given = [value(v) if type(v) is str and v.strip() else None for v in names]
            good = np.array([v is not None for v in given], dtype=bool)
            ok[:] &= good[np.asarray(codes, dtype=np.int64)]
            return list(map(given.__getitem__, codes))

        id_col = column(ids, id_codes, str)
        node_cols = [column(names, codes, nodes.get) for (names, codes), nodes in hier]
        sens_cols = [column(names, codes, str) for names, codes in sens]
        cats = list(map(list, zip(*node_cols, strict=True))) if node_cols else [_NO_CAT] * n
        sens_rows = list(zip(*sens_cols, strict=True)) if sens_cols else [()] * n
        return mat, id_col, cats, sens_rows, ok.tolist()

    def is_qi(self, name: str | None) -> bool:
        """``name`` is one of the quasi-identifiers (not the id, a sensitive attribute or the
        time)."""
        return (any(r.name == name for r in self.rules.qi_rules)
                and name not in (self._id_field, self.rules.time_field))

    def parse_star(self, row: CastleRow, pos: int, need_time: bool = False, *,
                   observe: bool = True) -> tuple[Item, list[Any], list[Any]]:
        """:meth:`parse` for a tuple with empty quasi-identifiers, each taken as its
        attribute's top: a range value as the whole domain (``Item.missing``), a hierarchy
        value as the root, a plug-in's as the value of its ``maximal()`` (a plug-in that
        cannot parse that refuses the tuple). Raises as :meth:`parse` for anything else.

        The tuple's values are observed here unless not ``observe`` (a validation only), so
        the raw values returned for :meth:`observe` are empty.
        """
        values = dict(row.values)
        blank: set[str] = set()
        for name, g, kind in self._all:
            raw = values.get(name)
            if name != self.rules.time_field and (
                    (not raw.strip()) if type(raw) is str else _missing(raw)):
                blank.add(name)
                values[name] = (0.0 if kind == "num" else g.tree.root if kind == "hier"
                                else g.maximal())
        try:
            item, hier_raw, other_raw = self.parse(CastleRow(values, row.line, row.t), pos,
                                                   need_time)
        except BadRecordError as exc:
            if exc.field in blank:  # a plug-in without a top it can parse
                raise MissingFieldError(exc.field) from None
            raise
        if not observe:
            return item, [], []
        item.row = row
        hier_names = [name for name, _, kind in self._all if kind == "hier"]
        if hier_raw:
            cat = []
            for name, g, v in zip(hier_names, self.hier, hier_raw, strict=True):
                if name in blank:
                    cat.append(g.tree.index(g.tree.root))
                elif g.metric is _GLM and type(v) is str:
                    cat.append(g.tree.index(v))
                else:
                    cat.append(g.tree.index(g.observe(v)))
                    self._stale = True
            item.nodes = cat
        else:  # the known nodes, or no hierarchy
            item.nodes = [g.tree.index(g.tree.root) if name in blank else node
                          for name, g, node in zip(hier_names, self.hier, item.nodes,
                                                   strict=True)]
        if self.other:
            item.plugin_values = tuple(g.observe(v) for g, v in zip(self.other, other_raw,
                                                                    strict=True))
        missing = tuple(j for j, name in enumerate(self._num_names) if name in blank)
        if missing:
            item.numbers = item.numbers.copy()
            item.numbers[list(missing)] = np.nan
            item.missing = missing
            self._star = True
        return item, [], []

    def _star_row(self, item: Item) -> np.ndarray:
        """``item.bounds_row`` with each missing value as its whole domain (``-inf``, which
        changes no maximum, while the domain is empty)."""
        row = item.bounds_row
        d = len(self.num)
        for j in item.missing:
            lo, hi = self._dom[0, j], self._dom[1, j]
            row[j], row[d + j] = (-lo, hi) if lo <= hi else (-np.inf, -np.inf)
        return row

    def _top_columns(self, i: int, columns: Collection[int]) -> None:
        """Row ``i`` spans the whole domain of each range attribute in ``columns`` (a
        harmless ``[0,0]`` while a domain is empty: its weight is 0 then)."""
        d = len(self.num)
        for j in columns:
            lo, hi = self._dom[0, j], self._dom[1, j]
            self._bounds[i, j], self._bounds[i, d + j] = (-lo, hi) if lo <= hi else (0.0, 0.0)

    def _place_star(self, item: Item, tau: float, beta: int, eps: float) -> None:
        """:meth:`place` for a tuple with missing range values, in numpy (the compiled
        kernel takes points): the same rule, the missing values as their whole domains."""
        x = item.numbers
        with np.errstate(invalid="ignore"):  # NaN (missing) is never outside
            if ((x < self._dom[0]) | (x > self._dom[1])).any():
                self._widen(x)
        n = len(self.clusters)
        if n == 0:
            self.open_cluster(item)
            return
        lh, nodes = self.bounds, self.nodes
        grown = np.maximum(lh, self._star_row(item))
        new_nodes = nodes.copy()
        for j, g in enumerate(self.hier):
            new_nodes[:, j] = g.tree.lca_table()[nodes[:, j], item.nodes[j]]
        cur, new = self.loss_of(lh, nodes), self.loss_of(grown, new_nodes)
        if self.other:
            other_cur, other_new, _ = self._other_parts(item)
            cur, new = cur + other_cur, new + other_new
        e = new - cur
        best = int(np.argmin(e))
        picks = np.flatnonzero(e <= e[best] + eps)
        bound = tau + eps
        if len(picks) == 1:
            if new[best] > bound and n < beta:
                self.open_cluster(item)
                return
            idx = best
        else:
            ok = picks[new[picks] <= bound]
            if not len(ok):
                if n < beta:
                    self.open_cluster(item)
                    return
                ok = picks
            sizes = [len(self.clusters[i].individuals) for i in ok.tolist()]
            idx = int(ok[sizes.index(min(sizes))])
        self.insert(idx, item)

    def _fast_numbers(self, values: Mapping[str, Any]) -> np.ndarray | None:
        """All numeric attributes at once; ``None`` when one is bad (the slow path says why).

        Runs once per tuple, so it avoids per-value Python work: one ``itemgetter`` call, one
        type test, one ``map(float)``, a finite check on the sum (finite only when every value
        is), one small array. Values outside a range's domain are found by the best selection.
        """
        try:
            raw = self._get_num(values) if self._get_num else [values[n] for n in self._num_names]
        except KeyError:
            return None
        types = set(map(type, raw))
        if types == _FLOAT:  # as the row readers give them: no conversion needed
            if math.isfinite(sum(raw)) or all(map(math.isfinite, raw)):
                return np.array(raw)
            return None
        if types <= _INT_FLOAT:
            floats = list(map(float, raw))
        else:
            try:
                floats = list(map(float, raw))
            except (TypeError, ValueError):
                return None
            if bool in set(map(type, raw)):
                return None
        if not math.isfinite(sum(floats)) and not all(map(math.isfinite, floats)):
            return None
        return np.array(floats)

    def observe(self, item: Item, hier_raw: list[Any], other_raw: list[Any]) -> None:
        """Let the generalizers account for an accepted tuple (growth, counts); the range
        domains take it in :meth:`place` (the kernel finds values outside them)."""
        if hier_raw:
            cat = []
            for g, v in zip(self.hier, hier_raw, strict=True):
                if g.metric is _GLM and type(v) is str:  # nothing to observe
                    cat.append(g.tree.index(v))
                else:
                    cat.append(g.tree.index(g.observe(v)))
                    self._stale = True
            item.nodes = cat
        if self.other:
            item.plugin_values = tuple(g.observe(v) for g, v in zip(self.other, other_raw,
                                                                    strict=True))

    @property
    def dlo(self) -> np.ndarray:
        return self._dom[0]

    @property
    def dhi(self) -> np.ndarray:
        return self._dom[1]

    def _widen(self, x: np.ndarray) -> None:
        """Widen the range domains to take ``x`` (a tuple with values outside them)."""
        np.fmin(self.dlo, x, out=self.dlo)  # a missing value (NaN) widens nothing
        np.fmax(self.dhi, x, out=self.dhi)
        for j, g in enumerate(self.num):
            g.observe(float(x[j]))
        self._refresh_inv()
        if self._star:  # rows holding a missing value span the (wider) domain again
            for i, c in enumerate(self.clusters):
                columns = {j for it in c.items for j in it.missing}
                if columns:
                    self._top_columns(i, columns)
        if self._packed is not None:  # the kernel's copy of the weights and domains, in place
            d = len(self.num)
            self._kernel_floats[HEAD:HEAD + 2 * d] = self._inv
            self._kernel_floats[HEAD + 2 * d:HEAD + 4 * d] = self._dom.ravel()

    def _refresh_inv(self) -> None:
        self._inv_version += 1
        span = self.dhi - self.dlo
        # w / span where span > 0, else 0 (NaN too); divided only there (no warning to hide,
        # unless a span or a weight is not finite: then the same as under errstate)
        pos = span > 0
        if np.isfinite(span).all() and np.isfinite(self.w_num).all():
            inv = np.divide(self.w_num, span, out=np.zeros_like(span), where=pos)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                inv = np.where(pos, self.w_num / np.where(pos, span, 1.0), 0.0)
        self._inv = np.concatenate((inv, inv))

    # -- losses ------------------------------------------------------------------------------
    def loss_of(self, lh: np.ndarray, nodes: np.ndarray,
                gen: Sequence[Sequence[Any]] | None = None) -> np.ndarray:
        """Weighted loss of states given as arrays (rows = clusters), vectorized."""
        out = lh @ self._inv if len(self.num) else np.zeros(len(lh))
        for j, g in enumerate(self.hier):
            out = out + self.w_hier[j] * g.loss_vector()[nodes[:, j]]
        if self.other and gen is not None:
            out = out + np.array([sum(w * g.loss(s) for w, g, s in
                                      zip(self.w_other, self.other, states, strict=True))
                                  for states in gen])
        return out

    @property
    def bounds(self) -> np.ndarray:
        """``(-lo, hi)`` of every open cluster (a view: one row per cluster, in order)."""
        return self._bounds[:len(self.clusters)]

    @property
    def nodes(self) -> np.ndarray:
        """Hierarchy node of every open cluster (a view: one row per cluster, in order)."""
        return self._nodes[:len(self.clusters)]

    def place(self, item: Item, tau: float, beta: int, eps: float) -> None:
        """Best selection: put ``item`` into the open cluster it enlarges least, or a new one.

        The rule (ties, τ, β, then fewest individuals) runs compiled in
        :func:`streamanon.castle._kernel.best_selection`, which also grows the chosen row and
        finds values outside the range domains (they are widened first, then it runs again).
        """
        if item.missing:
            self._place_star(item, tau, beta, eps)
            return
        clusters = self.clusters
        n = len(clusters)
        x = item.numbers
        if n == 0:
            dom = self._dom
            if ((x < dom[0]) | (x > dom[1])).any():
                self._widen(x)
            self.open_cluster(item)
            return
        kernel = _KERNEL[0] if _KERNEL else _load_kernel()
        if len(self._picks) < n:
            self._work = np.zeros((4, 2 * n))
            self._picks = np.empty(2 * n, dtype=np.int64)
        if self._stale or beta != self._beta or eps != self._eps:
            key = (beta, eps, *[g.loss_version for g in self.hier])
            if key != self._packed:
                self._pack(key, beta, eps)
            self._stale = False
        cat = self._item_nodes
        for j, node in enumerate(item.nodes):
            cat[j] = node
        plug = self.other
        if plug:
            other_cur, other_new, okey = self._other_parts(item)
            self._work[2, :n] = other_cur
            self._work[3, :n] = other_new
        idx = kernel(self._bounds, self._nodes, n, x, cat, tau, self._kernel_floats,
                     self._kernel_ints, self._work, self._picks)
        if idx == OUTSIDE:
            self._widen(x)
            if plug:
                other_cur, other_new, okey = self._other_parts(item)
                self._work[2, :n] = other_cur
                self._work[3, :n] = other_new
            idx = kernel(self._bounds, self._nodes, n, x, cat, tau, self._kernel_floats,
                         self._kernel_ints, self._work, self._picks)
        if idx == OPEN:
            self.open_cluster(item)
            return
        if idx < 0:
            picks = self._picks[:TIED - idx].tolist()
            if not picks:
                raise ProtocolError("no cluster to choose (the losses are not numbers)")
            sizes = [len(clusters[i].individuals) for i in picks]
            idx = picks[sizes.index(min(sizes))]
            self._grow_row(idx, item)
        if plug:
            other_cur[idx] = other_new[idx]
            self._other_cur, self._other_key = other_cur, okey
        self.insert(idx, item, True)

    def _pack(self, key: tuple[Any, ...], beta: int, eps: float) -> None:
        """Lay out what the kernel reads besides the rows (see its docstring): beta, eps, the
        plug-in flag, the hierarchies' largest terms, the weights, the domains, then every
        hierarchy's ``w * loss(lca(a, b))`` and ``lca(a, b)`` as flat tables."""
        losses, lcas, offs, sizes = [], [], [], []
        off = 0
        for j, g in enumerate(self.hier):
            n = len(g.tree.names)
            table = g.tree.lca_table()[:n, :n]
            losses.append((self.w_hier[j] * g.loss_vector()[table]).T.ravel())
            lcas.append(table.T.astype(np.int64).ravel())
            offs.append(off)
            sizes.append(n)
            off += n * n
        # the kernel screens clusters only when every hierarchy term is >= 0 (see _must_open)
        hmax = (sum(float(t.max()) for t in losses if t.size)
                if all(bool((t >= 0).all()) for t in losses) else -1.0)
        head = [float(beta), float(eps), 1.0 if self.other else 0.0, hmax]  # HEAD values
        self._beta, self._eps = beta, eps
        self._kernel_floats = np.concatenate((head, self._inv, self._dom[0], self._dom[1], *losses))
        self._kernel_ints = np.concatenate((np.array(offs + sizes, dtype=np.int64), *lcas))
        self._packed = key

    def _other_parts(self, item: Item) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        """The plug-ins' weighted loss of every open cluster without and with ``item``.

        Without: cached, updated on insertion, recomputed when a cluster changed otherwise or
        a loss may have (a numeric domain or a hierarchy's losses changed).
        """
        key = (self._inv_version, *(g.loss_stamp for g in self.hier))
        other_cur = self._other_cur
        if other_cur is None or key != self._other_key or len(other_cur) != len(self.clusters):
            other_cur = np.array([sum(w * g.loss(s) for w, g, s in
                                      zip(self.w_other, self.other, c.plugin_states, strict=True))
                                  for c in self.clusters], dtype=np.float64)
        other_new = np.array([sum(w * g.loss(g.add(s, v)) for w, g, s, v in
                                  zip(self.w_other, self.other, c.plugin_states,
                                      item.plugin_values, strict=True))
                              for c in self.clusters], dtype=np.float64)
        return other_cur, other_new, key

    def _grow_row(self, idx: int, item: Item) -> None:
        row = self._bounds[idx]
        np.maximum(row, self._star_row(item) if item.missing else item.bounds_row, out=row)
        for j, g in enumerate(self.hier):
            self._nodes[idx, j] = g.tree.lca_table()[self._nodes[idx, j], item.nodes[j]]

    #: ``"cluster"``: a categorical's loss is measured in the cluster's own tree
    #: (:meth:`HierarchyGeneralizer.cluster_loss`) when its tuples are given
    hierarchy_scope = "shared"

    def attr_losses(self, st: State, items: Sequence[Item] | None = None) -> dict[str, float]:
        """Per-attribute loss of one state, by attribute name (``items``: the tuples it
        generalizes, for the per-cluster hierarchies)."""
        own_tree = items is not None and self.hierarchy_scope == "cluster"
        out: dict[str, float] = {}
        lo, hi = st.lo.tolist(), st.hi.tolist()
        for rule, (kind, j) in zip(self.rules.qi_rules, self.kind, strict=True):
            if kind == "num":
                out[rule.name] = self.num[j].loss((lo[j], hi[j]))
            elif kind == "hier":
                g = self.hier[j]
                node = g.tree.names[int(st.nodes[j])]
                out[rule.name] = g.cluster_loss(node, [g.tree.names[int(it.nodes[j])]
                                                       for it in items]  # type: ignore[union-attr]
                                                ) if own_tree else g.loss(node)
            else:
                out[rule.name] = self.other[j].loss(st.plugin_states[j])
        if self._star:  # a domain still empty: released as [*], the top
            for g in self.num:
                if g.hi < g.lo:
                    out[g.name] = 1.0
        return out

    def weighted(self, losses: dict[str, float]) -> float:
        total = sum(r.weight for r in self.rules.qi_rules)
        if total <= 0:
            return 0.0
        return sum(losses[r.name] * r.weight for r in self.rules.qi_rules) / total

    def output_values(self, st: State) -> dict[str, Any]:
        out: dict[str, Any] = {}
        lo, hi = st.lo.tolist(), st.hi.tolist()
        for rule, (kind, j) in zip(self.rules.qi_rules, self.kind, strict=True):
            if kind == "num":
                out[rule.name] = self.num[j].output((lo[j], hi[j]))
            elif kind == "hier":
                out[rule.name] = self.hier[j].tree.names[int(st.nodes[j])]
            else:
                out[rule.name] = self.other[j].output(st.plugin_states[j])
        if self._star:  # a domain still empty: only missing values were seen, top is [*]
            for g in self.num:
                if g.hi < g.lo:
                    out[g.name] = g.maximal()
        return out

    def maximal_values(self) -> dict[str, Any]:
        return {r.name: r.generalizer.maximal() for r in self.rules.qi_rules}

    def state_of(self, items: Sequence[Item]) -> State:
        """The generalization of a set of tuples, from scratch (no removal bookkeeping)."""
        if self.num:
            x = np.array([it.numbers for it in items])
            lo, hi = x.min(axis=0), x.max(axis=0)
            if self._star:  # a missing value (NaN) counts as the whole domain
                lo, hi = np.fmin.reduce(x, axis=0), np.fmax.reduce(x, axis=0)
                for j in {j for it in items for j in it.missing}:
                    dlo, dhi = self._dom[0, j], self._dom[1, j]
                    lo[j], hi[j] = (dlo, dhi) if dlo <= dhi else (0.0, 0.0)
        else:
            lo = hi = np.empty(0)
        nodes = np.empty(len(self.hier), dtype=np.int64)
        if self.hier:
            # the lowest common node of the distinct nodes, first seen first: the same node
            # as folding every tuple's (the fold is a join: repeats and order change nothing)
            for j, column in enumerate(zip(*map(_NODES_OF, items), strict=True)):
                seen = dict.fromkeys(column)
                if len(seen) == 1:
                    nodes[j] = column[0]
                    continue
                table = self.hier[j].tree.lca_table()
                it_seen = iter(seen)
                node = next(it_seen)
                for v in it_seen:
                    node = int(table[node, v])
                nodes[j] = node
        gen: list[Any] = []
        for j, g in enumerate(self.other):
            s = None
            for it in items:
                s = g.add(s, it.plugin_values[j])
            gen.append(s)
        return State(lo, hi, nodes, gen)

    def cluster_state(self, c: Cluster) -> State:
        """The generalization of open cluster ``c``, read from its rows of the arrays.

        Equal to ``state_of(c.items)`` without touching the tuples: a row is kept as the
        maximum of its tuples' ``(-x, x)`` and the lowest common node of their nodes, both
        exact and independent of order. Plug-in states are folded from the tuples as
        ``state_of`` does, since their ``merge`` need not equal folding ``add``.
        """
        i = self.index(c)
        d = len(self.num)
        row = self._bounds[i]
        gen = self.state_of(c.items).plugin_states if self.other else []
        return State(-row[:d], row[d:].copy(), self._nodes[i].copy(), gen)

    def covers(self, st: State, item: Item) -> bool:
        if self.num:
            x = item.numbers.tolist()
            if item.missing:  # a missing value: only the whole domain covers it
                x_lo, x_hi = list(x), list(x)
                for j in item.missing:
                    x_lo[j], x_hi[j] = self._dom[0, j], self._dom[1, j]
                return (all(map(operator.le, st.lo.tolist(), x_lo))
                        and all(map(operator.le, x_hi, st.hi.tolist()))
                        and self._covers_rest(st, item))
            if not (all(map(operator.le, st.lo.tolist(), x))
                    and all(map(operator.le, x, st.hi.tolist()))):
                return False
        return self._covers_rest(st, item)

    def _covers_rest(self, st: State, item: Item) -> bool:
        for j, g in enumerate(self.hier):
            if int(g.tree.lca_table()[st.nodes[j], item.nodes[j]]) != st.nodes[j]:
                return False
        return all(g.covers(st.plugin_states[j], item.plugin_values[j])
                   for j, g in enumerate(self.other))

    # -- clusters ----------------------------------------------------------------------------
    def open_cluster(self, item: Item) -> int:
        c = Cluster(self.n_sensitive, self)
        idx = len(self.clusters)
        if idx == len(self._bounds):
            self._bounds = np.concatenate((self._bounds, np.empty_like(self._bounds)))
            self._nodes = np.concatenate((self._nodes, np.empty_like(self._nodes)))
        d = len(self.num)
        self._bounds[idx, :d] = -item.numbers
        self._bounds[idx, d:] = item.numbers
        self._nodes[idx] = item.nodes
        if item.missing:
            self._top_columns(idx, item.missing)
        self.clusters.append(c)
        c.plugin_states = [None] * len(self.other)
        self._other_key = None
        self.insert(idx, item, grown=True)
        return idx

    def insert(self, idx: int, item: Item, grown: bool = False) -> None:
        """Add ``item`` to open cluster ``idx``; ``grown``: its array rows already hold it."""
        c = self.clusters[idx]
        c.items.append(item)
        item.cluster = c
        pid = item.individual
        ids = c.individuals
        ids[pid] = ids.get(pid, 0) + 1
        pool = self._pool_ids
        pool[pid] = pool.get(pid, 0) + 1
        # as long: one per attribute
        for cs, ps, v in zip(c.sensitive_counts, self._pool_sens, item.sensitive, strict=False):
            cs[v] = cs.get(v, 0) + 1
            ps[v] = ps.get(v, 0) + 1
        if not grown:
            self._other_key = None
            self._grow_row(idx, item)
        if self.other:
            for j, g in enumerate(self.other):
                c.plugin_states[j] = g.add(c.plugin_states[j], item.plugin_values[j])

    def _drop_row(self, i: int) -> None:
        """Close row ``i`` (its cluster already left ``clusters``): later rows move up."""
        n = len(self.clusters)
        self._bounds[i:n] = self._bounds[i + 1:n + 1]
        self._nodes[i:n] = self._nodes[i + 1:n + 1]
        self._other_key = None

    def index(self, c: Cluster) -> int:
        try:
            return self.clusters.index(c)  # clusters compare by identity
        except ValueError:
            raise KeyError("cluster is not open") from None

    def pool_meets(self, k: int, rule: Diversity) -> bool:
        """All open clusters together hold >= k individuals and meet the diversity ``rule``
        on every sensitive attribute (counted as tuples enter and leave the open clusters)."""
        if len(self._pool_ids) < k:
            return False
        if rule.off:
            return True
        if not all(len(ps) >= rule.l for ps in self._pool_sens):  # every rule needs it
            return False
        return rule.distinct or rule.all_hold(self._pool_sens, self.rules.sensitive)

    def _leave_pool(self, c: Cluster) -> None:
        """``c``'s tuples leave the open clusters (``c`` was closed)."""
        _subtract(self._pool_ids, c.individuals)
        for ps, cs in zip(self._pool_sens, c.sensitive_counts, strict=True):
            _subtract(ps, cs)

    def detach(self, c: Cluster) -> None:
        """Close ``c``: its tuples leave the pool (they are being released or merged away)."""
        i = self.index(c)
        self.clusters.pop(i)
        self._drop_row(i)
        self._leave_pool(c)

    def close_all(self) -> list[Item]:
        """Close every open cluster at once and return their tuples and the waiting ones,
        which leave the pool (the window release releases every held tuple when it cuts
        them): no state to rebuild, no counts to take apart."""
        items = [it for c in self.clusters for it in c.items]
        if self._waiting is not None:
            items += self._waiting.items
            self._waiting = None
            self._waiting_ids = {}
        for it in items:
            it.cluster = None
        self.clusters = []
        self._pool_ids = {}
        self._pool_sens = [{} for _ in range(self.n_sensitive)]
        self._other_key = None
        return items

    # -- the window release's waiting tuples ------------------------------------------------
    def wait(self, item: Item, tau: float) -> None:
        """Hold ``item`` without placing it in a cluster (``split="window"``).

        The window release cuts every held tuple by its values alone and releases them all
        at the cut, so the clusters the best selection builds are needed only when the held
        tuples together cannot form a class and CASTLE's rules apply (:meth:`settle`). Until
        then a tuple waits in a cluster of its own set that is not open (its ``owner`` says
        whose rules it is under) with the τ it arrived under.
        """
        w = self._waiting
        if w is None:
            w = self._waiting = Cluster(self.n_sensitive, self)
            self._waiting_tau = []
            self._waiting_ids = {}
        w.items.append(item)
        item.cluster = w
        self._waiting_tau.append(tau)
        ids = self._waiting_ids
        ids[item.individual] = ids.get(item.individual, 0) + 1

    def settle(self, beta: int, eps: float) -> None:
        """Place the waiting tuples in arrival order, each with the τ it arrived under: the
        clusters (and range domains) the best selection would have built by placing each on
        arrival, since nothing else changes them in between (no release happened since)."""
        w = self._waiting
        if w is None:
            return
        self._waiting = None
        self._waiting_ids = {}
        for item, tau in zip(w.items, self._waiting_tau, strict=True):
            item.cluster = None
            self.place(item, tau, beta, eps)

    def widen_to_waiting(self) -> None:
        """Widen the range domains to the waiting tuples' values, all at once: the domains
        their placement on arrival would have left (a widening takes minima and maxima,
        so order does not matter); for a cut that releases them without placing them."""
        w = self._waiting
        if w is None or not self.num:
            return
        x = np.array([it.numbers for it in w.items], dtype=np.float64)
        for row in (np.fmin.reduce(x, axis=0), np.fmax.reduce(x, axis=0)):
            if ((row < self._dom[0]) | (row > self._dom[1])).any():
                self._widen(row)

    def holds_individual(self, individual: str) -> bool:
        """Does ``individual`` have a tuple in an open cluster or waiting?"""
        return individual in self._pool_ids or (
            self._waiting is not None and individual in self._waiting_ids)

    @property
    def holds(self) -> int:
        """The tuples this set holds: in open clusters and waiting."""
        waiting = 0 if self._waiting is None else len(self._waiting.items)
        return sum(len(c.items) for c in self.clusters) + waiting

    def remove_item(self, item: Item) -> None:
        """Take one tuple out of its cluster; the cluster's state is rebuilt from the rest."""
        self._other_key = None
        c = item.cluster
        if c is None:
            raise ProtocolError(f"tuple at position {item.pos} is in no cluster")
        c.items.remove(item)
        self._uncount(c, item)
        i = self.index(c)
        if not c.items:
            self.clusters.pop(i)
            self._drop_row(i)
            return
        st = self.state_of(c.items)
        self._bounds[i] = np.concatenate((-st.lo, st.hi))
        self._nodes[i] = st.nodes
        c.plugin_states = st.plugin_states

    def _uncount(self, c: Cluster, item: Item) -> None:
        """``item`` leaves cluster ``c`` and the pool: its individual and sensitive values
        are no longer counted in either (the caller takes it out of ``c.items``)."""
        item.cluster = None
        _dec(c.individuals, item.individual)
        _dec(self._pool_ids, item.individual)
        for j, v in enumerate(item.sensitive):
            _dec(c.sensitive_counts[j], v)
            _dec(self._pool_sens[j], v)

    def absorb(self, into: Cluster, other: Cluster) -> None:
        """Merge ``other`` into ``into`` (both open)."""
        self._absorb_at(self.index(into), self.index(other))

    def absorb_nearest(self, c: Cluster) -> None:
        """Merge into open cluster ``c`` the one that enlarges its loss least (the first of
        equal ones): ``absorb(c, clusters[argmin(merge_enlargement(c))])``, with ``c`` looked
        up once."""
        i = self.index(c)
        self._absorb_at(i, int(np.argmin(self._merge_enlargement_at(i, c))))

    def _absorb_at(self, i: int, j: int) -> None:
        self._other_key = None
        into, other = self.clusters[i], self.clusters[j]
        np.maximum(self._bounds[i], self._bounds[j], out=self._bounds[i])
        for h, g in enumerate(self.hier):
            self._nodes[i, h] = g.tree.lca_table()[self._nodes[i, h], self._nodes[j, h]]
        for h, g in enumerate(self.other):
            into.plugin_states[h] = g.merge(into.plugin_states[h], other.plugin_states[h])
        for it in other.items:
            it.cluster = into
        into.items.extend(other.items)
        into.individuals.update(other.individuals)
        for h in range(self.n_sensitive):
            into.sensitive_counts[h].update(other.sensitive_counts[h])
        self.clusters.pop(j)
        self._drop_row(j)

    def merge_enlargement(self, c: Cluster) -> np.ndarray:
        """``loss(c + other) - loss(c)`` for every open cluster (``inf`` for ``c`` itself)."""
        return self._merge_enlargement_at(self.index(c), c)

    def _merge_enlargement_at(self, i: int, c: Cluster) -> np.ndarray:
        lh_all, nodes_all = self.bounds, self.nodes
        n = len(lh_all)
        if len(self._merged) < n:
            self._merged = np.empty_like(self._bounds)
        lh = self._merged[:n]
        if not _KERNEL:
            _load_kernel()
        _KERNEL[1](self._bounds, n, i, lh)  # np.maximum(lh_all, lh_all[i])
        nodes = nodes_all.copy()
        for h, g in enumerate(self.hier):
            nodes[:, h] = g.tree.lca_table()[nodes_all[:, h], nodes_all[i, h]]
        gen = None
        if self.other:
            gen = [[g.merge(x.plugin_states[h], c.plugin_states[h])
                    for h, g in enumerate(self.other)]
                   for x in self.clusters]
        new = self.loss_of(lh, nodes, gen)
        own = self.loss_of(lh_all[i:i + 1], nodes_all[i:i + 1],
                           [c.plugin_states] if self.other else None)[0]
        e = new - own
        e[i] = np.inf
        return e

    def pair_distance(self, reps: Sequence[Item], seed: Item) -> np.ndarray:
        """Loss of generalizing each representative together with ``seed`` (for splits)."""
        if self.num:  # |(-x, x) - (-s, s)| counts each attribute twice
            dist = np.abs(np.array([r.numbers for r in reps]) - seed.numbers)
            if self._star:  # a missing value: the pair spans the whole domain
                dist = np.where(np.isnan(dist), np.maximum(self.dhi - self.dlo, 0.0), dist)
            out = np.concatenate((dist, dist), axis=1) @ self._inv * 0.5
        else:
            out = np.zeros(len(reps))
        for j, g in enumerate(self.hier):
            col = np.array([r.nodes[j] for r in reps], dtype=np.int64)
            out = out + self.w_hier[j] * g.loss_vector()[g.tree.lca_table()[col, seed.nodes[j]]]
        for j, g in enumerate(self.other):
            out = out + self.w_other[j] * np.array(
                [g.loss(g.add(g.add(None, seed.plugin_values[j]), r.plugin_values[j]))
                 for r in reps])
        return out


_NO_CAT: list[int] = []  # the hierarchy nodes of a tuple when there are none
_NODES_OF = operator.attrgetter("nodes")
_INT_FLOAT = frozenset((int, float))
_FLOAT = {float}
_NO_NODES = np.empty(0, dtype=np.int64)
_GLM = Metric.glm
OPEN, OUTSIDE, TIED = -1, -2, -3  # the kernel's answers besides a cluster index (as there)
HEAD = 4  # values before the weights in the kernel's ``fl`` (as there; numba is imported late)


_KERNEL: list[Any] = []


def _load_kernel() -> Any:
    """The compiled kernel, loaded on first use: the C build of
    :mod:`streamanon.castle._native` (a few milliseconds), else numba's
    (:mod:`streamanon.castle._kernel`; numba is imported only then).

    Loading numba imports it and, on the first call, numba's typing registries: about 80,000
    long-lived objects that every full garbage collection would walk again (see
    docs/design/castle.md). They are frozen
    (:func:`gc.freeze`) once loaded, with whatever else the process holds at that moment.
    The collector is off while they are created: each collection it would run meanwhile walks
    the whole heap, and a Flink TaskManager's interpreter holds PyFlink and Beam.
    """
    if not _KERNEL:
        enabled = gc.isenabled()
        gc.disable()
        try:
            from streamanon.castle import _native

            native = _native.loaded()
            if native is not None:
                best_selection, merged_rows = native.best_selection, native.merged_rows
            else:
                from streamanon.castle._kernel import best_selection, merged_rows
            best_selection(np.zeros((1, 0)), np.zeros((1, 0), dtype=np.int64), 1,
                           np.empty(0), _NO_NODES, 0.0, np.zeros(HEAD), _NO_NODES,
                           np.zeros((4, 1)), np.zeros(1, dtype=np.int64))
            merged_rows(np.zeros((1, 0)), 1, 0, np.zeros((1, 0)))
        finally:
            gc.freeze()
            if enabled:
                gc.enable()
        _KERNEL.extend((best_selection, merged_rows))
    return _KERNEL[0]


def _dec(counter: Counter[str], key: str) -> None:
    n = counter[key] - 1
    if n:
        counter[key] = n
    else:
        dict.__delitem__(counter, key)  # (Counter.__delitem__ is Python code)


def _subtract(pool: dict[str, int], counts: Mapping[str, int]) -> None:
    for key, n in counts.items():
        left = pool[key] - n
        if left:
            pool[key] = left
        else:
            dict.__delitem__(pool, key)  # (a Counter of a set pickled earlier: the same)


def _parse_time(raw: Any, name: str) -> float:
    if isinstance(raw, bool) or raw is None or raw == "":
        raise MissingFieldError(name, f"missing field {name} (the time)")
    try:
        return parse_time(repr(raw) if isinstance(raw, int | float) else str(raw))
    except ValueError as exc:
        raise BadValueError(name, f"field {name}: {exc}: {raw!r}") from None

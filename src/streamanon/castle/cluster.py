"""Tuples and clusters of one rule set, with the numeric state kept in numpy arrays.

The hot path of CASTLE is the enlargement of every open cluster by each arriving tuple. The
:class:`ClusterSet` keeps each cluster's state in arrays, one row per open cluster:
``(-lo, hi)`` for the numeric ranges (so adding a tuple ``x`` is one ``maximum`` with
``(-x, x)`` and the range loss is one product with ``(w/span, w/span)``), node indices for
hierarchies (the loss of the lowest common node of any two nodes is a cached matrix). The
enlargement of all clusters is then a few vectorized operations, and each cluster's current
loss is cached and updated on insertion (the Java original's future work: cache enlargement
values instead of recomputing every cluster's loss on every arrival). Plug-in generalizers fall
back to a Python loop over their immutable states.
"""

from __future__ import annotations

import json
import math
import operator
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamanon.castle.generalizers import Generalizer, HierarchyGeneralizer, RangeGeneralizer
from streamanon.castle.rules import RuleSet
from streamanon.errors import BadValueError, MissingFieldError, ProtocolError
from streamanon.timefmt import parse_time


@dataclass(frozen=True, slots=True)
class Row:
    """One input tuple: its columns, and where it came from (for messages and timing).

    ``t`` is the arrival time in seconds, used only by the ``max_delay`` bound; when absent it
    is read from the rules' ``time`` column.
    """

    values: Mapping[str, Any]
    line: int | None = field(default=None, compare=False)
    t: float | None = None


@dataclass(slots=True)
class Released:
    """One output tuple: the input's columns with quasi-identifiers generalized.

    ``cluster`` numbers the released equivalence group (-1 for a suppressed tuple written by
    the ``null``/``generalize`` strategies); ``loss`` is that group's information loss.
    """

    values: dict[str, Any]
    loss: float
    cluster: int
    line: int | None = None


def canonical(value: Any) -> str:
    """The identity of an id or sensitive value: numbers by value, the rest by text.

    >>> canonical(5), canonical(5.0), canonical("5"), canonical(True)
    ('5.0', '5.0', '5', 'true')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value))
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


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
    """A tuple held by the operator, with its parsed values and its current cluster."""

    __slots__ = ("cat", "cluster", "done", "gen", "pid", "pos", "row", "sens", "t", "xx")

    def __init__(self, row: Row, pos: int, pid: str, xx: np.ndarray, cat: list[int],
                 gen: tuple[Any, ...], sens: tuple[str, ...], t: float) -> None:
        self.row = row
        self.pos = pos
        self.pid = pid
        self.xx = xx  # (-x, x) for the numeric attributes x: see ClusterSet
        self.cat = cat
        self.gen = gen
        self.sens = sens
        self.t = t
        self.cluster: Cluster | None = None
        self.done = False


class Cluster:
    """Open cluster: its tuples, distinct individuals and sensitive values (counted)."""

    __slots__ = ("gen", "ids", "items", "owner", "sens")

    def __init__(self, n_sensitive: int, owner: ClusterSet) -> None:
        self.owner = owner
        self.items: list[Item] = []
        self.ids: Counter[str] = Counter()
        self.sens: list[Counter[str]] = [Counter() for _ in range(n_sensitive)]
        self.gen: list[Any] = []


@dataclass
class State:
    """The generalization of a set of tuples (what gets released)."""

    lo: np.ndarray
    hi: np.ndarray
    nodes: np.ndarray
    gen: list[Any]


class ClusterSet:
    """The open clusters of one rule set, with their states as arrays (one row per cluster)."""

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
        self.n_sens = len(rules.sensitive)
        self._num_names = [g.name for g in self.num]
        self._all = [(r, k) for r, (k, _) in zip(rules.qi_rules, self.kind, strict=True)]
        self._slow = [(r, k) for r, k in self._all if k != "num"]
        d = len(self.num)
        # one call fetches all numeric columns (itemgetter gives a tuple for >= 2 names)
        self._get_num = operator.itemgetter(*self._num_names) if d > 1 else None
        # -1 then +1 per numeric attribute: (-x, x) = (x, x) * _sign in one numpy call
        self._sign = np.concatenate((np.full(d, -1.0), np.ones(d)))
        self.dlo = np.array([g.lo for g in self.num], dtype=np.float64)
        self.dhi = np.array([g.hi for g in self.num], dtype=np.float64)
        self._dlo_l, self._dhi_l = self.dlo.tolist(), self.dhi.tolist()
        self._outside = False  # set by parse when a value lies outside a range's domain
        self._inv = np.zeros(2 * d)
        self._refresh_inv()
        self.clusters: list[Cluster] = []
        # one row per open cluster: (-lo, hi), so that adding x is one np.maximum with (-x, x)
        # and the range part of the loss is one product with (w/span, w/span)
        self.lh = np.empty((0, 2 * d))
        self.nodes = np.empty((0, len(self.hier)), dtype=np.int64)
        # cached loss of every open cluster (valid while _cur_key matches), see enlargement()
        self._cur: np.ndarray | None = None
        self._cur_key: tuple[int, ...] | None = None
        self._new: np.ndarray | None = None
        self._grown: np.ndarray | None = None  # rows of lh grown by the last tuple, see insert
        self._buf = np.empty((0, 2 * d))
        self._lca_cache: dict[int, tuple[tuple[int, int], np.ndarray]] = {}
        self.pool_ids: Counter[str] = Counter()
        self.pool_sens: list[Counter[str]] = [Counter() for _ in range(self.n_sens)]

    # -- tuples ----------------------------------------------------------------------------
    def parse(self, row: Row, pos: int, need_time: bool = False
              ) -> tuple[Item, list[Any], list[Any]]:
        """Validate ``row`` without changing anything; raises ``BadRecordError`` naming the field.

        The time column is read only when ``need_time`` (the ``max_delay`` bound needs it).
        """
        values = row.values
        rules = self.rules
        pid = values.get(rules.id_field)
        if _missing(pid):
            raise MissingFieldError(rules.id_field,
                                    f"missing field {rules.id_field} (the individual)")
        if isinstance(pid, float) and not math.isfinite(pid):
            raise BadValueError(rules.id_field, f"field {rules.id_field} is not a finite number")
        num = self._fast_numbers(values)
        hier_raw: list[Any] = []
        other_raw: list[Any] = []
        for rule, kind in self._slow if num is not None else self._all:
            raw = values.get(rule.name)
            if _missing(raw):
                raise MissingFieldError(rule.name)
            if kind == "num":
                rule.generalizer.parse(raw)  # raises with the reason
            elif kind == "hier":
                hier_raw.append(rule.generalizer.parse(raw))
            else:
                other_raw.append(rule.generalizer.parse(raw))
        if num is None:  # pragma: no cover - the loop above raised
            raise ProtocolError("numeric attributes could not be parsed")
        sens = []
        for name in rules.sensitive:
            raw = values.get(name)
            if _missing(raw):
                raise MissingFieldError(name, f"missing field {name} (sensitive)")
            if isinstance(raw, float) and not math.isfinite(raw):
                raise BadValueError(name, f"field {name} is not a finite number")
            sens.append(_canonical(raw))
        t = row.t
        if t is None and need_time and rules.time_field is not None:
            raw_t = values.get(rules.time_field)
            t = _parse_time(raw_t, rules.time_field)
        item = Item(row, pos, _canonical(pid), num, [], (), tuple(sens),
                    t if t is not None else math.nan)
        return item, hier_raw, other_raw

    def _fast_numbers(self, values: Mapping[str, Any]) -> np.ndarray | None:
        """All numeric attributes at once; ``None`` when one is bad (the slow path says why).

        Runs once per tuple, so it avoids per-value Python work: one ``itemgetter`` call, one
        ``map(float)``, a finite check on the sum (finite only when every value is), and
        ``(-x, x)`` as one product with ``_sign`` (exact: multiplying by -1 negates).
        """
        try:
            raw = self._get_num(values) if self._get_num else [values[n] for n in self._num_names]
            floats = list(map(float, raw))
        except (KeyError, TypeError, ValueError):
            return None
        if not math.isfinite(sum(floats)) and not all(map(math.isfinite, floats)):
            return None
        if bool in set(map(type, raw)):
            return None
        if any(map(operator.lt, floats, self._dlo_l)) or any(map(operator.gt, floats,
                                                                   self._dhi_l)):
            self._outside = True
        return np.array(floats + floats) * self._sign

    def observe(self, item: Item, hier_raw: list[Any], other_raw: list[Any]) -> None:
        """Let the generalizers account for an accepted tuple (domains, growth, counts)."""
        if self._outside:
            self._outside = False
            x = item.xx[len(self.num):]
            np.minimum(self.dlo, x, out=self.dlo)
            np.maximum(self.dhi, x, out=self.dhi)
            for j, g in enumerate(self.num):
                g.observe(float(x[j]))
            self._dlo_l, self._dhi_l = self.dlo.tolist(), self.dhi.tolist()
            self._refresh_inv()
        if self.hier:
            item.cat = [g.tree.index(g.observe(v)) for g, v in zip(self.hier, hier_raw,
                                                                   strict=True)]
        if self.other:
            item.gen = tuple(g.observe(v) for g, v in zip(self.other, other_raw, strict=True))

    def _refresh_inv(self) -> None:
        self._inv_version = getattr(self, "_inv_version", 0) + 1
        span = self.dhi - self.dlo
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(span > 0, self.w_num / np.where(span > 0, span, 1.0), 0.0)
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

    def enlargement(self, item: Item) -> tuple[np.ndarray, np.ndarray]:
        """``(loss now, loss with item)`` of every open cluster.

        The grown rows ``max((-lo, hi), (-x, x))`` are formed in a buffer kept across calls
        (one broadcast copy and one flat ``maximum``, cheaper than a broadcasting
        ``maximum`` into a new array) and kept for :meth:`insert`, which copies the chosen
        row instead of recomputing it.
        """
        lh = self.lh
        lvs = [g.loss_vector() for g in self.hier]
        key = (self._inv_version, *(g.loss_stamp for g in self.hier))
        cur = self._cur if key == self._cur_key else None
        n = len(lh)
        if len(self._buf) < n:
            self._buf = np.empty((2 * n, lh.shape[1]))
        grown = self._buf[:n]
        grown[...] = item.xx
        np.maximum(lh, grown, out=grown)
        new = grown @ self._inv
        if cur is None:
            cur = lh @ self._inv
            for j, lv in enumerate(lvs):
                cur = cur + self.w_hier[j] * lv[self.nodes[:, j]]
            if self.other:
                cur = cur + np.array([sum(w * g.loss(s) for w, g, s in
                                          zip(self.w_other, self.other, c.gen, strict=True))
                                      for c in self.clusters])
        for j, g in enumerate(self.hier):
            new += self._lca_loss(j, g, lvs[j])[item.cat[j]][self.nodes[:, j]]
        if self.other:
            new += np.array([sum(w * g.loss(g.add(s, v)) for w, g, s, v in
                                 zip(self.w_other, self.other, c.gen, item.gen, strict=True))
                             for c in self.clusters])
        self._cur, self._cur_key, self._new, self._grown = cur, key, new, grown
        return cur, new

    def _lca_loss(self, j: int, g: HierarchyGeneralizer, lv: np.ndarray) -> np.ndarray:
        """``w * loss(lca(a, b))`` for all node pairs, cached while the loss vector holds.

        Stored transposed (``[b, a]``), so that the losses of all clusters' nodes ``a`` with a
        tuple's node ``b`` are one row gathered by the nodes column (cheaper than indexing
        the table with an array and a scalar; the values are the same entries).
        """
        n = len(g.tree.names)
        key = (g.loss_stamp, n)
        hit = self._lca_cache.get(j)
        if hit is None or hit[0] != key:
            table = g.tree.lca_table()[:n, :n]
            hit = (key, np.ascontiguousarray((self.w_hier[j] * lv[table]).T))
            self._lca_cache[j] = hit
        return hit[1]

    def attr_losses(self, st: State) -> dict[str, float]:
        """Per-attribute loss of one state, by attribute name."""
        out: dict[str, float] = {}
        for rule, (kind, j) in zip(self.rules.qi_rules, self.kind, strict=True):
            if kind == "num":
                out[rule.name] = self.num[j].loss((float(st.lo[j]), float(st.hi[j])))
            elif kind == "hier":
                g = self.hier[j]
                out[rule.name] = g.loss(g.tree.names[int(st.nodes[j])])
            else:
                out[rule.name] = self.other[j].loss(st.gen[j])
        return out

    def weighted(self, losses: dict[str, float]) -> float:
        total = sum(r.weight for r in self.rules.qi_rules)
        if total <= 0:
            return 0.0
        return sum(losses[r.name] * r.weight for r in self.rules.qi_rules) / total

    def output_values(self, st: State) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for rule, (kind, j) in zip(self.rules.qi_rules, self.kind, strict=True):
            if kind == "num":
                out[rule.name] = self.num[j].output((float(st.lo[j]), float(st.hi[j])))
            elif kind == "hier":
                out[rule.name] = self.hier[j].tree.names[int(st.nodes[j])]
            else:
                out[rule.name] = self.other[j].output(st.gen[j])
        return out

    def maximal_values(self) -> dict[str, Any]:
        return {r.name: r.generalizer.maximal() for r in self.rules.qi_rules}

    def state_of(self, items: Sequence[Item]) -> State:
        """The generalization of a set of tuples, from scratch (no removal bookkeeping)."""
        d = len(self.num)
        if d:
            lh = np.array([it.xx for it in items]).max(axis=0)
            lo, hi = -lh[:d], lh[d:]
        else:
            lo = hi = np.empty(0)
        nodes = np.empty(len(self.hier), dtype=np.int64)
        for j, g in enumerate(self.hier):
            table = g.tree.lca_table()
            node = items[0].cat[j]
            for it in items[1:]:
                node = int(table[node, it.cat[j]])
            nodes[j] = node
        gen: list[Any] = []
        for j, g in enumerate(self.other):
            s = None
            for it in items:
                s = g.add(s, it.gen[j])
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
        row = self.lh[i]
        gen = self.state_of(c.items).gen if self.other else []
        return State(-row[:d], row[d:].copy(), self.nodes[i].copy(), gen)

    def covers(self, st: State, item: Item) -> bool:
        d = len(self.num)
        if d and not (np.all(st.lo <= item.xx[d:]) and np.all(item.xx[d:] <= st.hi)):
            return False
        for j, g in enumerate(self.hier):
            if int(g.tree.lca_table()[st.nodes[j], item.cat[j]]) != st.nodes[j]:
                return False
        return all(g.covers(st.gen[j], item.gen[j]) for j, g in enumerate(self.other))

    # -- clusters ----------------------------------------------------------------------------
    def open_cluster(self, item: Item) -> int:
        c = Cluster(self.n_sens, self)
        self.clusters.append(c)
        self.lh = np.vstack([self.lh, item.xx[None, :]])
        self.nodes = np.vstack([self.nodes, np.array(item.cat, dtype=np.int64)[None, :]])
        c.gen = [None] * len(self.other)
        idx = len(self.clusters) - 1
        self.insert(idx, item, fresh=True)
        return idx

    def insert(self, idx: int, item: Item, *, fresh: bool = False) -> None:
        c = self.clusters[idx]
        c.items.append(item)
        item.cluster = c
        pid = item.pid
        ids = c.ids
        ids[pid] = ids.get(pid, 0) + 1
        pool = self.pool_ids
        pool[pid] = pool.get(pid, 0) + 1
        for j, v in enumerate(item.sens):
            cs, ps = c.sens[j], self.pool_sens[j]
            cs[v] = cs.get(v, 0) + 1
            ps[v] = ps.get(v, 0) + 1
        if fresh:
            self._cur_key = None
        else:
            if self._new is not None and self._cur is not None and len(self._cur) == len(
                    self.clusters):  # enlargement() just computed this tuple's losses
                self._cur[idx] = self._new[idx]
                self.lh[idx] = self._grown[idx]  # type: ignore[index]
                self._new = self._grown = None
            else:
                self._cur_key = None
                row = self.lh[idx]
                np.maximum(row, item.xx, out=row)
            for j, g in enumerate(self.hier):
                self.nodes[idx, j] = g.tree.lca_table()[self.nodes[idx, j], item.cat[j]]
        for j, g in enumerate(self.other):
            c.gen[j] = g.add(c.gen[j], item.gen[j])

    def index(self, c: Cluster) -> int:
        for i, x in enumerate(self.clusters):
            if x is c:
                return i
        raise KeyError("cluster is not open")

    def detach(self, c: Cluster) -> None:
        """Close ``c``: its tuples leave the pool (they are being released or merged away)."""
        self._cur_key = None
        i = self.index(c)
        self.clusters.pop(i)
        self.lh = np.delete(self.lh, i, axis=0)
        self.nodes = np.delete(self.nodes, i, axis=0)
        _remove_counts(self.pool_ids, c.ids)
        for j in range(self.n_sens):
            _remove_counts(self.pool_sens[j], c.sens[j])

    def remove_item(self, item: Item) -> None:
        """Take one tuple out of its cluster; the cluster's state is rebuilt from the rest."""
        self._cur_key = None
        c = item.cluster
        if c is None:
            raise ProtocolError(f"tuple at position {item.pos} is in no cluster")
        c.items.remove(item)
        item.cluster = None
        _dec(c.ids, item.pid)
        _dec(self.pool_ids, item.pid)
        for j, v in enumerate(item.sens):
            _dec(c.sens[j], v)
            _dec(self.pool_sens[j], v)
        i = self.index(c)
        if not c.items:
            self.clusters.pop(i)
            self.lh = np.delete(self.lh, i, axis=0)
            self.nodes = np.delete(self.nodes, i, axis=0)
            return
        st = self.state_of(c.items)
        self.lh[i] = np.concatenate((-st.lo, st.hi))
        self.nodes[i] = st.nodes
        c.gen = st.gen

    def absorb(self, into: Cluster, other: Cluster) -> None:
        """Merge ``other`` into ``into`` (both open)."""
        self._cur_key = None
        i, j = self.index(into), self.index(other)
        np.maximum(self.lh[i], self.lh[j], out=self.lh[i])
        for h, g in enumerate(self.hier):
            self.nodes[i, h] = g.tree.lca_table()[self.nodes[i, h], self.nodes[j, h]]
        for h, g in enumerate(self.other):
            into.gen[h] = g.merge(into.gen[h], other.gen[h])
        for it in other.items:
            it.cluster = into
        into.items.extend(other.items)
        into.ids.update(other.ids)
        for h in range(self.n_sens):
            into.sens[h].update(other.sens[h])
        self.clusters.pop(j)
        self.lh = np.delete(self.lh, j, axis=0)
        self.nodes = np.delete(self.nodes, j, axis=0)

    def merge_enlargement(self, c: Cluster) -> np.ndarray:
        """``loss(c + other) - loss(c)`` for every open cluster (``inf`` for ``c`` itself)."""
        i = self.index(c)
        lh = np.maximum(self.lh, self.lh[i])
        nodes = self.nodes.copy()
        for h, g in enumerate(self.hier):
            nodes[:, h] = g.tree.lca_table()[self.nodes[:, h], self.nodes[i, h]]
        gen = None
        if self.other:
            gen = [[g.merge(x.gen[h], c.gen[h]) for h, g in enumerate(self.other)]
                   for x in self.clusters]
        new = self.loss_of(lh, nodes, gen)
        own = self.loss_of(self.lh[i:i + 1], self.nodes[i:i + 1],
                           [c.gen] if self.other else None)[0]
        e = new - own
        e[i] = np.inf
        return e

    def pair_distance(self, reps: Sequence[Item], seed: Item) -> np.ndarray:
        """Loss of generalizing each representative together with ``seed`` (for splits)."""
        if self.num:  # |(-x, x) - (-s, s)| counts each attribute twice
            out = np.abs(np.stack([r.xx for r in reps]) - seed.xx) @ self._inv * 0.5
        else:
            out = np.zeros(len(reps))
        for j, g in enumerate(self.hier):
            col = np.array([r.cat[j] for r in reps], dtype=np.int64)
            out = out + self.w_hier[j] * g.loss_vector()[g.tree.lca_table()[col, seed.cat[j]]]
        for j, g in enumerate(self.other):
            out = out + self.w_other[j] * np.array(
                [g.loss(g.add(g.add(None, seed.gen[j]), r.gen[j])) for r in reps])
        return out


def _remove_counts(pool: Counter[str], part: Counter[str]) -> None:
    for key, n in part.items():
        left = pool[key] - n
        if left:
            pool[key] = left
        else:
            del pool[key]


def _dec(counter: Counter[str], key: str) -> None:
    n = counter[key] - 1
    if n:
        counter[key] = n
    else:
        del counter[key]


def _parse_time(raw: Any, name: str) -> float:
    if isinstance(raw, bool) or raw is None or raw == "":
        raise MissingFieldError(name, f"missing field {name} (the time)")
    try:
        return parse_time(repr(raw) if isinstance(raw, int | float) else str(raw))
    except ValueError as exc:
        raise BadValueError(name, f"field {name}: {exc}: {raw!r}") from None

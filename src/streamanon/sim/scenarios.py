"""The three scenarios of the paper on identical measurements, vectorized across cycles.

Design: docs/design/simulation.md
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamanon.dezent.cbf import (
    CountingBloomFilter,
    CountingStructure,
    int_positions,
)
from streamanon.dezent.grid import CYCLE_SECONDS, CYCLES_PER_DAY
from streamanon.dezent.mix import item_bytes
from streamanon.dezent.order import PAPER as PAPER_ORDER
from streamanon.dezent.order import pass_messages, pass_start
from streamanon.dezent.protocol import (
    MIX,
    StructureSpec,
    publish_records,
)
from streamanon.dezent.ring import Ring
from streamanon.dezent.rules import PAPER, WINDOW, publishable
from streamanon.dezent.securesum import SecureSumMask, max_true_count
from streamanon.errors import ConfigError
from streamanon.sim.config import SimConfig
from streamanon.sim.district import District
from streamanon.sim.linkability import fold_of, position_decile
from streamanon.sim.metrics import TUPLE_BYTES, ScenarioMetrics

SCENARIOS = ("centralized", "fully_decentralized", "dezent")


@dataclass
class SimResult:
    """Metrics per scenario, and (with ``keep_published``) who was published."""

    district: District
    config: SimConfig
    cycles: int
    spec: StructureSpec
    metrics: dict[str, ScenarioMetrics]
    published: dict[str, np.ndarray] | None = None  # scenario -> bool (cycles, sensors)
    readings: np.ndarray | None = None  # int (cycles, sensors)
    history: np.ndarray | None = None  # readings of the Δt before ``start`` (counted, not
    # anonymized): part of the input any checker must see
    start: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = self.district.config
        c = self.config
        return {
            "params": {
                "gateways": d.gateways, "max_sn": d.max_sn, "seed": d.seed, "year": d.year,
                "district": d.kind, "farm_share": d.farm_share,
                "sensors": self.district.sensors, "cycles": self.cycles,
                "days": self.cycles / CYCLES_PER_DAY, "z": c.z, "delta_t": c.delta_t,
                "window_cycles": c.window, "p_pub": c.p_pub, "rule": c.rule,
                "structure": c.structure, "fp_rate": c.fp_rate,
                "counter_bits": self.spec.bits, "epoch_cycles": c.epoch_cycles,
                "ring_redraw": c.ring_redraw,
                "publication": c.publication, "publication_order": c.publication_order,
                "mix_padding": c.mix_padding,
            },
            "structure": {"kind": self.spec.kind, "m": self.spec.m, "k": self.spec.k,
                          "bits": self.spec.bits, "bytes": self.spec.nbytes},
            "scenarios": {name: m.to_dict() for name, m in self.metrics.items()},
            **self.extra,
        }


def simulate(district: District, cycles: int, config: SimConfig, *, start: int = 0,
             keep_published: bool = False, chunk_days: int = 1,
             on_chunk: Callable[[int], None] | None = None) -> SimResult:
    """Run the three scenarios on cycles ``[start, start + cycles)`` of ``district``.

    ``on_chunk`` is told how many cycles each chunk (a day) simulated (for a progress bar).

    Args:
        district: the district simulated.
        cycles: the number of cycles (at least 1).
        config: the anonymization parameters.
        start: the first cycle.
        keep_published: keep what each scenario published, cycle by sensor.
        chunk_days: days of cycles simulated per chunk.
        on_chunk: called with the cycles of each chunk (``None``: none).
    """
    if cycles < 1:
        raise ConfigError(f"cycles must be >= 1, got {cycles}")
    end = start + cycles
    if end > district.cycles_available:
        raise ConfigError(f"the profiles of {district.config.year} have "
                          f"{district.cycles_available} cycles; asked for [{start}, {end})")
    spec = config.structure_spec(district)
    w = config.window
    SecureSumMask.check_capacity(max_true_count(spec.kind, spec.k, district.sensors, w),
                                 spec.bits)
    domain = district.domain()
    engine = _Engine(district, config, spec, domain)
    lut = np.full(int(domain[-1]) + 1, -1, dtype=np.int64)  # bucket value -> code
    lut[domain] = np.arange(len(domain))
    metrics = {name: ScenarioMetrics(name, district, config.z) for name in SCENARIOS}
    kept: dict[str, list[np.ndarray]] = {name: [] for name in SCENARIOS}
    kept_readings: list[np.ndarray] = []
    step = chunk_days * CYCLES_PER_DAY
    c0 = start
    while c0 < end:
        c1 = min(end, (c0 // step + 1) * step)
        h0 = max(0, c0 - (w - 1))
        values = district.readings(h0, c1)
        codes = lut[values]
        coins = district.coins(c0, c1)
        out, dist = engine.chunk(c0, c1, codes, c0 - h0, values[c0 - h0 :], coins,
                                 link_until=start + CYCLES_PER_DAY)
        for name, (pub, info) in out.items():
            metrics[name].add_chunk(pub, dist, info)
            if keep_published:
                kept[name].append(pub)
        if keep_published:
            kept_readings.append(values[c0 - h0 :])
        if on_chunk is not None:
            on_chunk(c1 - c0)
        c0 = c1
    for m in metrics.values():
        m.finish(spec, config)
    result = SimResult(district, config, cycles, spec, metrics, start=start)
    if keep_published:
        result.history = district.readings(max(0, start - (w - 1)), start)
        result.published = {k: np.concatenate(v) for k, v in kept.items()}
        result.readings = np.concatenate(kept_readings)
    return result


class _Engine:
    """The vectorized per-chunk computation shared by the three scenarios."""

    def __init__(self, district: District, config: SimConfig, spec: StructureSpec,
                 domain: np.ndarray) -> None:
        self.d, self.cfg, self.spec, self.domain = district, config, spec, domain
        self.G, self.S, self.V = district.gateways, district.sensors, len(domain)
        self.gw = district.sn_gateway
        self.ring = Ring(self.G, district.config.seed, config.epoch_cycles,
                         redraw=config.ring_redraw)
        self.pos = int_positions(domain, spec.m, spec.k) if spec.kind == "cbf" else None

    def ring_order(self, c0: int, c1: int) -> tuple[np.ndarray, np.ndarray]:
        """Per cycle and gateway: hops after the CCC; per cycle, the start positions of
        publication passes 1 and 2 (:func:`~streamanon.dezent.order.pass_start`, on the
        district's order draws)."""
        dist = np.empty((c1 - c0, self.G), dtype=np.int64)
        for c in range(c0, c1):
            dist[c - c0] = self.ring.distance_from_ccc(c)
        order = self.cfg.publication_order
        if order == PAPER_ORDER:
            starts = np.full((c1 - c0, 2), pass_start(order, self.G, 0.0), dtype=np.int64)
        else:
            draws = self.d.order_draws(c0, c1)
            starts = np.array([[pass_start(order, self.G, float(u)) for u in row]
                               for row in draws], dtype=np.int64).reshape(c1 - c0, 2)
        return dist, starts

    def chunk(self, c0: int, c1: int, codes: np.ndarray, h: int, values: np.ndarray,
              coins: np.ndarray, link_until: int = 0
              ) -> tuple[dict[str, tuple[np.ndarray, dict[str, Any]]], np.ndarray]:
        """Published masks ``(C, S)`` per scenario for cycles ``[c0, c1)``; ``codes`` has ``h``
        cycles of history before them. The CE's view of deZent's tuples (for the linkability
        metric) is kept for the cycles before ``link_until``."""
        cfg, G, S, V, w = self.cfg, self.G, self.S, self.V, self.cfg.window
        T = codes.shape[0]
        C = T - h
        # L[r, s]: cycles until s's next reading of the same value (capped at W)
        L = np.full((T, S), w, dtype=np.int64)
        for j in range(w - 1, 0, -1):
            if j < T:
                eq = codes[j:] == codes[:-j]
                L[:-j][eq] = j
        rows = np.repeat(np.arange(T), S)
        flat_codes = codes.ravel()
        ends = rows + L.ravel()
        # district-wide distinct counts D[c, v] for the chunk's current cycles
        g_rows = np.tile(self.gw, T)
        Dl = _window_counts(rows, ends, g_rows * V + flat_codes, T + w, G * V)[h:T]
        # every sensor belongs to one gateway: district counts are sums of gateway counts
        D = Dl.reshape(C, G, V).sum(axis=1)
        cur = codes[h:]
        r_idx = np.repeat(np.arange(C), S)
        cc = cur.ravel()
        g_idx = np.tile(self.gw, C)
        n = np.bincount(r_idx * V + cc, minlength=C * V).reshape(C, V)
        nl = np.bincount((r_idx * G + g_idx) * V + cc, minlength=C * G * V).reshape(C, G * V)
        dist, starts = self.ring_order(c0, c0 + C)
        vis1 = (dist - starts[:, :1]) % G  # turn number of each gateway, per pass
        vis2 = (dist - starts[:, 1:]) % G
        out: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}
        key_c = r_idx * V + cc
        key_l = (r_idx * G + g_idx) * V + cc
        D_rec, n_rec = D.reshape(-1)[key_c], n.reshape(-1)[key_c]
        # centralized: arrival (sensor) order
        order_c = np.argsort(key_c, kind="stable")
        rank_c = _group_rank(key_c, order_c)
        out["centralized"] = self._decide(rank_c, D_rec, n_rec, D_rec, C, S)
        # fully decentralized: each gateway alone, sensor order (a gateway's sensors are
        # contiguous, so the groups of key_l are contiguous runs of order_c)
        rank_l = _group_rank(key_l, order_c)
        out["fully_decentralized"] = self._decide(rank_l, Dl.reshape(-1)[key_l],
                                                  nl.reshape(-1)[key_l], D_rec, C, S)
        # deZent: pass 1 (coin < p_pub) before pass 2, each in ring order from its start
        est, counters = self._estimates(D)
        second = coins >= cfg.p_pub
        rows2 = r_idx.reshape(C, S)
        v1 = vis1[rows2, self.gw[None, :]].ravel()
        vis = np.where(second.ravel(), vis2[rows2, self.gw[None, :]].ravel(), v1)
        key_d = (key_c * 2 + second.ravel()) * G + vis
        order_d = np.argsort(key_d, kind="stable")
        rank_d = _group_rank(key_c, order_d)
        pub_d, info = self._decide(rank_d, est.reshape(-1)[key_c], n_rec, D_rec, C, S)
        passes = np.ones(C, dtype=np.int64)
        if cfg.rule == PAPER and cfg.p_pub < 1:
            # pass 2 runs when some coin-failed record still saw a positive count in pass 1:
            # fewer coin-passed records of its value came before it (pass-1 order) than allowed
            allowed = publishable(est.reshape(-1)[key_c], n_rec, cfg.z, cfg.rule)
            order_v = np.argsort(key_c * G + v1, kind="stable")
            before = _group_prefix(key_c, order_v, ~second.ravel())
            more = second.ravel() & (before < allowed)
            passes += more.reshape(C, S).any(axis=1)
        contested = np.zeros(C, dtype=bool)
        if counters is not None and cfg.rule == PAPER:
            contested = self._contested(counters, publishable(est, n, cfg.z, cfg.rule))
            for r in np.flatnonzero(contested).tolist():
                pub_d[r], passes[r] = self._replay(self._row(counters, r), values[r], coins[r],
                                                   (vis1[r], vis2[r]))
        info.update(passes=passes, contested=int(contested.sum()))
        info.update(self._traffic(pub_d, dist, starts, passes))
        if c0 < link_until:
            info["ce_view"] = self._ce_view(pub_d[: link_until - c0], dist, cur, c0)
        out["dezent"] = (pub_d, info)
        return out, dist

    def _traffic(self, pub: np.ndarray, dist: np.ndarray, starts: np.ndarray,
                 passes: np.ndarray) -> dict[str, int]:
        """Messages and bytes of deZent on each link, as the protocol core sends them: the
        collection round, each pass (:func:`~streamanon.dezent.order.pass_messages`), and
        either one tuple per message to the CE or the mix (a batch that grows along the ring
        from the CCC, whose share is padded with dummies to its records, then one delivery
        and ``n - 1`` acknowledgements)."""
        G, C = self.G, pub.shape[0]
        nb = self.spec.nbytes
        structure = 0
        if G > 1:
            p1 = np.array([pass_messages(int(s), G) for s in starts[:, 0]])
            p2 = np.array([pass_messages(int(s), G) for s in starts[:, 1]])
            structure = int(G * C + p1.sum() + (p2 * (passes >= 2)).sum())
        out = {"structure_messages": structure, "gw_gw_messages": structure,
               "gw_gw_bytes": structure * nb}
        n_pub = int(pub.sum())
        if self.cfg.publication != MIX:
            return {**out, "gw_ce_messages": n_pub, "gw_ce_bytes": n_pub * TUPLE_BYTES}
        size = item_bytes(self.cfg.mix_padding)
        per_gw = np.zeros((C, G), dtype=np.int64)
        rows, cols = np.nonzero(pub)
        np.add.at(per_gw, (rows, self.gw[cols]), 1)
        by_pos = np.take_along_axis(per_gw, np.argsort(dist, axis=1), axis=1)
        ccc = np.argmin(dist, axis=1)
        records = self.d.sn_per_gw[ccc]
        dummies = np.maximum(0, records - by_pos[:, 0])
        by_pos[:, 0] += dummies
        cum = np.cumsum(by_pos, axis=1)
        hops = int(cum[:, : G - 1].sum())
        return {**out, "gw_gw_messages": structure + 2 * (G - 1) * C,
                "gw_gw_bytes": structure * nb + hops * size, "mix_ring_bytes": hops * size,
                "mix_dummies": int(dummies.sum()), "gw_ce_messages": C,
                "gw_ce_bytes": int(cum[:, G - 1].sum()) * size}

    def _ce_view(self, pub: np.ndarray, dist: np.ndarray, cur: np.ndarray, c0: int
                 ) -> dict[str, np.ndarray]:
        """What the CE sees of each published tuple (sender, position in its frame, value
        code) and its true gateway, for the linkability metric (:mod:`..linkability`).

        Direct: the gateway's own frame, its tuples in sensor order. Mix: the deliverer's
        batch (the CCC's predecessor), in an order drawn uniformly at random (the last
        shuffle), among the cycle's tuples and the CCC's dummies."""
        G = self.G
        dist = dist[: pub.shape[0]]
        rows, cols = np.nonzero(pub)
        labels = self.gw[cols]
        if self.cfg.publication != MIX:
            key = rows * G + labels
            rank = _group_rank(key, np.argsort(key, kind="stable"))
            size = np.bincount(key, minlength=pub.shape[0] * G)[key]
            sender = labels
        else:
            deliverer = np.argmax(dist, axis=1)
            ccc = np.argmin(dist, axis=1)
            per_cycle = pub.sum(axis=1)
            size_c = per_cycle + np.maximum(0, self.d.sn_per_gw[ccc] - np.array(
                [int(pub[r, self.gw == ccc[r]].sum()) for r in range(pub.shape[0])]))
            keys = self.d.shuffle_keys(c0, c0 + pub.shape[0], self.S)
            rank = np.empty(len(rows), dtype=np.int64)
            first = np.searchsorted(rows, np.arange(pub.shape[0]))
            for r in range(pub.shape[0]):
                places = np.argsort(np.argsort(keys[r, : size_c[r]], kind="stable"))
                rank[first[r] : first[r] + per_cycle[r]] = places[: per_cycle[r]]
            size = size_c[rows]
            sender = deliverer[rows]
        return {"label": labels, "sender": sender, "decile": position_decile(rank, size),
                "value": cur[rows, cols], "fold": fold_of(c0 + rows)}

    def _decide(self, rank: np.ndarray, count: np.ndarray, n: np.ndarray, true: np.ndarray,
                C: int, S: int) -> tuple[np.ndarray, dict[str, Any]]:
        """Per record: published when its rank in the visiting order is below what the rule
        allows its value; also how many the *other* rule would publish (same order)."""
        z, rule = self.cfg.z, self.cfg.rule
        other = WINDOW if rule == PAPER else PAPER
        pub = (rank < publishable(count, n, z, rule)).reshape(C, S)
        n_other = int((rank < publishable(count, n, z, other)).sum())
        return pub, {f"published_{other}": n_other, "true_count": true.reshape(C, S)}

    def _estimates(self, D: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
        """The structure's count of every value with readings in Δt, per cycle, and the CBF's
        nonzero counters as ``(flat index r * m + j, value)``, sorted by index (sparse: a
        cycle touches a few hundred of the ``m`` counters). Values without readings get 0:
        they have no current record to decide on."""
        if self.pos is None:
            return D, None
        k, m = self.spec.k, self.spec.m
        r, v = np.nonzero(D)
        idx = (r[:, None] * m + self.pos[v]).ravel()
        uniq, inv = np.unique(idx, return_inverse=True)
        sums = np.bincount(inv, weights=np.repeat(D[r, v], k)).astype(np.int64)
        est = np.zeros_like(D)
        est[r, v] = sums[inv].reshape(-1, k).min(axis=1)
        return est, (uniq, sums)

    def _contested(self, counters: tuple[np.ndarray, np.ndarray], p: np.ndarray) -> np.ndarray:
        """Cycles where some cleaned counter is below the decrements the rule allows on it."""
        uniq, sums = counters
        k, m = self.spec.k, self.spec.m
        r, v = np.nonzero(p)
        at = np.searchsorted(uniq, (r[:, None] * m + self.pos[v]).ravel())  # type: ignore[index]
        demand = np.bincount(at, weights=np.repeat(p[r, v], k), minlength=len(uniq))
        cleaned = np.maximum(sums - (self.cfg.z - 1), 0)
        contested = np.zeros(p.shape[0], dtype=bool)
        contested[uniq[demand > cleaned] // m] = True
        return contested

    def _row(self, counters: tuple[np.ndarray, np.ndarray], r: int) -> np.ndarray:
        """The dense counters of cycle ``r`` of the chunk."""
        uniq, sums = counters
        m = self.spec.m
        lo, hi = np.searchsorted(uniq, [r * m, (r + 1) * m])
        row = np.zeros(m, dtype=np.int64)
        row[uniq[lo:hi] - r * m] = sums[lo:hi]
        return row

    def _replay(self, counters: np.ndarray, values: np.ndarray, coins: np.ndarray,
                visits: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, int]:
        """One contested cycle, record by record, with the protocol's publication step; each
        pass visits the gateways in its own order (``visits``: turn number per gateway)."""
        cbf: CountingStructure = CountingBloomFilter(self.spec.m, self.spec.k, self.spec.bits)
        cbf.counters = counters.astype(np.uint64)
        cbf.subtract_clamp(self.cfg.z - 1)
        published = np.zeros(self.S, dtype=bool)
        members = [np.flatnonzero(self.gw == g) for g in range(self.G)]
        done = {g: [False] * len(ix) for g, ix in enumerate(members)}
        passes, p_pub = 0, self.cfg.p_pub
        while True:
            more = False
            for g in np.argsort(visits[passes]).tolist():
                ix = members[g]
                got, m = publish_records(cbf, values[ix].tolist(), done[g], coins[ix], p_pub,
                                         self.cfg.rule)
                published[ix[got]] = True
                more |= m
            passes += 1
            if not more or passes == 2:
                return published, passes
            p_pub = 1.0


def _window_counts(rows: np.ndarray, ends: np.ndarray, bins: np.ndarray, T: int, B: int
                   ) -> np.ndarray:
    """``out[c, b]`` = records with bin ``b`` whose interval ``[row, end)`` covers ``c``."""
    diff = np.bincount(rows * B + bins, minlength=T * B)
    diff = diff - np.bincount(ends * B + bins, minlength=T * B)
    return np.cumsum(diff.reshape(T, B), axis=0)


def _group_prefix(keys: np.ndarray, order: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Per element, how many flagged elements with the same key come before it in ``order``
    (equal keys contiguous in ``order``)."""
    k = keys[order]
    f = flags[order].astype(np.int64)
    start = np.empty(len(k), dtype=bool)
    start[:1] = True
    start[1:] = k[1:] != k[:-1]
    incl = np.cumsum(f)
    excl = incl - f
    base = np.maximum.accumulate(np.where(start, excl, 0))
    out = np.empty(len(k), dtype=np.int64)
    out[order] = excl - base
    return out


def _group_rank(keys: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Rank of every element among equal ``keys``, counted in ``order`` (a sort of ``keys``
    or a refinement of it)."""
    k = keys[order]
    start = np.empty(len(k), dtype=bool)
    start[:1] = True
    start[1:] = k[1:] != k[:-1]
    pos = np.arange(len(k))
    first = np.maximum.accumulate(np.where(start, pos, 0))
    rank = np.empty(len(k), dtype=np.int64)
    rank[order] = pos - first
    return rank


@dataclass
class ProtocolRun:
    """What the pure protocol core did on a district (the slow, message-level engine)."""

    published: np.ndarray  # bool (cycles, sensors)
    ring_messages: int
    ring_bytes: int
    passes: int
    tuples: list[Any]
    ce_messages: int = 0
    ce_bytes: int = 0
    dummies: int = 0
    ce_view: dict[str, list[int]] = field(default_factory=lambda: {
        k: [] for k in ("label", "sender", "position", "size", "value", "fold")})


def run_protocol(district: District, cycles: int, config: SimConfig, *, start: int = 0,
                 id_mode: str = "sensor") -> ProtocolRun:
    """deZent through :class:`~streamanon.dezent.protocol.Gateway` objects, message by message.

    Same readings, coins and order draws as :func:`simulate`; real secure-sum masks (OS
    randomness), real byte encodings on every hop, and with ``publication = "mix"`` real
    sealing to a fresh CE key, real secret shuffles, and a CE that opens every batch (what it
    sees is kept in ``ce_view``). Meant for small districts: it is the executable specification
    the vectorized engine is tested against.

    Args:
        district: the district simulated.
        cycles: the number of cycles.
        config: the anonymization parameters.
        start: the first cycle.
        id_mode: how sensors are named in the protocol (``sensor`` or ``pseudonym``).
    """
    from streamanon.dezent.mix import MixKeys, decode_plaintext, open_sealed
    from streamanon.dezent.protocol import Gateway, ProtocolConfig, run_cycle

    spec = config.structure_spec(district)
    keys = MixKeys.generate() if config.publication == MIX else None
    pcfg = ProtocolConfig(z=config.z, delta_t=config.delta_t, structure=spec,
                          sensors_total=district.sensors, period=CYCLE_SECONDS,
                          rule=config.rule, p_pub=config.p_pub, id_mode=id_mode,
                          min_members=1,  # the paper's protocol: no minimum ring size
                          publication=config.publication,
                          publication_order=config.publication_order,
                          mix_key=keys.public_bytes if keys else None,
                          mix_padding=config.mix_padding)
    ring = Ring(district.gateways, district.config.seed, config.epoch_cycles,
                redraw=config.ring_redraw)
    gws = [Gateway(g, pcfg, ring) for g in range(district.gateways)]
    members = [np.flatnonzero(district.sn_gateway == g) for g in range(district.gateways)]
    index = {sid: i for i, sid in enumerate(district.sensor_ids)}
    code = {int(v): i for i, v in enumerate(district.domain())}
    w = config.window
    h0 = max(0, start - (w - 1))
    values = district.readings(h0, start + cycles)
    coins = district.coins(h0, start + cycles)
    draws = district.order_draws(h0, start + cycles)
    published = np.zeros((cycles, district.sensors), dtype=bool)
    run = ProtocolRun(published, 0, 0, 0, [])
    for c in range(h0, start + cycles):
        r = c - h0
        for g, ix in enumerate(members):
            gws[g].measure(c, [(district.sensor_ids[i], int(values[r, i])) for i in ix],
                           coins=coins[r, ix], order_draws=draws[r])
        if c < start:
            continue  # history only: readings before the simulated range are not anonymized
        res = run_cycle(gws, c)
        run.ring_messages += res.ring_messages
        run.ring_bytes += res.ring_bytes
        run.passes += res.passes
        run.tuples.extend(res.published)
        for tup in res.published:
            published[c - start, index[tup.sensor]] = True
        uid_sensor = {t.uid: t.sensor for t in res.published}
        for batch in res.delivered:  # the CE's side: open, drop dummies, keep what it sees
            assert keys is not None
            run.ce_messages += 1
            run.ce_bytes += len(batch.payload)
            opened = [decode_plaintext(open_sealed(keys.private_key, x)) for x in batch.items]
            run.dummies += sum(t.dummy for t in opened)
            deliverer = ring.from_ccc(c)[-1]
            for pos, t in enumerate(opened):
                if t.dummy:
                    continue
                view = run.ce_view
                view["label"].append(int(district.sn_gateway[index[uid_sensor[t.uid]]]))
                view["sender"].append(deliverer)
                view["position"].append(pos)
                view["size"].append(len(opened))
                view["value"].append(code[int(t.value)])  # type: ignore[arg-type]
                view["fold"].append(int(fold_of(np.array([c]))[0]))
        if keys is None:
            run.ce_messages += len(res.published)
            run.ce_bytes += TUPLE_BYTES * len(res.published)
    return run

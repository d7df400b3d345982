"""Per-scenario metrics: publication ratios, messages and bytes on each link, violations,
position bias and (deZent) gateway linkability.

Design: docs/design/simulation.md
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from streamanon.dezent.grid import CYCLES_PER_DAY
from streamanon.sim.district import ALL_TYPES
from streamanon.sim.linkability import channel, gateway_linkability

if TYPE_CHECKING:
    from streamanon.dezent.protocol import StructureSpec
    from streamanon.sim.config import SimConfig
    from streamanon.sim.district import District

READING_BYTES = 16
TUPLE_BYTES = 16


class ScenarioMetrics:
    """Accumulates one scenario's counts chunk by chunk."""

    def __init__(self, name: str, district: District, z: int) -> None:
        self.name = name
        self.z = z
        self.district = district
        G, n_types = district.gateways, len(ALL_TYPES)
        self.cycles = 0
        self.measured = 0
        self.published = 0
        self.published_other = 0
        self.violations = 0
        self.by_type = np.zeros(n_types, dtype=np.int64)
        self.by_position = np.zeros(G, dtype=np.int64)
        self.measured_by_position = np.zeros(G, dtype=np.int64)
        self.passes = 0
        self.contested = 0
        self.traffic: dict[str, int] = {}
        self.ce_view: list[dict[str, np.ndarray]] = []
        self.result: dict[str, Any] = {}

    def add_chunk(self, pub: np.ndarray, dist: np.ndarray, info: dict[str, Any]) -> None:
        d = self.district
        C, S = pub.shape
        self.cycles += C
        self.measured += C * S
        self.published += int(pub.sum())
        other = [k for k in info if k.startswith("published_")]
        self.published_other += int(info[other[0]])
        self.violations += int((pub & (info["true_count"] < self.z)).sum())
        self.by_type += np.bincount(d.sn_type, weights=pub.sum(axis=0),
                                    minlength=len(ALL_TYPES)).astype(np.int64)
        hops = dist[:, d.sn_gateway]
        self.by_position += np.bincount(hops[pub], minlength=d.gateways)
        self.measured_by_position += np.bincount(hops.ravel(), minlength=d.gateways)
        self.passes += int(np.sum(info.get("passes", 0)))
        self.contested += int(info.get("contested", 0))
        for key in ("structure_messages", "gw_gw_messages", "gw_gw_bytes", "gw_ce_messages",
                    "gw_ce_bytes", "mix_ring_bytes", "mix_dummies"):
            if key in info:
                self.traffic[key] = self.traffic.get(key, 0) + int(info[key])
        if "ce_view" in info:
            self.ce_view.append(info["ce_view"])

    def finish(self, spec: StructureSpec, config: SimConfig) -> None:
        """Messages and bytes per link, and the result dictionary."""
        d = self.district
        G = d.gateways
        ratio = self.published / max(1, self.measured)
        other_rule = "window" if config.rule == "paper" else "paper"
        sn_gw = self.measured
        gw_ce = self.measured if self.name == "centralized" else self.published
        gw_gw = gw_gw_bytes = 0
        gw_ce_bytes = gw_ce * TUPLE_BYTES
        if self.traffic:  # deZent: counted message by message by the engine
            gw_gw, gw_gw_bytes = self.traffic["gw_gw_messages"], self.traffic["gw_gw_bytes"]
            gw_ce, gw_ce_bytes = self.traffic["gw_ce_messages"], self.traffic["gw_ce_bytes"]
        types_present = np.bincount(d.sn_type, minlength=len(ALL_TYPES)) * self.cycles
        per_type = {t.name: round(float(self.by_type[i] / types_present[i]), 6)
                    for i, t in enumerate(ALL_TYPES) if types_present[i]}
        per_pos = (self.by_position / np.maximum(1, self.measured_by_position)).round(6)
        seen = self.measured_by_position > 0
        bias = (float(per_pos[seen].max() / per_pos[seen].min())
                if seen.any() and per_pos[seen].min() > 0 else None)
        days = self.cycles / CYCLES_PER_DAY
        total = sn_gw * READING_BYTES + gw_gw_bytes + gw_ce_bytes
        self.result = {
            "measured": self.measured,
            "published": self.published,
            "publication_ratio": round(ratio, 6),
            "publication_ratio_by_rule": {
                config.rule: round(ratio, 6),
                other_rule: round(self.published_other / max(1, self.measured), 6),
            },
            "violations": self.violations,
            "messages": {"sn_gw": sn_gw, "gw_gw": gw_gw, "gw_ce": gw_ce,
                         "total": sn_gw + gw_gw + gw_ce},
            "bytes": {"sn_gw": sn_gw * READING_BYTES, "gw_gw": gw_gw_bytes,
                      "gw_ce": gw_ce_bytes, "total": total},
            "bytes_per_day": round(total / days),
            "per_client_type": per_type,
            "per_ring_position": per_pos.tolist(),
            "position_bias": round(bias, 6) if bias is not None else None,
        }
        if self.name == "dezent":
            self.result["publication_passes"] = self.passes
            self.result["contested_cycles"] = self.contested
            self.result["structure_bytes"] = spec.nbytes
            self.result["structure_messages"] = self.traffic.get("structure_messages", 0)
            if "mix_ring_bytes" in self.traffic:
                self.result["mix"] = {"ring_bytes": self.traffic["mix_ring_bytes"],
                                      "dummies": self.traffic["mix_dummies"]}
            self.result["gateway_linkability"] = self.linkability(G)

    def linkability(self, G: int) -> dict[str, Any]:
        """The CE's guess of the sending gateway (:mod:`.linkability`) on the first simulated
        day: from everything it sees (sender, position, value), from the channel alone
        (sender and position: what the publication mode controls) and from the content alone
        (the value: what any publication of the tuple reveals)."""
        keys = ("label", "sender", "decile", "value", "fold")
        view = {k: np.concatenate([v[k] for v in self.ce_view]) for k in keys} \
            if self.ce_view else {k: np.zeros(0, dtype=np.int64) for k in keys}
        view["channel"] = channel(view["sender"], view["decile"])
        cards = {"channel": 10 * G, "value": int(view["value"].max(initial=0)) + 1}
        out: dict[str, Any] = {}
        for name, cols in (("what_the_ce_sees", ("channel", "value")),
                           ("channel_only", ("channel",)),
                           ("content_only", ("value",))):
            r = gateway_linkability(view["label"], np.column_stack([view[c] for c in cols]),
                                    [cards[c] for c in cols], G, view["fold"])
            for k in ("tuples", "floor", "majority_share"):
                out[k] = r.pop(k)
            out[name] = r
        return out

    def to_dict(self) -> dict[str, Any]:
        return dict(self.result)

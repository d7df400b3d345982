"""Per-scenario metrics: publication ratios, messages and bytes on each link, violations.

Wire sizes (a choice; the paper counts messages): a reading SN->GW and a published tuple
GW->CE are ``(u32 sensor or pseudonym id, u32 value, u64 timestamp)`` = 16 bytes; a ring
message GW<->GW is the encoded counting structure (header + ``m * b`` bits).

A *violation* is a published tuple whose true number of distinct sensor nodes reporting its
value within Δt (current cycle included) is below ``z``: the same test as the independent
checker :func:`streamanon.zanon.verify.check_z` with ``exact=False``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from streamanon.sim.district import CLIENT_TYPES

if TYPE_CHECKING:
    from streamanon.dezent.protocol import StructureSpec
    from streamanon.sim.district import District
    from streamanon.sim.scenarios import SimConfig

READING_BYTES = 16
TUPLE_BYTES = 16


class ScenarioMetrics:
    """Accumulates one scenario's counts chunk by chunk."""

    def __init__(self, name: str, district: District, z: int) -> None:
        self.name = name
        self.z = z
        self.district = district
        G, n_types = district.gateways, len(CLIENT_TYPES)
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
                                    minlength=len(CLIENT_TYPES)).astype(np.int64)
        hops = dist[:, d.sn_gateway]
        self.by_position += np.bincount(hops[pub], minlength=d.gateways)
        self.measured_by_position += np.bincount(hops.ravel(), minlength=d.gateways)
        self.passes += int(np.sum(info.get("passes", 0)))
        self.contested += int(info.get("contested", 0))

    def finish(self, spec: StructureSpec, config: SimConfig) -> None:
        """Messages and bytes per link, and the result dictionary."""
        d = self.district
        G = d.gateways
        ratio = self.published / max(1, self.measured)
        other_rule = "window" if config.rule == "paper" else "paper"
        sn_gw = self.measured
        gw_ce = self.measured if self.name == "centralized" else self.published
        gw_gw = 0
        if self.name == "dezent" and G > 1:
            gw_gw = G * (self.cycles + self.passes)  # collection round + each pass
        types_present = np.bincount(d.sn_type, minlength=len(CLIENT_TYPES)) * self.cycles
        per_type = {t.name: round(float(self.by_type[i] / types_present[i]), 6)
                    for i, t in enumerate(CLIENT_TYPES) if types_present[i]}
        per_pos = (self.by_position / np.maximum(1, self.measured_by_position)).round(6)
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
            "bytes": {"sn_gw": sn_gw * READING_BYTES, "gw_gw": gw_gw * spec.nbytes,
                      "gw_ce": gw_ce * TUPLE_BYTES,
                      "total": sn_gw * READING_BYTES + gw_gw * spec.nbytes
                      + gw_ce * TUPLE_BYTES},
            "per_client_type": per_type,
            "per_ring_position": per_pos.tolist(),
        }
        if self.name == "dezent":
            self.result["publication_passes"] = self.passes
            self.result["contested_cycles"] = self.contested
            self.result["structure_bytes"] = spec.nbytes

    def to_dict(self) -> dict[str, Any]:
        return dict(self.result)

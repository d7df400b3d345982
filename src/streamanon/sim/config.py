"""The parameters of a simulated anonymization (:class:`SimConfig`); the district has its own
:class:`~streamanon.sim.district.DistrictConfig`.

>>> SimConfig(z=3).window
9
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamanon.dezent.cbf import cbf_parameters
from streamanon.dezent.grid import CYCLE_SECONDS, CYCLES_PER_DAY
from streamanon.dezent.mix import DEFAULT_PADDING, check_padding
from streamanon.dezent.order import PAPER as PAPER_ORDER
from streamanon.dezent.order import check_order
from streamanon.dezent.protocol import (
    DEFAULT_P_PUB,
    PUBLICATIONS,
    StructureSpec,
    window_cycles,
)
from streamanon.dezent.rules import PAPER, check_rule
from streamanon.dezent.securesum import bits_for, max_true_count
from streamanon.errors import ConfigError

if TYPE_CHECKING:
    from streamanon.sim.district import District


@dataclass(frozen=True)
class SimConfig:
    """Parameters of the anonymization (the district has its own :class:`DistrictConfig`)."""

    z: int = 10
    delta_t: float = 7260.0
    p_pub: float = DEFAULT_P_PUB
    rule: str = PAPER
    structure: str = "exact"  # the defaults of every entry point: docs/guides/dezent-simulation.md
    fp_rate: float = 0.05
    counter_bits: int | None = None  # None: the narrowest width for the largest true count
    max_hashes: int | None = 6  # the reference's cap; None: the paper's k = (m/X) ln 2
    cbf_keys: int | None = None
    epoch_cycles: int = CYCLES_PER_DAY  # pseudonym epochs
    ring_redraw: int | None = None  # None: the ring is fixed at setup (the paper)
    publication: str = "direct"  # or "mix"
    publication_order: str = PAPER_ORDER  # or "random"
    mix_padding: int = DEFAULT_PADDING

    def __post_init__(self) -> None:
        if self.z < 1:
            raise ConfigError(f"z must be >= 1, got {self.z}")
        if not self.delta_t >= 0:
            raise ConfigError(f"delta_t must be >= 0, got {self.delta_t}")
        if not 0 < self.p_pub <= 1:
            raise ConfigError(f"p_pub must be in (0, 1], got {self.p_pub}")
        check_rule(self.rule)
        if self.structure not in ("cbf", "exact"):
            raise ConfigError(f"structure must be cbf or exact, got {self.structure!r}")
        if not 0 < self.fp_rate < 1:
            raise ConfigError(f"fp_rate must be in (0, 1), got {self.fp_rate}")
        if self.counter_bits is not None and not 1 <= self.counter_bits <= 63:
            raise ConfigError(f"counter_bits must be in 1..63, got {self.counter_bits}")
        if self.publication not in PUBLICATIONS:
            raise ConfigError(f"publication must be one of {PUBLICATIONS}, got "
                              f"{self.publication!r}")
        if self.ring_redraw is not None and self.ring_redraw < 1:
            raise ConfigError(f"ring_redraw must be >= 1 cycle, got {self.ring_redraw}")
        check_order(self.publication_order)
        check_padding(self.mix_padding)

    @property
    def window(self) -> int:
        return window_cycles(self.delta_t, CYCLE_SECONDS)

    def structure_spec(self, district: District) -> StructureSpec:
        """The counting structure every gateway agrees on at setup.

        CBF sizing: the reference's ``X = 10 x SNs per gateway x cycles in Δt`` with the
        district's *mean* sensors per gateway instead of the CCC's own (so the size does not
        change with the rotating CCC and every gateway can compute it at setup), ``P`` =
        ``fp_rate``; ``cbf_keys`` overrides ``X``. Counter width: ``counter_bits``, or by
        default the narrowest that holds the largest true count (sensor nodes for the exact
        counter, ``k x`` sensor nodes ``x`` cycles in Δt for a CBF counter:
        :func:`~streamanon.dezent.securesum.max_true_count`).
        """
        if self.structure == "exact":
            domain = tuple(int(v) for v in district.domain())
            return StructureSpec("exact", len(domain), 1, self.bits_for(district, "exact", 1),
                                 domain)
        keys = self.cbf_keys or max(1, round(10 * district.sensors / district.gateways
                                             * self.window))
        m, k = cbf_parameters(keys, self.fp_rate, self.max_hashes)
        return StructureSpec("cbf", m, k, self.bits_for(district, "cbf", k))

    def bits_for(self, district: District, kind: str, k: int) -> int:
        if self.counter_bits is not None:
            return self.counter_bits
        return bits_for(max_true_count(kind, k, district.sensors, self.window))


__all__ = ["SimConfig"]

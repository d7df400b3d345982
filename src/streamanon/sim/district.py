"""A smart-metering district from the BDEW standard load profiles (the paper's Sec. VI data).

Design: docs/design/simulation.md
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from streamanon.dezent.grid import CYCLES_PER_DAY, bucket, bucket_grid
from streamanon.errors import ConfigError

PROFILES = ("h0_dyn", "g1", "g2", "g4", "g5", "h0", "l0", "l1", "l2")
KINDS = ("spec", "reference")
"""How the district's data is made: ``spec`` follows the specification (one-sided noise,
rounded sensor-node counts, the dynamised household profile, cycle ``c`` is the quarter hour
starting at ``c``); ``reference`` the authors' simulation (see :class:`DistrictConfig`)."""


@dataclass(frozen=True)
class ClientType:
    name: str
    share: float
    annual_kwh: float
    profile: str


CLIENT_TYPES: tuple[ClientType, ...] = (
    ClientType("household_1p", 0.471, 2105, "h0_dyn"),
    ClientType("household_2p", 0.299, 3470, "h0_dyn"),
    ClientType("household_3p", 0.125, 5047, "h0_dyn"),
    ClientType("household_4p", 0.090, 5047, "h0_dyn"),
    ClientType("workshop", 0.0039, 6000, "g1"),
    ClientType("restaurant", 0.0051, 20000, "g2"),
    ClientType("store", 0.0051, 17000, "g4"),
    ClientType("hairdresser", 0.0010, 7500, "g4"),
    ClientType("bakery", 0.0001, 25000, "g5"),
)
FARM_TYPES: tuple[ClientType, ...] = (
    # BDEW agricultural profiles; shares are within the farm share of the district
    # (DistrictConfig.farm_share), annual consumption a typical German farm's of each kind
    ClientType("farm", 1 / 3, 20000, "l0"),
    ClientType("dairy_farm", 1 / 3, 30000, "l1"),
    ClientType("other_farm", 1 / 3, 10000, "l2"),
)
ALL_TYPES: tuple[ClientType, ...] = CLIENT_TYPES + FARM_TYPES


def client_shares(farm_share: float) -> np.ndarray:
    """Probability of each of :data:`ALL_TYPES`: the authors' Berlin mix scaled to
    ``1 - farm_share``, the farms' shares to ``farm_share``."""
    base = np.array([t.share for t in CLIENT_TYPES])
    farms = np.array([t.share for t in FARM_TYPES])
    shares = np.concatenate((base / base.sum() * (1 - farm_share),
                             farms / farms.sum() * farm_share))
    return shares / shares.sum()


@lru_cache(maxsize=4)
def load_profiles(year: int = 2024) -> np.ndarray:
    """Mean power in W per quarter hour at 1,000 kWh/a, shape ``(len(PROFILES), cycles)``.

    demandlib 0.2.2 calls ``warnings.simplefilter("error")`` inside the profile builder, which
    turns pandas' deprecation notices into exceptions and leaks into the caller; the filter is
    neutralised for the duration of the call only.
    """
    from demandlib import bdew  # heavy (pandas): imported on first use only

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        original = warnings.simplefilter
        warnings.simplefilter = lambda *a, **k: None  # type: ignore[assignment]
        try:
            frame = bdew.ElecSlp(year=year).get_scaled_power_profiles(
                {p: 1000 for p in PROFILES})
        finally:
            warnings.simplefilter = original
    out = np.ascontiguousarray(frame[list(PROFILES)].to_numpy(dtype=np.float64).T * 1000.0)
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class DistrictConfig:
    """The district's shape; ``seed`` drives every random choice of the data.

    ``kind = "spec"`` (default): a reading is the profile value scaled to the client's annual
    consumption "plus up to 10 % noise" (the specification; the paper names no noise): a
    uniform factor in ``[0, noise]``, one-sided; sensor nodes per gateway a normal around
    ``max_sn / 2`` (sd ``sn_sd``) rounded and clipped to ``1..max_sn``; households on the
    dynamised profile ``h0_dyn``; cycle ``c`` reads the quarter hour that starts at it.

    ``kind = "reference"``: the authors' simulation's data choices: the scaled value truncated
    to an integer W plus an integer noise uniform in ``0..floor(value x noise)``; sensor
    nodes the floor of a normal truncated to ``[0, max_sn]``, at least 1 (mean ~9.5 for 20);
    households on the static H0 table; cycle ``c`` reads the table row labelled with its
    start time, which is the quarter hour *ending* there (the previous one).

    ``farm_share``: share of the BDEW agricultural profiles L0-L2 (:data:`FARM_TYPES`) in
    the client mix, the rest the authors' Berlin mix (which has no farms: 0 by default).
    """

    gateways: int = 25
    max_sn: int = 20
    seed: int = 1
    year: int = 2024
    noise: float = 0.1
    sn_sd: float = 2.0
    kind: str = "spec"
    farm_share: float = 0.0

    def __post_init__(self) -> None:
        if self.gateways < 1:
            raise ConfigError(f"gateways must be >= 1, got {self.gateways}")
        if self.max_sn < 1:
            raise ConfigError(f"max_sn must be >= 1, got {self.max_sn}")
        if not 0 <= self.noise < 1:
            raise ConfigError(f"noise must be in [0, 1), got {self.noise}")
        if self.kind not in KINDS:
            raise ConfigError(f"district kind must be one of {KINDS}, got {self.kind!r}")
        if not 0 <= self.farm_share <= 1:
            raise ConfigError(f"farm_share must be in [0, 1], got {self.farm_share}")


class District:
    """Gateways, their sensor nodes and the sensors' bucketed readings for any cycle range."""

    def __init__(self, config: DistrictConfig) -> None:
        self.config = config
        rng = np.random.default_rng([config.seed, 0])
        if config.kind == "reference":
            per_gw = np.floor(_truncated_normal(rng, config.max_sn / 2, config.sn_sd, 0.0,
                                                float(config.max_sn), config.gateways))
        else:
            per_gw = np.rint(rng.normal(config.max_sn / 2, config.sn_sd, config.gateways))
        self.sn_per_gw = np.clip(per_gw, 1, config.max_sn).astype(np.int64)
        self.sn_gateway = np.repeat(np.arange(config.gateways), self.sn_per_gw)
        self.sn_type = rng.choice(len(ALL_TYPES), size=self.sensors,
                                  p=client_shares(config.farm_share))
        household = "h0" if config.kind == "reference" else "h0_dyn"
        self._profile_row = np.array(
            [PROFILES.index(household if ALL_TYPES[t].profile == "h0_dyn"
                            else ALL_TYPES[t].profile) for t in self.sn_type], dtype=np.int64)
        self._scale = np.array([ALL_TYPES[t].annual_kwh / 1000.0 for t in self.sn_type])
        first = np.concatenate(([0], np.cumsum(self.sn_per_gw)[:-1]))
        local = np.arange(self.sensors) - np.repeat(first, self.sn_per_gw)
        self.sensor_ids = [f"gw{g:03d}-sn{j:03d}" for g, j in
                           zip(self.sn_gateway.tolist(), local.tolist(), strict=True)]

    @property
    def gateways(self) -> int:
        return self.config.gateways

    @property
    def sensors(self) -> int:
        return int(self.sn_per_gw.sum())

    @property
    def cycles_available(self) -> int:
        return load_profiles(self.config.year).shape[1]

    def profiles(self) -> np.ndarray:
        """The profile values cycle ``c`` reads (W at 1,000 kWh/a), shape like
        :func:`load_profiles`: the reference's alignment shifts them by one quarter hour."""
        prof = load_profiles(self.config.year)
        if self.config.kind == "reference":
            return np.roll(prof, 1, axis=1)
        return prof

    def max_reading(self) -> float:
        """An upper bound of every reading (for the exact counter's domain)."""
        peaks = load_profiles(self.config.year).max(axis=1)
        return float((peaks[self._profile_row] * self._scale).max() * (1 + self.config.noise))

    def domain(self) -> np.ndarray:
        """All bucket values a reading of this district can take (sorted)."""
        return bucket_grid(self.max_reading())

    def readings_w(self, c0: int, c1: int) -> np.ndarray:
        """Readings in W (before bucketing) of cycles ``[c0, c1)``, shape ``(c1 - c0, S)``."""
        if not 0 <= c0 <= c1 <= self.cycles_available:
            raise ConfigError(f"cycles [{c0}, {c1}) outside 0..{self.cycles_available}")
        prof = self.profiles()
        base = prof[:, c0:c1][self._profile_row].T * self._scale
        u = self._uniforms(1, c0, c1, self.sensors)
        if self.config.kind == "reference":
            whole = np.floor(base + 1e-9)
            top = np.floor(whole * self.config.noise + 1e-9)  # randint(0, int(v / 10))
            return whole + np.floor(u * (top + 1))
        return base * (1.0 + self.config.noise * u)

    def readings(self, c0: int, c1: int) -> np.ndarray:
        """Bucketed readings (int W) of cycles ``[c0, c1)``, shape ``(c1 - c0, S)``."""
        return bucket(self.readings_w(c0, c1))

    def coins(self, c0: int, c1: int) -> np.ndarray:
        """Publication coins (uniform [0, 1)) of cycles ``[c0, c1)``, one per reading."""
        return self._uniforms(2, c0, c1, self.sensors)

    def order_draws(self, c0: int, c1: int) -> np.ndarray:
        """Per cycle, two uniforms placing the starts of publication passes 1 and 2."""
        return self._uniforms(3, c0, c1, 2)

    def shuffle_keys(self, c0: int, c1: int, width: int) -> np.ndarray:
        """Per cycle, ``width`` uniforms whose ranks model the mix batch's secret order."""
        return self._uniforms(4, c0, c1, width)

    def _uniforms(self, stream: int, c0: int, c1: int, width: int) -> np.ndarray:
        """Uniforms [0, 1) of cycles ``[c0, c1)``, ``width`` per cycle, drawn per day from
        ``default_rng([seed, stream, day])`` (any chunking gives the same values)."""
        out = np.empty((c1 - c0, width))
        for day in range(c0 // CYCLES_PER_DAY, (c1 - 1) // CYCLES_PER_DAY + 1 if c1 > c0 else 0):
            rng = np.random.default_rng([self.config.seed, stream, day])
            day_values = rng.random((CYCLES_PER_DAY, width))
            lo, hi = max(c0, day * CYCLES_PER_DAY), min(c1, (day + 1) * CYCLES_PER_DAY)
            out[lo - c0 : hi - c0] = day_values[lo - day * CYCLES_PER_DAY :
                                                hi - day * CYCLES_PER_DAY]
        return out


def _truncated_normal(rng: np.random.Generator, mean: float, sd: float, low: float,
                      high: float, size: int) -> np.ndarray:
    """``size`` draws of a normal truncated to ``[low, high]`` (by rejection)."""
    out = np.empty(size)
    for i in range(size):
        while True:
            x = rng.normal(mean, sd)
            if low <= x <= high:
                out[i] = x
                break
    return out

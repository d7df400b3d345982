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

PROFILES = ("h0_dyn", "g1", "g2", "g4", "g5")


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
    """The district's shape; ``seed`` drives every random choice of the data."""

    gateways: int = 25
    max_sn: int = 20
    seed: int = 1
    year: int = 2024
    noise: float = 0.1
    sn_sd: float = 2.0

    def __post_init__(self) -> None:
        if self.gateways < 1:
            raise ConfigError(f"gateways must be >= 1, got {self.gateways}")
        if self.max_sn < 1:
            raise ConfigError(f"max_sn must be >= 1, got {self.max_sn}")
        if not 0 <= self.noise < 1:
            raise ConfigError(f"noise must be in [0, 1), got {self.noise}")


class District:
    """Gateways, their sensor nodes and the sensors' bucketed readings for any cycle range."""

    def __init__(self, config: DistrictConfig) -> None:
        self.config = config
        rng = np.random.default_rng([config.seed, 0])
        per_gw = np.rint(rng.normal(config.max_sn / 2, config.sn_sd, config.gateways))
        self.sn_per_gw = np.clip(per_gw, 1, config.max_sn).astype(np.int64)
        self.sn_gateway = np.repeat(np.arange(config.gateways), self.sn_per_gw)
        shares = np.array([t.share for t in CLIENT_TYPES])
        self.sn_type = rng.choice(len(CLIENT_TYPES), size=self.sensors, p=shares / shares.sum())
        self._profile_row = np.array([PROFILES.index(CLIENT_TYPES[t].profile)
                                      for t in self.sn_type], dtype=np.int64)
        self._scale = np.array([CLIENT_TYPES[t].annual_kwh / 1000.0 for t in self.sn_type])
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
        prof = load_profiles(self.config.year)
        base = prof[:, c0:c1][self._profile_row].T * self._scale
        noise = np.empty_like(base)
        day0, day1 = c0 // CYCLES_PER_DAY, (c1 - 1) // CYCLES_PER_DAY if c1 > c0 else -1
        for day in range(day0, day1 + 1):
            rng = np.random.default_rng([self.config.seed, 1, day])
            day_noise = rng.uniform(-self.config.noise, self.config.noise,
                                    (CYCLES_PER_DAY, self.sensors))
            lo, hi = max(c0, day * CYCLES_PER_DAY), min(c1, (day + 1) * CYCLES_PER_DAY)
            noise[lo - c0 : hi - c0] = day_noise[lo - day * CYCLES_PER_DAY :
                                                 hi - day * CYCLES_PER_DAY]
        return base * (1.0 + noise)

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

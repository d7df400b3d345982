"""An ASHRAE-shaped stream (Great Energy Predictor III, electricity meter), seeded, and a loader.

Prink evaluates CASTLE on the ASHRAE GEP III electricity readings of 89 buildings in 2016. The
data set cannot be downloaded here, so :func:`generate` builds a stream with the same schema,
sizes, ranges and distinct counts (spec ``castle.md``): building attributes fixed per building,
weather per site and hour (smooth seasonal and daily cycles plus noise, snapped to as many
distinct values as the real columns have), one row per building and hour, ordered by time.
:func:`load_real` builds the same stream from the real files for users who have them.

Timestamps are seconds since the epoch (numeric, so they generalize as ranges).

>>> rows = list(generate(178, seed=1))
>>> len(rows), rows[0]["timestamp"] == rows[88]["timestamp"] < rows[89]["timestamp"]
(178, True)
>>> sorted(rows[0]) == sorted(COLUMNS)
True
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

COLUMNS = [
    "building_id", "timestamp", "site_id", "primary_use", "square_feet", "year_built",
    "floor_count", "air_temperature", "cloud_coverage", "dew_temperature", "precip_depth_1_hr",
    "sea_level_pressure", "wind_direction", "wind_speed", "meter_reading",
]
NUMERIC_QI = [
    "square_feet", "year_built", "floor_count", "air_temperature", "cloud_coverage",
    "dew_temperature", "sea_level_pressure", "wind_direction", "wind_speed", "timestamp",
]
#: The seven numeric quasi-identifiers the CASTLEGUARD comparison (loss 0.66) is reported on.
SEVEN_NUMERIC = [
    "square_feet", "year_built", "floor_count", "air_temperature", "dew_temperature",
    "sea_level_pressure", "wind_speed",
]
#: The primary_use hierarchy (root first): 9 leaves; the 89 buildings use the first 7.
PRIMARY_USE_PATHS = [
    ["public", "education", "Education"],
    ["public", "administrative", "Public services"],
    ["public", "leisure", "Entertainment/public assembly"],
    ["private", "commercial", "Office"],
    ["private", "Lodging/residential"],
    ["private", "commercial", "Retail"],
    ["private", "Parking"],
    ["public", "leisure", "Religious worship"],
    ["private", "Healthcare"],
]
USES = [p[-1] for p in PRIMARY_USE_PATHS]
T0 = int(datetime(2016, 1, 1, tzinfo=UTC).timestamp())
HOURS_2016 = 366 * 24
N_BUILDINGS = 89

# (lo, hi, distinct values) from the spec
_RANGES = {
    "air_temperature": (1.1, 35.0, 59),
    "cloud_coverage": (0.0, 9.0, 4),
    "dew_temperature": (-9.4, 17.8, 49),
    "precip_depth_1_hr": (-1.0, 8.0, 4),
    "sea_level_pressure": (1007.8, 1031.7, 228),
    "wind_direction": (0.0, 360.0, 37),
    "wind_speed": (0.0, 12.9, 24),
}


def rules_toml(delta_domain: bool = True) -> str:
    """The rules of the paper's evaluation (all numeric QIs as ranges, primary_use as a DGH)."""
    return _rules_toml(NUMERIC_QI)


def _rules_toml(numeric: Sequence[str]) -> str:
    """Rules of the ASHRAE stream: ``numeric`` as ranges, ``primary_use`` as a DGH,
    ``meter_reading`` sensitive."""
    lines = ['id = "building_id"', 'time = "timestamp"', ""]
    for name in numeric:
        lines += ["[[attribute]]", f'name = "{name}"', 'generalizer = "range"', ""]
    paths = ", ".join("[" + ", ".join(f'"{p}"' for p in path) + "]"
                      for path in PRIMARY_USE_PATHS)
    lines += ["[[attribute]]", 'name = "primary_use"', 'generalizer = "hierarchy"',
              f"paths = [{paths}]", "", "[[attribute]]", 'name = "meter_reading"',
              "sensitive = true", ""]
    return "\n".join(lines)


def _grid(lo: float, hi: float, n: int) -> np.ndarray:
    return np.round(np.linspace(lo, hi, n), 1)


def _snap(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    idx = np.clip(np.searchsorted(grid, x), 1, len(grid) - 1)
    left, right = grid[idx - 1], grid[idx]
    return np.where(x - left <= right - x, left, right)


def _weather(rng: np.random.Generator, hours: int) -> dict[str, np.ndarray]:
    h = np.arange(hours)
    season = -np.cos(2 * np.pi * (h / 24 - 15) / 366)  # coldest mid January
    day = -np.cos(2 * np.pi * ((h % 24) - 3) / 24)
    def ar(scale: float) -> np.ndarray:
        noise = rng.normal(0, scale, hours)
        out = np.empty(hours)
        acc = 0.0
        for i, v in enumerate(noise.tolist()):
            acc = 0.95 * acc + v
            out[i] = acc
        return out
    w: dict[str, np.ndarray] = {}
    mid = lambda name: (_RANGES[name][0] + _RANGES[name][1]) / 2  # noqa: E731
    half = lambda name: (_RANGES[name][1] - _RANGES[name][0]) / 2  # noqa: E731
    raw = {
        "air_temperature": mid("air_temperature") + half("air_temperature")
        * (0.55 * season + 0.25 * day) + ar(0.6),
        "dew_temperature": mid("dew_temperature") + half("dew_temperature")
        * (0.6 * season + 0.1 * day) + ar(0.5),
        "sea_level_pressure": mid("sea_level_pressure") - half("sea_level_pressure")
        * 0.5 * season + ar(1.2),
        "wind_speed": 4.0 + 2.5 * day + np.abs(ar(1.0)),
        "wind_direction": (200 + ar(40.0)) % 360,
        "cloud_coverage": 3 + ar(0.7),
        "precip_depth_1_hr": np.where(rng.random(hours) < 0.9, -1.0, rng.exponential(2, hours)),
    }
    for name, x in raw.items():
        lo, hi, n = _RANGES[name]
        grid = _grid(lo, hi, n)
        snapped = _snap(np.clip(x, lo, hi), grid)
        snapped[0], snapped[-1] = lo, hi  # the spec's ranges are reached
        w[name] = snapped
    return w


def _buildings(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    sq = np.sort(rng.choice(np.arange(388, 420885), size=n - 2, replace=False))
    square_feet = np.concatenate(([387], sq, [420885]))
    years = np.sort(rng.choice(np.arange(1904, 2016), size=56, replace=False))
    years = np.concatenate(([1903], years, [2016]))
    year_built = np.concatenate((years, rng.choice(years, size=max(0, n - len(years)))))[:n]
    floors = np.concatenate((np.arange(1, 15)[np.arange(14) != 12],
                             rng.integers(1, 8, size=max(0, n - 13))))[:n]
    use = np.concatenate((np.arange(7), rng.choice(7, size=max(0, n - 7),
                                                   p=[.4, .2, .1, .15, .1, .03, .02])))[:n]
    perm = rng.permutation(n)
    return {
        "square_feet": square_feet[perm], "year_built": year_built[rng.permutation(n)],
        "floor_count": floors[rng.permutation(n)], "use": use[rng.permutation(n)],
        "scale": rng.uniform(0.2, 1.0, n),
    }


def generate(n: int | None = None, *, seed: int = 1, n_buildings: int = N_BUILDINGS,
             hours: int = HOURS_2016) -> Iterator[dict[str, Any]]:
    """``n`` rows (default: every building every hour of 2016) ordered by time, then building."""
    rng = np.random.default_rng(seed)
    weather = _weather(rng, hours)
    b = _buildings(rng, n_buildings)
    peak = 2293.88
    base = b["square_feet"] / 420885 * b["scale"]
    total = n if n is not None else hours * n_buildings
    count = 0
    for hour in range(hours):
        if count >= total:
            return
        temp = weather["air_temperature"][hour]
        load = base * (0.6 + 0.25 * np.sin(np.pi * ((hour % 24) - 6) / 12) ** 2
                       + 0.15 * (temp - 1.1) / 33.9)
        reading = np.round(np.clip(load * peak * rng.lognormal(0, 0.08, n_buildings), 0, peak), 4)
        if hour == 0:
            reading[0] = 0.0  # the spec's range 0..2293.88 is reached
        elif hour == hours // 2:
            reading[int(np.argmax(base))] = peak
        ts = T0 + 3600 * hour
        wx = {name: float(col[hour]) for name, col in weather.items()}
        for bid in range(n_buildings):
            if count >= total:
                return
            count += 1
            yield {
                "building_id": bid, "timestamp": ts, "site_id": 0,
                "primary_use": USES[int(b["use"][bid])],
                "square_feet": int(b["square_feet"][bid]),
                "year_built": int(b["year_built"][bid]),
                "floor_count": int(b["floor_count"][bid]),
                **wx,
                "meter_reading": float(reading[bid]),
            }


def write_csv(path: str | Path, rows: Iterable[dict[str, Any]]) -> Path:
    """Write rows as CSV with the :data:`COLUMNS` header (missing values as empty fields)."""
    path = Path(path)
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow(["" if r.get(c) is None else r[c] for c in COLUMNS])
    return path


def _num(text: str) -> float | None:
    return float(text) if text.strip() else None


def load_real(directory: str | Path, buildings: Iterable[int] | None = None, *,
              paper_filter: bool = False, drop_missing: bool = False
              ) -> list[dict[str, Any]]:
    """The same stream from the real files (``train.csv``, ``building_metadata.csv``,
    ``weather_train.csv``), electricity meter (0) only, ordered by time then building.

    ``paper_filter`` applies Prink's selection (Sect. 4.2): only buildings with both a
    ``year_built`` and a ``floor_count``, and only readings of 2016 that have a weather row
    for their site and hour (the merge of the three files is an inner join; on the real
    files the paper reports 321,728 tuples of 89 buildings). ``drop_missing`` also drops
    rows with an empty quasi-identifier. Otherwise missing values stay ``None`` (the reader
    then rejects or the rules skip them).
    """
    d = Path(directory)
    wanted = set(buildings) if buildings is not None else None
    meta: dict[int, dict[str, Any]] = {}
    with (d / "building_metadata.csv").open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            bid = int(r["building_id"])
            if paper_filter and not (r["year_built"].strip() and r["floor_count"].strip()):
                continue
            if wanted is None or bid in wanted:
                meta[bid] = {
                    "site_id": int(r["site_id"]), "primary_use": r["primary_use"],
                    "square_feet": _num(r["square_feet"]), "year_built": _num(r["year_built"]),
                    "floor_count": _num(r["floor_count"]),
                }
    weather: dict[tuple[int, str], dict[str, Any]] = {}
    names = [c for c in COLUMNS[7:14]]
    with (d / "weather_train.csv").open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            weather[(int(r["site_id"]), r["timestamp"])] = {c: _num(r[c]) for c in names}
    rows = []
    with (d / "train.csv").open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["meter"] != "0":
                continue
            bid = int(r["building_id"])
            if bid not in meta:
                continue
            m = meta[bid]
            ts = int(datetime.fromisoformat(r["timestamp"]).replace(tzinfo=UTC).timestamp())
            wx = weather.get((m["site_id"], r["timestamp"]))
            if wx is None:
                if paper_filter:
                    continue
                wx = dict.fromkeys(names)
            if paper_filter and not r["timestamp"].startswith("2016"):
                continue
            row = {"building_id": bid, "timestamp": ts, **m, **wx,
                   "meter_reading": float(r["meter_reading"])}
            if drop_missing and any(row[c] is None for c in COLUMNS):
                continue
            rows.append(row)
    rows.sort(key=lambda r: (r["timestamp"], r["building_id"]))
    return rows


# -- the paper's data set (Prink, Table 1) ------------------------------------------------------

#: Rows of the paper's data set: electricity readings of the buildings with a year and a floor
#: count, 2016 (Prink, Sect. 4.2).
PAPER_ROWS = 321_728
#: The building IDs of the paper's data set span 565..655 (91 IDs, 89 of them used).
PAPER_ID_RANGE = (565, 655)
#: Distinct hours of the paper's data set, from 2016-01-01 01:00 to 2016-12-31 23:00.
PAPER_HOURS = 8_736
#: The paper's quasi-identifiers (Table 1): every numeric column, the time, and primary_use.
PAPER_NUMERIC_QI = [*NUMERIC_QI[:-1], "precip_depth_1_hr", "timestamp"]


def paper_rules_toml() -> str:
    """The rules of Prink's evaluation on Table 1: every numeric QI (``precip_depth_1_hr``
    included) as a range, ``primary_use`` as a DGH, ``meter_reading`` sensitive, no weights."""
    return _rules_toml(PAPER_NUMERIC_QI)


def _paper_hours(rng: np.random.Generator) -> np.ndarray:
    """The 8,736 hours (offsets from 2016-01-01 00:00) of the paper's data set: 01:00 on Jan 1
    to 23:00 on Dec 31, with the 23 hours between missing at random (as gaps in the real
    weather file are)."""
    span = np.arange(1, HOURS_2016)  # 01:00 .. 23:00 on the last day: 8,783 hours
    inner = span[1:-1]
    missing = rng.choice(inner, size=len(span) - PAPER_HOURS, replace=False)
    return np.setdiff1d(span, missing)


def _paper_buildings(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """89 buildings with IDs in 565..655 and Table 1's ranges and distinct counts; floor area
    log-normal (median ~40,000 sq ft: most buildings are mid-sized, a few very large), as
    floor areas of real building stocks are, not uniform."""
    n = N_BUILDINGS
    lo_id, hi_id = PAPER_ID_RANGE
    inner_ids = rng.choice(np.arange(lo_id + 1, hi_id), size=n - 2, replace=False)
    ids = np.sort(np.concatenate(([lo_id, hi_id], inner_ids)))
    sq: set[int] = {387, 420885}
    while len(sq) < n:
        v = round(float(rng.lognormal(np.log(40_000), 1.0)))
        if 387 < v < 420885:
            sq.add(v)
    b = _buildings(rng, n)
    b["square_feet"] = rng.permutation(np.array(sorted(sq)))
    b["id"] = ids
    return b


def generate_paper(n: int | None = None, *, seed: int = 1) -> Iterator[dict[str, Any]]:
    """A stand-in for Prink's data set (Table 1): 321,728 rows over 2016 (``n`` of them, the
    first by time), building IDs 565..655, one site, ``precip_depth_1_hr`` among the columns.

    Each building reports over one contiguous stretch of the year (the real readings of a
    building start and stop), the stretches' lengths summing to :data:`PAPER_ROWS`: 36.8
    buildings report in a mean hour, not 89. Ranges and distinct counts are Table 1's.
    """
    rng = np.random.default_rng(seed)
    hours = _paper_hours(rng)
    weather = _weather(rng, HOURS_2016)
    for name, col in weather.items():  # the ranges are reached within the paper's hours
        col[hours[0]] = _RANGES[name][0]
    b = _paper_buildings(rng)
    nb, nh = N_BUILDINGS, len(hours)
    share = rng.dirichlet(np.full(nb, 2.0))
    counts = np.minimum(np.maximum(1, np.floor(share * PAPER_ROWS)), nh).astype(int)
    while counts.sum() != PAPER_ROWS:  # exact total, none above the year
        i = int(rng.integers(nb))
        step = 1 if counts.sum() < PAPER_ROWS else -1
        if 1 <= counts[i] + step <= nh:
            counts[i] += step
    # a third of the buildings report from the start of the year, a third until its end, a
    # third over a stretch within it: every hour has buildings reporting (36.8 on average)
    anchor = rng.integers(0, 3, nb)
    starts = np.array([0 if a == 0 else nh - c if a == 1 else int(rng.integers(0, nh - c + 1))
                       for a, c in zip(anchor.tolist(), counts.tolist(), strict=True)])
    first, last = int(np.argmax(counts)), int(np.argsort(counts)[-2])
    starts[first], starts[last] = 0, nh - counts[last]  # the first and last hour are reached
    peak = 2293.88
    base = b["square_feet"] / 420885 * b["scale"]
    total = PAPER_ROWS if n is None else min(n, PAPER_ROWS)
    count = 0
    hi_hour = nh // 2
    big = int(np.argmax(base * ((starts <= hi_hour) & (hi_hour < starts + counts))))
    for j, hour in enumerate(hours.tolist()):
        active = np.flatnonzero((starts <= j) & (j < starts + counts))
        if not len(active):
            continue
        temp = weather["air_temperature"][hour]
        load = base[active] * (0.6 + 0.25 * np.sin(np.pi * ((hour % 24) - 6) / 12) ** 2
                               + 0.15 * (temp - 1.1) / 33.9)
        reading = np.round(np.clip(load * peak * rng.lognormal(0, 0.08, len(active)), 0,
                                   peak), 2)
        if j == 0:
            reading[0] = 0.0  # Table 1's range 0..2293.88 is reached
        if j == hi_hour:
            reading[np.flatnonzero(active == big)] = peak
        ts = T0 + 3600 * hour
        wx = {name: float(col[hour]) for name, col in weather.items()}
        for pos, i in enumerate(active.tolist()):
            if count >= total:
                return
            count += 1
            yield {
                "building_id": int(b["id"][i]), "timestamp": ts, "site_id": 5,
                "primary_use": USES[int(b["use"][i])],
                "square_feet": int(b["square_feet"][i]),
                "year_built": int(b["year_built"][i]),
                "floor_count": int(b["floor_count"][i]),
                **wx,
                "meter_reading": float(reading[pos]),
            }

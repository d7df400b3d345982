"""Parameter grids of the deZent simulation: runs in parallel processes, one flat row per run.

Every row repeats every parameter of its run (so a CSV row alone says what produced it) and the
metrics of the three scenarios, prefixed by the scenario name.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from streamanon.sim.district import CYCLES_PER_DAY, District, DistrictConfig
from streamanon.sim.scenarios import SCENARIOS, SimConfig, simulate


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid: a district and the anonymization parameters."""

    district: DistrictConfig
    sim: SimConfig
    cycles: int
    start: int = 0


def grid(gateways: Sequence[int], zs: Sequence[int], seeds: Sequence[int], *, max_sn: int,
         cycles: int, base: SimConfig, start: int = 0, cbf_keys: Sequence[int] = (),
         sweep_gateways: int = 25) -> list[RunSpec]:
    """gateways x z x seeds with ``base``'s other parameters; plus, for every ``cbf_keys``
    value and seed, ``sweep_gateways`` gateways at ``base.z`` with a CBF sized for that many
    keys (the violations-vs-bytes sweep)."""
    specs = [RunSpec(DistrictConfig(gateways=g, max_sn=max_sn, seed=s), replace(base, z=z),
                     cycles, start)
             for g, z, s in itertools.product(gateways, zs, seeds)]
    for keys, s in itertools.product(cbf_keys, seeds):
        specs.append(RunSpec(DistrictConfig(gateways=sweep_gateways, max_sn=max_sn, seed=s),
                             replace(base, cbf_keys=keys, structure="cbf"), cycles, start))
    return specs


def flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list):
        out[prefix] = " ".join(str(x) for x in value)
    else:
        out[prefix] = value


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Simulate one run and flatten it into a CSV row."""
    result = simulate(District(spec.district), spec.cycles, spec.sim, start=spec.start)
    summary = result.to_dict()
    row: dict[str, Any] = {}
    flatten("", summary["params"], row)
    row["cbf_keys"] = spec.sim.cbf_keys or ""
    row["max_hashes"] = spec.sim.max_hashes
    row["start_cycle"] = spec.start
    flatten("structure", summary["structure"], row)
    for name in SCENARIOS:
        m = dict(summary["scenarios"][name])
        m.pop("per_ring_position", None)
        flatten(name, m, row)
    return row


def run_grid(specs: Sequence[RunSpec], jobs: int,
             on_done: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """All runs, in parallel processes when ``jobs > 1``; rows in the order of ``specs``."""
    rows: list[dict[str, Any] | None] = [None] * len(specs)
    if jobs <= 1:
        for i, spec in enumerate(specs):
            rows[i] = run_one(spec)
            if on_done:
                on_done(rows[i])  # type: ignore[arg-type]
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(run_one, spec): i for i, spec in enumerate(specs)}
            for fut in as_completed(futures):
                rows[futures[fut]] = fut.result()
                if on_done:
                    on_done(rows[futures[fut]])  # type: ignore[arg-type]
    return [r for r in rows if r is not None]


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    fields: list[str] = []
    for r in rows:
        fields.extend(k for k in r if k not in fields)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def mean_by(rows: Iterable[dict[str, Any]], keys: Sequence[str], value: str
            ) -> dict[tuple[Any, ...], float]:
    """Mean of ``value`` over rows grouped by ``keys`` (e.g. over seeds)."""
    groups: dict[tuple[Any, ...], list[float]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(float(r[value]))
    return {k: float(np.mean(v)) for k, v in sorted(groups.items())}


def cycles_for(days: float | None, cycles: int | None) -> int:
    if cycles is not None:
        return cycles
    return max(1, round((days if days is not None else 1.0) * CYCLES_PER_DAY))


def iter_main_rows(rows: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The rows of the main grid (not the CBF-size sweep)."""
    return (r for r in rows if r["cbf_keys"] == "")

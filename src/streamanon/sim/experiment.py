"""Parameter grids of the deZent simulation: runs in parallel processes, one flat row per run.

Every row repeats every parameter of its run (so a CSV row alone says what produced it) and the
metrics of the three scenarios, prefixed by the scenario name. Column ``sweep`` says which part
of the experiment a row belongs to: ``main`` (gateways x z x seeds), ``cbf_keys`` (CBF size vs
violations), ``tradeoff`` (bytes per day vs violations: the CBF at several false-positive rates
and the exact counter), ``order`` (publication ratio by ring position, paper vs random order)
and ``linkability`` (direct sending vs the mix).
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

from streamanon.dezent.grid import CYCLES_PER_DAY
from streamanon.sim.config import SimConfig
from streamanon.sim.district import District, DistrictConfig
from streamanon.sim.scenarios import SCENARIOS, simulate


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid: a district and the anonymization parameters."""

    district: DistrictConfig
    sim: SimConfig
    cycles: int
    start: int = 0
    sweep: str = "main"


def grid(gateways: Sequence[int], zs: Sequence[int], seeds: Sequence[int], *, max_sn: int,
         cycles: int, base: SimConfig, start: int = 0, cbf_keys: Sequence[int] = (),
         sweep_gateways: int = 25, fp_rates: Sequence[float] = (),
         order_z: int | None = None, linkability: bool = False, district: str = "spec",
         farm_share: float = 0.0) -> list[RunSpec]:
    """gateways x z x seeds with ``base``'s other parameters; plus, per seed, at
    ``sweep_gateways`` gateways: for every ``cbf_keys`` value a CBF sized for that many keys at
    ``base.z`` (violations vs CBF bytes); for every ``fp_rates`` value a CBF of that rate, and
    the exact counter, at ``base.z`` (bytes per day vs violations); with ``order_z`` the paper
    and the random publication order at that z with ``p_pub = 1``; with ``linkability`` direct
    sending and the mix at ``base.z``.

    Args:
        gateways: the numbers of gateways of the grid.
        zs: the values of z of the grid.
        seeds: the district seeds of the grid.
        max_sn: the most sensors per gateway.
        cycles: the cycles of each run.
        base: the other anonymization parameters.
        start: the first cycle of each run.
        cbf_keys: the key counts of the CBF sweep (empty: none).
        sweep_gateways: the number of gateways of the sweeps.
        fp_rates: the false-positive rates of the trade-off sweep (empty: none).
        order_z: the z of the publication-order sweep (``None``: none).
        linkability: add the linkability sweep.
        district: how every run's district is made (``DistrictConfig.kind``).
        farm_share: the share of farms in every district.
    """
    specs = [RunSpec(DistrictConfig(gateways=g, max_sn=max_sn, seed=s, kind=district,
                                    farm_share=farm_share), replace(base, z=z), cycles, start)
             for g, z, s in itertools.product(gateways, zs, seeds)]

    def sweep(name: str, cfg: SimConfig, s: int) -> RunSpec:
        return RunSpec(DistrictConfig(gateways=sweep_gateways, max_sn=max_sn, seed=s,
                                      kind=district, farm_share=farm_share), cfg,
                       cycles, start, name)

    for keys, s in itertools.product(cbf_keys, seeds):
        specs.append(sweep("cbf_keys", replace(base, cbf_keys=keys, structure="cbf"), s))
    for s in seeds:
        for rate in fp_rates:
            specs.append(sweep("tradeoff", replace(base, fp_rate=rate, structure="cbf"), s))
        if fp_rates:
            specs.append(sweep("tradeoff", replace(base, structure="exact"), s))
        if order_z is not None:
            for order in ("paper", "random"):
                specs.append(sweep("order", replace(base, z=order_z, p_pub=1.0,
                                                    publication_order=order), s))
        if linkability:
            for publication in ("direct", "mix"):
                specs.append(sweep("linkability", replace(base, publication=publication), s))
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
    row["sweep"] = spec.sweep
    row["cbf_keys"] = spec.sim.cbf_keys or ""
    row["max_hashes"] = spec.sim.max_hashes
    row["start_cycle"] = spec.start
    flatten("structure", summary["structure"], row)
    for name in SCENARIOS:
        flatten(name, dict(summary["scenarios"][name]), row)
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
    """Mean of ``value`` over rows grouped by ``keys`` (e.g. over seeds); rows without the
    value (None or empty, e.g. no position bias when nothing was published) are skipped."""
    groups: dict[tuple[Any, ...], list[float]] = {}
    for r in rows:
        if r[value] is None or r[value] == "":
            continue
        groups.setdefault(tuple(r[k] for k in keys), []).append(float(r[value]))
    return {k: float(np.mean(v)) for k, v in sorted(groups.items())}


def cycles_for(days: float | None, cycles: int | None) -> int:
    if cycles is not None:
        return cycles
    return max(1, round((days if days is not None else 1.0) * CYCLES_PER_DAY))


def iter_main_rows(rows: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The rows of the main grid (not the sweeps)."""
    return (r for r in rows if r["sweep"] == "main")


def per_position(rows: Iterable[dict[str, Any]], scenario: str) -> list[float]:
    """Mean over rows of a scenario's publication ratio by ring position (hops after the CCC).
    """
    arrays = [np.array([float(x) for x in str(r[f"{scenario}.per_ring_position"]).split()])
              for r in rows]
    return np.mean(arrays, axis=0).tolist() if arrays else []

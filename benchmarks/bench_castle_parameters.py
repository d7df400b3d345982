"""Information loss when a rules broadcast changes k mid-stream (a ``[parameters]`` table).

    .venv/bin/python benchmarks/bench_castle_parameters.py [--n 6000] [--k 5 10] [--delta 1250]

ASHRAE-shaped rows (:func:`streamanon.data.ashrae.generate`, seed 1), l = 2, β 50, μ 10, ζ 10.
Six runs: k fixed at each of the two values without an update, with an update at the
stream's middle that keeps k (:meth:`~streamanon.castle.CastleAnonymizer.set_rules` with the
same rules: what any rule update costs, a new rule set starting with fresh generalizer state),
and with an update that switches k to the other value (the same rules plus
``[parameters] k = ...``). Printed per run: the mean loss per released tuple (every QI
averaged) over the whole stream and over the tuples of each half, the suppressed tuples and
the smallest class (distinct buildings) of each half. The figures are exact (no timing).
"""

from __future__ import annotations

import argparse
from typing import Any

from streamanon.castle import CastleAnonymizer, Released
from streamanon.castle.rules import RuleSet
from streamanon.data import ashrae


def run(rows: list[dict[str, Any]], k0: int, k1: int | None, delta: int) -> dict[str, Any]:
    """One run: k0 for the first half of ``rows``, k1 (by a rules update) for the rest;
    ``k1 = None``: no update."""
    text = ashrae.rules_toml()
    op = CastleAnonymizer(RuleSet.from_toml(text), k=k0, l=2, delta=delta)
    half = len(rows) // 2
    out: list[Any] = []
    for i, row in enumerate(rows):
        if i == half and k1 is not None:
            out += op.set_rules(RuleSet.from_toml(text + f"\n[parameters]\nk = {k1}\n"))
        out += op.process(dict(row, _n=i))
    out += op.flush()
    qis = RuleSet.from_toml(text).quasi_identifiers
    loss = {0: [], 1: []}
    classes: dict[int, set[Any]] = {}
    first_half: dict[int, bool] = {}
    for r in out:
        if isinstance(r, Released):
            loss[int(r.values["_n"] >= half)].append(r.loss)
            classes.setdefault(r.cluster, set()).add(r.values["building_id"])
            first_half[r.cluster] = r.values["_n"] < half
    summary = op.summary()
    smallest = [min((len(v) for c, v in classes.items() if first_half[c] == h), default=0)
                for h in (True, False)]
    both = loss[0] + loss[1]
    return {"k": str(k0) if k1 is None else f"{k0}->{k1}",
            "mean_loss": sum(both) / len(both), "loss_half1": sum(loss[0]) / len(loss[0]),
            "loss_half2": sum(loss[1]) / len(loss[1]), "suppressed": summary["suppressed"],
            "smallest_half1": smallest[0], "smallest_half2": smallest[1], "qis": len(qis)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6000)
    parser.add_argument("--k", type=int, nargs=2, default=[5, 10])
    parser.add_argument("--delta", type=int, default=1250)
    args = parser.parse_args()
    rows = list(ashrae.generate(args.n, seed=1))
    a, b = args.k
    print(f"n = {args.n}, delta = {args.delta}, l = 2; loss = mean cluster loss per released "
          "tuple")
    print(f"{'k':>8} {'loss':>8} {'half 1':>8} {'half 2':>8} {'supp':>5} {'min1':>5} {'min2':>5}")
    for k0, k1 in ((a, None), (a, a), (a, b), (b, None), (b, b), (b, a)):
        r = run(rows, k0, k1, args.delta)
        print(f"{r['k']:>8} {r['mean_loss']:8.4f} {r['loss_half1']:8.4f} {r['loss_half2']:8.4f} "
              f"{r['suppressed']:5d} {r['smallest_half1']:5d} {r['smallest_half2']:5d}")


if __name__ == "__main__":
    main()

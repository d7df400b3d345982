"""Benchmark: information loss of CASTLE with one shared hierarchy per rule set against
Prink's hierarchy per cluster (``hierarchy_scope = "cluster"``).

Two data sets: the ASHRAE stand-in of Prink's Table 1 (:func:`streamanon.data.ashrae.
generate_paper`, its rules; ``primary_use`` is the categorical) and Adult-schema rows
(``utility_data.adult_rows``; sex, race, marital status, education and native country are
hierarchies). Two ways to give the trees: as configured in the rules (every value in them:
the cluster's tree is the configured one, so both scopes must give the same loss), and carried
by the records (each value as its own leaf-first path, the rules' trees empty, as Prink's
tuples carry them: the shared tree grows to every path seen, a cluster's holds its own).

Printed per run: the mean loss per released tuple of each categorical, the mean over all
quasi-identifiers, released and suppressed tuples. The figures are exact (deterministic);
only the time depends on the machine.

Run:  .venv/bin/python benchmarks/bench_hierarchy_scope.py [--n 10000] [--k 5,20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import utility_data as ud
from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.data import ashrae


def _carried(rules: dict[str, Any], rows: list[dict[str, Any]]
             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The rules with empty trees, and the rows with each categorical as its path (leaf
    first, as Prink's tuples carry it)."""
    out = {**rules, "attribute": []}
    paths: dict[str, dict[str, list[str]]] = {}
    for a in rules["attribute"]:
        if a.get("generalizer") == "hierarchy":
            paths[a["name"]] = {p[-1]: list(reversed(p)) for p in a["paths"]}
            a = {**a, "paths": []}
        out["attribute"].append(a)
    return out, [{**r, **{c: paths[c][str(r[c])] for c in paths}} for r in rows]


def _ashrae(n: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import tomllib
    return tomllib.loads(ashrae.paper_rules_toml()), list(ashrae.generate_paper(n, seed=1))


def _adult(n: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return ud.adult_rules(), ud.adult_rows(n, seed=1)


def run(rules: dict[str, Any], rows: list[dict[str, Any]], *, k: int, scope: str
        ) -> dict[str, Any]:
    op = CastleAnonymizer(RuleSet.from_dict(rules), k=k, l=2, delta=1250, beta=50,
                          hierarchy_scope=scope)
    t0 = time.perf_counter()
    for r in rows:
        op.process(r)
    op.flush()
    s = op.summary()
    cats = [a["name"] for a in rules["attribute"] if a.get("generalizer") == "hierarchy"]
    return {"cats": {c: s["info_loss"][c] for c in cats}, "mean": s["mean_info_loss"],
            "released": s["released"], "suppressed": s["suppressed"],
            "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--k", default="5,20")
    args = ap.parse_args(argv)
    ks = [int(x) for x in args.k.split(",")]
    print(f"{args.n:,} rows per data set; l = 2, δ = 1,250, β = 50 (mean loss per released "
          "tuple; exact)\n")
    print("| data | trees | k | categorical loss, shared | categorical loss, cluster | "
          "mean QI loss shared → cluster | released / suppressed (shared; cluster) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, make in (("ASHRAE stand-in", _ashrae), ("Adult schema", _adult)):
        rules, rows = make(args.n)
        for trees, (r, data) in (("configured", (rules, rows)),
                                 ("carried by the records", _carried(rules, rows))):
            for k in ks:
                a = run(r, data, k=k, scope="shared")
                b = run(r, data, k=k, scope="cluster")
                ca = ", ".join(f"{c} {v:.4f}" for c, v in a["cats"].items())
                cb = ", ".join(f"{c} {v:.4f}" for c, v in b["cats"].items())
                print(f"| {label} | {trees} | {k} | {ca} | {cb} | {a['mean']:.4f} → "
                      f"{b['mean']:.4f} | {a['released']:,} / {a['suppressed']:,}; "
                      f"{b['released']:,} / {b['suppressed']:,} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Information loss of CASTLE beside batch anchors (a textbook Mondrian, anjana), one metric.

    .venv/bin/python benchmarks/bench_utility.py [--n 2000] [--n-ashrae 4000] [--k 5 10 20]
        [--splits prink window] [--deltas 1250 20000 whole] [--only 'ASHRAE']
        [--plot utility.png]          # the issue's sizes: --n 20000 --n-ashrae 100000

Data sets (``utility_data.py``): Adult-schema rows from a generator with UCI Adult's schema and
close marginals (no wheel ships the table offline), one row per individual and three rows per
individual (k over individuals); ASHRAE-shaped rows (:func:`streamanon.data.ashrae.generate`)
with k over the buildings and over rows. l = 2 throughout (occupation, meter reading).

Tools: Mondrian (strict multidimensional median cuts, k over rows or distinct ids, l respected),
anjana 1.2.3 (installed from PyPI with ``pip install --target`` into a temporary folder when not
importable; one row per individual only: it counts k over rows), CASTLE
(:class:`~streamanon.castle.operator.CastleAnonymizer`, β 50, μ 10, ζ 10) at δ 1,250 /
20,000 / the whole stream, for each split the operator offers. One metric for every output
(NCP over the input's range, GLM, a suppressed row 1); every output's k (over distinct
individuals) and l checked by pycanon, CASTLE's also by :mod:`streamanon.verify.castle`. For
CASTLE with several rows per individual, the intersection attack
(:func:`streamanon.attack.intersect`) prints how far intersecting an individual's releases
narrows it (median remaining width as a share of its widest release; 1.00 = no narrowing).

Run on a shared machine: the loss figures are exact, the times (CPU, user + sys) are not.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import utility_data as ud  # noqa: E402
from streamanon import attack  # noqa: E402
from streamanon.castle.operator import CastleAnonymizer  # noqa: E402
from streamanon.castle.records import Released  # noqa: E402
from streamanon.castle.rules import RuleSet  # noqa: E402
from streamanon.data import ashrae  # noqa: E402
from streamanon.verify.castle import check_castle, rules_from_dict  # noqa: E402

DELTAS = [1250, 20_000, None]  # None: the whole stream
ANJANA = "anjana==1.2.3"


def _anjana() -> Any | None:
    """anjana's anonymity module, installed into a temporary folder if it is missing."""
    try:
        return importlib.import_module("anjana.anonymity")
    except ImportError:
        pass
    target = Path(tempfile.gettempdir()) / "streamanon-bench-anjana"
    if not (target / "anjana").exists():
        # --no-deps: anjana pins exact pandas/numpy; it runs on the installed ones and needs
        # beartype besides pycanon
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
               str(target), ANJANA, "beartype==0.22.2"]
        if subprocess.run(cmd, check=False, stderr=subprocess.DEVNULL).returncode:
            print("anjana could not be installed: its column is left out")
            return None
    sys.path.insert(0, str(target))
    return importlib.import_module("anjana.anonymity")


# -- checks --------------------------------------------------------------------------------
def pycanon_kl(rows: list[dict[str, Any]], schema: ud.Schema) -> tuple[int, int]:
    """(k over distinct individuals, l) of the released rows, as pycanon measures them."""
    import pandas as pd
    from pycanon import anonymity

    if not rows:
        return 0, 0
    qi = schema.qi
    df = pd.DataFrame([{c: str(r[c]) for c in [schema.id_field, *qi, schema.sensitive]}
                       for r in rows])
    # pycanon counts rows per class: one row per (individual, class) counts individuals
    k = anonymity.k_anonymity(df.drop_duplicates([schema.id_field, *qi]), qi)
    return int(k), int(anonymity.l_diversity(df, qi, [schema.sensitive]))


# -- the tools -------------------------------------------------------------------------------
def run_castle(rows: list[dict[str, Any]], rules: dict[str, Any], *, k: int, l: int,  # noqa: E741
               delta: int, split: str | None) -> tuple[list[dict[str, Any]], int, float]:
    params: dict[str, Any] = {"k": k, "l": l, "delta": delta, "beta": 50, "mu": 10,
                              "zeta": 10}
    if split is not None:
        params["split"] = split
    op = CastleAnonymizer(RuleSet.from_dict(rules), **params)
    t0 = time.process_time()  # CPU time (user + sys): the machine is shared
    out = [r for row in rows for r in op.process(row)] + op.flush()
    seconds = time.process_time() - t0
    released = [r.values for r in out if isinstance(r, Released)]
    return released, len(out) - len(released), seconds


def _levels(values: list[Any], name: str, schema: ud.Schema) -> dict[int, list[str]]:
    """anjana's hierarchy for one QI: level 0 the distinct values, then coarser levels."""
    distinct = sorted(set(values), key=lambda v: (str(type(v)), v))
    if name in schema.trees:
        tree = schema.trees[name]
        depth = max(len(tree.ancestors(v)) for v in map(str, distinct))
        out: dict[int, list[str]] = {}
        for level in range(depth):
            out[level] = [tree.ancestors(str(v))[min(level, len(tree.ancestors(str(v))) - 1)]
                          for v in distinct]
        return out
    lo = schema.numeric[name][0]
    out = {0: list(distinct)}
    for level, width in enumerate((5, 10, 20, 40), start=1):
        out[level] = [f"[{int(lo + (v - lo) // width * width)},"
                      f"{int(lo + (v - lo) // width * width + width - 1)}]" for v in distinct]
    out[len(out)] = ["*"] * len(distinct)
    return out


def run_anjana(anj: Any, rows: list[dict[str, Any]], schema: ud.Schema, *, k: int,
               l: int) -> tuple[list[dict[str, Any]], int]:  # noqa: E741
    import pandas as pd

    df = pd.DataFrame(rows)
    hier = {c: _levels(df[c].tolist(), c, schema) for c in schema.qi}
    df["_pid"] = df[schema.id_field]
    with contextlib.redirect_stdout(io.StringIO()):  # anjana prints what it reaches
        anon = anj.l_diversity(df, [schema.id_field], schema.qi, schema.sensitive, k, l, 5,
                               hier)
    released = anon.assign(**{schema.id_field: anon["_pid"]}).to_dict("records")
    return released, len(rows) - len(released)


# -- the benchmark -------------------------------------------------------------------------
def datasets(n: int, n_ashrae: int) -> list[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    adult = ud.adult_rules()
    import tomllib

    ash = tomllib.loads(ashrae.rules_toml())
    ash.pop("time", None)
    rows = [dict(r) for r in ashrae.generate(n_ashrae)]
    by_row = [{**r, "row": i} for i, r in enumerate(rows)]
    return [
        ("Adult, 1 row/individual", ud.adult_rows(n, per_individual=1), adult),
        ("Adult, 3 rows/individual", ud.adult_rows(n, per_individual=3), adult),
        ("ASHRAE, k over buildings", rows, ash),
        ("ASHRAE, k over rows", by_row, {**ash, "id": "row"}),
    ]


def splits() -> list[str | None]:
    """The operator's splits (``None``: the operator has no choice of split)."""
    sig = inspect.signature(CastleAnonymizer.__init__)
    if "split" not in sig.parameters:
        return [None]
    from streamanon.castle.split import SPLITS

    return list(SPLITS)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="Adult rows (the issue: 20000)")
    ap.add_argument("--n-ashrae", type=int, default=4000, help="ASHRAE rows (the issue: 100000)")
    ap.add_argument("--k", type=int, nargs="+", default=[5, 10, 20])
    ap.add_argument("--l", type=int, default=2)
    ap.add_argument("--plot", default="utility.png", help="the PNG of loss vs δ")
    ap.add_argument("--no-anjana", action="store_true")
    ap.add_argument("--splits", nargs="+", default=None, help="the CASTLE splits to run "
                    "(default: every split the operator offers, prink first: the baseline)")
    ap.add_argument("--deltas", nargs="+", default=None, help="the δ values to run "
                    "(default: 1250 20000 whole)")
    ap.add_argument("--only", default="", help="run only the data sets whose title contains "
                    "this text (e.g. 'ASHRAE')")
    args = ap.parse_args(argv)
    anj = None if args.no_anjana else _anjana()
    variants = splits() if args.splits is None else list(args.splits)
    deltas = DELTAS if args.deltas is None else [
        None if d == "whole" else int(d) for d in args.deltas]
    results: list[dict[str, Any]] = []
    failures = 0
    for title, rows, rules in datasets(args.n, args.n_ashrae):
        if args.only not in title:
            continue
        schema = ud.schema_of(rows, rules)
        spec = rules_from_dict(rules)
        by_ids = len({r[schema.id_field] for r in rows}) < len(rows)
        print(f"\n## {title}: {len(rows)} rows, "
              f"{len({r[schema.id_field] for r in rows})} individuals, l = {args.l}")
        for k in args.k:
            base_rows = ud.mondrian(rows, schema, k=k, l=args.l, by_ids=by_ids)
            base = ud.loss(base_rows, 0, schema)
            entry: dict[str, Any] = {"data": title, "k": k, "mondrian": base}
            kl = pycanon_kl(base_rows, schema)
            failures += _report("Mondrian", base, base, kl, k, args.l)
            if anj is not None and not by_ids:
                a_rows, a_sup = run_anjana(anj, rows, schema, k=k, l=args.l)
                a = ud.loss(a_rows, a_sup, schema)
                entry["anjana"] = a
                failures += _report(f"anjana (suppressed {a_sup})", a, base,
                                    pycanon_kl(a_rows, schema), k, args.l)
            done: dict[int, Any] = {}
            for split in variants:
                name = "CASTLE" + (f" split={split}" if split else "")
                for d in deltas:
                    delta = len(rows) if d is None or d >= len(rows) else d
                    label = _label(d)
                    key = (split, delta)
                    if key not in done:
                        rel, sup, secs = run_castle(rows, rules, k=k, l=args.l, delta=delta,
                                                    split=split)
                        report = check_castle(rel, spec, k=k, l=args.l, allow_empty=True)
                        narrowing = _narrowing(rel, rules) if by_ids else None
                        done[key] = (ud.loss(rel, sup, schema), pycanon_kl(rel, schema),
                                     report, sup, secs, narrowing)
                    value, kl, report, sup, secs, narrowing = done[key]
                    entry[(name, label)] = value
                    entry[(name, label, "narrowing")] = narrowing
                    extra = (f", suppressed {sup}, {secs:.2f} s CPU "
                             f"({len(rows) / max(secs, 1e-9):,.0f} tuples/s), "
                             f"verify castle {'ok' if report.ok else 'FAILED'}")
                    if narrowing is not None:
                        extra += f", intersection leaves {narrowing:.2f} of the width"
                    failures += _report(f"{name} {label}{extra}", value, base, kl, k, args.l)
                    failures += 0 if report.ok else 1
            results.append(entry)
    labels = [_label(d) for d in deltas]
    _table(results, variants, labels)
    _plot(results, variants, args.plot, labels)
    print(f"\nviolations: {failures} (k over distinct individuals and l, pycanon and "
          "verify castle)")
    return 1 if failures else 0


def _narrowing(released: list[dict[str, Any]], rules: dict[str, Any]) -> float:
    attrs = []
    for a in rules["attribute"]:
        if a.get("sensitive"):
            continue
        leaves = None
        if a.get("generalizer") == "hierarchy":
            tree = ud.Tree(a["paths"])
            leaves = {node: frozenset(s) for node, s in tree.under.items()}
        attrs.append(attack.Attribute(a["name"], leaves))
    exp = attack.intersect(released, id_field=rules["id"], attributes=attrs)
    med = [e.median for e in exp.attributes.values() if e.individuals and e.median is not None]
    return float(np.mean(med)) if med else 1.0


def _report(name: str, value: float, base: float, kl: tuple[int, int], k: int,
            l: int) -> int:  # noqa: E741
    bad = kl[0] < k or (l > 1 and kl[1] < l)
    print(f"  k={k:>2}  {name}: loss {value:.3f} ({value / base:.2f}x Mondrian), pycanon "
          f"k={kl[0]} l={kl[1]}{'  VIOLATION' if bad else ''}")
    return int(bad)


def _label(d: int | None) -> str:
    return f"δ={'whole' if d is None else f'{d:,}'}"


def _table(results: list[dict[str, Any]], variants: list[str | None],
           labels: list[str]) -> None:
    print("\n| data, k | Mondrian loss | anjana | " + " | ".join(
        f"CASTLE{' ' + v if v else ''} {lab}" for v in variants for lab in labels) + " |")
    print("|---" * (3 + len(labels) * len(variants)) + "|")
    for e in results:
        base = e["mondrian"]
        cells = [f"{e['data']}, k={e['k']}", f"{base:.3f}",
                 f"{e['anjana'] / base:.2f}x" if "anjana" in e else "-"]
        for v in variants:
            name = "CASTLE" + (f" split={v}" if v else "")
            for lab in labels:
                cells.append(f"{e[(name, lab)] / base:.2f}x")
        print("| " + " | ".join(cells) + " |")


def _plot(results: list[dict[str, Any]], variants: list[str | None], path: str,
          labels: list[str]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    titles = list(dict.fromkeys(e["data"] for e in results))
    fig, axes = plt.subplots(1, len(titles), figsize=(4.2 * len(titles), 3.6), squeeze=False)
    for ax, title in zip(axes[0], titles, strict=True):
        for e in (e for e in results if e["data"] == title):
            base = e["mondrian"]
            for v in variants:
                name = "CASTLE" + (f" split={v}" if v else "")
                ax.plot(range(len(labels)), [e[(name, lab)] / base for lab in labels], marker="o",
                        label=f"{name} k={e['k']}")
            if "anjana" in e:
                ax.axhline(e["anjana"] / base, ls=":", color="grey")
        ax.axhline(1.0, color="black", lw=0.8, label="Mondrian")
        ax.set_xticks(range(len(labels)), labels)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("loss / Mondrian's")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    raise SystemExit(main())

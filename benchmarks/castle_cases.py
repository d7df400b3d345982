"""Seeded CASTLE cases whose complete output is printed, to compare two versions of the code.

    python benchmarks/castle_cases.py --cases 400 [--ashrae 30000] > out.txt

Runs only the public API (``RuleSet.from_dict``, ``CastleAnonymizer``, ``CastleRow``, ``process``,
``set_rules``, ``advance``, ``flush``, ``register_generalizer``), so the same script runs on
today's code and on the code of an earlier commit (``PYTHONPATH=<old>/src``): ``bench_castle.py``
and ``tests/castle/test_speed_equivalence.py`` run it on both and compare the text byte for byte.

Every case writes every released and suppressed tuple (values in their order, loss, cluster,
line, reason), every refused tuple with its message, and the accounting. With ``--files`` the
same streams also go through the file adapters as ``streamanon castle`` uses them: written as a
CSV file with some broken lines mixed in (quotes, blanks, CRLF, bad numbers, missing fields,
undecodable bytes), read back with ``RowReader`` (``skip``), anonymized, and written with
``RowWriter``: the written text and every rejection (line, reason, text) are printed.

The cases cover what the operator can be asked to do: ranges with configured or adaptive
domains (values outside them), hierarchies given as paths or grown at run time with GLM, NCP
and PRL losses, reduction, a plug-in generalizer, zero weights, sensitive attributes
(l = 0..3), ``max_delay`` with ``advance``, the three suppression modes, a loss column, rule
changes mid-stream, tuples held before any rules, and bad tuples; values on coarse grids, so
exact ties in the best selection are frequent.
"""

from __future__ import annotations

import argparse
import inspect
import io
import json
import random
import sys
from typing import Any

from streamanon import castle
from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.castle.generalizers import Generalizer, register_generalizer
from streamanon.records import Suppressed

#: the release every version has: CASTLE's clusters split as Prink does (the default until the
#: window release became it; a version without ``split`` has only this one)
_PAPERS = ({"split": "prink"}
           if "split" in inspect.signature(CastleAnonymizer.__init__).parameters else {})


def operator(rules: RuleSet | None, **params: Any) -> CastleAnonymizer:
    """The operator of a case: CASTLE's clustering, on any version of the code."""
    return CastleAnonymizer(rules, **_PAPERS, **params)

#: the input record type (named ``Row`` in the reference commits this script also runs on)
CastleRow = getattr(castle, "CastleRow", None) or castle.Row

PATHS = [
    ["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE", "Berlin"], ["EU", "DE"],
    ["US", "Boston"], ["US", "NY"], ["Asia"],
]
LEAVES = ["Paris", "Lyon", "Berlin", "Boston", "NY", "Asia", "FR", "EU"]
NEW_PATHS = [["Munich", "DE", "EU"], ["Tokyo", "JP", "Asia"], ["Osaka", "JP", "Asia"]]
ZIPS = ["75001", "75013", "69001", "7500", "69", "750011"]


class BucketGeneralizer(Generalizer):
    """A plug-in: the set of values seen, released as ``a|b|c`` (loss = share of 8 buckets)."""

    def parse(self, raw: Any) -> str:
        if raw is None:
            raise ValueError(f"attribute {self.name!r} needs a bucket")
        return str(raw)

    def add(self, state: Any, value: Any) -> frozenset[str]:
        return frozenset([value]) if state is None else state | {value}

    def merge(self, a: Any, b: Any) -> frozenset[str]:
        return a | b

    def loss(self, state: Any) -> float:
        return min(1.0, (len(state) - 1) / 7)

    def output(self, state: Any) -> str:
        return "|".join(sorted(state))

    def covers(self, state: Any, value: Any) -> bool:
        return value in state

    def maximal(self) -> str:
        return "*"


register_generalizer("bucket", lambda name, **_: BucketGeneralizer(name))


def rules_spec(rng: random.Random, variant: int) -> dict[str, Any]:
    attrs: list[dict[str, Any]] = []
    for i in range(rng.randint(0 if variant else 1, 4)):
        spec: dict[str, Any] = {"name": f"x{i}", "generalizer": "range",
                                "weight": rng.choice([1.0, 1.0, 0.5, 0.25, 0.0])}
        if rng.random() < 0.4:
            spec["domain"] = rng.choice([[-50, 50], [0, 10], [3, 3]])
        attrs.append(spec)
    for h in range(rng.choice([0, 1, 1, 2])):
        attrs.append({"name": f"place{h}", "generalizer": "hierarchy", "paths": PATHS,
                      "metric": rng.choice(["glm", "ncp", "prl"]),
                      "grow": rng.random() < 0.3, "prl_reset": rng.choice([10_000, 7]),
                      "weight": rng.choice([1.0, 0.5])})
    if rng.random() < 0.35:
        attrs.append({"name": "zip", "generalizer": "reduction"})
    if rng.random() < 0.25:
        attrs.append({"name": "bucket", "generalizer": "bucket"})
    if not attrs:
        attrs.append({"name": "x0", "generalizer": "range"})
    attrs.append({"name": "note", "generalizer": "none"})
    for j in range(rng.choice([0, 1, 1, 2])):
        attrs.append({"name": f"s{j}", "sensitive": True})
    rng.shuffle(attrs)
    spec = {"id": "u", "attribute": attrs}
    if rng.random() < 0.5:
        spec["time"] = "t"
    return spec


def stream(rng: random.Random, spec: dict[str, Any], n: int) -> list[CastleRow]:
    people = rng.randint(1, 25)
    values = rng.randint(1, 5)
    grid = rng.choice([1, 2, 4, 10])
    spread = rng.choice([5, 20, 60])
    rows: list[CastleRow] = []
    t = 0.0
    for i in range(n):
        row: dict[str, Any] = {"u": rng.choice([f"p{rng.randrange(people)}",
                                                rng.randrange(people)])}
        for a in spec["attribute"]:
            kind, name = a.get("generalizer"), a["name"]
            if kind == "range":
                row[name] = rng.randint(-spread, spread) / grid
            elif kind == "hierarchy":
                row[name] = (rng.choice(NEW_PATHS) if rng.random() < 0.05 else
                             f"leaf{rng.randrange(3)}" if a.get("grow") and rng.random() < 0.05
                             else rng.choice(LEAVES))
            elif kind == "reduction":
                row[name] = rng.choice(ZIPS)
            elif kind == "bucket":
                row[name] = f"b{rng.randrange(6)}"
            elif kind == "none":
                row[name] = f"n{i}"
            elif a.get("sensitive"):
                row[name] = rng.choice([f"v{rng.randrange(values)}", rng.randrange(values)])
        t += rng.choice([0.0, 0.5, 1.0, 3.0])
        row["t"] = t - rng.choice([0.0, 0.0, 0.0, 4.0])  # now and then late
        r = rng.random()
        if r < 0.01:
            row.pop(rng.choice(list(row)))  # missing field
        elif r < 0.02:
            row[rng.choice(list(row))] = rng.choice(["", "abc", None, float("nan"), True])
        rows.append(CastleRow(row, i + 2))
    return rows


def write(out: list[str], items: list[Any]) -> None:
    for x in items:
        if isinstance(x, Released):
            out.append(f"R {json.dumps(x.values, default=repr)} {x.loss!r} {x.cluster} {x.line}")
        elif isinstance(x, Suppressed):
            rec = x.record
            vals = rec.values if isinstance(rec, Released | CastleRow) else rec
            extra = f" {rec.loss!r} {rec.cluster}" if isinstance(rec, Released) else ""
            out.append(f"S {x.reason} {json.dumps(vals, default=repr)}{extra}")
        else:
            out.append(f"? {x!r}")


def summary_line(op: CastleAnonymizer) -> str:
    s = op.summary()
    keep = {k: s[k] for k in ("read", "released", "suppressed", "held", "clusters_released",
                              "tau", "info_loss", "mean_info_loss") if k in s}
    return "summary " + json.dumps(keep, sort_keys=True)


def run_case(seed: int) -> list[str]:
    rng = random.Random(seed)
    spec = rules_spec(rng, seed % 4)
    has_sens = any(a.get("sensitive") for a in spec["attribute"])
    params: dict[str, Any] = {
        "k": rng.randint(1, 6), "l": rng.choice([0, 2, 3]) if has_sens else 0,
        "delta": rng.choice([1, 3, 10, 30, 120]), "beta": rng.choice([1, 2, 5, 20, 50]),
        "mu": rng.choice([1, 3, 10]), "zeta": rng.choice([0, 2, 10]),
        "suppression": rng.choice(["drop", "null", "generalize"]),
    }
    if "time" in spec and rng.random() < 0.5:
        params["max_delay"] = rng.choice([0.0, 2.0, 10.0])
    if rng.random() < 0.3:
        params["loss_field"] = "loss"
    n = rng.choice([5, 40, 150, 400])
    rows = stream(rng, spec, n)
    out = [f"case {seed} {json.dumps(spec, sort_keys=True)} {json.dumps(params, sort_keys=True)}"]
    held_first = rng.random() < 0.1
    change_at = rng.randrange(n) if rng.random() < 0.25 else -1
    op = operator(None if held_first else RuleSet.from_dict(spec), **params)
    for i, row in enumerate(rows):
        if held_first and i == n // 3:
            write(out, op.set_rules(RuleSet.from_dict(spec)))
        if i == change_at:
            spec2 = rules_spec(rng, 1)
            spec2["id"] = "u"
            try:
                write(out, op.set_rules(RuleSet.from_dict({**spec, "attribute": [
                    a for a in spec["attribute"] if rng.random() < 0.8] or spec["attribute"]})))
                out.append("rules changed")
            except Exception as exc:
                # typed errors (streamanon.errors) are ValueErrors: name the builtin base so
                # that this tree and the reference commit print the same line
                kind = "ValueError" if isinstance(exc, ValueError) else type(exc).__name__
                out.append(f"rules refused {kind}: {exc}")
        try:
            write(out, op.process(row))
        except Exception as exc:
            out.append(f"E {row.line} {exc}")
        if "max_delay" in params and rng.random() < 0.05:
            write(out, op.advance(float(row.values.get("t", 0) or 0) + 5))
    write(out, op.flush())
    out.append(summary_line(op))
    return out


BROKEN = [b'p1,"quoted, with a comma",x', b"", b"   ", b"\xff\xfe,1,2", b'p2,"open', b"p3",
          b"p4" + b",abc" * 40, b",,,,,,,,,,,,,,,,,,,", b"p5," + b"9" * 60]


def _csv_cell(v: Any) -> bytes:
    text = "" if v is None else repr(v) if isinstance(v, float) else str(v)
    return f'"{text}"'.encode() if "," in text else text.encode()


def run_file_case(seed: int, tmp: str) -> list[str]:
    """A case's stream through the file adapters (see the module docstring)."""
    import os

    from streamanon.io import rows as rows_module
    from streamanon.io.rows import RowReader, RowWriter

    if hasattr(rows_module, "_BLOCK"):  # blocks of a few dozen lines: some clean, some not
        rows_module._BLOCK = 2048

    rng = random.Random(10_000 + seed)
    spec = rules_spec(rng, 1)
    has_sens = any(a.get("sensitive") for a in spec["attribute"])
    n = rng.choice([20, 150, 600])
    rows = stream(rng, spec, n)
    columns = list(dict.fromkeys(k for r in rows for k in r.values))
    lines = [",".join(columns).encode()]
    for r in rows:
        lines.append(b",".join(_csv_cell(r.values.get(c)) for c in columns))
        if rng.random() < 0.03:
            lines.append(rng.choice(BROKEN))
    end = b"\r\n" if rng.random() < 0.2 else b"\n"
    path = os.path.join(tmp, f"case{seed}.csv")
    with open(path, "wb") as fh:
        fh.write(end.join(lines) + (end if rng.random() < 0.8 else b""))
    rules = RuleSet.from_dict(spec)
    numeric = [a["name"] for a in spec["attribute"] if a.get("generalizer") == "range"]
    params = {"k": rng.randint(1, 4), "l": 2 if has_sens and rng.random() < 0.5 else 0,
              "delta": rng.choice([3, 30, 120])}
    out = [f"file {seed} {len(lines)} lines {json.dumps(params, sort_keys=True)}"]
    rejected: list[Any] = []
    reader = RowReader(path, "csv", on_error="skip", rejects=rejected.append,
                       numeric=numeric, required=["u"], max_value_len=50,
                       source_name=f"case{seed}.csv")
    op = operator(rules, **params)
    buf = io.StringIO()
    writer: RowWriter | None = None
    try:
        for row in reader:
            try:
                items = op.process(row)
            except ValueError as exc:  # a refused tuple (the typed errors are ValueErrors)
                reader.refuse_row(row, str(exc))
                continue
            for x in items:
                if isinstance(x, Released):
                    writer = writer or RowWriter(buf, "csv", reader.columns)
                    writer.write(x.values)
        for x in op.flush():
            if isinstance(x, Released):
                writer = writer or RowWriter(buf, "csv", reader.columns)
                writer.write(x.values)
    except ValueError as exc:  # the input as a whole refused (a broken header, say)
        out.append(f"refused {exc}")
    out += [f"W {line}" for line in buf.getvalue().splitlines()]
    out += [f"J {r.line} {r.reason} {r.text!r}" for r in rejected]
    out.append(f"read {reader.read} rejected {reader.n_rejected} {summary_line(op)}")
    return out


def run_ashrae(n: int, l: int) -> list[str]:  # noqa: E741
    from streamanon.data import ashrae

    op = operator(RuleSet.from_toml(ashrae.rules_toml()), k=5, l=l, delta=1250, beta=50,
                  mu=100, zeta=10)
    out = [f"ashrae n={n} l={l}"]
    for i, r in enumerate(ashrae.generate(n, seed=1)):
        write(out, op.process(CastleRow(r, i + 2)))
    write(out, op.flush())
    out.append(summary_line(op))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--ashrae", type=int, default=0, help="also the ASHRAE stream of n tuples")
    ap.add_argument("--files", type=int, default=0,
                    help="also n cases through the file adapters (RowReader, RowWriter)")
    args = ap.parse_args()
    w = sys.stdout.write
    for seed in range(args.first, args.first + args.cases):
        w("\n".join(run_case(seed)) + "\n")
    if args.files:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="castle-cases-") as tmp:
            for seed in range(args.first, args.first + args.files):
                w("\n".join(run_file_case(seed, tmp)) + "\n")
    if args.ashrae:
        for l in (0, 2):  # noqa: E741
            w("\n".join(run_ashrae(args.ashrae, l)) + "\n")


if __name__ == "__main__":
    main()

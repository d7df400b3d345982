"""``streamanon attack intersect``: the intersection attack on a released stream's files.

The figures are :func:`streamanon.attack.intersect`'s; this module reads the files (CSV with
a header, or JSON Lines) with the csv and json modules, nothing of the operator's reader.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from streamanon.cli.app import attack_app
from streamanon.cli.common import JSON_HELP, fail, print_summary
from streamanon.errors import ConfigError


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def read_rows(path: str) -> Iterator[dict[str, Any]]:
    """The rows of a CSV file with a header, or of JSON Lines (by the extension)."""
    fh = sys.stdin if path == "-" else open(path, encoding="utf-8", newline="")  # noqa: SIM115
    try:
        if path.endswith((".jsonl", ".ndjson")):
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as exc:
                        fail(f"{path}:{number}: not JSON ({exc.msg})")
                    if not isinstance(obj, dict):
                        fail(f"{path}:{number}: not a JSON object")
                    yield obj
        else:
            yield from csv.DictReader(fh)
    finally:
        if fh is not sys.stdin:
            fh.close()


@attack_app.command("intersect", help="""Intersect each individual's released
generalizations over time: how far its quasi-identifiers narrow.

An attribute that does not change for an individual (a building's floor area) lies in each of
its releases, so their intersection narrows it below any single one. Per attribute: the
intersected width relative to the widest single release of the individual (median, p10, p90
over individuals released twice or more; 0 = pinned to a point or a leaf), the share narrower
than their first release, and the share whose releases do not intersect (the attribute
varies: the attack does not apply). Per individual: how many individuals of the class it was
first released in stay compatible with its intersection, and the share for which fewer do
than the class held. Numeric ranges [lo,hi] are intersected as intervals, hierarchy nodes as
their sets of leaves (give --rules for the tree); with --input also which attributes are
constant and whether each intersection holds the true value.

The attributes declared static (the rules' static = true, or --static) are marked in the
report, each attribute's "first" quantiles give its intersected width over the first release's
(1 = nothing learned beyond the first release: what the static bound promises), and a "static"
section gives side by side the share of individuals narrowed below their first release on the
static attributes (narrowed_static: 0 when the bound held, bound_holds) and on the others
(narrowed_other).

Examples:

    streamanon attack intersect out.csv --rules rules.toml --k 5

    streamanon attack intersect out.csv --id building_id --qi square_feet,year_built --json
""")
def intersect_command(
    output: str = typer.Argument(..., metavar="OUTPUT", help="The released rows (CSV with a "
                                 "header, or JSON Lines)."),
    id_field: str = typer.Option(None, "--id", help="The column naming the individual "
                                 "(default: the rules' id)."),
    qi: list[str] = typer.Option(None, "--qi", help="Quasi-identifiers to attack (repeat or "
                                 "comma-separate; default: the rules' range and hierarchy "
                                 "attributes). Without --rules each is numeric."),
    rules: Path = typer.Option(None, "--rules", help="The CASTLE rules (the hierarchies' "
                               "trees, read by the attack itself)."),
    source: str = typer.Option(None, "--input", help="The input rows the release was made "
                               "from: adds which attributes are constant and whether the "
                               "intersections hold the true values."),
    k: int = typer.Option(None, "--k", min=1, help="Also report the share of individuals left "
                          "with fewer than k compatible candidates."),
    static: str = typer.Option(None, "--static", metavar="COL[,COL]", help="The attributes "
                               "the release bounded as static (castle --static; default: "
                               "the rules' static = true): the report adds, side by side, "
                               "the share of individuals narrowed below their first release "
                               "on them and on the other attributes."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    from streamanon.attack import Attribute, attributes_from_rules, intersect

    qis = _split(qi)
    attrs: list[Any] = []
    try:
        if rules is not None:
            rules_id, attrs = attributes_from_rules(rules)
            id_field = id_field or rules_id
            if qis:
                known = {a.name: a for a in attrs}
                attrs = [known.get(q, Attribute(q)) for q in qis]
        elif qis:
            attrs = [Attribute(q) for q in qis]
        if not id_field or not attrs:
            fail("give --rules, or --id and --qi")
        for name in _split([static] if static else None):
            hit = [a for a in attrs if a.name == name]
            if not hit:
                fail(f"--static {name}: not an attacked attribute "
                     f"({', '.join(a.name for a in attrs)})")
            hit[0].static = True
        report = intersect(read_rows(output), id_field=id_field, attributes=attrs, k=k,
                           inputs=read_rows(source) if source else None)
    except ConfigError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename}: {exc.strerror}")
    print_summary(f"attack intersect ({len(attrs)} attributes)", report.to_dict(), as_json)

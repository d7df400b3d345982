"""``streamanon data``: the real files of the papers' evaluations turned into streams."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from streamanon.cli.app import COMMANDS, app
from streamanon.cli.common import JSON_HELP, fail, writing

__all__ = ["data_app", "data_ashrae"]

data_app = typer.Typer(help=COMMANDS["data"][1], no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("ashrae")
def data_ashrae(
    directory: Path = typer.Argument(..., metavar="DIR", help="Folder with the Kaggle ASHRAE "
                                     "GEP III files train.csv, building_metadata.csv and "
                                     "weather_train.csv."),
    output: Path = typer.Option(..., "-o", "--output", help="The stream as CSV (the "
                                "columns of the rules of `experiment prink`)."),
    drop_missing: bool = typer.Option(False, "--drop-missing", help="Also drop rows with an "
                                      "empty quasi-identifier (kept as empty fields "
                                      "otherwise)."),
    rules: Path = typer.Option(None, "--rules", help="Also write the rules of Prink's "
                               "evaluation (TOML) here."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Prink's data set from the real ASHRAE files: electricity, buildings with year and floors.

    The paper's filter (Sect. 4.2): meter 0 (electricity), only buildings with both a
    year_built and a floor_count, readings of 2016 merged with their site's weather (the
    paper reports 321,728 tuples of 89 buildings). Ordered by time, then building. Example:

        streamanon data ashrae ashrae-energy-prediction/ -o in.csv --rules rules.toml
    """
    from streamanon.data import ashrae

    for name in ("train.csv", "building_metadata.csv", "weather_train.csv"):
        if not (directory / name).is_file():
            fail(f"DIR {directory}: no {name} (the Kaggle files are expected there)")
    rows = ashrae.load_real(directory, paper_filter=True, drop_missing=drop_missing)
    with writing([directory / "train.csv"]) as outs:
        ashrae.write_csv(outs.add(output, "--output"), rows)
        if rules is not None:
            Path(outs.add(rules, "--rules")).write_text(ashrae.paper_rules_toml(),
                                                        encoding="utf-8")
    summary = {"rows": len(rows), "buildings": len({r["building_id"] for r in rows}),
               "hours": len({r["timestamp"] for r in rows}), "output": str(output),
               "rules": None if rules is None else str(rules)}
    if as_json:
        print(json.dumps(summary))
    else:
        print(f"{summary['rows']:,} tuples of {summary['buildings']} buildings over "
              f"{summary['hours']:,} hours -> {output}"
              + ("" if rules is None else f"; rules -> {rules}"))

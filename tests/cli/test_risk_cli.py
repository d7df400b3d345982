"""``streamanon risk`` end to end: a CASTLE release read as CSV and as JSON Lines gives the
library's figures, windows of rows and of time (released ranges count at their upper end), a
population file, and exit 2 on usage or input errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from streamanon.castle import RuleSet
from streamanon.cli import app
from streamanon.data import ashrae
from streamanon.risk import population_counts, reidentification_risk

runner = CliRunner()
QI = ["primary_use", "square_feet", "year_built", "timestamp"]


def release(tmp_path: Path) -> Path:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(600, seed=4))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--delta", "300", str(data),
                              "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def columns(path: Path, names: list[str]) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [[r[n] for r in rows] for n in names]


def risk(*args: str) -> dict:
    res = runner.invoke(app, ["risk", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_the_figures_are_the_librarys_on_the_released_text(tmp_path: Path) -> None:
    out = release(tmp_path)
    got = risk(str(out), "--qi", ",".join(QI))
    want = reidentification_risk(columns(out, QI)).overall.to_dict()
    del want["start"]
    assert got["overall"] == want and got["windows"] == 0
    assert got["overall"]["smallest_class"] >= 1 and got["qi"] == QI
    # the same release as JSON Lines
    jsonl = tmp_path / "out.jsonl"
    with open(out, newline="", encoding="utf-8") as fh, open(jsonl, "w") as dst:
        for row in csv.DictReader(fh):
            dst.write(json.dumps(row) + "\n")
    assert risk(str(jsonl), "--qi", ",".join(QI))["overall"] == got["overall"]
    # with --id: classes counted in distinct buildings (CASTLE's k), never fewer than k = 5
    ids = columns(out, ["building_id"])[0]
    by_id = risk(str(out), "--qi", ",".join(QI), "--id", "building_id")["overall"]
    want = reidentification_risk(columns(out, QI), ids=ids).overall.to_dict()
    del want["start"]
    assert by_id == want and by_id["smallest_class"] >= 5


def test_row_and_time_windows_written_one_csv_row_each(tmp_path: Path) -> None:
    out = release(tmp_path)
    cols = columns(out, QI)
    windows = tmp_path / "w.csv"
    got = risk(str(out), "--qi", ",".join(QI), "--window", "100", "-o", str(windows))
    lib = reidentification_risk(cols, window=100)
    assert got["windows"] == len(lib.windows) == len(cols[0]) // 100 + (len(cols[0]) % 100 > 0)
    assert got["worst_window"] == lib.worst()
    with open(windows, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["rows"]) for r in rows] == [w.rows for w in lib.windows]
    assert [int(r["smallest_class"]) for r in rows] == [w.smallest_class for w in lib.windows]
    hours = risk(str(out), "--qi", "primary_use,square_feet", "--every", "7200", "--time",
                 "timestamp")
    ends = [float(t.strip("[]").split(",")[-1]) for t in cols[3]]
    lib = reidentification_risk(cols[:2], every=7200, times=ends)
    assert hours["windows"] == len(lib.windows) >= 2 and hours["worst_window"] == lib.worst()


def test_a_population_file_sets_journalist_and_marketer_risk(tmp_path: Path) -> None:
    rel = tmp_path / "rel.csv"
    rel.write_text('u,age,zip\n1,"[30,34]",12*\n2,"[30,34]",12*\n3,"[35,39]",13*\n')
    pop = tmp_path / "pop.csv"
    pop.write_text('zip,age,count\n12*,"[30,34]",10\n13*,"[35,39]",4\n')
    got = risk(str(rel), "--qi", "age,zip", "--population", str(pop))["overall"]
    want = reidentification_risk([["[30,34]", "[30,34]", "[35,39]"], ["12*", "12*", "13*"]],
                                 population=population_counts(
                                     [["[30,34]", "[35,39]"], ["12*", "13*"]], [10, 4]))
    assert got["journalist"] == want.overall.journalist == 0.25
    assert got["marketer"] == want.overall.marketer and got["prosecutor"] == 1.0
    micro = tmp_path / "micro.csv"  # no count column: one row each
    micro.write_text('age,zip\n"[30,34]",12*\n"[30,34]",12*\n"[30,34]",12*\n"[35,39]",13*\n')
    assert risk(str(rel), "--qi", "age,zip", "--population", str(micro))["overall"][
        "journalist"] == 1.0


def test_usage_and_input_errors_exit_2(tmp_path: Path) -> None:
    rel = tmp_path / "rel.csv"
    rel.write_text('u,t,a\n1,5,x\n2,"[1,x]",y\n')
    cases = [
        (["--qi", "a", "--window", "2", "--every", "1", "--time", "t"], "not both"),
        (["--qi", "a", "--every", "10"], "--time"),
        (["--qi", "nope"], "nope"),
        (["--qi", "a", "--every", "10", "--time", "t"], "neither a number"),
        (["--qi", "a", "--every", "0", "--time", "t"], "> 0"),
    ]
    for args, message in cases:
        res = runner.invoke(app, ["risk", str(rel), *args])
        assert res.exit_code == 2, (args, res.output)
        assert message in res.output, (args, res.output)
    res = runner.invoke(app, ["risk", str(tmp_path / "missing.csv"), "--qi", "a"])
    assert res.exit_code == 2


def test_castle_risk_summary_equals_streamanon_risk_on_its_output(tmp_path: Path) -> None:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(600, seed=4))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    for name in ("out.csv", "out.jsonl"):
        out = tmp_path / name
        gauges = tmp_path / f"{name}.prom"
        res = runner.invoke(app, ["castle", "--rules", str(rules), "--delta", "300", str(data),
                                  "-o", str(out), "--risk", "--risk-window", "100",
                                  "--risk-metrics", str(gauges), "--json"])
        assert res.exit_code == 0, res.output
        got = json.loads(res.stdout)["risk"]
        qis = got["qi"]
        assert qis == RuleSet.load(rules).quasi_identifiers  # the rules' by default
        want = risk(str(out), "--qi", ",".join(qis), "--window", "100")
        assert got["overall"] == want["overall"]
        assert got["worst_window"] == want["worst_window"]
        assert got["windows"] == want["windows"] > 1
        # the gauges file holds the whole release's figures, in Prometheus' text format
        from prometheus_client.parser import text_string_to_metric_families

        values = {s.name: s.value for f in text_string_to_metric_families(gauges.read_text())
                  for s in f.samples}
        assert values["streamanon_release_prosecutor"] == want["overall"]["prosecutor"]
        assert values["streamanon_release_smallest_class"] == \
            want["overall"]["smallest_class"]
        assert values["streamanon_release_rows"] == want["overall"]["rows"]
    # --risk-qi names the columns; an unknown one, or stdout as the output, exits 2
    out = tmp_path / "out2.csv"
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--delta", "300", str(data),
                              "-o", str(out), "--risk-qi", "primary_use,year_built", "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)["risk"]
    assert got["overall"] == risk(str(out), "--qi", "primary_use,year_built")["overall"]
    for extra in (["-o", str(tmp_path / "o3.csv"), "--risk-qi", "nope"], ["--risk"]):
        res = runner.invoke(app, ["castle", "--rules", str(rules), str(data), *extra])
        assert res.exit_code == 2, res.output

"""``streamanon castle``, ``verify castle`` and ``experiment castle`` end to end."""

from __future__ import annotations

import csv
import json

from typer.testing import CliRunner

from streamanon.cli import app
from streamanon.data import ashrae

runner = CliRunner()


def write_inputs(tmp_path, n: int = 900):
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(n, seed=2))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    return data, rules


def test_castle_then_verify(tmp_path) -> None:
    data, rules = write_inputs(tmp_path)
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "5", "--l", "2",
                              "--delta", "300", str(data), "-o", str(out),
                              "--suppressed", str(tmp_path / "sup.csv"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["balanced"] and summary["read"] == 900
    assert summary["released"] + summary["suppressed"] == 900
    assert set(summary["info_loss"]) == {*ashrae.NUMERIC_QI, "primary_use"}
    assert all(0 <= v <= 1 for v in summary["info_loss"].values())
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == summary["released"]
    assert list(rows[0]) == ashrae.COLUMNS
    assert rows[0]["square_feet"].startswith("[")
    ok = runner.invoke(app, ["verify", "castle", str(out), "--id", "building_id", "--qi",
                             ",".join([*ashrae.NUMERIC_QI, "primary_use"]), "--sa",
                             "meter_reading", "--k", "5", "--l", "2", "--input", str(data),
                             "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["ok"]


def test_verify_finds_a_tampered_output(tmp_path) -> None:
    data, rules = write_inputs(tmp_path, 600)
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "5", "--l", "0",
                              "--delta", "300", str(data), "-o", str(out), "--json",
                              "--loss-column", "info_loss"])
    assert res.exit_code == 0, res.output
    with out.open() as fh:
        released = list(csv.DictReader(fh))
    assert all(0 <= float(r["info_loss"]) <= 1 for r in released)
    lines = out.read_text().splitlines()
    header = lines[0].split(",")
    first = next(csv.reader([lines[1]]))
    first[header.index("building_id")] = "1000"  # a new individual, and one less for its class
    first[header.index("square_feet")] = "[1,2]"  # alone in its own class
    lines[1] = ",".join(f'"{x}"' for x in first)
    out.write_text("\n".join(lines) + "\n")
    res = runner.invoke(app, ["verify", "castle", str(out), "--rules", str(rules), "--k", "5",
                              "--l", "0"])
    assert res.exit_code == 1
    assert "counterexample" in res.output and "distinct individual" in res.output


def test_bad_lines_fail_or_skip_with_line_numbers(tmp_path) -> None:
    _, rules = write_inputs(tmp_path, 10)
    src = tmp_path / "bad.jsonl"
    good = dict(next(ashrae.generate(1, seed=1)))
    rows = [good, {**good, "primary_use": "Casino"}, {**good, "square_feet": "big"}, good]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n{oops\n")
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "1", "--l", "0",
                              str(src), "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2
    assert "bad.jsonl:2" in res.output and "unknown category 'Casino'" in res.output
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "1", "--l", "0",
                              str(src), "-o", str(tmp_path / "o.jsonl"), "--on-error", "skip",
                              "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert (s["read"], s["released"], s["rejected"]) == (5, 2, 3) and s["balanced"]
    rejected = [json.loads(x) for x in (tmp_path / "o.jsonl.rejects.jsonl").read_text()
                .splitlines()]
    assert [r["line"] for r in rejected] == [2, 3, 5]


def test_bad_rules_file_is_a_clear_error(tmp_path) -> None:
    rules = tmp_path / "r.toml"
    rules.write_text('id = "u"\n[[attribute]]\nname = "a"\ngeneralizer = "rnage"\n')
    res = runner.invoke(app, ["castle", "--rules", str(rules), "in.csv"])
    assert res.exit_code == 2 and "unknown generalizer 'rnage'" in res.output


def test_experiment_subset_writes_rows_and_plots(tmp_path) -> None:
    res = runner.invoke(app, ["experiment", "castle", "--workdir", str(tmp_path), "--k", "5,10",
                              "--delta", "200,400", "--l", "0", "--n", "700", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    with open(summary["csv"]) as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["k"], r["delta"]) for r in rows} == {("5", "200"), ("10", "200"), ("5", "400"),
                                                    ("10", "400")}
    for r in rows:
        assert int(r["released"]) + int(r["suppressed"]) == 700
        assert float(r["latency_ms"]) >= 0
    assert len(summary["plots"]) == 2
    for p in summary["plots"]:
        with open(p, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_demo_part_runs_and_verifies(tmp_path) -> None:
    from streamanon.cli.castle import castle_demo

    summary = castle_demo(tmp_path, seed=3, n=890)
    assert summary["balanced"] and summary["read"] == 890
    assert summary["checker"]["ok"] and summary["checker"]["min_individuals"] >= 5


def test_castle_split_median_then_verify(tmp_path) -> None:
    data, rules = write_inputs(tmp_path)
    outs = {}
    for split in ("prink", "median", "window"):
        out = tmp_path / f"out-{split}.csv"
        res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "5", "--l", "2",
                                  "--delta", "900", "--split", split, str(data), "-o",
                                  str(out), "--json"])
        assert res.exit_code == 0, res.output
        ok = runner.invoke(app, ["verify", "castle", str(out), "--rules", str(rules),
                                 "--k", "5", "--l", "2", "--input", str(data), "--json"])
        assert ok.exit_code == 0, ok.output
        assert json.loads(ok.stdout)["ok"]
        outs[split] = out.read_text()
    assert outs["prink"] != outs["median"]
    assert outs["window"] not in (outs["prink"], outs["median"])
    bad = runner.invoke(app, ["castle", "--rules", str(rules), "--split", "widest", str(data)])
    assert bad.exit_code != 0


def blank_some(data, tmp_path, every: int = 11):
    """A copy of ``data`` with every ``every``-th row's square_feet and primary_use empty;
    returns it and the number of rows with an empty quasi-identifier."""
    with data.open() as fh:
        rows = list(csv.DictReader(fh))
    n = 0
    for i, r in enumerate(rows):
        if i % every == 3:
            r["square_feet"] = ""
            n += 1
        elif i % every == 7:
            r["primary_use"] = ""
            n += 1
    path = tmp_path / "blank.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path, n


def test_missing_reject_suppress_star_then_verify(tmp_path) -> None:
    data, rules = write_inputs(tmp_path, 600)
    blank, n_blank = blank_some(data, tmp_path)
    base = ["castle", "--rules", str(rules), "--k", "5", "--l", "2", "--delta", "300",
            str(blank), "--json"]
    res = runner.invoke(app, [*base, "-o", str(tmp_path / "r.csv")])
    assert res.exit_code == 2
    assert "blank.csv:5: missing field square_feet" in res.output
    res = runner.invoke(app, [*base, "-o", str(tmp_path / "r.csv"), "--missing", "reject",
                              "--on-error", "skip"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["rejected"] == n_blank and summary["params"]["missing"] == "reject"
    assert "suppressed_missing" not in summary
    for mode in ("suppress", "star"):
        out, sup = tmp_path / f"{mode}.csv", tmp_path / f"{mode}.sup.csv"
        res = runner.invoke(app, [*base, "-o", str(out), "--suppressed", str(sup),
                                  "--missing", mode])
        assert res.exit_code == 0, res.output
        summary = json.loads(res.stdout)
        assert summary["params"]["missing"] == mode
        assert summary["rejected"] == 0 and summary["balanced"]
        assert summary["read"] == 600 == summary["published"] + summary["suppressed"]
        with out.open() as fh:
            released = list(csv.DictReader(fh))
        if mode == "suppress":
            assert summary["suppressed_missing"] == n_blank
            assert summary["suppressed_by_reason"]["missing value"] == n_blank
            with sup.open() as fh:
                reasons = [r["reason"] for r in csv.DictReader(fh)]
            assert reasons.count("missing value") == n_blank
            assert all(r["square_feet"] and r["primary_use"] for r in released)
        else:
            assert "suppressed_missing" not in summary
            assert sum(r["primary_use"] == "*" for r in released) >= n_blank // 2
        ok = runner.invoke(app, ["verify", "castle", str(out), "--rules", str(rules), "--k",
                                 "5", "--l", "2", "--input", str(blank), "--suppressed",
                                 str(sup), "--json"])
        assert ok.exit_code == 0, ok.output
        assert json.loads(ok.stdout)["ok"]


def test_missing_from_the_config_file_and_refused_values(tmp_path) -> None:
    data, rules = write_inputs(tmp_path, 300)
    blank, _ = blank_some(data, tmp_path)
    config = tmp_path / "c.toml"
    config.write_text('missing = "star"\n')
    args = ["castle", "--rules", str(rules), "--delta", "100", str(blank), "--json"]
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "a.csv"), "--config", str(config)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["params"]["missing"] == "star"
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "b.csv"), "--missing", "star"])
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "c.csv"), "--missing", "drop"])
    assert res.exit_code == 2 and "--missing" in res.output


def test_flink_castle_shares_the_missing_option() -> None:
    from streamanon.cli.flink import flink_castle
    from streamanon.pipeline.stages import signature_params

    res = runner.invoke(app, ["flink", "castle", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "--missing" in res.output
    params = [p.name for p in __import__("inspect").signature(flink_castle).parameters.values()]
    assert "missing" in params
    from streamanon.castle import CastleAnonymizer

    assert signature_params(CastleAnonymizer, {"missing": "star", "k": 3}) == {
        "k": 3, "missing": "star"}


def test_hierarchy_scope_cluster_is_summarized_and_its_release_verifies(tmp_path) -> None:
    data, rules = write_inputs(tmp_path, 600)
    out = {}
    for scope in ("shared", "cluster"):
        out[scope] = tmp_path / f"out-{scope}.csv"
        res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "5", "--l", "2",
                                  "--delta", "300", str(data), "-o", str(out[scope]),
                                  "--hierarchy-scope", scope, "--json"])
        assert res.exit_code == 0, res.output
        summary = json.loads(res.stdout)
        assert summary["params"].get("hierarchy_scope") == (None if scope == "shared"
                                                            else "cluster")
        ok = runner.invoke(app, ["verify", "castle", str(out[scope]), "--rules", str(rules),
                                 "--k", "5", "--l", "2", "--input", str(data), "--json"])
        assert ok.exit_code == 0, ok.output
        assert json.loads(ok.stdout)["ok"]
    # the rules configure every primary_use: both scopes release the same file
    assert out["shared"].read_bytes() == out["cluster"].read_bytes()
    bad = runner.invoke(app, ["castle", "--rules", str(rules), str(data), "-o",
                              str(tmp_path / "x.csv"), "--hierarchy-scope", "tree"])
    assert bad.exit_code == 2

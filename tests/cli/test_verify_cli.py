"""``streamanon verify z`` and ``verify castle`` end to end: exit codes (0 ok, 1 problem found,
2 usage or input error), defaults equal to ``castle``'s, empty releases, help with examples."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from streamanon.cli import app
from streamanon.data import ashrae

runner = CliRunner()


def run_castle(tmp_path: Path, *extra: str, n: int = 700) -> tuple[Path, Path, Path, Path]:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(n, seed=2))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    out, sup = tmp_path / "out.csv", tmp_path / "sup.csv"
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--delta", "300", str(data),
                              "-o", str(out), "--suppressed", str(sup), *extra])
    assert res.exit_code == 0, res.output
    return data, rules, out, sup


def verify_castle(out: Path, rules: Path, *extra: str):
    return runner.invoke(app, ["verify", "castle", str(out), "--rules", str(rules), *extra])


def test_castle_then_verify_with_castles_defaults(tmp_path) -> None:
    data, rules, out, sup = run_castle(tmp_path)  # k = 5, l = 2 by default
    res = verify_castle(out, rules, "--input", str(data), "--suppressed", str(sup), "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["ok"] and report["params"] == {"k": 5, "l": 2}
    assert report["input_rows"] == 700 and report["lost"] == report["unverified"] == 0
    assert report["rows"] + report["suppressed_rows"] == 700


def test_defaults_of_verify_castle_equal_castles() -> None:
    group = typer.main.get_command(app)
    ctx = group.make_context("streamanon", ["castle", "--help"], resilient_parsing=True)
    castle = group.get_command(ctx, "castle")
    verify = group.get_command(ctx, "verify").get_command(ctx, "castle")  # type: ignore[union-attr]

    def defaults(cmd):
        return {p.name: p.default for p in cmd.params if p.name in ("k", "l")}

    assert defaults(verify) == defaults(castle) == {"k": 5, "l": 2}


def test_k_and_l_default_to_the_rules_parameters_table(tmp_path) -> None:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(700, seed=2))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml().replace('time = "timestamp"\n',
                                                 'time = "timestamp"\n[parameters]\nk = 9\n'))
    out, summary = tmp_path / "out.csv", tmp_path / "summary.json"
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--delta", "300", str(data),
                              "-o", str(out), "--summary", str(summary)])
    assert res.exit_code == 0, res.output
    said = json.loads(summary.read_text())
    assert said["parameters"]["k"] == 9 and said["params"]["k"] == 5, said
    assert said["individuals_seen"]["counted_up_to"] == 9
    res = verify_castle(out, rules, "--json")  # k from the rules, l castle's default
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["params"] == {"k": 9, "l": 2}
    res = verify_castle(out, rules, "--k", "3", "--l", "0", "--json")  # given: kept
    assert res.exit_code == 0 and json.loads(res.stdout)["params"] == {"k": 3, "l": 0}
    res = verify_castle(out, rules, "--k", "10", "--json")  # the rules' k = 9 was met, not 10
    assert res.exit_code == 1 and json.loads(res.stdout)["k_violations"] > 0


def test_a_tampered_release_exits_1_with_the_counterexample(tmp_path) -> None:
    data, rules, out, _ = run_castle(tmp_path)
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    first = rows[0]
    use = first["primary_use"]
    for r in rows:  # the whole class says "banana": classes intact, coverage broken
        if r["primary_use"] == use and r["square_feet"] == first["square_feet"]:
            r["primary_use"] = "banana"
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(first))
        w.writeheader()
        w.writerows(rows)
    res = verify_castle(out, rules, "--input", str(data))
    assert res.exit_code == 1
    assert "counterexample: released row" in res.stderr and "'banana'" in res.stderr
    # without the input, k and l still hold: only the coverage check sees the forgery
    assert verify_castle(out, rules).exit_code == 0


def test_an_empty_release_because_l_cannot_be_met_is_not_ok(tmp_path) -> None:
    data, rules, out, _ = run_castle(tmp_path, "--l", "500", n=300)
    assert len(out.read_text().splitlines()) == 1  # header only
    res = verify_castle(out, rules, "--l", "500", "--input", str(data))
    assert res.exit_code == 1
    assert "nothing was released" in res.stderr and "fewer than l = 500" in res.stderr
    ok = verify_castle(out, rules, "--l", "500", "--input", str(data), "--allow-empty")
    assert ok.exit_code == 0


def test_a_dropped_row_is_lost_in_the_accounting(tmp_path) -> None:
    data, rules, out, sup = run_castle(tmp_path)
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:1] + lines[2:]) + "\n")
    res = verify_castle(out, rules, "--input", str(data), "--suppressed", str(sup), "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["lost"] == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--l", "2", "--id", "building_id", "--qi", "square_feet"], "needs a sensitive attribute"),
    (["--id", "building_id"], "give --rules"),
    (["--rules", "RULES", "--qi", "square_feet"], "not both"),
    (["--rules", "MISSING"], "No such file"),
    (["--rules", "RULES", "--suppressed", "x.csv"], "needs --input"),
    (["--rules", "RULES", "--input", "MISSING"], "No such file"),
])
def test_usage_and_input_errors_exit_2(tmp_path, args, message) -> None:
    _, rules, out, _ = run_castle(tmp_path, n=200)
    args = [str(rules) if a == "RULES" else str(tmp_path / "nope") if a == "MISSING" else a
            for a in args]
    res = runner.invoke(app, ["verify", "castle", str(out), *args])
    assert res.exit_code == 2 and message in res.stderr, res.output


def test_verify_z_exit_codes(tmp_path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("t,u,a\n0,a,x\n1,b,x\n2,c,y\n")
    out = tmp_path / "out.csv"
    out.write_text("t,u,a\n1,b,x\n")
    assert runner.invoke(app, ["verify", "z", "--z", "2", "--delta-t", "9", str(src),
                               str(out)]).exit_code == 0
    out.write_text("t,u,a\n1,b,x\n2,c,y\n")
    res = runner.invoke(app, ["verify", "z", "--z", "2", "--delta-t", "9", str(src), str(out)])
    assert res.exit_code == 1 and "only 1 distinct user" in res.stderr
    out.write_text("t,u,a\n1,b\n")
    res = runner.invoke(app, ["verify", "z", "--z", "2", "--delta-t", "9", str(src), str(out)])
    assert res.exit_code == 2 and "out.csv:2" in res.stderr
    res = runner.invoke(app, ["verify", "z", "--z", "2", "--delta-t", "9", str(src),
                              str(tmp_path / "nope.csv")])
    assert res.exit_code == 2 and "No such file" in res.stderr


@pytest.mark.parametrize(("command", "shown"), [
    ("z", ["Examples:", "streamanon verify z --z 5", "[t-Δt, t]", "Exit codes"]),
    ("castle", ["Examples:", "streamanon verify castle out.csv --rules", "[lo,hi]",
                "Exit codes"]),
])
def test_help_has_examples_and_keeps_square_brackets(command, shown) -> None:
    res = runner.invoke(app, ["verify", command, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    for text in shown:
        assert text in res.stdout, text

"""``castle --diversity entropy|recursive --c C`` and ``verify castle --diversity``: the run
meets the rule, the checker confirms it, and refuses a release that does not."""

from __future__ import annotations

import csv
import json
import random

from typer.testing import CliRunner

from streamanon.cli import app

runner = CliRunner()
RULES = """id = "u"
[[attribute]]
name = "a"
generalizer = "range"
[[attribute]]
name = "s"
sensitive = true
"""


def _inputs(tmp_path):
    rnd = random.Random(4)
    data = tmp_path / "in.csv"
    with data.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["u", "a", "s"])
        for _ in range(600):
            w.writerow([f"p{rnd.randrange(30)}", rnd.randint(0, 99),
                        rnd.choices("vwxyz", weights=[50, 20, 15, 10, 5])[0]])
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    return data, rules


def _castle(data, rules, out, *extra: str):
    return runner.invoke(app, ["castle", "--rules", str(rules), "--k", "3", "--l", "3",
                               "--delta", "60", "--beta", "8", str(data), "-o", str(out),
                               "--json", *extra])


def _verify(out, rules, data, *extra: str):
    return runner.invoke(app, ["verify", "castle", str(out), "--rules", str(rules), "--k", "3",
                               "--l", "3", "--input", str(data), "--json", *extra])



def _skew_first_class(out, value: str) -> None:
    """Every row of the output's first class (by attribute ``a``) gets sensitive ``value``:
    that class no longer looks like the reference."""
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    first = rows[0]["a"]
    for r in rows:
        if r["a"] == first:
            r["s"] = value
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

def test_each_rule_runs_and_verifies(tmp_path) -> None:
    data, rules = _inputs(tmp_path)
    for extra in (["--diversity", "entropy"], ["--diversity", "recursive", "--c", "2"]):
        out = tmp_path / f"out-{extra[1]}.csv"
        res = _castle(data, rules, out, *extra)
        assert res.exit_code == 0, res.output
        summary = json.loads(res.stdout)
        assert summary["params"]["diversity"] == extra[1]
        assert summary["released"] > 300
        ok = _verify(out, rules, data, *extra)
        assert ok.exit_code == 0, ok.output
        report = json.loads(ok.stdout)
        assert report["ok"] and report["diversity"]["ok"]
        assert report["diversity"]["measure"] == extra[1]


def test_a_distinct_release_fails_the_entropy_check(tmp_path) -> None:
    data, rules = _inputs(tmp_path)
    out = tmp_path / "out.csv"
    assert _castle(data, rules, out).exit_code == 0
    assert _verify(out, rules, data).exit_code == 0  # distinct 3-diversity holds
    bad = _verify(out, rules, data, "--diversity", "entropy")
    assert bad.exit_code == 1
    assert "fails entropy 3-diversity of s" in bad.stderr
    assert json.loads(bad.stdout)["diversity"]["violations"] > 0


def test_a_tampered_entropy_release_exits_1(tmp_path) -> None:
    data, rules = _inputs(tmp_path)
    out = tmp_path / "out.csv"
    assert _castle(data, rules, out, "--diversity", "entropy").exit_code == 0
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    first = rows[0]["a"]
    same = [r for r in rows if r["a"] == first]
    for r in same[2:]:  # the class keeps its values, skewed to one
        r["s"] = same[0]["s"]
    same[1]["s"] = "zz" if same[0]["s"] != "zz" else "yy"
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    res = _verify(out, rules, data, "--diversity", "entropy")
    assert res.exit_code == 1 and first in res.stderr


def test_c_goes_with_recursive_only(tmp_path) -> None:
    data, rules = _inputs(tmp_path)
    out = tmp_path / "out.csv"
    res = _castle(data, rules, out, "--diversity", "recursive")
    assert res.exit_code == 2 and "needs c > 0" in res.output
    assert _castle(data, rules, out, "--diversity", "entropy", "--c", "2").exit_code == 2
    assert _verify(out, rules, data, "--diversity", "recursive").exit_code == 2
    assert _verify(out, rules, data, "--diversity", "gini").exit_code == 2


def test_t_closeness_runs_verifies_and_catches_a_tampered_class(tmp_path) -> None:
    data, rules = _inputs(tmp_path)
    out = tmp_path / "out.csv"
    extra = ["--t", "0.15", "--t-reference", str(data)]
    res = _castle(data, rules, out, *extra)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["params"]["t"] == 0.15
    ok = _verify(out, rules, data, *extra)
    assert ok.exit_code == 0, ok.output
    report = json.loads(ok.stdout)["closeness"]
    assert report["ok"] and report["worst"]["s"] <= 0.15
    plain = tmp_path / "plain.csv"
    assert _castle(data, rules, plain).exit_code == 0
    assert _verify(plain, rules, data, *extra).exit_code == 1  # no t: classes stray
    _skew_first_class(out, "v")
    bad = _verify(out, rules, data, *extra)
    assert bad.exit_code == 1
    assert json.loads(bad.stdout)["closeness"]["violations"] == 1
    assert _castle(data, rules, out, "--t", "0.2").exit_code == 2
    assert _verify(out, rules, data, "--t", "0.2").exit_code == 2


def test_the_rules_and_closeness_options_come_from_a_config_file(tmp_path) -> None:
    data, rules = _inputs(tmp_path)
    given = tmp_path / "given.csv"
    options = ["--diversity", "entropy", "--t", "0.2", "--t-reference", str(data)]
    assert _castle(data, rules, given, *options).exit_code == 0
    config = tmp_path / "castle.toml"
    config.write_text(f'diversity = "entropy"\nt = 0.2\nt-reference = "{data}"\n')
    from_file = tmp_path / "from_file.csv"
    res = _castle(data, rules, from_file, "--config", str(config))
    assert res.exit_code == 0, res.output
    params = json.loads(res.stdout)["params"]
    assert params["diversity"] == "entropy" and params["t"] == 0.2
    assert from_file.read_bytes() == given.read_bytes()
    config.write_text('diversity = "recursive"\nc = 2.5\n')
    res = _castle(data, rules, from_file, "--config", str(config))
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["params"]["c"] == 2.5
    ok = _verify(from_file, rules, data, "--diversity", "recursive", "--c", "2.5")
    assert ok.exit_code == 0, ok.output


HIERARCHY = """[s]
paths = [["common", "v"], ["common", "w"], ["rare", "x"], ["rare", "y"], ["rare", "z"]]
"""


def test_hierarchical_closeness_runs_verifies_and_catches_a_tampered_class(tmp_path) -> None:
    data, rules = _inputs(tmp_path)
    tree = tmp_path / "tree.toml"
    tree.write_text(HIERARCHY)
    out = tmp_path / "out.csv"
    extra = ["--t", "0.1", "--t-reference", str(data), "--closeness", "hierarchical",
             "--t-hierarchy", str(tree)]
    res = _castle(data, rules, out, *extra)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["params"]["closeness"] == "hierarchical"
    ok = _verify(out, rules, data, *extra)
    assert ok.exit_code == 0, ok.output
    report = json.loads(ok.stdout)["closeness"]
    assert report["ok"] and report["ground_distance"] == {"s": "hierarchical"}
    assert report["worst"]["s"] <= 0.1
    _skew_first_class(out, "z")
    bad = _verify(out, rules, data, *extra)
    assert bad.exit_code == 1
    assert json.loads(bad.stdout)["closeness"]["violations"] == 1
    # the options go together, on both commands
    assert _castle(data, rules, out, *extra[:6]).exit_code == 2
    assert _verify(out, rules, data, *extra[:6]).exit_code == 2
    assert _castle(data, rules, out, "--closeness", "hierarchical", "--t-hierarchy",
                   str(tree)).exit_code == 2  # without --t

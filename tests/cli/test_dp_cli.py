"""``castle --dp-epsilon E --dp-beta B``: left-out tuples are counted and written with their
reason, the released classes pass ``verify castle`` on the perturbed values, and the options
come from a config file too."""

from __future__ import annotations

import csv
import json
import random

from typer.testing import CliRunner

from streamanon.castle.dp import NOT_SAMPLED
from streamanon.cli import app

runner = CliRunner()
RULES = """id = "u"
[[attribute]]
name = "a"
generalizer = "range"
domain = [0, 100]
[[attribute]]
name = "s"
sensitive = true
"""


def _inputs(tmp_path):
    rnd = random.Random(6)
    data = tmp_path / "in.csv"
    with data.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["u", "a", "s"])
        for _ in range(800):
            w.writerow([f"p{rnd.randrange(40)}", rnd.randint(0, 99), rnd.choice("vwxyz")])
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    return data, rules


def _castle(data, rules, out, *extra: str):
    return runner.invoke(app, ["castle", "--rules", str(rules), "--k", "3", "--l", "2",
                               "--delta", "60", "--beta", "8", str(data), "-o", str(out),
                               "--json", *extra])


def _verify(out, rules, *extra: str):
    return runner.invoke(app, ["verify", "castle", str(out), "--rules", str(rules), "--k", "3",
                               "--l", "2", "--json", *extra])


def _read(path):
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_dp_run_counts_left_out_tuples_and_verifies(tmp_path) -> None:
    data, rules = _inputs(tmp_path)
    out, sup = tmp_path / "out.csv", tmp_path / "sup.csv"
    res = _castle(data, rules, out, "--dp-epsilon", "5", "--dp-beta", "0.75",
                  "--suppressed", str(sup))
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["params"]["dp_epsilon"] == 5 and summary["params"]["dp_beta"] == 0.75
    assert "dp_rng" not in summary["params"]
    left_out = summary["suppressed_by_reason"][NOT_SAMPLED]
    assert 100 < left_out < 300  # Binomial(800, 0.25): mean 200, sd 12
    suppressed = _read(sup)
    assert sum(r["reason"] == NOT_SAMPLED for r in suppressed) == left_out
    released = _read(out)
    assert summary["read"] == 800 == len(released) + len(suppressed)
    ok = _verify(out, rules)
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["ok"]
    # against the input the checker finds values the noise moved out of their range; the
    # classes themselves still pass
    moved = _verify(out, rules, "--suppressed", str(sup), "--input", str(data))
    assert moved.exit_code == 1, moved.output
    report = json.loads(moved.stdout)
    assert report["not_covered"] > 0, report
    assert report["k_violations"] == 0 and report["l_violations"] == 0, report


def test_dp_options_come_from_a_config_file_and_are_checked(tmp_path) -> None:
    data, rules = _inputs(tmp_path)
    config = tmp_path / "run.toml"
    config.write_text("dp-epsilon = 2.0\ndp_beta = 0.5\n")
    out = tmp_path / "out.csv"
    res = _castle(data, rules, out, "--config", str(config))
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["params"]["dp_epsilon"] == 2.0 and summary["params"]["dp_beta"] == 0.5
    assert summary["suppressed_by_reason"][NOT_SAMPLED] > 250
    bad = _castle(data, rules, out, "--dp-beta", "0")
    assert bad.exit_code == 2 and "dp_beta" in bad.output
    bad = _castle(data, rules, out, "--dp-epsilon", "0")
    assert bad.exit_code == 2 and "dp_epsilon" in bad.output


def test_without_dp_options_nothing_is_sampled_out(tmp_path) -> None:
    data, rules = _inputs(tmp_path)
    out = tmp_path / "out.csv"
    res = _castle(data, rules, out)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert NOT_SAMPLED not in summary["suppressed_by_reason"]
    assert summary["params"]["dp_epsilon"] is None and summary["params"]["dp_beta"] is None

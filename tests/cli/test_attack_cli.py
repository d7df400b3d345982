"""``streamanon attack intersect`` end to end on a CASTLE release of the ASHRAE-shaped stream:
the building attributes narrow, the weather and the time vary (the attack does not apply), the
intersections hold the true values, and usage errors exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from streamanon.cli import app
from streamanon.data import ashrae

runner = CliRunner()


def test_attack_on_a_castle_release(tmp_path: Path) -> None:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(900, seed=3))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--delta", "300", str(data),
                              "-o", str(out)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["attack", "intersect", str(out), "--rules", str(rules),
                              "--input", str(data), "--k", "5", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["rows"] == 900 and report["individuals"] == 89 and report["k"] == 5
    attrs = report["attributes"]
    for name in ("square_feet", "year_built", "floor_count", "primary_use"):
        a = attrs[name]
        assert a["varying"] == 0.0 and a["constant"] == 1.0 and a["contains_input"] == 1.0
        assert 0.0 <= a["median"] <= 1.0
    assert attrs["timestamp"]["constant"] == 0.0
    assert attrs["primary_use"]["kind"] == "hierarchy"
    # the same through --id and --qi, without the rules: numeric attributes only
    res = runner.invoke(app, ["attack", "intersect", str(out), "--id", "building_id", "--qi",
                              "square_feet,year_built", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["attributes"]["square_feet"] == {
        k: v for k, v in attrs["square_feet"].items() if k not in ("constant",
                                                                   "contains_input")} | {
        "constant": None, "contains_input": None}


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    rel = tmp_path / "rel.csv"
    rel.write_text("u,x\na,1\n")
    for args in (["--qi", "x"], ["--id", "u"], ["--id", "nope", "--qi", "x"]):
        res = runner.invoke(app, ["attack", "intersect", str(rel), *args])
        assert res.exit_code == 2, (args, res.output)


def test_attack_reports_the_static_bound_beside_the_other_attributes(tmp_path: Path) -> None:
    """A release bounded on three building attributes (``castle --static``): the attack told
    so (``--static``, or the rules' key) shows no individual narrowed below its first release
    on them, while the fourth constant attribute, not bound, is narrowed; on the release
    without the bound the same three attributes are narrowed."""
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(900, seed=3))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    bound = ("square_feet", "year_built", "floor_count")
    outs = {}
    for name, extra in (("bound", ["--static", ",".join(bound)]), ("plain", [])):
        outs[name] = tmp_path / f"{name}.csv"
        res = runner.invoke(app, ["castle", "--rules", str(rules), "--delta", "300",
                                  str(data), "-o", str(outs[name]), *extra])
        assert res.exit_code == 0, res.output

    def attack(out: Path, rules_file: Path, *extra: str) -> dict:
        res = runner.invoke(app, ["attack", "intersect", str(out), "--rules", str(rules_file),
                                  "--json", *extra])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    report = attack(outs["bound"], rules, "--static", ",".join(bound))
    side = report["static"]
    assert side["attributes"] == list(bound) and side["bound_holds"] is True
    assert side["narrowed_static"] == 0.0 < side["narrowed_other"]
    for name in bound:
        a = report["attributes"][name]
        assert a["static"] is True and a["narrowed"] == 0.0 and a["first"]["p10"] == 1.0
    assert report["attributes"]["primary_use"]["static"] is False
    assert report["attributes"]["primary_use"]["narrowed"] > 0
    # the rules' key says the same as --static
    keyed = tmp_path / "keyed.toml"
    text = ashrae.rules_toml()
    for name in bound:
        text = text.replace(f'name = "{name}"\n', f'name = "{name}"\nstatic = true\n')
    keyed.write_text(text)
    assert attack(outs["bound"], keyed) == report
    # without the bound, the same attributes narrow below the first release
    plain = attack(outs["plain"], keyed)["static"]
    assert plain["bound_holds"] is False and plain["narrowed_static"] > 0.5
    # the table names the section
    res = runner.invoke(app, ["attack", "intersect", str(outs["bound"]), "--rules", str(keyed)])
    assert res.exit_code == 0 and "narrowed_static" in res.output
    bad = runner.invoke(app, ["attack", "intersect", str(outs["bound"]), "--rules", str(rules),
                              "--static", "nope"])
    assert bad.exit_code == 2 and "nope" in bad.output

"""``castle --static COL[,COL]`` marks quasi-identifiers static as the rules' ``static = true``
does (byte-identical outputs, from the command line and from a ``--config`` file), ``verify
castle --static`` checks them, and ``--static-ttl`` / ``--static-max`` bound the anchors
with the forgotten ones counted in the ``--json`` summary."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from streamanon.cli import app
from streamanon.data import ashrae

runner = CliRunner()
STATIC = ("square_feet", "year_built", "floor_count", "primary_use")
HOUR = 3600


def _files(tmp_path):
    rows = list(ashrae.generate(2500, seed=5))
    t0 = rows[0]["timestamp"]
    # a third of the buildings are absent for 12 hours mid-stream
    rows = [r for r in rows if not (r["building_id"] % 3 == 0
                                    and t0 + 6 * HOUR <= r["timestamp"] < t0 + 18 * HOUR)]
    data = ashrae.write_csv(tmp_path / "in.csv", rows)
    plain = tmp_path / "rules.toml"
    plain.write_text(ashrae.rules_toml())
    keyed = tmp_path / "static.toml"
    text = ashrae.rules_toml()
    for name in STATIC:
        text = text.replace(f'name = "{name}"\n', f'name = "{name}"\nstatic = true\n')
    keyed.write_text(text)
    return data, plain, keyed


def _castle(data, rules, out, *extra: str):
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "4", "--l", "2",
                              "--delta", "200", str(data), "-o", str(out), "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _verify(out, rules, data, *extra: str):
    res = runner.invoke(app, ["verify", "castle", str(out), "--rules", str(rules), "--k", "4",
                              "--l", "2", "--input", str(data), "--json", *extra])
    return res.exit_code, json.loads(res.stdout)


def test_static_option_and_the_rules_key_give_byte_identical_outputs(tmp_path) -> None:
    data, plain, keyed = _files(tmp_path)
    by_key, by_option, by_config, none = (tmp_path / f"{n}.csv"
                                          for n in ("key", "option", "config", "none"))
    s_key = _castle(data, keyed, by_key)
    s_opt = _castle(data, plain, by_option, "--static", ",".join(STATIC))
    config = tmp_path / "castle.toml"
    config.write_text(f'static = "{",".join(STATIC)}"\n')
    s_cfg = _castle(data, plain, by_config, "--config", str(config))
    _castle(data, plain, none)
    assert by_option.read_bytes() == by_key.read_bytes() == by_config.read_bytes()
    assert by_option.read_bytes() != none.read_bytes()  # the option does bind the release
    assert s_opt["params"]["static"] == s_cfg["params"]["static"] == list(STATIC)
    assert s_key["params"]["static"] is None
    assert s_opt["anchors"] == s_key["anchors"]
    assert s_opt["anchors"]["forgotten"] == 0
    # the checker: from the rules key, or told by --static; not told, it checks no bound
    assert _verify(by_key, keyed, data)[1]["static_violations"] == 0
    code, report = _verify(by_option, plain, data, "--static", ",".join(STATIC))
    assert code == 0 and report["static_violations"] == 0
    code, report = _verify(none, plain, data, "--static", ",".join(STATIC))
    assert code != 0 and report["static_violations"] > 0  # the plain release narrows
    for wrong, said in (("square_feet,nope", "no attribute"),
                        ("meter_reading", "needs a quasi-identifier")):
        bad = runner.invoke(app, ["castle", "--rules", str(plain), str(data), "-o",
                                  str(tmp_path / "x.csv"), "--static", wrong])
        assert bad.exit_code == 2 and said in bad.output


def test_static_ttl_forgets_absent_anchors_and_says_so(tmp_path) -> None:
    data, plain, _ = _files(tmp_path)
    out = tmp_path / "ttl.csv"
    summary = _castle(data, plain, out, "--static", ",".join(STATIC),
                      "--static-ttl", str(6 * HOUR), "--static-max", "1000")
    absent = {b for b in range(200) if b % 3 == 0}
    anchors = summary["anchors"]
    assert anchors["ttl"] == 6 * HOUR and anchors["max_count"] == 1000
    assert 0 < anchors["forgotten"] <= len(absent)
    assert summary["params"]["static_ttl"] == 6 * HOUR
    # what forgetting gives up, as the checker sees it: some individual's later release no
    # longer covers its first one; k and l still hold
    code, report = _verify(out, plain, data, "--static", ",".join(STATIC))
    assert report["k_violations"] == report["l_violations"] == 0
    assert code != 0 and report["static_violations"] > 0
    wide = tmp_path / "wide.csv"
    assert _castle(data, plain, wide, "--static", ",".join(STATIC), "--static-ttl",
                   str(48 * HOUR))["anchors"]["forgotten"] == 0
    code, report = _verify(wide, plain, data, "--static", ",".join(STATIC))
    assert code == 0 and report["static_violations"] == 0

"""``streamanon simulate`` / ``experiment dezent`` / the demo section, end to end."""

from __future__ import annotations

import csv
import json

from typer.testing import CliRunner

from streamanon.cli import app
from streamanon.cli.dezent import dezent_demo

runner = CliRunner()
SMALL = ["--gateways", "4", "--max-sn", "6", "--cycles", "20", "--seed", "3"]


def run(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.stdout


def test_simulate_json_has_the_three_scenarios():
    code, out = run("simulate", *SMALL, "--z", "3", "--json")
    assert code == 0, out
    summary = json.loads(out)
    assert set(summary["scenarios"]) == {"centralized", "fully_decentralized", "dezent"}
    for m in summary["scenarios"].values():
        for key in ("publication_ratio", "measured", "published", "messages", "bytes",
                    "violations", "per_client_type", "per_ring_position"):
            assert key in m
        assert m["measured"] == 20 * summary["params"]["sensors"]
    assert summary["params"]["z"] == 3 and summary["params"]["delta_t"] == 7260


def test_exact_structure_matches_centralized_and_export_passes_the_checker(tmp_path):
    code, out = run("simulate", *SMALL, "--z", "3", "--structure", "exact", "--start-day", "40",
                    "--p-pub", "0.3", "--json", "--export", str(tmp_path))
    assert code == 0, out
    s = json.loads(out)["scenarios"]
    assert s["dezent"]["published"] == s["centralized"]["published"]
    for name in ("centralized", "fully_decentralized", "dezent"):
        path = tmp_path / f"published_{name}.csv"
        with open(path) as fh:
            assert sum(1 for _ in fh) - 1 == s[name]["published"]
        code, out = run("verify", "z", str(tmp_path / "measurements.csv"), str(path),
                        "--z", "3", "--delta-t", "7260", "--privacy-only", "--json")
        assert code == 0, out
        assert json.loads(out)["privacy_violations"] == 0


def test_simulate_table_and_bad_options():
    res = runner.invoke(app, ["simulate", *SMALL])
    assert res.exit_code == 0
    assert "dezent" in res.output
    code, _ = run("simulate", *SMALL, "--rule", "other")
    assert code == 2
    code, _ = run("simulate", *SMALL, "--structure", "hash")
    assert code == 2


def test_experiment_grid_rows_plots_and_parallel_determinism(tmp_path):
    args = ["experiment", "dezent", "--gateways", "2,3", "--z", "1,3", "--seeds", "1-2",
            "--max-sn", "4", "--days", "0.25", "--cbf-keys", "3,30", "--sweep-gateways", "4",
            "--fp-rates", "0.1,0.01", "--order-z", "3", "--sweep-z", "3", "--json"]
    code, out = run(*args, "--jobs", "1", "--workdir", str(tmp_path / "a"))
    assert code == 0, out
    summary = json.loads(out)
    # main grid, CBF sizes, and per seed: 2 FP rates + exact, 2 orders, direct + mix
    assert summary["runs"] == 2 * 2 * 2 + 2 * 2 + 2 * (3 + 2 + 2)
    findings = summary["findings"]
    assert set(findings) == {"position_bias", "gateway_linkability", "bytes_per_day_tradeoff"}
    link = findings["gateway_linkability"]
    assert link["direct_channel_only"] > 0.9 > link["mix_channel_only"]
    with open(summary["csv"]) as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == summary["runs"]
    for col in ("gateways", "max_sn", "seed", "z", "delta_t", "p_pub", "rule", "structure",
                "fp_rate", "cycles", "dezent.publication_ratio", "centralized.messages.total"):
        assert col in rows[0] and all(r[col] != "" for r in rows)
    names = sorted(p.split("/")[-1].split("_")[1] for p in summary["plots"])
    assert names == ["bytes", "collusion", "cost", "gw", "publication", "publication",
                     "publication", "violations"]
    code, out2 = run(*args, "--jobs", "2", "--workdir", str(tmp_path / "b"))
    assert code == 0, out2
    with open(json.loads(out2)["csv"]) as fh:
        assert list(csv.DictReader(fh)) == rows


def test_demo_section_exports_checks_and_plots(tmp_path):
    out = dezent_demo(tmp_path, seed=2)
    assert out["checker_ok"]["centralized"] and out["checker_ok"]["fully_decentralized"]
    assert (tmp_path / out["plot"].split("/")[-1]).exists()
    ratios = out["publication_ratio"]
    assert ratios[5]["centralized"] >= ratios[10]["centralized"] >= ratios[25]["centralized"]


def test_simulate_mix_and_random_order_report_linkability_bias_and_bytes():
    code, out = run("simulate", *SMALL, "--z", "3", "--publication", "mix",
                    "--publication-order", "random", "--json")
    assert code == 0, out
    s = json.loads(out)
    assert s["params"]["publication"] == "mix" and s["params"]["publication_order"] == "random"
    d = s["scenarios"]["dezent"]
    assert d["messages"]["gw_ce"] == 20  # one mix batch per cycle
    link = d["gateway_linkability"]
    assert link["floor"] == 0.25 and link["channel_only"]["balanced_accuracy"] < 0.5
    assert d["position_bias"] >= 1.0 and d["bytes_per_day"] > 0
    assert s["params"]["counter_bits"] == s["structure"]["bits"] < 20  # from the bound
    res = runner.invoke(app, ["simulate", *SMALL, "--publication", "mix"])
    assert res.exit_code == 0 and "gateway linkability (mix" in res.output
    assert run("simulate", *SMALL, "--publication", "proxy")[0] == 2
    assert run("simulate", *SMALL, "--publication-order", "ccc-last")[0] == 2


def test_every_entry_point_defaults_to_one_p_pub():
    """The CLI states its defaults literally (its modules load no protocol code for --help);
    this holds them to the protocol's one default, as the API, the daemons' configs, the
    simulation and the local site take it."""
    import dataclasses

    import typer

    from streamanon.dezent.protocol import DEFAULT_P_PUB, ProtocolConfig
    from streamanon.dezent.stream import DezentRing
    from streamanon.harness.local_site import LocalSiteSpec
    from streamanon.net.config import ProtocolSection
    from streamanon.sim.config import SimConfig

    root = typer.main.get_command(app)
    commands = {"simulate": root.commands["simulate"],
                "experiment dezent": root.commands["experiment"].commands["dezent"],
                "cluster init": root.commands["cluster"].commands["init"],
                "cluster up": root.commands["cluster"].commands["up"]}
    cli = {name: next(p.default for p in cmd.params if p.name == "p_pub")
           for name, cmd in commands.items()}
    assert cli == dict.fromkeys(commands, DEFAULT_P_PUB)
    for cls in (ProtocolConfig, SimConfig, ProtocolSection, LocalSiteSpec):
        field = next(f for f in dataclasses.fields(cls) if f.name == "p_pub")
        assert field.default == DEFAULT_P_PUB, cls
    import inspect

    assert inspect.signature(DezentRing).parameters["p_pub"].default == DEFAULT_P_PUB

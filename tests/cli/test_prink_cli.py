"""``streamanon experiment prink`` writes the CSV of every run and Prink's three figures;
``streamanon data ashrae`` turns files in the Kaggle layout into the paper's stream."""

from __future__ import annotations

import csv
import json

from typer.testing import CliRunner

from streamanon.cli import app
from tests.data.test_ashrae_paper import write_real_layout

runner = CliRunner()


def test_experiment_prink_small_grid(tmp_path) -> None:
    res = runner.invoke(app, ["experiment", "prink", "--n", "600", "--k", "3,5",
                              "--delta", "100", "--l", "0,2", "--repeat", "2", "--rate", "0",
                              "--workdir", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    with open(summary["csv"], encoding="utf-8") as fh:
        runs = list(csv.DictReader(fh))
    assert len(runs) == 2 * 2 * 2 and summary["runs"] == 8
    assert {(r["k"], r["l"], r["repeat"]) for r in runs} == {
        (k, lv, rep) for k in ("3", "5") for lv in ("0", "2") for rep in ("1", "2")}
    assert {r["beta"] for r in runs} == {"600"} and {r["mu"] for r in runs} == {"100"}
    assert {r["zeta"] for r in runs} == {"0"}
    assert all(int(r["released"]) + int(r["suppressed"]) == 600 for r in runs)
    assert {"loss_cluster_precip_depth_1_hr", "loss_tuple_square_feet",
            "latency_ms_mean"} <= set(runs[0])
    names = sorted(p.rsplit("/", 1)[-1] for p in summary["plots"])
    assert names == ["prink-fig3-info-loss-vs-k-per-tuple.png", "prink-fig3-info-loss-vs-k.png",
                     "prink-fig4-latency.png", "prink-fig5-internal-times.png"]
    assert all((tmp_path / n).stat().st_size > 10_000 for n in names)
    configs = summary["configs"]
    assert len(configs) == 4 and all(c["repeats"] == 2 for c in configs)


def test_experiment_prink_warns_when_delta_is_below_k(tmp_path) -> None:
    res = runner.invoke(app, ["experiment", "prink", "--n", "80", "--k", "10",
                              "--delta", "5", "--l", "0", "--repeat", "1", "--rate", "0",
                              "--workdir", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    assert "Prink requires δ >= k" in res.stderr


def test_data_ashrae_writes_the_filtered_stream(tmp_path) -> None:
    src = tmp_path / "kaggle"
    src.mkdir()
    write_real_layout(src)
    out, rules = tmp_path / "in.csv", tmp_path / "rules.toml"
    res = runner.invoke(app, ["data", "ashrae", str(src), "-o", str(out), "--rules",
                              str(rules), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"] == 3
    with out.open(encoding="utf-8") as fh:
        got = [(r["building_id"], r["meter_reading"]) for r in csv.DictReader(fh)]
    assert got == [("565", "10.5"), ("565", "11.5"), ("568", "6.0")]
    assert "precip_depth_1_hr" in rules.read_text()
    missing = runner.invoke(app, ["data", "ashrae", str(tmp_path), "-o", str(out)])
    assert missing.exit_code == 2 and "train.csv" in missing.stderr


def test_replot_redraws_from_the_runs_csv_and_prints_no_loss_where_nothing_was_released(
        tmp_path) -> None:
    grid = ["experiment", "prink", "--n", "300", "--k", "3,80", "--delta", "100", "--l", "0",
            "--repeat", "1", "--rate", "0", "--workdir", str(tmp_path)]
    res = runner.invoke(app, [*grid, "--json"])
    assert res.exit_code == 0, res.output
    configs = (tmp_path / "prink-configs.csv").read_bytes()
    figures = sorted(tmp_path.glob("prink-fig*.png"))
    for f in figures:
        f.unlink()
    again = runner.invoke(app, ["experiment", "prink", "--replot", "--workdir", str(tmp_path)],
                          env={"COLUMNS": "200"})
    assert again.exit_code == 0, again.output
    assert (tmp_path / "prink-configs.csv").read_bytes() == configs
    assert sorted(tmp_path.glob("prink-fig*.png")) == figures
    rows = {line.split("│")[2].strip(): line for line in again.stderr.splitlines()
            if line.count("│") > 5}
    assert rows["80"].count("—") == 5 and "0.000" not in rows["80"]  # loss, latency, times
    assert "—" not in rows["3"]
    missing = runner.invoke(app, ["experiment", "prink", "--replot", "--workdir",
                                  str(tmp_path / "none")])
    assert missing.exit_code == 2 and "prink-runs.csv" in missing.stderr


def test_every_finished_run_is_on_disk_before_the_grid_ends(tmp_path, monkeypatch) -> None:
    import streamanon.sim.prink as engine
    from streamanon.cli.prink import read_runs, run_prink

    seen: list[int] = []
    real = engine.run_one

    def count_then_run(*args, **kwargs):  # the real run, after a look at the CSV
        path = tmp_path / "prink-runs.csv"
        seen.append(len(read_runs(path)) if path.exists() else 0)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "run_one", count_then_run)
    run_prink(tmp_path, ks=[3], deltas=[100], ls=[0], n=200, repeat=3, rate=None, data=None,
              seed=1)
    assert seen == [0, 1, 2]  # each run found the ones before it written
    assert len(read_runs(tmp_path / "prink-runs.csv")) == 3


def test_replot_merges_grids_run_apart_into_one(tmp_path) -> None:
    from streamanon.cli.prink import read_runs

    def grid(name: str, ks: str) -> list[dict]:
        res = runner.invoke(app, ["experiment", "prink", "--n", "200", "--k", ks, "--delta",
                                  "100", "--l", "0", "--repeat", "1", "--rate", "0",
                                  "--workdir", str(tmp_path / name), "--json"])
        assert res.exit_code == 0, res.output
        return read_runs(tmp_path / name / "prink-runs.csv")

    first, second = grid("a", "5,3"), grid("b", "3")
    merged_dir = tmp_path / "merged"
    res = runner.invoke(app, ["experiment", "prink", "--replot", "--workdir", str(merged_dir),
                              "--merge", str(tmp_path / "a"),
                              "--merge", str(tmp_path / "b" / "prink-runs.csv"), "--json"])
    assert res.exit_code == 0, res.output
    merged = read_runs(merged_dir / "prink-runs.csv")
    # the grid's order (k ascending), each configuration's repeats numbered in --merge order
    assert [(r["k"], r["repeat"]) for r in merged] == [(3, 1), (3, 2), (5, 1)]
    k3_first = next(r for r in first if r["k"] == 3)
    assert merged[0] == k3_first and merged[1] == {**second[0], "repeat": 2}
    assert merged[2] == next(r for r in first if r["k"] == 5)
    configs = {c["k"]: c for c in json.loads(res.stdout)["configs"]}
    assert configs[3]["repeats"] == 2 and configs[5]["repeats"] == 1
    assert configs[3]["released"] == k3_first["released"]
    assert sorted(p.name for p in merged_dir.glob("prink-fig*.png")) == [
        "prink-fig3-info-loss-vs-k-per-tuple.png", "prink-fig3-info-loss-vs-k.png",
        "prink-fig4-latency.png", "prink-fig5-internal-times.png"]
    alone = runner.invoke(app, ["experiment", "prink", "--workdir", str(merged_dir),
                                "--merge", str(tmp_path / "a")])
    assert alone.exit_code == 2 and "only with --replot" in alone.stderr
    empty = runner.invoke(app, ["experiment", "prink", "--replot", "--workdir",
                                str(merged_dir), "--merge", str(tmp_path / "none")])
    assert empty.exit_code == 2 and "no prink-runs.csv" in empty.stderr

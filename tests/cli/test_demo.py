"""``streamanon demo`` runs end to end, checks its guarantees and writes named outputs."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from streamanon.cli import app


def test_demo_small(tmp_path):
    res = CliRunner().invoke(app, ["demo", "--workdir", str(tmp_path), "--z-tuples", "5000",
                                   "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    runs = summary["z"]["runs"]
    assert all(r["checker_ok"] and r["balanced"] for r in runs)
    ratios = [r["publication_ratio"] for r in runs]
    assert ratios == sorted(ratios, reverse=True)  # a larger z never publishes more
    assert (tmp_path / "z-published_z5_dt3600.csv").exists()
    assert (tmp_path / "z-publication-ratio-vs-z_dt3600.png").stat().st_size > 10_000

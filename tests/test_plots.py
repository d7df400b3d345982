"""Plots that do not mislead: real k on the axis, plain tick labels, the reported
attributes highlighted, identical series named, a caption on non-monotone curves."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from streamanon import plots
from streamanon.data import ashrae


@pytest.fixture
def figures(monkeypatch) -> list[Figure]:
    """Every figure a plot function finishes, laid out and drawn, instead of saved."""
    kept: list[Figure] = []

    def keep(fig, path, layout=True):
        fig.canvas.draw()
        kept.append(fig)
        return path

    monkeypatch.setattr(plots, "_save", keep)
    return kept


def labels(fig: Figure, axis: str = "x") -> list[str]:
    out = []
    for ax in fig.axes:
        ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
        out += [t.get_text() for t in ticks if t.get_text()]
    return out


def loss_runs(ks=(2, 5, 10, 20), falling="air_temperature") -> list[dict[str, object]]:
    rows = []
    for i, k in enumerate(ks):
        row: dict[str, object] = {"k": k, "delta": 1250}
        for a in [*ashrae.NUMERIC_QI, "primary_use"]:
            row[f"info_loss_{a}"] = 0.1 + 0.1 * i
        row[f"info_loss_{falling}"] = 0.6 - 0.1 * i
        rows.append(row)
    return rows


def test_castle_loss_plot_shows_the_k_that_ran_and_explains_falling_curves(figures) -> None:
    plots.castle_info_loss_vs_k(loss_runs(), [*ashrae.NUMERIC_QI, "primary_use"], "x.png", "t",
                                highlight=ashrae.SEVEN_NUMERIC, highlight_name="numeric")
    fig = figures[0]
    assert labels(fig, "x") == ["2", "5", "10", "20"]  # not 2^1 .. 2^4
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert set(ashrae.SEVEN_NUMERIC) <= set(legend)
    assert "other attributes (faded)" in legend and "mean of the 7 numeric" in legend
    assert not {"cloud_coverage", "timestamp"} & set(legend)  # faded, not one colour each
    captions = " ".join(t.get_text() for t in fig.texts)
    assert "Not monotone in k: air_temperature" in captions


def test_monotone_curves_get_no_caption(figures) -> None:
    runs = loss_runs(falling="cloud_coverage")  # a faded attribute: not among the reported
    for r in runs:
        r["info_loss_cloud_coverage"] = 0.5
    plots.castle_info_loss_vs_k(runs, [*ashrae.NUMERIC_QI], "x.png", "t",
                                highlight=ashrae.SEVEN_NUMERIC)
    assert not [t for t in figures[0].texts if "monotone" in t.get_text()]


def test_identical_series_are_named_identical(figures) -> None:
    same = [(5, 0.9), (10, 0.8), (25, 0.7)]
    plots.publication_ratio_vs_z({"centralized": same, "fully_decentralized": [
        (5, 0.2), (10, 0.0), (25, 0.0)], "dezent": list(same)}, "x.png", "t")
    legend = [t.get_text() for t in figures[0].axes[0].get_legend().get_texts()]
    assert legend[2] == "dezent (identical to centralized: lines overlap)"
    assert legend[1] == "fully_decentralized"


def test_tick_labels_are_plain_numbers(figures) -> None:
    series = {"centralized": [(5, 10.0), (25, 80.0), (100, 3e6)],
              "dezent": [(5, 12.0), (25, 95.0), (100, 4e6)]}
    plots.dezent_cost_vs_gateways(series, series, "x.png", "t")
    plots.violations_vs_cbf_bytes([(80, 3.0), (800, 1.0), (6100, 0.0)], "x.png", "t")
    runs = [{"k": k, "delta": d, "latency_ms": 0.05 * k, "waiting_ms": 0.01 * k,
             "best_selection_ms": 0.001 * k, "delay_constraint_ms": 0.002}
            for k in (5, 10, 20, 40, 80) for d in (1250, 5000)]
    plots.castle_latency(runs, "x.png", "t")
    for fig in figures:
        for text in labels(fig, "x") + labels(fig, "y"):
            assert "×" not in text and "$" not in text and "^" not in text, text
    assert labels(figures[1], "x") == ["80", "800", "6.1k"]
    assert labels(figures[2], "x")[:5] == ["5", "10", "20", "40", "80"]


@pytest.fixture(scope="module")
def grid_with_nothing_released() -> list[dict[str, object]]:
    """A real Prink grid on 300 tuples: k = 3 releases, k = 80 cannot (fewer buildings)."""
    from streamanon.sim import prink

    rows = list(ashrae.generate_paper(300, seed=1))
    runs = prink.run_grid(rows, ashrae.paper_rules_toml(), ks=[3, 80], deltas=[100], ls=[0],
                          repeat=1, rate=None)
    return prink.aggregate(runs)


def _points_at(ax, x: float) -> list[float]:
    """Every y an axis draws at ``x``: its lines' points and its error bars' ends."""
    ys = [float(y) for line in ax.get_lines()
          for lx, y in zip(line.get_xdata(), line.get_ydata(), strict=True) if float(lx) == x]
    for coll in ax.collections:
        for seg in coll.get_segments() if hasattr(coll, "get_segments") else []:
            ys += [float(y) for sx, y in seg if float(sx) == x]
    return ys


def test_prink_figures_draw_nothing_released_as_absent_not_zero(
        figures, grid_with_nothing_released) -> None:
    import math

    agg = grid_with_nothing_released
    by_k = {int(r["k"]): r for r in agg}  # type: ignore[call-overload]
    assert by_k[80]["released"] == 0 and by_k[80]["loss_cluster_mean"] == 0  # the engine's 0
    assert by_k[3]["released"] > 0
    attrs = [*ashrae.PAPER_NUMERIC_QI, "primary_use"]
    plots.prink_info_loss_vs_k(agg, attrs, "x.png", "t", basis="cluster")
    plots.prink_info_loss_vs_k(agg, attrs, "x.png", "t", basis="tuple")
    plots.prink_latency(agg, "x.png", "t")
    plots.prink_internal_times(agg, "x.png", "t")
    for fig in figures[:3]:
        ax = fig.axes[0]
        assert all(math.isnan(y) for y in _points_at(ax, 80.0))  # a gap, never a 0
        assert [y for y in _points_at(ax, 3.0) if not math.isnan(y)]  # k = 3 is drawn
        assert any(t.get_text().startswith("nothing released") for t in ax.texts)
    fig5 = figures[3].axes[0]
    bars = {c.get_label(): c for c in fig5.containers if hasattr(c, "patches")}
    assert len(bars["bestSelection (per tuple)"].patches) == 2  # placed tuples: timed
    for name in ("delayConstraint (per release)", "waitTime (per released tuple)"):
        assert len(bars[name].patches) == 1  # k = 80 has no release to time: no bar
    assert sum(t.get_text() == "nothing released" for t in fig5.texts) == 1


def test_a_mostly_suppressed_point_says_how_little_it_stands_on(figures) -> None:
    row: dict[str, object] = {"k": 40, "delta": 1250, "l": 0, "read": 20000, "released": 1220,
                              "suppressed": 18780, "clusters": 1}
    row.update({f"loss_cluster_{a}": 0.7 for a in ashrae.PAPER_NUMERIC_QI})
    small = {**row, "k": 5, "released": 19999, "suppressed": 1, "clusters": 905}
    plots.prink_info_loss_vs_k([small, row], list(ashrae.PAPER_NUMERIC_QI), "x.png", "t")
    texts = [t.get_text() for t in figures[0].axes[0].texts]
    assert texts == ["94% suppressed\n1 cluster"]

"""One function per figure; each writes a PNG and names its parameters in the title.

Rules every figure follows, so that none misleads: ticks at the values that were run, labelled
as plain numbers (``80``, ``10k``, never ``8×10¹``); series that coincide are labelled as
identical instead of one hiding the other; when a figure has many lines, the ones a table
reports are drawn strongly and the rest faded; a curve that is not monotone where a reader
would expect it to be gets a caption line saying so and why.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogLocator,
    NullFormatter,
    NullLocator,
)


def plain_number(x: float, _pos: object = None) -> str:
    """A tick label without exponents: ``80``, ``2.5``, ``12k``, ``3M``.

    >>> [plain_number(x) for x in (80, 0.25, 1000, 12_000, 3_000_000, 2.5e9)]
    ['80', '0.25', '1k', '12k', '3M', '2.5G']
    """
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:g}{suffix}"
    return f"{x:g}"


def _plain_axis(ax: Axes, axis: str = "y", ticks: Sequence[float] | None = None) -> None:
    """Plain labels on ``axis``; with ``ticks``, exactly those ticks and no minor ones."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    if ticks is not None:
        target.set_major_locator(FixedLocator(sorted(set(ticks))))
        target.set_minor_locator(NullLocator())
    elif target.get_scale() == "log":  # 1-2-5 steps: labels even within a single decade
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        target.set_minor_locator(NullLocator())
    target.set_major_formatter(FuncFormatter(plain_number))
    target.set_minor_formatter(NullFormatter())


def _same(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> bool:
    return len(a) == len(b) and all(
        x1 == x2 and abs(y1 - y2) <= 1e-12 for (x1, y1), (x2, y2) in zip(
            sorted(a), sorted(b), strict=True))


def not_monotone(xs: Sequence[float], ys: Sequence[float], tol: float = 0.005) -> bool:
    """True when ``ys`` falls by more than ``tol`` somewhere as ``xs`` grows.

    >>> not_monotone([2, 5, 10], [0.1, 0.3, 0.298]), not_monotone([2, 5, 10], [0.1, 0.3, 0.2])
    (False, True)
    """
    pts = sorted(zip(xs, ys, strict=True))
    return any(b[1] < a[1] - tol for a, b in pairwise(pts))


def _save(fig: Figure, path: str | Path, layout: bool = True) -> Path:
    """Lay out, write the PNG and free the figure (every plot ends here)."""
    if layout:
        fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def publication_ratio_vs_z(
    series: Mapping[str, Sequence[tuple[float, float]]], path: str | Path, title: str
) -> Path:
    """Publication ratio against z, one line per series (e.g. per Δt or per scenario)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    styles = [("-", "o", 8), ("--", "s", 5), (":", "^", 5), ("-.", "D", 4)]
    ticks: set[float] = set()
    names = list(series)
    for i, (label, points) in enumerate(series.items()):
        xs, ys = zip(*sorted(points), strict=True)
        line, marker, size = styles[i % len(styles)]
        # identical series (deZent with an exact count == centralized) stay visible and are
        # named as identical, so that a hidden line is never mistaken for a missing one
        twin = next((n for n in names[:i] if _same(series[n], points)), None)
        if twin is not None:
            label = f"{label} (identical to {twin}: lines overlap)"
        ax.plot(xs, ys, linestyle=line, marker=marker, markersize=size, label=label,
                fillstyle="none" if i else "full")
        ticks.update(xs)
    ax.set_xscale("log")
    _plain_axis(ax, "x", sorted(ticks))
    ax.set_xlabel("z")
    ax.set_ylabel("publication ratio")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def dezent_cost_vs_gateways(
    messages: Mapping[str, Sequence[tuple[float, float]]],
    bytes_: Mapping[str, Sequence[tuple[float, float]]],
    path: str | Path, title: str,
) -> Path:
    """deZent: messages and bytes per scenario (all links) against the number of gateways."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, series, label in ((axes[0], messages, "messages"), (axes[1], bytes_, "bytes")):
        xs_all: set[float] = set()
        names = list(series)
        for i, (name, points) in enumerate(series.items()):
            xs, ys = zip(*sorted(points), strict=True)
            xs_all.update(xs)
            twin = next((n for n in names[:i] if _same(series[n], points)), None)
            shown = f"{name} (identical to {twin})" if twin else name
            ax.plot(xs, ys, marker="o", label=shown, linestyle="--" if twin else "-",
                    fillstyle="none" if twin else "full")
        ax.set_xlabel("gateways")
        ax.set_ylabel(f"{label} per simulated day (all links)")
        ax.set_yscale("log")
        _plain_axis(ax, "x", sorted(xs_all))
        _plain_axis(ax, "y")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def gw_ce_messages_per_scenario(
    messages: Mapping[str, Sequence[tuple[float, float]]], path: str | Path, title: str,
) -> Path:
    """deZent: messages per simulated day on the gateway -> CE link only (the paper's
    headline: deZent sends the CE only what it publishes), per scenario against gateways."""
    fig, ax = plt.subplots(figsize=(6, 4))
    xs_all: set[float] = set()
    for name, points in messages.items():
        if not points:
            continue
        xs, ys = zip(*sorted(points), strict=True)
        xs_all.update(xs)
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel("gateways")
    ax.set_ylabel("GW -> CE messages per simulated day")
    ax.set_yscale("log")
    _plain_axis(ax, "x", sorted(xs_all))
    _plain_axis(ax, "y")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def collusion_vs_share(rows: Sequence[Mapping[str, float]], path: str | Path, title: str) -> Path:
    """deZent: probability that colluders flank an honest gateway, formula and Monte Carlo."""
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [r["share"] for r in rows]
    ax.plot(xs, [r["p_formula"] for r in rows], marker="o", label="formula c/(n-1)·(c-1)/(n-2)")
    ax.plot(xs, [r["p_monte_carlo"] for r in rows], marker="x", linestyle="--",
            label="Monte Carlo (random rings)")
    ax.set_xlabel("share of colluding gateways")
    ax.set_ylabel("p_att")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def violations_vs_cbf_bytes(points: Sequence[tuple[float, float]], path: str | Path,
                            title: str) -> Path:
    """deZent: privacy violations (published with < z true users) against the CBF's size."""
    fig, ax = plt.subplots(figsize=(6, 4))
    xs, ys = zip(*sorted(points), strict=True)
    ax.plot(xs, ys, marker="o")
    ax.set_xscale("log")
    _plain_axis(ax, "x", xs)
    ax.set_xlabel("CBF bytes per ring message")
    ax.set_ylabel("violations per run (mean over seeds)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _loss_axis(ax: Any, ks: Sequence[float], delta: int) -> None:
    """One panel of a loss-against-k figure: log k, plain ticks, its δ, loss in [0, 1]."""
    ax.set_xscale("log")
    _plain_axis(ax, "x", ks)
    ax.set_xlabel("k")
    ax.set_title(f"δ = {delta:,}")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)


def _finish_loss_figure(fig: Any, axes: Any, ylabel: str, title: str, falling: set[str],
                        why: str, path: str | Path) -> Path:
    """Label, legend and title of a loss-against-k figure, and a caption naming the
    attributes whose loss is not monotone in k (``why`` says why it can happen)."""
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(title, fontsize=10)
    if falling:
        caption = "Not monotone in k: " + ", ".join(sorted(falling)) + ". " + why
        lines = textwrap.wrap(caption, width=int(fig.get_figwidth() * 15))
        fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, ha="left", va="bottom")
        fig.tight_layout(rect=(0, 0.03 * len(lines) + 0.02, 1, 1))
    return _save(fig, path, layout=not falling)


def castle_info_loss_vs_k(
    runs: Sequence[Mapping[str, object]], attributes: Sequence[str], path: str | Path,
    title: str, highlight: Sequence[str] = (), highlight_name: str = "highlighted",
) -> Path:
    """CASTLE: mean information loss per attribute against k, one panel per δ.

    ``runs`` are experiment rows with ``k``, ``delta`` and ``info_loss_<attribute>`` keys. The
    ``highlight`` attributes (the ones a table reports, e.g. the seven numeric ones) are drawn
    in colour with their mean as a thick black line (``highlight_name`` names it); the other
    attributes are faded. The x axis shows the k values that were run. Curves that fall as k
    rises are named in a caption line, with the reason.

    Args:
        runs: experiment rows with ``k``, ``delta`` and ``info_loss_<attribute>`` keys.
        attributes: the attributes to plot, one line each.
        path: the PNG file to write.
        title: the figure's title.
        highlight: the attributes drawn in colour with their mean (empty: all, without a mean).
        highlight_name: what the highlighted attributes are called in the mean's label.
    """
    deltas = sorted({int(r["delta"]) for r in runs})  # type: ignore[call-overload]
    fig, axes = plt.subplots(1, len(deltas), figsize=(5 * len(deltas) + 2.5, 4.8),
                             squeeze=False, sharey=True)
    strong = [a for a in attributes if a in highlight] or list(attributes)
    faded = [a for a in attributes if a not in strong]
    colors = plt.get_cmap("tab10").colors
    falling: set[str] = set()
    for ax, delta in zip(axes[0], deltas, strict=True):
        sel = sorted((r for r in runs if int(r["delta"]) == delta),  # type: ignore[call-overload]
                     key=lambda r: float(r["k"]))  # type: ignore[arg-type]
        ks = [float(r["k"]) for r in sel]  # type: ignore[arg-type]
        for i, a in enumerate(faded):
            ax.plot(ks, [float(r[f"info_loss_{a}"]) for r in sel],  # type: ignore[arg-type]
                    color="0.6", alpha=0.5, linewidth=1,
                    label="other attributes (faded)" if i == 0 else None)
        for i, a in enumerate(strong):
            ys = [float(r[f"info_loss_{a}"]) for r in sel]  # type: ignore[arg-type]
            ax.plot(ks, ys, marker="o", markersize=4, color=colors[i % len(colors)], label=a)
            if not_monotone(ks, ys):
                falling.add(a)
        if highlight and len(strong) > 1:
            mean = [sum(float(r[f"info_loss_{a}"]) for a in strong) / len(strong)  # type: ignore[arg-type]
                    for r in sel]
            ax.plot(ks, mean, color="black", linewidth=3, marker="s",
                    label=f"mean of the {len(strong)} {highlight_name}")
        _loss_axis(ax, ks, delta)
    return _finish_loss_figure(
        fig, axes, "mean information loss (released tuples)", title, falling,
        "CASTLE picks clusters by their loss over all attributes, so a larger k can widen one "
        "attribute and narrow another; loss is averaged over released tuples only.", path)


def castle_latency(runs: Sequence[Mapping[str, object]], path: str | Path, title: str) -> Path:
    """CASTLE: mean latency per tuple against k, one line per δ, in four panels: end to end,
    waiting (held for the delay bound), best selection and delay constraint (per tuple)."""
    deltas = sorted({int(r["delta"]) for r in runs})  # type: ignore[call-overload]
    panels = (("latency_ms", "end to end (ms)", 1.0), ("waiting_ms", "waiting (ms)", 1.0),
              ("best_selection_ms", "best selection (µs)", 1000.0),
              ("delay_constraint_ms", "delay constraint (µs)", 1000.0))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8))
    for ax, (key, label, scale) in zip(axes, panels, strict=True):
        for delta in deltas:
            sel = sorted((r for r in runs if int(r["delta"]) == delta),  # type: ignore[call-overload]
                         key=lambda r: float(r["k"]))  # type: ignore[arg-type]
            ax.plot([float(r["k"]) for r in sel],  # type: ignore[arg-type]
                    [float(r[key]) * scale for r in sel],  # type: ignore[arg-type]
                    marker="o", label=f"δ = {delta:,}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_axis(ax, "x", [float(r["k"]) for r in runs])  # type: ignore[arg-type]
        _plain_axis(ax, "y")
        ax.set_xlabel("k")
        ax.set_title(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def publication_ratio_by_position(series: Mapping[str, Sequence[float]], path: str | Path,
                                  title: str) -> Path:
    """deZent: publication ratio of the records of the gateway ``p`` hops after the
    coordinator, for each ``p``, one line per series (e.g. paper vs random order)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for (label, ys), marker in zip(series.items(), ("o", "s", "^", "D"), strict=False):
        ys = list(ys)
        spread = max(ys) / min(ys) if ys and min(ys) > 0 else float("nan")
        ax.plot(range(len(ys)), ys, marker=marker, markersize=4,
                label=f"{label} (max/min {spread:.3f})")
    ax.set_xlabel("ring position (hops after the cycle coordinator; 0 = the coordinator)")
    ax.set_ylabel("publication ratio")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def bytes_per_day_tradeoff(points: Sequence[tuple[str, float, float]], path: str | Path,
                           title: str) -> Path:
    """deZent: bytes per day on all links against privacy violations per day, one labelled
    point per choice (CBF at a false-positive rate, exact counter, centralized)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, nbytes, violations in points:
        ax.scatter([nbytes], [violations], s=30)
        ax.annotate(label, (nbytes, violations), textcoords="offset points", xytext=(0, 6),
                    fontsize=8, rotation=90, ha="center", va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(-0.5, max(20.0, 30.0 * max(v for _l, _b, v in points)))
    ax.set_xlim(min(b for _l, b, _v in points) / 2, max(b for _l, b, _v in points) * 4)
    ax.set_xlabel("bytes per day, all links (SN->GW, GW<->GW, GW->CE)")
    ax.set_ylabel("violations per day (published with < z users)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    return _save(fig, path)


def _err(runs: Sequence[Mapping[str, object]], key: str) -> list[float]:
    return [math.nan if nothing_released(r) else float(r.get(f"{key}_sd", 0.0) or 0.0)  # type: ignore[arg-type]
            for r in runs]


NOTHING_RELEASED = "nothing released"


def nothing_released(run: Mapping[str, object]) -> bool:
    """True for a run (or a configuration's mean) that released no tuple: its loss, latency,
    delayConstraint and waitTime are undefined, not 0 (rows without ``released``: False).

    >>> nothing_released({"released": 0.0}), nothing_released({"released": 3}), nothing_released({})
    (True, False, False)
    """
    value = run.get("released")
    return value is not None and float(value) == 0  # type: ignore[arg-type]


def released_values(runs: Sequence[Mapping[str, object]], key: str) -> list[float]:
    """``key`` of each run, NaN (a gap in a line, no bar) where nothing was released.

    >>> released_values([{"released": 5, "loss": 0.2}, {"released": 0, "loss": 0.0}], "loss")
    [0.2, nan]
    """
    return [math.nan if nothing_released(r) else float(r[key])  # type: ignore[arg-type]
            for r in runs]


def _mark_nothing_released(ax: Axes, ks: Sequence[float], note: str = "") -> None:
    """A grey band and an upright "nothing released" at each k (data x, mid-height): an
    absent point, never a 0."""
    for k in sorted(set(ks)):
        ax.axvspan(k / 1.12, k * 1.12, color="0.85", alpha=0.6, zorder=0, linewidth=0)
        ax.text(k, 0.5, NOTHING_RELEASED + (f"\n{note}" if note else ""),
                transform=ax.get_xaxis_transform(), rotation=90, ha="center", va="center",
                fontsize=7, color="0.3")


def _mark_mostly_suppressed(ax: Axes, sel: Sequence[Mapping[str, object]]) -> None:
    """Under a point whose run released something but suppressed most of the stream, the
    share suppressed and the clusters its mean stands on."""
    for r in sel:
        read = float(r.get("read", 0) or 0)  # type: ignore[arg-type]
        supp = float(r.get("suppressed", 0) or 0)  # type: ignore[arg-type]
        if nothing_released(r) or read <= 0 or supp < read / 2:
            continue
        clusters = float(r.get("clusters", 0) or 0)  # type: ignore[arg-type]
        ax.text(float(r["k"]), 0.012, f"{supp / read:.0%} suppressed\n"  # type: ignore[arg-type]
                f"{clusters:g} cluster{'s' if clusters != 1 else ''}",
                transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=6,
                color="0.2", bbox={"facecolor": "white", "alpha": 0.8, "linewidth": 0,
                                   "pad": 1})


def prink_info_loss_vs_k(
    runs: Sequence[Mapping[str, object]], attributes: Sequence[str], path: str | Path,
    title: str, basis: str = "cluster",
) -> Path:
    """Prink's Fig. 3: mean information loss of every attribute against k, one panel per δ
    (the paper: δ = 1,250 left, 20,000 right), error bars over the repeats.

    ``runs`` are aggregated experiment rows with ``k``, ``delta`` and
    ``loss_<basis>_<attribute>`` (and ``..._sd``) keys; ``basis`` is ``cluster`` (the paper's
    mean over released clusters) or ``tuple`` (streamanon's mean over released tuples).
    Attributes whose loss falls as k grows are named in a caption line.

    Args:
        runs: aggregated experiment rows (one per configuration).
        attributes: the quasi-identifiers to plot, one line each.
        path: the PNG file to write.
        title: the figure's title.
        basis: ``cluster`` (the paper's mean) or ``tuple`` (streamanon's).
    """
    deltas = sorted({int(r["delta"]) for r in runs})  # type: ignore[call-overload]
    fig, axes = plt.subplots(1, len(deltas), figsize=(5 * len(deltas) + 2.5, 4.8),
                             squeeze=False, sharey=True)
    cmap = plt.get_cmap("tab20").colors
    markers = "os^Dv<>pP*hX"
    falling: set[str] = set()
    for ax, delta in zip(axes[0], deltas, strict=True):
        sel = sorted((r for r in runs if int(r["delta"]) == delta),  # type: ignore[call-overload]
                     key=lambda r: float(r["k"]))  # type: ignore[arg-type]
        ks = [float(r["k"]) for r in sel]  # type: ignore[arg-type]
        for i, a in enumerate(attributes):
            key = f"loss_{basis}_{a}"
            ys = released_values(sel, key)
            ax.errorbar(ks, ys, yerr=_err(sel, key), marker=markers[i % len(markers)],
                        markersize=4, capsize=2, color=cmap[i % len(cmap)], label=a)
            shown = [(x, y) for x, y in zip(ks, ys, strict=True) if not math.isnan(y)]
            if not_monotone([x for x, _ in shown], [y for _, y in shown]):
                falling.add(a)
        _mark_nothing_released(ax, [k for k, r in zip(ks, sel, strict=True)
                                    if nothing_released(r)])
        _mark_mostly_suppressed(ax, sel)
        _loss_axis(ax, ks, delta)
    return _finish_loss_figure(
        fig, axes, f"mean information loss (per released {basis})", title, falling,
        "A cluster is chosen by its loss over all attributes, so a larger k can widen one "
        "attribute and narrow another.", path)


def _which(cfgs: set[tuple[int, int]], series: Sequence[tuple[int, int]]) -> str:
    """The (δ, l) configurations of ``cfgs``, a δ once when all its l are in it."""
    parts = []
    for d in sorted({d for d, _ in cfgs}):
        ls_ = sorted(lv for dd, lv in cfgs if dd == d)
        every = sorted(lv for dd, lv in series if dd == d)
        parts.append(f"δ {d:,}" + ("" if ls_ == every else " l " + ",".join(map(str, ls_))))
    return "; ".join(parts)


def prink_latency(runs: Sequence[Mapping[str, object]], path: str | Path, title: str) -> Path:
    """Prink's Fig. 4: mean end-to-end latency per tuple (client side, through the socket)
    against k, one line per (δ, l), error bars over the repeats."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    series = sorted({(int(r["delta"]), int(r["l"])) for r in runs})  # type: ignore[call-overload]
    styles = ["-", "--", ":", "-."]
    ls_ = sorted({lv for _, lv in series})
    colors = plt.get_cmap("tab10").colors
    deltas = sorted({d for d, _ in series})
    for d, l in series:  # noqa: E741
        sel = sorted((r for r in runs if int(r["delta"]) == d  # type: ignore[call-overload]
                      and int(r["l"]) == l), key=lambda r: float(r["k"]))  # type: ignore[call-overload, arg-type]
        ax.errorbar([float(r["k"]) for r in sel],  # type: ignore[arg-type]
                    released_values(sel, "latency_ms_mean"),
                    yerr=_err(sel, "latency_ms_mean"), marker="o", capsize=2,
                    linestyle=styles[ls_.index(l) % len(styles)],
                    color=colors[deltas.index(d) % len(colors)], label=f"δ = {d:,}, l = {l}")
    empty: dict[float, set[tuple[int, int]]] = {}
    for r in runs:
        if nothing_released(r):
            empty.setdefault(float(r["k"]), set()).add(  # type: ignore[arg-type]
                (int(r["delta"]), int(r["l"])))  # type: ignore[call-overload]
    for k, cfgs in empty.items():
        _mark_nothing_released(ax, [k], "" if cfgs == set(series) else _which(cfgs, series))
    ax.set_xscale("log")
    if any(not nothing_released(r) and float(r["latency_ms_mean"]) > 0  # type: ignore[arg-type]
           for r in runs):  # a log axis needs a value: none when nothing was released
        ax.set_yscale("log")
    _plain_axis(ax, "x", [float(r["k"]) for r in runs])  # type: ignore[arg-type]
    _plain_axis(ax, "y")
    ax.set_xlabel("k")
    ax.set_ylabel("end-to-end latency per tuple (ms)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(fig, path)


def prink_internal_times(runs: Sequence[Mapping[str, object]], path: str | Path,
                         title: str) -> Path:
    """Prink's Fig. 5: bestSelection, delayConstraint and waitTime (ms, log scale) per
    configuration (δ, k, l), error bars over the repeats."""
    sel = sorted(runs, key=lambda r: (int(r["delta"]), int(r["k"]), int(r["l"])))  # type: ignore[call-overload]
    keys = (("best_selection_ms", "bestSelection (per tuple)"),
            ("delay_constraint_ms", "delayConstraint (per release)"),
            ("wait_time_ms", "waitTime (per released tuple)"))
    fig, ax = plt.subplots(figsize=(max(7.0, 0.45 * len(sel) + 3), 4.8))
    width = 0.27
    xs = list(range(len(sel)))
    for j, (key, label) in enumerate(keys):
        # bestSelection is timed per tuple placed, released or not; the other two only exist
        # for released clusters: no bar where nothing was released
        keep = [i for i, r in enumerate(sel) if j == 0 or not nothing_released(r)]
        ax.bar([xs[i] + (j - 1) * width for i in keep],
               [max(1e-4, float(sel[i][key])) for i in keep],  # type: ignore[arg-type]
               width, yerr=[float(sel[i].get(f"{key}_sd", 0.0) or 0.0)  # type: ignore[arg-type]
                            for i in keep], capsize=1.5, label=label)
    for i, r in enumerate(sel):
        if nothing_released(r):
            ax.text(xs[i] + width / 2, 0.5, NOTHING_RELEASED, transform=ax.get_xaxis_transform(),
                    rotation=90, ha="center", va="center", fontsize=6, color="0.3")
    ax.set_yscale("log")
    _plain_axis(ax, "y")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"δ={plain_number(float(r['delta']))} k={r['k']} l={r['l']}"  # type: ignore[arg-type]
                        for r in sel], rotation=70, fontsize=7)
    ax.set_ylabel("time (ms)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return _save(fig, path)

"""One function per figure; each writes a PNG and names its parameters in the title."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure


def _save(fig: Figure, path: str | Path) -> Path:
    """Lay out, write the PNG and free the figure (every plot ends here)."""
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
    for i, (label, points) in enumerate(series.items()):
        xs, ys = zip(*sorted(points), strict=True)
        line, marker, size = styles[i % len(styles)]
        # identical series (deZent with an exact count == centralized) must stay visible
        ax.plot(xs, ys, linestyle=line, marker=marker, markersize=size, label=label,
                fillstyle="none" if i else "full")
        ticks.update(xs)
    ax.set_xscale("log")
    ax.set_xticks(sorted(ticks), [f"{x:g}" for x in sorted(ticks)])
    ax.minorticks_off()
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
        for name, points in series.items():
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, marker="o", label=name)
        ax.set_xlabel("gateways")
        ax.set_ylabel(f"{label} per simulated day (all links)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title, fontsize=10)
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
    ax.set_xlabel("CBF bytes per ring message")
    ax.set_ylabel("violations per run (mean over seeds)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def castle_info_loss_vs_k(
    runs: Sequence[Mapping[str, object]], attributes: Sequence[str], path: str | Path,
    title: str,
) -> Path:
    """CASTLE: mean information loss per attribute against k, one panel per δ.

    ``runs`` are experiment rows with ``k``, ``delta`` and ``info_loss_<attribute>`` keys.
    """
    deltas = sorted({int(r["delta"]) for r in runs})  # type: ignore[call-overload]
    fig, axes = plt.subplots(1, len(deltas), figsize=(5 * len(deltas) + 2.5, 4.5),
                             squeeze=False, sharey=True)
    colors = plt.get_cmap("tab20").colors
    for ax, delta in zip(axes[0], deltas, strict=True):
        ax.set_prop_cycle(color=colors)
        sel = sorted((r for r in runs if int(r["delta"]) == delta),  # type: ignore[call-overload]
                     key=lambda r: float(r["k"]))  # type: ignore[arg-type]
        ks = [float(r["k"]) for r in sel]  # type: ignore[arg-type]
        for a in attributes:
            ax.plot(ks, [float(r[f"info_loss_{a}"]) for r in sel],  # type: ignore[arg-type]
                    marker="o", label=a)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.set_title(f"δ = {delta:,}")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean information loss")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


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
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
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

"""One function per figure; each writes a PNG and names its parameters in the title."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def publication_ratio_vs_z(
    series: Mapping[str, Sequence[tuple[float, float]]], path: str | Path, title: str
) -> Path:
    """Publication ratio against z, one line per series (e.g. per Δt or per scenario)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, points in series.items():
        xs, ys = zip(*sorted(points), strict=True)
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("z")
    ax.set_ylabel("publication ratio")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def castle_info_loss_vs_k(
    runs: Sequence[Mapping[str, object]], attributes: Sequence[str], path: str | Path,
    title: str,
) -> Path:
    """CASTLE: mean information loss per attribute against k, one panel per δ.

    ``runs`` are experiment rows with ``k``, ``delta`` and ``info_loss_<attribute>`` keys.
    """
    deltas = sorted({int(r["delta"]) for r in runs})  # type: ignore[call-overload]
    fig, axes = plt.subplots(1, len(deltas), figsize=(5 * len(deltas), 4), squeeze=False,
                             sharey=True)
    for ax, delta in zip(axes[0], deltas, strict=True):
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
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def castle_latency(runs: Sequence[Mapping[str, object]], path: str | Path, title: str) -> Path:
    """CASTLE: mean latency per tuple against k, one panel per δ, split into best selection,
    delay constraint and waiting (stacked bars, milliseconds)."""
    deltas = sorted({int(r["delta"]) for r in runs})  # type: ignore[call-overload]
    fig, axes = plt.subplots(1, len(deltas), figsize=(5 * len(deltas), 4), squeeze=False)
    for ax, delta in zip(axes[0], deltas, strict=True):
        sel = sorted((r for r in runs if int(r["delta"]) == delta),  # type: ignore[call-overload]
                     key=lambda r: float(r["k"]))  # type: ignore[arg-type]
        labels = [str(r["k"]) for r in sel]
        bottom = [0.0] * len(sel)
        for key, name in (("best_selection_ms", "best selection"),
                          ("delay_constraint_ms", "delay constraint"),
                          ("waiting_ms", "waiting")):
            vals = [float(r[key]) for r in sel]  # type: ignore[arg-type]
            ax.bar(labels, vals, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_xlabel("k")
        ax.set_title(f"δ = {delta:,}")
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("mean latency per tuple (ms)")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path

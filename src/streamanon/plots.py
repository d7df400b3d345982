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

"""Generic sweep figures (draw only): a metric against one axis, one line per value of another."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.figure import Figure


def plot_metric_vs_axis(cells: pd.DataFrame, x: str, metrics: Sequence[str], hue: str | None = None,
                        title: str = "", max_cols: int = 4) -> Figure:
    """One panel per metric (``max_cols`` per row): cell mean (error bars: std over seeds when present) against ``x``.

    ``cells``: an aggregated cell table (one row per cell, ``<metric>`` and
    optional ``<metric>_std`` columns); ``hue``: another axis drawn as separate lines.
    """
    metrics = [m for m in metrics if m in cells.columns]
    n = max(len(metrics), 1)
    ncols = min(n, max_cols)
    nrows = -(-n // ncols)
    fig = Figure(figsize=(4.2 * ncols, 3.4 * nrows))
    grid = fig.subplots(nrows, ncols, squeeze=False)
    axes = [a for row in grid for a in row]
    for ax in axes[n:]:
        ax.set_visible(False)
    groups = cells.groupby(hue, sort=True) if hue else [(None, cells)]
    for ax, m in zip(axes, metrics):
        for key, g in groups:
            g = g.sort_values(x)
            std = g[f"{m}_std"] if f"{m}_std" in g else None
            ax.errorbar(g[x], g[m], yerr=std, marker="o", capsize=3,
                        label=None if key is None else str(key))
        ax.set_xlabel(x)
        ax.set_title(m)
        ax.grid(alpha=0.3)
        if hue:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_matrix_grid(mats: dict[tuple, "object"], row_label: str, col_label: str, title: str = "",
                     vmin: float = -1.0, vmax: float = 1.0) -> Figure:
    """A grid of square heatmaps (e.g. cosine matrices) keyed by (row value, column value), one per cell."""
    rows = sorted({k[0] for k in mats})
    cols = sorted({k[1] for k in mats})
    fig = Figure(figsize=(2.2 * len(cols) + 1, 2.2 * len(rows) + 0.6))
    axes = fig.subplots(len(rows), len(cols), squeeze=False)
    im = None
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i][j]
            ax.set_xticks([])
            ax.set_yticks([])
            if (r, c) in mats:
                im = ax.imshow(mats[(r, c)], vmin=vmin, vmax=vmax, cmap="RdBu_r", interpolation="nearest")
            if i == len(rows) - 1:
                ax.set_xlabel(f"{col_label}={c}", fontsize=8)
            if j == 0:
                ax.set_ylabel(f"{row_label}={r}", fontsize=8)
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.6)
    if title:
        fig.suptitle(title, fontsize=9)
    return fig

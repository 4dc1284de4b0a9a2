"""Figures of the journal's reasoning checks (drawing only; tables from :mod:`anchorlab.analysis.reasoning`).

* :func:`plot_addition_heatmaps`: accuracy of every a + b as a 100x100 image
  per panel, the held-out square outlined (journal Fig. 7C): case-based
  solutions show as a hole in the square.
* :func:`plot_prontoqa`: convergence epoch, generalization error (train -
  test) vs training-set size per setting, and test accuracy per hop count
  (journal Fig. 7E).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from anchorlab.config import ConfigError

COLORS = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown")


def _need(df: pd.DataFrame, cols: tuple[str, ...], arg: str) -> None:
    if missing := [c for c in cols if c not in df.columns]:
        raise ConfigError(f"{arg}: missing column(s) {missing}; has {list(df.columns)}")


def accuracy_image(grid: pd.DataFrame, n: int = 100) -> np.ndarray:
    """(n, n) array, [a, b] = mean of ``accuracy`` (or ``correct``) for problem a + b; NaN where absent."""
    col = "accuracy" if "accuracy" in grid.columns else "correct"
    _need(grid, ("a", "b", col), "grid")
    img = np.full((n, n), np.nan)
    g = grid.groupby(["a", "b"])[col].mean()
    a = g.index.get_level_values(0).to_numpy()
    b = g.index.get_level_values(1).to_numpy()
    img[a, b] = g.to_numpy(dtype=float)
    return img


def plot_addition_heatmaps(panels: Mapping[str, pd.DataFrame], square: tuple[int, int] = (40, 60),
                           ncols: int = 2) -> Figure:
    """One heatmap per panel (title -> grid table with a, b and accuracy or correct), square outlined.

    Each title gets the panel's mean accuracy inside and outside the square.
    """
    if not panels:
        raise ConfigError("panels: need at least one grid table")
    ncols = min(ncols, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = Figure(figsize=(4.2 * ncols + 0.8, 4.0 * nrows), layout="constrained")   # titles clear of the x labels
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    lo, hi = square
    im = None
    for ax, (title, grid) in zip(axes, panels.items()):
        img = accuracy_image(grid)
        inside = img[lo:hi + 1, lo:hi + 1]
        outside = np.delete(img.ravel(), (np.arange(lo, hi + 1)[:, None] * 100 + np.arange(lo, hi + 1)).ravel())
        im = ax.imshow(img, origin="lower", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        ax.add_patch(Rectangle((lo - 0.5, lo - 0.5), hi - lo + 1, hi - lo + 1, fill=False, ec="white", lw=1.5))
        ax.set_title(f"{title}\nsquare {np.nanmean(inside):.2f} / outside {np.nanmean(outside):.2f}", fontsize=9)
        ax.set_xlabel("b")
        ax.set_ylabel("a")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if im is not None:
        fig.colorbar(im, ax=list(axes[:len(panels)]), shrink=0.8, label="exact-match accuracy")
    return fig


def addition_grid_figure(tables: Mapping[str, pd.DataFrame], opts: Any, label: str) -> Figure:
    """The ``addition-grid`` analysis of one run: its heatmap."""
    grid = tables["grid"]
    ood = grid[grid.split == "ood"]
    square = (int(ood.a.min()), int(ood.a.max())) if len(ood) else (40, 60)
    return plot_addition_heatmaps({label: grid}, square, ncols=1)


def plot_prontoqa(conv: pd.DataFrame, hops: pd.DataFrame | None = None, setting_col: str = "setting",
                  size_col: str = "n_train") -> Figure:
    """Convergence epoch and generalization error vs training-set size, one line per setting (mean over
    seeds, runs that never converged drawn as open markers at the cap); optionally test accuracy per hop.

    ``conv``: columns ``setting_col``, ``size_col``, ``converged_epoch``, ``cap_epoch``, ``gen_error``;
    ``hops``: columns ``setting_col``, ``size_col``, ``hop``, ``accuracy``.
    """
    _need(conv, (setting_col, size_col, "converged_epoch", "cap_epoch", "gen_error"), "conv")
    n = 3 if hops is not None else 2
    fig = Figure(figsize=(4.4 * n, 3.6))
    axes = fig.subplots(1, n)
    settings = list(dict.fromkeys(conv[setting_col]))
    for color, s in zip(COLORS, settings):
        g = conv[conv[setting_col] == s]
        ep = g.assign(epoch=g.converged_epoch.fillna(g.cap_epoch)).groupby(size_col).epoch.mean()
        axes[0].plot(ep.index, ep.values, "o-", color=color, label=s)
        never = g[g.converged_epoch.isna()]
        if len(never):
            axes[0].plot(never[size_col], never.cap_epoch, "o", mfc="white", color=color)
        ge = g.groupby(size_col).gen_error.agg(["mean", "min", "max"])
        axes[1].plot(ge.index, ge["mean"], "o-", color=color, label=s)
        axes[1].fill_between(ge.index, ge["min"], ge["max"], color=color, alpha=0.15)
    axes[0].set_ylabel("epochs to train accuracy threshold")
    axes[0].set_title("convergence (open: not reached by the cap)", fontsize=9)
    axes[1].set_ylabel("train - test accuracy")
    axes[1].set_title("generalization error", fontsize=9)
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.set_xlabel("training examples")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    if hops is not None:
        _need(hops, (setting_col, size_col, "hop", "accuracy"), "hops")
        styles = ("-", "--", ":", "-.")
        for color, s in zip(COLORS, settings):
            for ls, (size, g) in zip(styles, hops[hops[setting_col] == s].groupby(size_col)):
                m = g.groupby("hop").accuracy.mean()
                axes[2].plot(m.index, m.values, ls, marker="o", color=color, label=f"{s}, n={size:,}")
        axes[2].axhline(0.5, color="grey", lw=0.8)
        axes[2].set_ylim(0.3, 1.02)
        axes[2].set_xlabel("hops")
        axes[2].set_ylabel("test label accuracy")
        axes[2].set_title("held-out ontologies per hop count", fontsize=9)
        axes[2].legend(fontsize=6)
        axes[2].grid(alpha=0.3)
    fig.tight_layout()
    return fig

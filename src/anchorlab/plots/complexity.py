"""Complexity figures (NeurIPS Fig. 5 / Fig. 7; journal Fig. 5A-C, Fig. 10). Drawing only:
the numbers come from :mod:`anchorlab.analysis.condensation`, ``.embedding`` and ``.spectra``.

Every ``plot_*`` function draws on ``ax`` when given (else a new figure) and returns the Figure.
The ``*_figure(tables, opts, label)`` functions draw the tables of one analysis of
:mod:`anchorlab.analysis.complexity` (the registry calls them).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from anchorlab.config import ConfigError

log = logging.getLogger(__name__)


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is None:
        fig = Figure(figsize=figsize)
        return fig, fig.subplots()
    return ax.figure, ax


def _need(df: pd.DataFrame, cols: Sequence[str], arg: str = "df") -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ConfigError(f"{arg}: missing column(s) {missing}; has {list(df.columns)}")


def plot_cosine_heatmap(C: torch.Tensor | np.ndarray, order: torch.Tensor | np.ndarray | None = None,
                        ax: Axes | None = None, title: str = "cosine similarity of input weights",
                        colorbar: bool = True) -> Figure:
    """Heatmap of a cosine matrix ``C`` (n, n) on a fixed [-1, 1] diverging scale; rows and
    columns permuted by ``order`` (n,) (e.g. from ``condensation_order``) when given."""
    c = C.detach().cpu().numpy() if isinstance(C, torch.Tensor) else np.asarray(C)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ConfigError(f"C: must be a square matrix, got shape {c.shape}")
    if order is not None:
        o = order.cpu().numpy() if isinstance(order, torch.Tensor) else np.asarray(order)
        if sorted(o.tolist()) != list(range(c.shape[0])):
            raise ConfigError(f"order: must be a permutation of 0..{c.shape[0] - 1}")
        c = c[np.ix_(o, o)]
    fig, ax = _axes(ax, (4.6, 4))
    im = ax.imshow(c, cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("neuron" + (" (clustered order)" if order is not None else ""))
    ax.set_ylabel("neuron")
    if colorbar:
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return fig


def plot_embedding_pca(df: pd.DataFrame, ax: Axes | None = None, x: str = "pc1", y: str = "pc2",
                       arrow_steps: Sequence[int] = (), title: str | None = None) -> Figure:
    """Tokens at their PCA coordinates (from ``embedding_pca``), each labelled by its value.

    ``arrow_steps`` (e.g. ``(3, 4)``) draws, per step s, an arrow from the smallest token v to
    v + s, as the papers' red/blue arrows."""
    _need(df, ["token", x, y])
    fig, ax = _axes(ax, (4.6, 4.2))
    ax.scatter(df[x], df[y], s=14, c=df["token"], cmap="viridis", alpha=0.5)
    for t, px, py in zip(df["token"], df[x], df[y]):
        ax.annotate(str(int(t)), (px, py), fontsize=7, ha="center", va="center")
    pos = {int(t): (px, py) for t, px, py in zip(df["token"], df[x], df[y])}
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, s in enumerate(arrow_steps):
        start = next((v for v in sorted(pos) if v + s in pos), None)
        if start is None:
            log.warning("plot_embedding_pca: no tokens v, v+%d to draw an arrow", s)
            continue
        ax.annotate("", xy=pos[start + s], xytext=pos[start],
                    arrowprops=dict(arrowstyle="->", color=colors[(i + 3) % len(colors)], lw=1.8))
        ax.plot([], [], color=colors[(i + 3) % len(colors)], label=f"+{s}")
    if arrow_steps:
        ax.legend(fontsize=8, loc="best")
    ratio = df.attrs.get("explained_variance_ratio")
    xl, yl = x.upper(), y.upper()
    if ratio and x.startswith("pc") and y.startswith("pc"):
        try:
            xl += f" ({100 * ratio[int(x[2:]) - 1]:.0f}%)"
            yl += f" ({100 * ratio[int(y[2:]) - 1]:.0f}%)"
        except (ValueError, IndexError):
            pass
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(title or "token embeddings (PCA)", fontsize=10)
    ax.grid(alpha=0.3)
    return fig


def plot_covariance_spectrum(spectra_by_step: pd.DataFrame, ax: Axes | None = None, top_k: int = 10,
                             log_y: bool = True, title: str = "embedding covariance eigenvalues") -> Figure:
    """Eigenvalues over training from a tidy ``step, index, eigenvalue`` table
    (``covariance_spectra_by_step``): one line per eigenvalue index 1..top_k. With a single
    step, eigenvalue against index instead."""
    _need(spectra_by_step, ["step", "index", "eigenvalue"], "spectra_by_step")
    d = spectra_by_step[spectra_by_step["index"] <= top_k]
    fig, ax = _axes(ax, (5.2, 3.6))
    steps = sorted(d["step"].unique())
    if len(steps) <= 1:
        d = d.sort_values("index")
        ax.plot(d["index"], d["eigenvalue"], "o-")
        ax.set_xlabel("eigenvalue index")
    else:
        cmap = matplotlib.colormaps["viridis"]
        idx = sorted(d["index"].unique())
        for j, i in enumerate(idx):
            g = d[d["index"] == i].sort_values("step")
            ax.plot(g["step"], g["eigenvalue"], color=cmap(j / max(len(idx) - 1, 1)),
                    label=f"$\\lambda_{{{int(i)}}}$")
        ax.set_xlabel("step")
        ax.legend(fontsize=7, ncol=2)
    if log_y and (d["eigenvalue"] > 0).any():
        ax.set_yscale("log")
    ax.set_ylabel("eigenvalue")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    return fig


def plot_stable_rank_bubbles(df: pd.DataFrame, x: str = "optim.weight_decay", y: str = "init.gamma",
                             size: str = "phase", color: str = "stable_rank", ax: Axes | None = None,
                             size_scale: float = 120.0, cmap: str = "viridis",
                             title: str = "stable rank of $W^{Q(1)}$") -> Figure:
    """Journal Fig. 5C: one bubble per (x, y) cell, area ~ ``size`` (the phase index), colour =
    ``color`` (stable rank). Rows sharing a cell (seeds) are averaged for display; rows with a
    missing value are dropped with a warning."""
    _need(df, [x, y, size, color])
    d = df[[x, y, size, color]]
    bad = d.isna().any(axis=1)
    if bad.any():
        log.warning("plot_stable_rank_bubbles: dropping %d row(s) with missing values", int(bad.sum()))
        d = d[~bad]
    d = d.groupby([x, y], as_index=False)[[size, color]].mean()
    fig, ax = _axes(ax, (5.4, 4.2))
    sc = ax.scatter(d[x], d[y], s=size_scale * d[size].clip(lower=0), c=d[color], cmap=cmap,
                    edgecolors="k", linewidths=0.5)
    fig.colorbar(sc, ax=ax, label=color)
    levels = sorted(v for v in pd.unique(d[size].round()) if v > 0)
    for v in levels:
        ax.scatter([], [], s=size_scale * v, facecolors="none", edgecolors="k", label=f"{size} {v:g}")
    if levels:
        ax.legend(fontsize=8, loc="best", labelspacing=1.2, borderpad=0.8)
    xs = np.asarray(d[x], dtype=float)
    if len(xs) and (xs > 0).all() and xs.max() / xs.min() > 50:
        ax.set_xscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    return fig


def plot_stable_rank_bars(table: pd.DataFrame, ax: Axes | None = None,
                          title: str = "stable rank of every matrix") -> Figure:
    """Horizontal bars of ``stable_rank`` per ``name`` (a ``stable_rank_table``), in table order."""
    _need(table, ["name", "stable_rank"], "table")
    fig, ax = _axes(ax, (7, max(3.0, 0.22 * len(table))))
    ax.barh(table["name"], table["stable_rank"])
    ax.set_xlabel("stable rank ||W||_F^2 / ||W||_2^2")
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------ one figure per analysis
Tables = Mapping[str, pd.DataFrame]


def condensation_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``condensation``: the long ``cosine`` table (already in clustered order) as a heatmap."""
    cos = tables["cosine"]
    C = cos.pivot(index="i", columns="j", values="cosine").to_numpy()
    return plot_cosine_heatmap(C, order=np.arange(len(C)),
                               title=f"{label}\n{opts.param}: cosine of rows (clustered order)")


def embedding_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``embedding``: tokens in the PC plane, with a +s arrow for each ``diff_consistency`` step."""
    pca, summary = tables["pca"], tables["summary"]
    steps = [int(s) for s in summary[summary.metric == "diff_consistency"].step]
    if "explained_variance_ratio" not in pca.attrs:  # tables read back from CSV
        ratio = summary[summary.metric.str.startswith("explained_variance_ratio_")].value
        pca = pca.copy()
        pca.attrs["explained_variance_ratio"] = [float(v) for v in ratio]
    return plot_embedding_pca(pca, arrow_steps=steps, title=f"{label}: token embeddings (PCA)")


def cov_spectrum_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``cov-spectrum``: eigenvalue against index (one step) or over steps."""
    return plot_covariance_spectrum(tables["spectrum"], top_k=opts.top_k,
                                    title=f"{label}: embedding covariance eigenvalues")


def stable_rank_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``stable-rank``: one bar per 2-D parameter."""
    return plot_stable_rank_bars(tables["stable_rank"], title=f"{label}: stable rank of every matrix")

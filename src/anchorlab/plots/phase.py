"""Phase-diagram figures of a sweep (draw only; the tables come from ``sweep.aggregate``).

* :func:`plot_mapping_grid` - the held-out pair's accuracy under the symmetric and the inferential
  mapping over two axes (gamma x depth by default); hatched where seen-pair test accuracy < 90%.
* :func:`plot_phase_vs_gamma` - journal Fig. 3A: ID and OOD accuracy vs gamma on
  background bands coloured by phase.
* :func:`plot_ood_heatmap` - journal Fig. 3B: OOD accuracy over gamma x weight decay,
  hatched where ID is poor, triangles where commutativity < 70%.
* :func:`plot_run_history` - a run's metrics over training steps.

Each returns a Figure; :func:`anchorlab.plots.save.save_figure` writes it as PNG and PDF.
"""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.patches import Patch, Rectangle

from anchorlab.config import ConfigError
from anchorlab.eval.phases import PhaseThresholds

PHASE_COLORS = {"1": "#d9d9d9", "2n": "#fdd0a2", "2c": "#fff2ae", "2": "#fde0b0", "3": "#c7e9c0"}
PHASE_NAMES = {"1": "phase 1 (poor ID)", "2n": "phase 2, non-commutative", "2c": "phase 2, commutative",
               "2": "phase 2", "3": "phase 3 (good ID and OOD)"}


def fmt_value(v: object) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def need_columns(table: pd.DataFrame, *cols: str) -> None:
    for c in cols:
        if c not in table.columns:
            raise ConfigError(f"column {c!r} not in table; columns: {', '.join(map(str, table.columns))}")


def pivot_grid(table: pd.DataFrame, x: str, y: str, value: str) -> pd.DataFrame:
    """Cell table -> 2-D grid, rows = sorted ``y`` values, columns = sorted ``x`` values."""
    for col in (x, y, value):
        if col not in table.columns:
            raise ConfigError(f"pivot_grid: column {col!r} not in table; columns: "
                              f"{', '.join(map(str, table.columns))}")
    dup = table.duplicated([x, y])
    if dup.any():
        raise ConfigError(f"pivot_grid: several rows per ({x}, {y}) cell; aggregate the other axes first")
    g = table.pivot(index=y, columns=x, values=value)
    return g.sort_index().sort_index(axis=1)


def heatmap(ax: Axes, grid: pd.DataFrame, vmin: float = 0.0, vmax: float = 1.0,
             cmap: str = "viridis", annotate: bool = True) -> AxesImage:
    """Draw a (n_y, n_x) grid with cell (i, j) centred at (j, i); NaN cells grey."""
    values = grid.to_numpy(dtype=float)
    cm = matplotlib.colormaps[cmap].with_extremes(bad="#bdbdbd")
    im = ax.imshow(np.ma.masked_invalid(values), origin="lower", cmap=cm, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [fmt_value(v) for v in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [fmt_value(v) for v in grid.index])
    if annotate and values.size <= 400:
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                if math.isfinite(values[i, j]):
                    ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if values[i, j] < 0.5 * (vmin + vmax) else "black")
    return im


def hatch(ax: Axes, mask: np.ndarray, hatch: str = "///") -> None:
    for i, j in zip(*np.nonzero(mask)):
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch=hatch,
                               edgecolor=(1, 1, 1, 0.45), linewidth=0))   # half-white: the numbers stay legible


def plot_mapping_grid(table: pd.DataFrame, x: str = "init.gamma", y: str = "model.n_layers",
                      symmetric: str = "ood_symmetric_acc", inferential: str = "ood_inferential_acc",
                      id_col: str = "id_acc", id_threshold: float = 0.9) -> Figure:
    """Two heatmaps (symmetric, inferential mapping) over ``x`` (gamma) x ``y`` (depth).

    ``table``: one row per cell (the output of ``sweep.aggregate.aggregate``). For the
    (4,3) pair alone pass e.g. ``symmetric='hyp/43/test/symmetric'``.
    """
    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2, sharey=True)
    draw_mapping_pair(fig, axes, table, x, y, symmetric, inferential, id_col, id_threshold)
    fig.legend(handles=[Patch(facecolor="none", edgecolor="k", hatch="///",
                              label=f"{id_col} < {id_threshold:.0%}")], loc="lower center", ncol=1,
               fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def draw_mapping_pair(fig: Figure, axes: Sequence[Axes], table: pd.DataFrame, x: str, y: str, symmetric: str,
                      inferential: str, id_col: str, id_threshold: float = 0.9, titles: Sequence[str] | None = None,
                      xlabel: str | None = None, ylabel: str | None = None, title_size: float = 10) -> None:
    """NeurIPS Fig. 2's two panels on ``axes``: ``symmetric`` and ``inferential`` over ``x`` x ``y``,
    each cell annotated, hatched where ``id_col`` < ``id_threshold``, with a colour bar each. ``titles``,
    ``xlabel``, ``ylabel`` default to the mapping and column names, ``x`` (init rate) and ``y``."""
    need_columns(table, x, y, symmetric, inferential, id_col)
    if titles is None:
        titles = [f"({k}) {m} mapping\n{col}" for k, m, col in (("a", "symmetric", symmetric),
                                                               ("b", "inferential", inferential))]
    poor = pivot_grid(table, x, y, id_col).to_numpy(dtype=float) < id_threshold
    for ax, col, title in zip(axes, (symmetric, inferential), titles):
        im = heatmap(ax, pivot_grid(table, x, y, col))
        hatch(ax, poor)
        ax.set_title(title, fontsize=title_size)
        ax.set_xlabel(xlabel or f"{x} (init rate)")
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="accuracy")
    axes[0].set_ylabel(ylabel or y)


def _bands(ax: Axes, xs: np.ndarray, labels: Sequence[object]) -> list[str]:
    """Colour [midpoint left, midpoint right] around each x by its phase label."""
    edges = np.concatenate([[xs[0] - (xs[1] - xs[0]) / 2 if len(xs) > 1 else xs[0] - 0.5],
                            (xs[1:] + xs[:-1]) / 2,
                            [xs[-1] + (xs[-1] - xs[-2]) / 2 if len(xs) > 1 else xs[0] + 0.5]])
    seen = []
    for k, lab in enumerate(labels):
        if lab is None or lab is pd.NA or (isinstance(lab, float) and math.isnan(lab)):
            continue
        lab = str(lab)
        ax.axvspan(edges[k], edges[k + 1], color=PHASE_COLORS.get(lab, "white"), alpha=0.9, lw=0, zorder=0)
        if lab not in seen:
            seen.append(lab)
    ax.set_xlim(edges[0], edges[-1])
    return seen


def plot_phase_vs_gamma(table: pd.DataFrame, x: str = "init.gamma", id_col: str = "id_acc",
                        ood_col: str = "ood_acc", phase_col: str = "phase_label") -> Figure:
    """ID (blue) and OOD (red) accuracy vs ``x``, error bars from ``<col>_std`` when present,
    on background bands coloured by ``phase_col`` (from ``eval.phases.classify_phases``)."""
    need_columns(table, x, id_col, ood_col, phase_col)
    if table[x].duplicated().any():
        raise ConfigError(f"plot_phase_vs_gamma: several rows per {x}; select one value of the other axes")
    t = table.sort_values(x)
    xs = t[x].to_numpy(dtype=float)
    fig = Figure(figsize=(6.5, 3.8))
    ax = fig.subplots()
    seen = _bands(ax, xs, list(t[phase_col]))
    for col, color, label in ((id_col, "tab:blue", "ID"), (ood_col, "tab:red", "OOD")):
        err = t[f"{col}_std"].to_numpy(dtype=float) if f"{col}_std" in t.columns else None
        ax.errorbar(xs, t[col].to_numpy(dtype=float), yerr=err, color=color, marker="o", ms=4, capsize=2,
                    label=f"{label} ({col})", zorder=3)
    handles, _ = ax.get_legend_handles_labels()
    handles += [Patch(color=PHASE_COLORS.get(s, "white"), label=PHASE_NAMES.get(s, s)) for s in seen]
    ax.legend(handles=handles, fontsize=7, loc="best")
    ax.set_xlabel(f"{x} (init rate)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    fig.tight_layout()
    return fig


def plot_ood_heatmap(table: pd.DataFrame, x: str = "init.gamma", y: str = "optim.weight_decay",
                     ood_col: str = "ood_acc", id_col: str = "id_acc", comm_col: str = "commutativity",
                     thresholds: PhaseThresholds = PhaseThresholds()) -> Figure:
    """OOD accuracy over ``x`` x ``y``; hatched where ``id_col`` < id threshold, green
    triangles where ``comm_col`` < commutativity threshold (journal Fig. 3B)."""
    need_columns(table, x, y, ood_col, id_col)
    fig = Figure(figsize=(6.5, 4.5))
    ax = fig.subplots()
    im = heatmap(ax, pivot_grid(table, x, y, ood_col), cmap="RdYlBu_r")
    hatch(ax, pivot_grid(table, x, y, id_col).to_numpy(dtype=float) < thresholds.id_threshold)
    handles = [Patch(facecolor="none", edgecolor="k", hatch="///",
                     label=f"{id_col} < {thresholds.id_threshold:.0%}")]
    if comm_col in table.columns:
        low = pivot_grid(table, x, y, comm_col).to_numpy(dtype=float) < thresholds.comm_threshold
        ii, jj = np.nonzero(low)
        h = ax.scatter(jj - 0.3, ii + 0.3, marker="^", s=28, color="tab:green", edgecolor="k", linewidth=0.5,
                       zorder=4, label=f"{comm_col} < {thresholds.comm_threshold:.0%}")
        handles.append(h)
    fig.colorbar(im, ax=ax, label=ood_col)
    ax.set_xlabel(f"{x} (init rate)")
    ax.set_ylabel(y)
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.15), ncol=2, frameon=False)
    fig.tight_layout()
    return fig


def plot_run_history(history: pd.DataFrame, metrics: Sequence[str] | None = None,
                     loss: str = "train_loss") -> Figure:
    """A run's history (one row per step, from ``sweep.aggregate.history_table`` or final.json):
    ``loss`` on a log scale (left, if present) and accuracies (right)."""
    need_columns(history, "step")
    if metrics is None:
        metrics = [m for m in ("train_acc", "id_acc", "ood_inferential_acc", "ood_symmetric_acc",
                               "commutativity") if m in history.columns]
    has_loss = loss in history.columns
    fig = Figure(figsize=(10 if has_loss else 5.5, 3.6))
    axes = fig.subplots(1, 2 if has_loss else 1, squeeze=False)
    if has_loss:
        a = axes[0][0]
        y = history[loss].to_numpy(dtype=float)
        a.plot(history.step, y, color="k")
        if (y[np.isfinite(y)] > 0).any():
            a.set_yscale("log")
        a.set_xlabel("step")
        a.set_ylabel(loss)
        a.grid(alpha=0.3)
    a = axes[0][-1]
    for m in metrics:
        need_columns(history, m)
        a.plot(history.step, history[m], label=m)
    a.set_xlabel("step")
    a.set_ylabel("accuracy")
    a.set_ylim(-0.02, 1.02)
    a.grid(alpha=0.3)
    if metrics:
        a.legend(fontsize=8)
    fig.tight_layout()
    return fig

"""Journal Fig. 6B: generated samples per concept-graph node across init settings, and accuracy on the unseen
nodes (all three concepts; shape, size, colour) vs init rate.

Draw only: inputs are arrays of samples and tidy per-run tables (from
:mod:`anchorlab.papers.reproduce.figures_diffusion`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from anchorlab.config import ConfigError

DEFAULT_COLOR = "tab:purple"
SCHEME, GAMMA = "init.scheme", "rate_gamma"   # the per-run table's scheme and the rate's gamma (NaN at default)


def mosaic(images: np.ndarray, pad: int = 1) -> np.ndarray:
    """(k, 3, H, W) images in [0, 1] -> one (rows*H, cols*W, 3) picture (white padding), about square."""
    k, _, H, W = images.shape
    cols = math.ceil(math.sqrt(k))
    rows = math.ceil(k / cols)
    out = np.ones((rows * (H + pad) - pad, cols * (W + pad) - pad, 3), dtype=np.float32)
    for i, im in enumerate(np.clip(images, 0, 1)):
        r, c = divmod(i, cols)
        out[r * (H + pad):r * (H + pad) + H, c * (W + pad):c * (W + pad) + W] = im.transpose(1, 2, 0)
    return out


def plot_sample_grid(samples: Mapping[str, np.ndarray], nodes: Sequence[str], row_labels: Sequence[str] = (),
                     default: str | None = None, unseen: Sequence[str] = ()) -> Figure:
    """Rows: nodes; columns: init settings (in ``samples`` order); each cell a mosaic of that setting's samples.

    ``samples[setting]``: (len(nodes), k, 3, H, W) in [0, 1]. The ``default``
    column is framed in purple (as the paper's default box); ``unseen`` rows
    get their label in bold.
    """
    settings = list(samples)
    if not settings:
        raise ConfigError("samples: no settings to draw")
    for s, a in samples.items():
        if a.ndim != 5 or a.shape[0] != len(nodes):
            raise ConfigError(f"samples[{s!r}]: expected ({len(nodes)}, k, 3, H, W), got {a.shape}")
    labels = list(row_labels) or list(nodes)
    fig = Figure(figsize=(1.25 * len(settings) + 1.6, 1.2 * len(nodes) + 0.6))
    axes = fig.subplots(len(nodes), len(settings), squeeze=False)
    for j, s in enumerate(settings):
        for i, node in enumerate(nodes):
            ax = axes[i][j]
            ax.imshow(mosaic(samples[s][i]), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(s, fontsize=8, color=DEFAULT_COLOR if s == default else "black")
            if j == 0:
                ax.set_ylabel(labels[i], fontsize=7, rotation=0, ha="right", va="center",
                              fontweight="bold" if node in unseen else "normal")
            if s == default:
                for sp in ax.spines.values():
                    sp.set_edgecolor(DEFAULT_COLOR)
                    sp.set_linewidth(2.5)
    fig.suptitle("generated samples per node (rows) and init setting (columns)", fontsize=9)
    fig.tight_layout()
    return fig


def plot_shape_accuracy(runs: pd.DataFrame, nodes: Sequence[str] = ("010", "011"),
                        default_x: float = 0.5) -> Figure:
    """Shape accuracy on ``nodes`` vs the init rate (mean over seeds, min-max band), ID all-concept accuracy
    dashed; the framework-default runs as purple markers at ``default_x`` (PyTorch's default = gamma 0.5 on the
    uniform scale of the presets).

    ``runs``: one row per run with ``init.scheme`` (``rate`` / ``framework_default``), ``rate_gamma`` (the
    init rate's gamma; NaN at the default init), ``final.shape_acc_<node>`` and ``final.id_all_acc``.
    """
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    cols = [(f"final.shape_acc_{n}", f"shape accuracy, node {n}", "-", "o", c) for n, c in zip(nodes, colors)]
    return _accuracy_vs_gamma(runs, cols, default_x)


def plot_unseen_accuracy(runs: pd.DataFrame, metrics: Sequence[str] = ("final.all_acc_010_011",
                                                                      "final.shape_acc_010_011",
                                                                      "final.size_acc_010_011",
                                                                      "final.color_acc_010_011"),
                         default_x: float = 0.5) -> Figure:
    """The headline (``metrics[0]``, thick: all three concepts right on the unseen nodes) and the per-concept
    accuracies beside it (thin) vs the init rate, as :func:`plot_shape_accuracy`."""
    colors = ["black", "tab:blue", "tab:orange", "tab:green", "tab:red"]
    names = {"all": "all three concepts right", "shape": "shape right", "size": "size right",
             "color": "colour right"}

    def label(m: str) -> str:
        key, _, nodes = m.removeprefix("final.").partition("_acc_")
        return f"{names.get(key, key)}, nodes {nodes.replace('_', '/')}" if nodes else m

    cols = [(m, label(m), "-", "o" if k == 0 else "^", c) for k, (m, c) in enumerate(zip(metrics, colors))]
    return _accuracy_vs_gamma(runs, cols, default_x, bold=metrics[0])


def _accuracy_vs_gamma(runs: pd.DataFrame, cols: list[tuple[str, str, str, str, str]], default_x: float,
                       bold: str = "") -> Figure:
    """``cols``: (column, label, line style, marker, colour) per line; ``final.id_all_acc`` is added dashed."""
    cols = cols + [("final.id_all_acc", "training nodes, all concepts right", "--", "s", "gray")]
    need = {SCHEME, GAMMA, *(c[0] for c in cols)}
    if missing := sorted(need - set(runs.columns)):
        raise ConfigError(f"runs: missing columns {', '.join(missing)}")
    fig = Figure(figsize=(5.2, 3.6))
    ax = fig.subplots()
    rate = runs[runs[SCHEME] == "rate"]
    default = runs[runs[SCHEME] == "framework_default"]
    for k, (col, label, ls, marker, color) in enumerate(cols):
        lw = 2.5 if col == bold else 1.2
        if not rate.empty:
            st = rate.groupby(GAMMA)[col].agg(["mean", "min", "max"]).reset_index()
            ax.plot(st[GAMMA], st["mean"], ls=ls, marker=marker, color=color, label=label, lw=lw)
            ax.fill_between(st[GAMMA], st["min"], st["max"], color=color, alpha=0.15)
        if not default.empty:
            dx = default_x - 0.015 + 0.01 * k
            ax.scatter([dx] * len(default), default[col], marker=marker, s=36, facecolors="none",
                       edgecolors=DEFAULT_COLOR, zorder=3)
    if not default.empty:
        ax.add_patch(Rectangle((default_x - 0.04, -0.03), 0.08, 1.06, fill=False, ec=DEFAULT_COLOR, lw=1.5))
        ax.annotate("default init", (default_x, 1.04), color=DEFAULT_COLOR, fontsize=8, ha="center")
    ax.set_xlabel("init rate gamma (bound = fan_in^-gamma)")
    ax.set_ylabel("fraction of samples")
    ax.set_ylim(-0.05, 1.12)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig

"""The demo's figure: seen- and unseen-pair accuracy over training beside each model's first-layer W_Q cosine matrix."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

COLOURS = {"large_init": "tab:red", "small_init": "tab:blue"}


def plot_demo(curves: Mapping[str, pd.DataFrame], wq: Mapping[str, np.ndarray],
              labels: Mapping[str, str] | None = None) -> Figure:
    """Left: ``id_acc`` (dashed) and ``ood_acc`` (solid) against ``step`` for each model of ``curves``; then one
    panel per model of ``wq``: the cosine matrix of its first layer's W_Q rows (clustered; journal Fig. 5C / 10)."""
    labels = dict(labels or {})
    fig = Figure(figsize=(5.2 + 3.6 * len(wq), 3.9))
    axes = fig.subplots(1, 1 + len(wq), gridspec_kw={"width_ratios": [1.45] + [1.0] * len(wq)})
    ax = axes[0]
    for name, h in curves.items():
        c = COLOURS.get(name)
        ax.plot(h.step, h.ood_acc, color=c, lw=2, label=f"{name}: unseen pairs")
        ax.plot(h.step, h.id_acc, color=c, lw=1.2, ls="--", label=f"{name}: seen pairs (ID)")
    ax.set_xlabel("step")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center right")
    ax.set_title("accuracy over training", fontsize=9)
    im = None
    for a, (name, C) in zip(axes[1:], wq.items()):
        im = a.imshow(C, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
        a.set_title(f"{labels.get(name, name)}\ncosine of W_Q(1) rows (clustered)", fontsize=8)
        a.set_xticks([])
        a.set_yticks([])
    if im is not None:
        fig.colorbar(im, ax=list(axes[1:]), fraction=0.03, pad=0.02, label="cosine")
    return fig

"""Training-speed figures: NeurIPS Fig. 6 / journal Fig. 8A and journal Fig. 8B (draw only).

Inputs are the tidy tables of :mod:`anchorlab.analysis.speed`; a bar whose
value includes a censored run (the threshold was never reached, so the value
is a lower bound) is hatched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from anchorlab.config import ConfigError

HATCH = "///"


def _need(df: pd.DataFrame, cols: Sequence[str], arg: str) -> None:
    missing = [c for c in cols if c not in df]
    if missing:
        raise ConfigError(f"{arg}: missing columns {missing}")


def _init_label(gamma: float, gammas: Sequence[float], name: str = "gamma") -> str:
    if len(gammas) >= 2 and gamma == max(gammas):
        return f"small init ({name} {gamma:g})"
    if len(gammas) >= 2 and gamma == min(gammas):
        return f"large init ({name} {gamma:g})"
    return f"{name} {gamma:g}"


def plot_complexity_speed(summary: pd.DataFrame, threshold_label: str = "train loss <= 5e-2",
                          gamma_label: str = "gamma") -> Figure:
    """Epochs to threshold vs depth, one bar per k, one panel per gamma (small init first).

    summary: :func:`~anchorlab.analysis.speed.summarize_speed` output
    (gamma, depth, k, epochs, sem, censored). Error bars are the sem over
    seeds; hatched bars contain censored runs (lower bounds). ``gamma_label`` names the gammas' convention in
    the panel titles (e.g. ``"paper gamma"`` for runs set at ``init.ref_width: 400``).
    """
    _need(summary, ["gamma", "depth", "k", "epochs", "censored"], "summary")
    if summary.empty:
        raise ConfigError("summary: is empty; nothing to plot")
    gammas = sorted(summary.gamma.unique(), reverse=True)   # largest gamma = smallest init first
    ks = sorted(summary.k.unique())
    depths = sorted(summary.depth.unique())
    cmap = matplotlib.colormaps["viridis"]
    colors = {k: cmap(i / max(len(ks) - 1, 1)) for i, k in enumerate(ks)}
    fig = Figure(figsize=(4.6 * len(gammas), 3.6))
    axes = fig.subplots(1, len(gammas), squeeze=False)
    width = 0.8 / len(ks)
    for ax, g in zip(axes[0], gammas):
        sub = summary[summary.gamma == g]
        for j, k in enumerate(ks):
            for i, d in enumerate(depths):
                cell = sub[(sub.k == k) & (sub.depth == d)]
                if cell.empty:
                    continue
                r = cell.iloc[0]
                err = r["sem"] if "sem" in cell and np.isfinite(r["sem"]) else None
                ax.bar(i - 0.4 + (j + 0.5) * width, r["epochs"], width, yerr=err, capsize=2,
                       color=colors[k], edgecolor="black", linewidth=0.5,
                       hatch=HATCH if bool(r["censored"]) else None)
        ax.set_xticks(range(len(depths)), [str(d) for d in depths])
        ax.set_xlabel("depth (layers)")
        ax.set_title(_init_label(g, gammas, gamma_label))
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(f"epochs to {threshold_label}")
    handles = [Patch(facecolor=colors[k], edgecolor="black", label=f"k={k}") for k in ks]
    if summary.censored.astype(bool).any():
        handles.append(Patch(facecolor="white", edgecolor="black", hatch=HATCH, label="censored (lower bound)"))
    axes[0][-1].legend(handles=handles, fontsize=8, title="noise groups", title_fontsize=8,
                       loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def plot_pair_speed(pair_speed: pd.DataFrame, highlight: Iterable[str] = (),
                    threshold_label: str = "60% train accuracy", title: str | None = None) -> Figure:
    """Per-pair epochs to threshold (journal Fig. 8B), highlighted pairs in red.

    pair_speed: DataFrame(pair, epochs, censored[, sem]) from
    :func:`~anchorlab.analysis.speed.pair_fit_speed` or
    :func:`~anchorlab.analysis.speed.summarize_pair_speed`; one row per pair.
    highlight: pair labels (``"12"``), e.g. the rule-violating pairs.
    """
    _need(pair_speed, ["pair", "epochs", "censored"], "pair_speed")
    if pair_speed.pair.duplicated().any():
        raise ConfigError("pair_speed: one row per pair expected; average seeds with summarize_pair_speed")
    df = pair_speed.sort_values("pair").reset_index(drop=True)
    hl = {str(h) for h in highlight}
    fig = Figure(figsize=(max(5.0, 0.45 * len(df) + 1.5), 3.4))
    ax = fig.subplots()
    x = np.arange(len(df))
    err = df["sem"].to_numpy(dtype=float) if "sem" in df else None
    if err is not None and not np.isfinite(err).any():
        err = None
    bars = ax.bar(x, df.epochs, 0.7, yerr=err, capsize=2, edgecolor="black", linewidth=0.5,
                  color=["tab:red" if p in hl else "tab:blue" for p in df.pair])
    for b, cens in zip(bars, df.censored.astype(bool)):
        if cens:
            b.set_hatch(HATCH)
    ax.set_xticks(x, [f"({p[0]},{p[1:]})" if len(p) == 2 else p for p in df.pair], fontsize=8)
    ax.set_xlabel("anchor pair")
    ax.set_ylabel(f"epochs to {threshold_label}")
    handles = [Patch(facecolor="tab:red", label="rule-violating / affected"),
               Patch(facecolor="tab:blue", label="other pairs")]
    if df.censored.astype(bool).any():
        handles.append(Patch(facecolor="white", edgecolor="black", hatch=HATCH, label="censored"))
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if title:
        ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


__all__ = ["plot_complexity_speed", "plot_pair_speed"]

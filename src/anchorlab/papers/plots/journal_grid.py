"""Journal Fig. 3B at a CPU scale beside the journal's own phase per cell (draw only; the cells are
:func:`anchorlab.papers.eval.journal_cells.journal_cells`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from anchorlab.eval.phases import PhaseThresholds
from anchorlab.plots.phase import PHASE_COLORS, PHASE_NAMES, fmt_value, hatch, heatmap, need_columns, pivot_grid


def plot_journal_grid(cells: pd.DataFrame, reading: str = "best", x: str = "optim.weight_decay", y: str = "gamma_axis",
                      thresholds: PhaseThresholds = PhaseThresholds(), journal: str = "journal_phase",
                      xlabel: str | None = None, ylabel: str | None = None) -> Figure:
    """Journal Fig. 3B beside the journal's own cells: (left) our mean OOD accuracy of ``reading`` over
    ``y`` (init rate) x ``x`` (weight decay), each cell annotated with its value and phase label, hatched
    where the mean ID is below the ID threshold, a green triangle where the mean commutativity on the
    unseen pair is below the commutativity threshold; (right) the journal's phase label of the matched
    cell, coloured by phase (blank off its grid). ``cells``: :func:`anchorlab.papers.eval.journal_cells.journal_cells`;
    ``xlabel`` / ``ylabel`` default to the column names."""
    ood, idc, phase = f"ood_{reading}", f"id_{reading}", f"phase_{reading}"
    need_columns(cells, x, y, ood, idc, phase)
    fig = Figure(figsize=(10.5, 1.0 * cells[y].nunique() + 2.4))
    ax, jx = fig.subplots(1, 2)
    grid = pivot_grid(cells, x, y, ood)
    im = heatmap(ax, grid, cmap="RdYlBu_r", annotate=False)
    labels = pivot_grid(cells, x, y, phase)
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            v = grid.iat[i, j]
            if isinstance(v, float) and math.isfinite(v):
                ax.text(j, i, f"{v:.2f}\n{labels.iat[i, j]}", ha="center", va="center", fontsize=7,
                        color="white" if v < 0.25 or v > 0.8 else "black")
    hatch(ax, pivot_grid(cells, x, y, idc).to_numpy(dtype=float) < thresholds.id_threshold)
    if "commutativity" in cells.columns:
        low = pivot_grid(cells, x, y, "commutativity").to_numpy(dtype=float) < thresholds.comm_threshold
        ii, jj = np.nonzero(low)
        ax.scatter(jj - 0.3, ii + 0.3, marker="^", s=30, color="tab:green", edgecolor="k", linewidth=0.5, zorder=4)
    fig.colorbar(im, ax=ax, label=f"OOD accuracy ({reading})")
    ax.set_title(f"ours: mean OOD ({reading} reading) and phase\nhatched: ID < {thresholds.id_threshold:.0%}; "
                 f"triangle: commutativity < {thresholds.comm_threshold:.0%}", fontsize=8)
    if journal in cells.columns:
        jl = pivot_grid(cells, x, y, journal)
        jx.imshow(np.zeros(jl.shape), cmap="Greys", vmin=0, vmax=1, origin="lower", aspect="auto")
        for i in range(jl.shape[0]):
            for j in range(jl.shape[1]):
                lab = jl.iat[i, j]
                if isinstance(lab, str) and lab:
                    jx.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, color=PHASE_COLORS.get(lab, "white")))
                    jx.text(j, i, lab, ha="center", va="center", fontsize=9)
        rows = cells.groupby(x)["journal_wd"].first() if "journal_wd" in cells.columns else None
        jx.set_xticks(range(jl.shape[1]), [fmt_value(v) + (f"\n(journal {fmt_value(rows[v])})" if rows is not None else "")
                                           for v in jl.columns])
        jx.set_yticks(range(jl.shape[0]), [fmt_value(v) for v in jl.index])
        jx.set_title("the journal's phase at the matched cell\n(its Fig. 5C / 3B code; blank: off its grid)",
                     fontsize=8)
        jx.set_xlabel(f"{xlabel or x} (our value; rows matched by decay exponent)")
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or f"{y} (init rate)")
    fig.legend(handles=[Patch(color=PHASE_COLORS[k], label=PHASE_NAMES[k]) for k in ("1", "2n", "2c", "3")],
               loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig

"""The init-rate x weight-decay phase diagram (journal Fig. 3B) at CPU scale (draw only; the tables are
:func:`anchorlab.papers.eval.wd_grid.grid_cells` and :func:`anchorlab.papers.eval.wd_grid.grid_view`).

:func:`plot_gamma_wd`: two heatmaps over weight decay (columns, labelled with the decay exponent) x
paper gamma (rows): the papers' cell of the inferential and of the symmetric mapping (mean over seeds
of each seed's best), each cell annotated with its value, its journal phase and the per-run counts
(runs composing / memorizing by final metrics), hatched where the mean best ID is below ``id_min``
(the journal's "striped" poor-ID regions). The journal's Fig. 3B is a heatmap whose numbers are not in
its text; its stated reading (OOD accuracy rises with the init rate and with weight decay) is printed
under the panels instead of invented values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from anchorlab.config import ConfigError

JOURNAL = ("journal Fig. 3B (10-layer GPT-2, 92k steps; its numbers are not in the text): OOD accuracy rises "
           "with the init rate and with weight decay; small init + large wd reason")


def plot_gamma_wd(cells: pd.DataFrame, rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9) -> Figure:
    need = ["paper_gamma", "init.gamma", "optim.weight_decay", "decay_exponent", "id_best", "inferential_best",
            "symmetric_best", "phase", "n_seeds"]
    missing = [c for c in need if c not in cells.columns]
    if missing:
        raise ConfigError(f"gamma x wd cell table lacks column(s) {', '.join(missing)}")
    cells = cells.assign(y=cells.paper_gamma.fillna(cells["init.gamma"]), wd=cells["optim.weight_decay"])
    rows = rows.assign(y=rows.paper_gamma.fillna(rows["init.gamma"]), wd=rows["optim.weight_decay"])
    gammas = sorted(cells.y.unique())
    wds = sorted(cells.wd.unique())
    expo = cells.groupby("wd").decay_exponent.mean()
    counts = rows.groupby(["y", "wd"]).solution.agg(
        lambda s: f"{int(s.eq('composes').sum())}c {int(s.eq('memorizes').sum())}m /{len(s)}")
    fig = Figure(figsize=(4.0 * 2 + 1.2, 1.0 * len(gammas) + 2.2))
    axes = fig.subplots(1, 2, sharey=True)
    im = None
    for ax, m in zip(axes, ("inferential", "symmetric")):
        grid = np.full((len(gammas), len(wds)), np.nan)
        for r in cells.itertuples():
            i, j = gammas.index(r.y), wds.index(r.wd)
            grid[i, j] = getattr(r, f"{m}_best")
            poor = not r.id_best >= id_min
            ax.text(j, i, f"{grid[i, j]:.2f}\nphase {r.phase}\n{counts.get((r.y, r.wd), '')}",
                    ha="center", va="center", fontsize=7, color="black" if grid[i, j] >= 0.45 else "white")
            if poor:
                ax.add_patch(_hatch(j, i))
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis",
                       origin="lower", aspect="auto", alpha=0.85)
        ax.set_xticks(range(len(wds)), [f"{w:g}\n(e={expo[w]:.2f})" for w in wds], fontsize=7)
        ax.set_yticks(range(len(gammas)), [f"{g:g}" for g in gammas])
        ax.set_xlabel("weight decay (decay exponent wd x sum of lr)", fontsize=8)
        ax.set_title(f"{m} (held-out pair): papers' cell\n(mean over seeds of the best over training)", fontsize=8)
    axes[0].set_ylabel("paper gamma (init.ref_width 400)" if cells.paper_gamma.notna().all()
                       else "gamma", fontsize=8)
    fig.colorbar(im, cax=fig.add_axes([0.9, 0.25, 0.015, 0.61]), label="accuracy")
    fig.text(0.01, 0.01, f"phase: journal's (1: best ID < {id_min:g}, hatched; 2: ID fitted, inferential < "
             f"{threshold:g}; 3: both). counts: runs composing (c) / memorizing (m) by final metrics.\n" + JOURNAL,
             fontsize=6.5, va="bottom")
    fig.subplots_adjust(bottom=0.25, top=0.86, left=0.08, right=0.87)
    return fig


def _hatch(j: int, i: int):
    from matplotlib.patches import Rectangle

    return Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="white", linewidth=0)

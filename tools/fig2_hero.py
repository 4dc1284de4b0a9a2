"""The README's hero figure: NeurIPS Fig. 2 at CPU scale, ours beside the paper's reading.

    python tools/fig2_hero.py            # writes docs/figures/fig2_hero.png

Reads docs/figures/fig2_cell_cpu_cells.csv (the papers' cells: 1/2x clock, the papers' op set, the peaks
inside the paper's corrected range); the paper's reading is its text (NeurIPS §4, Fig. 2 caption):
symmetric accuracy near 1 at small gamma, inferential near 1 at large gamma, the seen pairs unfit
(shadow) where the init is large and the model deep.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from anchorlab.papers.docs.common import FIGURES  # noqa: E402
from anchorlab.papers.docs.fig2 import RANGE, cells  # noqa: E402

OUT = FIGURES / "fig2_hero.png"
PAPER = {0.3: ("memorizes", "symmetric near 1"), 0.8: ("composes", "inferential near 1")}


def grid() -> tuple[list[int], list[float], dict]:
    d = cells()
    d = d[(d.clock == 0.5) & (d.lrs == RANGE) & (d.devices == "cpu") & d.op.str.endswith("papers'")
          & d.paper_gamma.isin(list(PAPER))]
    depths, gammas = sorted(d.n_layers.unique()), sorted(d.paper_gamma.unique())
    return depths, gammas, {(r.n_layers, r.paper_gamma): r for r in d.itertuples()}


def draw(out: Path = OUT) -> Path:
    depths, gammas, by = grid()
    fig, axes = plt.subplots(1, 3, figsize=(11.5, 3.9), gridspec_kw={"width_ratios": [1, 1, 1.15]})
    for ax, col, title in ((axes[0], "inferential_best", "ours: inferential (composes)"),
                           (axes[1], "symmetric_best", "ours: symmetric (memorizes)")):
        m = np.array([[getattr(by[(dp, g)], col) for g in gammas] for dp in depths])
        ax.imshow(m, origin="lower", cmap="viridis", vmin=0, vmax=1, aspect="auto")
        for i, dp in enumerate(depths):
            for j, g in enumerate(gammas):
                r = by[(dp, g)]
                ax.text(j, i, f"{getattr(r, col):.2f}\n{r.solution}", ha="center", va="center", fontsize=9,
                        color="white" if getattr(r, col) < 0.6 else "black")
                if r.solution == "unfit":
                    ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", color="white", lw=0))
        ax.set_title(title, fontsize=10)
    ax = axes[2]
    ax.imshow(np.zeros((len(depths), len(gammas))), origin="lower", cmap="Greys", vmin=0, vmax=1, aspect="auto")
    for i, dp in enumerate(depths):
        for j, g in enumerate(gammas):
            text = "\n".join(PAPER[g]) if dp >= 2 else "not stated\nin the text"
            ax.text(j, i, text, ha="center", va="center", fontsize=9, color="black" if dp >= 2 else "grey")
    ax.set_title("the paper's reading (NeurIPS Fig. 2, width 400, 1x)", fontsize=10)
    for ax in axes:
        ax.set_xticks(range(len(gammas)), [f"{g:g}\n({'large' if g < 0.5 else 'small'} init)" for g in gammas])
        ax.set_yticks(range(len(depths)), [str(dp) for dp in depths])
        ax.set_xlabel("paper gamma (std = 400^-gamma)")
    axes[0].set_ylabel("depth (layers)")
    fig.suptitle("NeurIPS Fig. 2 at CPU scale: the papers' cell (mean over seeds of each seed's best), "
                 "1/2x clock, peaks in the paper's range; hatched: unfit", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(draw())

"""NeurIPS Fig. 7's quantity: the key embeddings' covariance eigenvalues, as shares of the trace, per side."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

# (set, side) -> (panel, label, colour)
STYLE = {("init", "small_init"): (0, "small init (journal gamma 0.8)", "tab:blue"),
         ("init", "large_init"): (0, "large init (journal gamma 0.4)", "tab:red"),
         ("cleanest", "composes"): (1, "composes (clean picks)", "tab:blue"),
         ("cleanest", "memorizes"): (1, "memorizes (clean picks)", "tab:red"),
         ("matched", "memorizes"): (1, "memorizes, matched gamma", "tab:orange")}
TITLES = ("the journal's task: small vs large init", "the mirror task: composing vs memorizing runs")


def plot_spectra(spectra: pd.DataFrame, top_k: int = 10, labels: dict[tuple[str, str], str] | None = None,
                 titles: tuple[str, ...] = TITLES) -> Figure:
    """``spectra``: rows (side, set, run_id, index, share). Each run a thin line, each side's mean a thick one;
    one panel per comparison that has rows. ``labels``: (set, side) -> legend label, over :data:`STYLE`'s (e.g.
    the init contrast's gammas as its runs have them); ``titles``: the panels' titles, over :data:`TITLES`."""
    labels = labels or {}
    panels = sorted({STYLE[(s, d)][0] for s, d in zip(spectra.set, spectra.side) if (s, d) in STYLE})
    fig = Figure(figsize=(4.2 * len(panels), 3.4))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    where = {p: ax for p, ax in zip(panels, axes)}
    t = spectra[spectra["index"] <= top_k]
    for (st, side), g in t.groupby(["set", "side"], sort=False):
        if (st, side) not in STYLE:
            continue
        panel, label, colour = STYLE[(st, side)]
        label = labels.get((st, side), label)
        ax = where[panel]
        for _, run in g.groupby("run_id"):
            ax.plot(run["index"], run.share, color=colour, alpha=0.25, lw=0.8)
        m = g.groupby("index").share.mean()
        ax.plot(m.index, m.to_numpy(), color=colour, lw=2, marker="o", ms=3,
                label=f"{label}, {g.run_id.nunique()} runs")
    for p, ax in where.items():
        ax.set_title(titles[p], fontsize=8)
        ax.set_xlabel("eigenvalue index (largest first)")
        ax.set_ylabel("share of the covariance's trace")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig

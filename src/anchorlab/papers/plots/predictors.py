"""AUC of each early predictor for "composes" vs "memorizes" (draw only; the table is
:func:`anchorlab.papers.reproduce.predictors_fit.study_auc`).

:func:`plot_auc`: one row per feature, its AUC with the bootstrap interval at each fraction of
training (one marker per fraction), a line at 0.5 (no separation) and at 0.15 / 0.85 (the early
verdict's bar, either direction).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from anchorlab.config import ConfigError

MARKERS = ("o", "s", "^", "D", "v")


def plot_auc(auc: pd.DataFrame, fractions: Sequence[float] | None = None, bar: float = 0.85) -> Figure:
    """Features (rows, in table order) x fractions (markers) of an :data:`~anchorlab.papers.analysis.auc.AUC_COLUMNS` table."""
    need = ["feature", "at_fraction", "auc", "auc_lo", "auc_hi", "n_runs"]
    missing = [c for c in need if c not in auc.columns]
    if missing:
        raise ConfigError(f"AUC table lacks column(s) {', '.join(missing)}")
    fracs = sorted(auc.at_fraction.unique()) if fractions is None else list(fractions)
    t = auc[auc.at_fraction.isin(fracs)]
    if t.empty:
        raise ConfigError(f"AUC table has no rows at fractions {fracs}")
    feats = list(dict.fromkeys(t.feature))
    fig = Figure(figsize=(7.5, 0.28 * len(feats) + 1.4))
    ax = fig.subplots()
    y = np.arange(len(feats))
    for k, f in enumerate(fracs):
        g = t[np.isclose(t.at_fraction, f)].set_index("feature").reindex(feats)
        off = (k - (len(fracs) - 1) / 2) * 0.22
        v = g.auc.to_numpy(float)
        err = np.vstack([v - g.auc_lo.to_numpy(float), g.auc_hi.to_numpy(float) - v])
        n = int(g.n_runs.max()) if g.n_runs.notna().any() else 0
        ax.errorbar(v, y + off, xerr=err, fmt=MARKERS[k % len(MARKERS)], ms=4, capsize=0, lw=0.8,
                    label=f"{f:.0%} of training (n={n})")
    for x, ls in ((0.5, "-"), (bar, ":"), (1 - bar, ":")):
        ax.axvline(x, color="grey", lw=0.8, ls=ls)
    ax.set_yticks(y, feats, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("AUC, composes vs memorizes (95% bootstrap interval)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.5 / (0.28 * len(feats) + 1.4)),
              ncol=len(fracs), frameon=False)
    fig.tight_layout()
    return fig


def verdict_figure(tables: dict[str, pd.DataFrame], opts: object = None, label: str = "") -> Figure:
    """The ``early-verdict`` analysis: each feature's contribution to the logit, the verdict in the title."""
    v, c = tables["verdict"].iloc[0], tables["features"]
    fig = Figure(figsize=(6.5, 0.45 * len(c) + 1.6))
    ax = fig.subplots()
    y = np.arange(len(c))
    ax.barh(y, c.contribution, color=["#4393c3" if x >= 0 else "#d6604d" for x in c.contribution])
    ax.set_yticks(y, [f"{f} = {val:.3g}" for f, val in zip(c.feature, c.value)], fontsize=8)
    ax.axvline(0, color="grey", lw=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("contribution to the logit (+ composes, - memorizes)")
    ax.set_title(f"{label}\nat {v.at_fraction:.0%} (step {v.step}): p(composes) = {v.p_composes:.2f} -> {v.verdict}"
                 f" (outcome: {v.outcome})", fontsize=9)
    fig.tight_layout()
    return fig

"""Op-set studies: each small-init run's outcome against an op-set property."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

OUTCOMES = ["unfit", "memorizes", "neither", "composed on the way", "composes"]


def plot_outcome_vs_property(runs: pd.DataFrame, prop: str, auc: float | None = None, small: float = 0.8) -> Figure:
    """One point per small-init run: ``prop`` (its op set's value) against its outcome; the papers' op set and the
    ones where the large init did not memorize are marked. ``runs``: :func:`anchorlab.papers.eval.crossing.crossing_rows`."""
    t = runs[runs.paper_gamma.round(6) == round(small, 6)]
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.subplots()
    rng = np.random.default_rng(0)
    y = t.outcome.map({o: i for i, o in enumerate(OUTCOMES)}).to_numpy(float) + rng.uniform(-0.15, 0.15, len(t))
    x = t[prop].to_numpy(float)
    span = (np.nanmax(x) - np.nanmin(x)) if len(x) else 1.0
    x = x + rng.uniform(-0.015, 0.015, len(t)) * (span or 1.0)
    ax.scatter(x, y, s=22, c="tab:blue", alpha=0.8)
    ax.set_yticks(range(len(OUTCOMES)), OUTCOMES, fontsize=8)
    ax.set_ylim(-0.6, len(OUTCOMES) - 0.4)
    ax.set_xlabel(prop.replace("_", " "), fontsize=9)
    n_ops = t.op_set.nunique()
    title = f"small init (paper gamma {small:g}): each run's outcome, {len(t)} runs over {n_ops} op sets"
    if auc is not None:
        title += f"\nAUC of {prop.replace('_', ' ')} for composing (over op sets): {auc:.2f}"
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", lw=0.3)
    return fig

"""Rates against a ladder of rungs (width, data): one panel per op set and one pooled, with Wilson intervals."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure


def plot_rates_by_rung(rungs: pd.DataFrame, order: Sequence[str]) -> Figure:
    """``rungs``: rows (rung, op_set, compose_rate, compose_lo, compose_hi, memorize_rate, memorize_lo, memorize_hi,
    n_small, n_large); ``op_set == "all"`` is the pooled panel. x: the rungs in ``order`` that have rows."""
    panels = [o for o in sorted(rungs.op_set.unique()) if o != "all"] + (["all"] if (rungs.op_set == "all").any()
                                                                         else [])
    fig = Figure(figsize=(3.4 * len(panels), 3.6))
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    xs = [r for r in order if r in set(rungs.rung)]
    for ax, op in zip(axes, panels):
        t = rungs[rungs.op_set == op].set_index("rung").reindex(xs)
        x = np.arange(len(xs))
        for rate, lo, hi, colour, label, dx in (
                ("compose_rate", "compose_lo", "compose_hi", "tab:blue", "small init composes", -0.06),
                ("memorize_rate", "memorize_lo", "memorize_hi", "tab:red", "large init memorizes", 0.06)):
            y = t[rate].to_numpy(float)
            err = np.vstack([y - t[lo].to_numpy(float), t[hi].to_numpy(float) - y])
            ax.errorbar(x + dx, y, yerr=err, color=colour, marker="o", capsize=3, label=label)
        ax.set_xticks(x, xs, fontsize=8)
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
        ax.set_title("all op sets (Wilson 95%)" if op == "all" else op, fontsize=7)
    axes[0].set_ylabel("per-run rate")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig

"""The robustness study's regime map (draw only; the table is :func:`anchorlab.papers.robustness.rate_map`).

:func:`plot_regime_map`: per grid point, the contrast rate and each model's
rate (large init memorizes, small init composes) as grouped bars, the case
count and the mean wall time of one model under each group.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from anchorlab.config import ConfigError

RATES = (("contrast_rate", "contrast holds", "#4d4d4d"),
         ("large_memorizes_rate", "{large} memorizes", "#d6604d"),
         ("small_composes_rate", "{small} composes", "#4393c3"))


def _fmt(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def plot_regime_map(table: pd.DataFrame, keys: Sequence[str], large: str = "large_init",
                    small: str = "small_init") -> Figure:
    """Grouped bars of the three rates for each grid point (x: the varied keys' values)."""
    missing = [c for c in (*keys, "cases", *(r for r, _, _ in RATES)) if c not in table.columns]
    if missing:
        raise ConfigError(f"regime map table lacks column(s) {', '.join(missing)}")
    t = table.sort_values(list(keys)).reset_index(drop=True)
    fig = Figure(figsize=(max(5.0, 1.3 * len(t) + 2), 3.8))
    ax = fig.subplots()
    x = np.arange(len(t))
    w = 0.8 / len(RATES)
    for i, (col, label, color) in enumerate(RATES):
        ax.bar(x + (i - 1) * w, t[col].to_numpy(dtype=float), w, color=color,
               label=label.format(large=large, small=small))
    ticks = []
    for _, r in t.iterrows():
        point = "\n".join(f"{k.split('.')[-1]}={_fmt(r[k])}" for k in keys)
        cost = f"{int(r['cases'])} cases"
        if "model_wall_s" in t.columns and np.isfinite(r["model_wall_s"]):
            cost += f"\n{r['model_wall_s'] / 60:.1f} min/model"
        ticks.append(f"{point}\n{cost}")
    ax.set_xticks(x, ticks, fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.axhline(0.8, color="#999999", lw=0.8, ls="--")
    ax.set_ylabel("fraction of cases")
    ax.set_title("regime map: the contrast over op sets x seeds at each compute point", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig

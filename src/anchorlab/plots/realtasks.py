"""Journal Fig. 7A,B: exact match on SCAN / COGS vs training-set size (draw only).

Input is a tidy table with one row per run (its final metrics, e.g. from
each run's final.json) and a ``setting`` column naming
the init / weight-decay setting; runs that share dataset, setting and
train_size (seeds) are averaged, and the spread is drawn as a band.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.figure import Figure

from ..config import ConfigError

TITLES = {"scan": "SCAN addprim_turn_left", "cogs": "COGS"}
STYLES = {"ood_exact": ("-", "o", "OOD"), "id_exact": ("--", "s", "ID")}


def plot_exact_vs_train_size(df: pd.DataFrame, metrics: Sequence[str] = ("ood_exact", "id_exact"),
                             datasets: Sequence[str] | None = None, setting_col: str = "setting",
                             colors: dict[str, str] | None = None) -> Figure:
    """One panel per dataset: exact match vs train_size, one colour per setting.

    ``df`` needs columns ``dataset``, ``train_size``, ``setting_col`` and each of
    ``metrics`` (OOD solid, ID dashed). Returns the Figure.
    """
    need = {"dataset", "train_size", setting_col, *metrics}
    if missing := sorted(need - set(df.columns)):
        raise ConfigError(f"df: missing columns {', '.join(missing)}; need {', '.join(sorted(need))}")
    datasets = list(datasets) if datasets is not None else sorted(df["dataset"].unique())
    settings = list(dict.fromkeys(df[setting_col]))
    palette = colors or {s: c for s, c in zip(settings, ["tab:blue", "tab:red", "tab:green", "tab:purple",
                                                         "tab:orange", "tab:brown"])}
    fig = Figure(figsize=(4.6 * len(datasets), 3.6))
    axes = fig.subplots(1, len(datasets), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        sub = df[df["dataset"] == ds]
        for setting in settings:
            g = sub[sub[setting_col] == setting]
            if g.empty:
                continue
            for m in metrics:
                ls, marker, tag = STYLES.get(m, (":", "^", m))
                stats = g.groupby("train_size")[m].agg(["mean", "min", "max"]).reset_index()
                ax.plot(stats.train_size, stats["mean"], ls=ls, marker=marker, color=palette.get(setting),
                        label=f"{tag}: {setting}")
                if (stats["max"] > stats["min"]).any():
                    ax.fill_between(stats.train_size, stats["min"], stats["max"], alpha=0.15,
                                    color=palette.get(setting))
        ax.set_xscale("log")
        sizes = sorted(sub["train_size"].unique())
        ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
        ax.minorticks_off()
        ax.set_title(TITLES.get(ds, ds))
        ax.set_xlabel("training-set size")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("exact match")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig

"""Journal Fig. 7A,B: exact match on SCAN / COGS vs training-set size (draw only).

Input is a tidy table with one row per run under the run table's names (``task.name``, ``task.train_size``,
the ``final.*`` metrics, ``steps``) and a ``setting`` column naming the init / weight-decay setting; runs that
share task, setting and training-set size (seeds) are averaged, and the spread is drawn as a band.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.figure import Figure

from anchorlab.config import ConfigError

TITLES = {"scan": "SCAN addprim_turn_left", "cogs": "COGS"}
STYLES = {"final.ood_exact": ("-", "o", "OOD"), "final.id_exact": ("--", "s", "ID")}
TASK, SIZE = "task.name", "task.train_size"


def plot_exact_vs_train_size(df: pd.DataFrame, metrics: Sequence[str] = ("final.ood_exact", "final.id_exact"),
                             datasets: Sequence[str] | None = None, setting_col: str = "setting",
                             colors: dict[str, str] | None = None) -> Figure:
    """One panel per dataset (``task.name``): exact match vs ``task.train_size``, one colour per setting.

    ``df`` needs columns ``task.name``, ``task.train_size``, ``setting_col`` and each of
    ``metrics`` (OOD solid, ID dashed). Returns the Figure.
    """
    need = {TASK, SIZE, setting_col, *metrics}
    if missing := sorted(need - set(df.columns)):
        raise ConfigError(f"df: missing columns {', '.join(missing)}; need {', '.join(sorted(need))}")
    datasets = list(datasets) if datasets is not None else sorted(df[TASK].unique())
    settings = list(dict.fromkeys(df[setting_col]))
    palette = colors or {s: c for s, c in zip(settings, ["tab:blue", "tab:red", "tab:green", "tab:purple",
                                                         "tab:orange", "tab:brown"])}
    fig = Figure(figsize=(4.6 * len(datasets), 3.6))
    axes = fig.subplots(1, len(datasets), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        sub = df[df[TASK] == ds]
        for setting in settings:
            g = sub[sub[setting_col] == setting]
            if g.empty:
                continue
            for m in metrics:
                ls, marker, tag = STYLES.get(m, (":", "^", m))
                stats = g.groupby(SIZE)[m].agg(["mean", "min", "max"]).reset_index()
                ax.plot(stats[SIZE], stats["mean"], ls=ls, marker=marker, color=palette.get(setting),
                        label=f"{tag}: {setting}")
                if (stats["max"] > stats["min"]).any():
                    ax.fill_between(stats[SIZE], stats["min"], stats["max"], alpha=0.15,
                                    color=palette.get(setting))
        ax.set_xscale("log")
        sizes = sorted(sub[SIZE].unique())
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


OOD = "final.ood_exact"
SETTING_ORDER = ("small init + large wd", "small init + small wd", "large init + large wd", "large init + small wd")


def plot_matched(df: pd.DataFrame, setting_col: str = "setting") -> Figure:
    """Runs compared at matched ID (each stopped on its ID rule or at a cap): one row of panels per
    dataset; left, OOD exact match per setting (bar: mean over seeds, dots: each run, hollow where the
    run hit the cap without reaching the ID rule); right, the step each run stopped at.

    ``df`` needs ``task.name``, ``setting_col``, ``final.ood_exact``, ``steps`` and ``reached_id``.
    """
    need = {TASK, setting_col, OOD, "steps", "reached_id"}
    if missing := sorted(need - set(df.columns)):
        raise ConfigError(f"df: missing columns {', '.join(missing)}; need {', '.join(sorted(need))}")
    present = list(dict.fromkeys(df[setting_col]))
    settings = [s for s in SETTING_ORDER if s in present] + [s for s in present if s not in SETTING_ORDER]
    datasets = sorted(df[TASK].unique())
    fig = Figure(figsize=(9.0, 3.4 * len(datasets)), layout="constrained")
    axes = fig.subplots(len(datasets), 2, squeeze=False)
    for (ax_ood, ax_steps), ds in zip(axes, datasets):
        sub = df[df[TASK] == ds]
        capped_label = "hit the cap (ID rule not reached)"
        for x, s in enumerate(settings):
            g = sub[sub[setting_col] == s]
            if g.empty:
                continue
            color = "tab:blue" if s.startswith("small init") else "tab:red"
            ax_ood.bar(x, g[OOD].mean(), color=color, alpha=0.35 if "small wd" in s else 0.6, width=0.6)
            ok = g.reached_id.astype(bool)
            for ax, col in ((ax_ood, OOD), (ax_steps, "steps")):
                ax.scatter([x] * int(ok.sum()), g[col][ok], color=color, zorder=3, s=22)
                if (~ok).any():
                    ax.scatter([x] * int((~ok).sum()), g[col][~ok], facecolors="none", edgecolors=color,
                               zorder=3, s=22, label=capped_label if col == "steps" else None)
                    if col == "steps":
                        capped_label = None   # one legend entry
        for ax in (ax_ood, ax_steps):
            ax.set_xticks(range(len(settings)), [s.replace(" + ", "\n+ ") for s in settings], fontsize=7)
            ax.grid(alpha=0.3, axis="y")
        ax_ood.set(ylim=(0, 1.02), ylabel="OOD exact match", title=f"{TITLES.get(ds, ds)}: OOD at matched ID")
        ax_steps.set(ylabel="steps to stop", title="steps to the ID rule")
        ax_steps.set_ylim(bottom=0)
        if (~sub.reached_id.astype(bool)).any():
            ax_steps.legend(fontsize=7)
    return fig

"""What a model answers on its held-out pairs (:mod:`anchorlab.analysis.answers`): one bar per answer, coloured by
what it is (the composition, the mirror's target, another trained pair's target, other). Drawing only."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

COLORS = {"composition": "tab:green", "mirror": "tab:red", "trained target": "tab:orange", "other": "tab:gray"}


def answers_figure(tables: dict[str, pd.DataFrame], opts: Any = None, label: str = "", top: int = 6) -> Figure:
    """One panel per pair of ``tables['answers']``: its ``top`` most frequent answers and their shares."""
    a = tables["answers"]
    pairs = list(dict.fromkeys(a.pair)) or ["(none)"]
    fig = Figure(figsize=(4.2 * len(pairs), 3.0), layout="constrained")
    axes = fig.subplots(1, len(pairs), squeeze=False)[0]
    for ax, pair in zip(axes, pairs):
        t = a[a.pair == pair].sort_values("share", ascending=False).head(top)
        names = [f"{r.answer}" + (f" {r.matches}" if r.matches else "") for r in t.itertuples()]
        ax.barh(range(len(t)), t.share, color=[COLORS[k] for k in t.kind])
        ax.set_yticks(range(len(t)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of held-out sequences")
        ax.set_title(f"{label + ': ' if label else ''}{pair}", fontsize=9)
    handles = [Patch(color=c, label=k) for k, c in COLORS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    return fig

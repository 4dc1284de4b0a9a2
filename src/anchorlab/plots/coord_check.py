"""The coordinate check (draw only): init std and activation scales against width, one line per step."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

MIN_SPAN = 8.0   # smallest y range (max/min) of an activation panel
ORDER = ("embed", "pos", "qkv", "q", "k", "v", "o", "mlp_in", "mlp_out", "logits")


def coord_check_figure(tables: dict[str, pd.DataFrame], opts: Any = None, label: str = "") -> Figure:
    """First panel: measured (markers) and target (lines) init std per role vs width;
    then one panel per activation role: RMS vs width (log-log), one line per training step."""
    acts, init = tables["activations"], tables["init"]
    roles = [r for r in ORDER if r in set(acts.role)]
    n = len(roles) + 1
    cols = min(n, 4)
    rows = -(-n // cols)
    fig = Figure(figsize=(3.4 * cols, 2.9 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    ax = axes[0]
    per_role = init.groupby(["role", "width"], as_index=False)[["target_std", "measured_std"]].mean()
    for i, (role, g) in enumerate(per_role.groupby("role", sort=False)):
        c = f"C{i % 10}"
        ax.plot(g.width, g.target_std, "-", color=c, lw=1)
        ax.plot(g.width, g.measured_std, "o", color=c, ms=4, label=role)
    ax.set(xscale="log", yscale="log", title=f"{label + ': ' if label else ''}init std (line: target)", xlabel="width")
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=6, ncol=2)
    steps = sorted(acts.step.unique())
    for ax, role in zip(axes[1:], roles):
        sub = acts[acts.role == role]
        for s in steps:
            g = sub[sub.step == s].sort_values("width")
            ax.plot(g.width, g.rms, "o-", ms=3, lw=1, color=f"C{int(s) % 10}", label=f"t={s}")
        ax.set_xscale("log", base=2)
        ax.set(yscale="log", title=role, xlabel="width", ylabel="RMS")
        lo, hi = float(sub.rms.min()), float(sub.rms.max())
        if lo > 0 and hi / lo < MIN_SPAN:   # show at least a factor MIN_SPAN, so noise does not look like a trend
            mid = (lo * hi) ** 0.5
            ax.set_ylim(mid / MIN_SPAN ** 0.5, mid * MIN_SPAN ** 0.5)
    axes[1].legend(fontsize=7)
    for ax in axes[n:]:
        ax.set_visible(False)
    if label:
        fig.suptitle(f"{label}: coordinate check", fontsize=10)
    return fig

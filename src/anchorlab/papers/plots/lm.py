"""Journal Fig. 7D: validation perplexity vs training tokens, per init rate and data composition (draw only)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from anchorlab.config import ConfigError

GAMMA = "init.gamma"


def plot_perplexity_curves(curves: pd.DataFrame, finals: pd.DataFrame | None = None) -> Figure:
    """One panel per composition: validation perplexity (log) vs tokens seen, one colour per gamma.

    ``curves`` needs ``composition``, ``init.gamma``, ``run_id``, ``tokens`` and
    ``val_ppl`` (one row per evaluation of a run); each run (seed) is a thin line
    and the mean over runs a thick one. ``finals`` (composition, ``init.gamma``,
    ``final.val_ppl``, ...: one row per run) adds the final perplexities to the legend.
    """
    need = {"composition", GAMMA, "run_id", "tokens", "val_ppl"}
    if missing := sorted(need - set(curves.columns)):
        raise ConfigError(f"curves: missing columns {', '.join(missing)}")
    comps = list(dict.fromkeys(curves.composition))
    gammas = sorted(curves[GAMMA].unique())
    fig = Figure(figsize=(4.8 * len(comps), 3.8), layout="constrained")
    axes = fig.subplots(1, len(comps), squeeze=False)[0]
    for ax, comp in zip(axes, comps):
        sub = curves[(curves.composition == comp) & (curves.tokens > 0)]
        for i, g in enumerate(gammas):
            c = f"C{i % 10}"
            runs = sub[sub[GAMMA] == g]
            for _, r in runs.groupby("run_id"):
                ax.plot(r.tokens, r.val_ppl, color=c, lw=0.6, alpha=0.45)
            mean = runs.groupby("tokens", as_index=False).val_ppl.mean()
            label = f"gamma={g:g}"
            if finals is not None:
                f = finals[(finals.composition == comp) & (finals[GAMMA] == g)]
                if len(f):
                    label += f" (final {f['final.val_ppl'].mean():.3g}, {len(f)} seed{'s' * (len(f) > 1)})"
            ax.plot(mean.tokens, mean.val_ppl, color=c, lw=2, label=label)
        ax.set(yscale="log", xlabel="training tokens seen", ylabel="validation perplexity", title=comp)
        ax.legend(fontsize=7)
    return fig

"""Journal Fig. 3B / 5C / 10 on the NeurIPS task at CPU scale: init rate x weight decay, and the rescue runs.

The sweep ``gamma_wd_cpu`` trains paper gammas (``init.ref_width: 400``) x weight-decay rows matched to the
journal's by the decay exponent ``wd x sum of lr`` (AdamW shrinks a weight by about ``exp(-exponent)``);
``wd_rescue_cpu`` asks whether a large decay rescues the init draws that memorize at the demo's small arm.
Both figures read one run table (``out/sweep`` and any ``--from-table`` CSVs, e.g. the committed
``docs/figures/gamma_wd_cpu.csv``) and write::

    runs.csv            one row per run: the run table's columns, the decay exponent, the journal's phase, the
                        solution, and the condensation of the first layer's W_Q and FFN W_in rows (and W_Q's
                        stable rank) at the end, read from the run's weights
    cells.csv           per (paper gamma, weight decay): the papers' cell beside the per-run rates (Fig. 3B)
    rescue.csv          per (gamma, draw): the solution at each weight decay; rescued or not
    gamma_wd.png        the phase diagram; condensation.png: the W_Q(1) cosine matrices of one seed (Fig. 10)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register, value

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

COND = {"wq0": ("blocks", 0, "attn", "W_Q"), "win0": ("blocks", 0, "mlp", "W_in")}
COND_SCORES = ("largest_group_frac", "mean_abs_cos", "effective_directions_frac")


def decay_exponent(cfg: Any) -> tuple[float, float]:
    """(sum of lr over the run's optimizer steps, weight decay x that sum) of an ExperimentConfig."""
    from anchorlab.train.optim import lr_sum
    from anchorlab.train.run import steps_plan

    spe, total, _ = steps_plan(cfg, cfg.task.n_train)
    s = lr_sum(spe, total, cfg.optim)
    return s, cfg.optim.weight_decay * s


def _weight(model: Any, path: tuple) -> Any:
    obj = model
    for p in path:
        obj = obj[p] if isinstance(p, int) else getattr(obj, p)
    return obj.weight.detach().float()


def condensation_row(run_dir: str | Path) -> dict[str, float]:
    """Condensation scores of the first layer's W_Q and FFN W_in rows at the end of a run (journal Fig. 10)
    as ``cond/<matrix>_<score>``, and W_Q's stable rank (Fig. 5C) as ``cond/wq0_stable_rank``; NaN where the
    run has no such weights or its directory holds no model."""
    from anchorlab.analysis.condensation import condensation_scores
    from anchorlab.analysis.spectra import stable_rank
    from anchorlab.train import load_run

    model = load_run(run_dir).model if run_dir and (Path(run_dir) / "config.yaml").exists() else None
    out: dict[str, float] = {}
    for name, path in COND.items():
        try:
            s = condensation_scores(_weight(model, path)) if model is not None else {}
        except (AttributeError, IndexError, TypeError):
            s = {}
        out.update({f"cond/{name}_{k}": float(s.get(k, math.nan)) for k in COND_SCORES})
    try:
        out["cond/wq0_stable_rank"] = stable_rank(_weight(model, COND["wq0"])) if model is not None else math.nan
    except (AttributeError, IndexError, TypeError):
        out["cond/wq0_stable_rank"] = math.nan
    return out


def with_run_values(rows: pd.DataFrame) -> pd.DataFrame:
    """A run table with ``lr_sum`` (from each run's config, :func:`anchorlab.sweep.runtable.row_config`),
    ``decay_exponent`` and the ``cond/*`` scores (from the run's weights where its directory is at hand);
    a committed row without a whole config keeps its committed values."""
    import pandas as pd

    from anchorlab.config import ConfigError
    from anchorlab.sweep.runtable import row_config

    rows = rows.reset_index(drop=True)
    extra: list[dict[str, float]] = []
    sums: dict[str, float] = {}   # one sum of lr per schedule
    for _, r in rows.iterrows():
        got: dict[str, float] = {}
        try:
            cfg = row_config(r.to_dict())
        except ConfigError:   # a committed row without a whole config keeps its committed lr_sum
            cfg = None
        if cfg is not None:
            key = repr((cfg.optim, cfg.train.epochs, cfg.train.batch_size, cfg.train.max_steps, cfg.task.n_train))
            got["lr_sum"] = sums.setdefault(key, decay_exponent(cfg)[0])
        d = r.get("run_dir", "")
        if isinstance(d, str) and d and (Path(d) / "config.yaml").exists():
            got.update(condensation_row(d))
        extra.append(got)
    found = pd.DataFrame(extra, index=rows.index)
    out = rows.copy()
    for col in found.columns:
        out[col] = found[col].combine_first(out[col]) if col in out else found[col]
    cond = [f"cond/{m}_{k}" for m in COND for k in COND_SCORES] + ["cond/wq0_stable_rank"]
    for col in ("lr_sum", *cond):
        if col not in out:
            out[col] = math.nan
    out["decay_exponent"] = out["optim.weight_decay"] * out.lr_sum
    return out


def condensation_matrices(view: pd.DataFrame, seed: int | None = None) -> dict[tuple, np.ndarray]:
    """{(paper gamma, weight decay): cosine matrix of the first layer's W_Q rows in clustered order} for the
    runs of one init seed (default: the smallest) whose directories are at hand, as journal Fig. 10 draws them."""
    from anchorlab.analysis.condensation import condensation_order, cosine_matrix
    from anchorlab.train import load_run

    seed = int(view.seed.min()) if seed is None else seed
    mats: dict[tuple, np.ndarray] = {}
    one = view[view.seed == seed]
    for run_dir, gamma, wd in zip(one.run_dir, one.paper_gamma, one["optim.weight_decay"]):
        if isinstance(run_dir, str) and run_dir and (Path(run_dir) / "config.yaml").exists():
            C = cosine_matrix(_weight(load_run(run_dir).model, COND["wq0"]))
            o = condensation_order(C)
            mats.setdefault((gamma, wd), C[o][:, o].numpy())
    return mats


def make_wd(rows: pd.DataFrame, out: Path, scale: str, threshold: float = 0.5, id_min: float = 0.9) -> Made:
    """The run table -> the tables and files of the module docstring."""
    from anchorlab.papers.eval.wd_grid import grid_cells, grid_view, rescue_table
    from anchorlab.papers.plots.gamma_wd import plot_gamma_wd
    from anchorlab.plots.save import save_figure
    from anchorlab.plots.sweep import plot_matrix_grid

    view = grid_view(with_run_values(rows), threshold, id_min)
    if view.empty:
        return {"runs": view}, {}
    cells, rescue = grid_cells(view, threshold, id_min), rescue_table(view, threshold, id_min)
    files = {"gamma_wd.png": save_figure(plot_gamma_wd(cells, view, threshold, id_min), out / "gamma_wd",
                                         formats=("png",), dpi=130)[0]}
    seed = int(view.seed.min())
    mats = condensation_matrices(view, seed)
    if mats:
        fig = plot_matrix_grid(mats, row_label="paper gamma", col_label="weight decay",
                               title=f"cosine of W_Q(1) rows (clustered), init seed {seed}")
        files["condensation.png"] = save_figure(fig, out / "condensation", formats=("png",), dpi=110)[0]
    return {"runs": view, "cells": cells, "rescue": rescue}, files


# ------------------------------------------------------------------ claims
def _corner(t: pd.DataFrame, init: str, wd: str) -> pd.Series:
    """The cell of the smallest (``init="small"``: largest gamma) or largest init and the largest or smallest decay."""
    g = t.paper_gamma.fillna(t["init.gamma"])
    w = t["optim.weight_decay"]
    return (g == (g.max() if init == "small" else g.min())) & (w == (w.max() if wd == "max" else w.min()))


def _phase_at(t: pd.DataFrame, init: str, wd: str) -> str:
    p = t[_corner(t, init, wd)].phase
    return str(p.iloc[0]) if len(p) and p.iloc[0] is not None else "n/a"


def _spearman(t: pd.DataFrame, x: str, y: str) -> float:
    if x not in t or y not in t:
        return math.nan
    ok = t[x].notna() & t[y].notna()
    if ok.sum() < 3 or t[x][ok].nunique() < 2 or t[y][ok].nunique() < 2:
        return math.nan
    return float(t[x][ok].astype(float).corr(t[y][ok].astype(float), method="spearman"))


def _rescued(t: Mapping[str, pd.DataFrame], col: str) -> str:
    r = t.get("rescue")
    if r is None or not len(r):
        return "n/a"
    lo = next(c for c in r.columns if c.startswith("best wd=" if col == "rescued_best" else "wd="))
    memorizing = r[lo].eq("memorizes")
    return f"{int(r[col][memorizing].sum())} of {int(memorizing.sum())} memorizing draws"


GRID_CLAIMS = (
    Reading("smallest init (largest gamma) and largest weight decay: phase 3 (good ID and OOD)", "phase 3",
          lambda t: _phase_at(t["cells"], "small", "max")),
    Reading("largest init (smallest gamma) and smallest weight decay: phase 1 or 2 (poor OOD)", "phase 1/2",
          lambda t: _phase_at(t["cells"], "large", "min")),
    Reading("inferential papers' cell, smallest init + largest wd", "high",
          lambda t: value(t["cells"], "inferential_best", lambda c: _corner(c, "small", "max"))),
    Reading("inferential papers' cell, largest init + smallest wd", "low",
          lambda t: value(t["cells"], "inferential_best", lambda c: _corner(c, "large", "min"))),
    Reading("Fig. 10: condensation grows with the init rate (Spearman of gamma vs mean |cos| of W_Q(1) rows, per run)",
          "positive", lambda t: _spearman(t["runs"], "init.gamma", "cond/wq0_mean_abs_cos")),
    Reading("Fig. 5C: W_Q(1)'s stable rank falls as the phase index rises (Spearman over cells)", "negative",
          lambda t: _spearman(t["cells"], "phase", "cond/wq0_stable_rank")),
    Reading("a large decay rescues a draw that memorizes at the smallest decay (final metrics)",
          "small init + large wd reason", lambda t: _rescued(t, "rescued")),
)

register(Figure(
    id="journal-gamma-wd", cids=("C3",), paper="journal", number="Fig. 3B / 5C / 10",
    shows="init rate x weight decay on the NeurIPS task, decay rows matched to the journal's by wd x sum of lr: "
          "the papers' cell and phase per cell, the rescue table, W_Q(1) condensation and stable rank",
    sweeps={"cpu": "gamma_wd_cpu", "paper": "fig3_paper"},
    tables=make_wd, readings=GRID_CLAIMS,
    rules={"cpu": "paper gammas 0.3 / 0.4 / 0.5 (init.ref_width 400) x weight decay 0 / 0.0149 / 0.149 / 1.49 (the "
                  "journal's 0 / 0.01 / 0.1 / 1 at the demo's clock, by decay exponent) x 5 init draws, one peak lr",
           "paper": "the journal's grid (journal-fig3's sweep: 10-layer GPT-2, width 640, 3 seeds)"},
    notes="`--from-table docs/figures/gamma_wd_cpu.csv --no-train` redraws the committed grid (condensation from the "
          "committed scores; the Fig. 10 matrices and stable ranks need the run directories)."))

register(Figure(
    id="journal-wd-rescue", cids=("C3",), paper="journal", number="Fig. 3B (rescue runs)",
    shows="does a large weight decay rescue an init draw that memorizes? the demo's small arm (gamma 0.45) at the "
          "journal's four decay rows, per draw",
    sweeps={"cpu": "wd_rescue_cpu"},
    tables=make_wd, readings=GRID_CLAIMS[2:4] + GRID_CLAIMS[6:] + (
        Reading("the same by the bests over training (a run that composed during training counts)",
              "small init + large wd reason", lambda t: _rescued(t, "rescued_best")),),
    rules={"cpu": "the draws (data 0, init 1), (0, 3), (8, 0) that memorize and (0, 0) that composes at the demo's "
                  "small arm, each at weight decay 0 / 0.0149 / 0.149 / 1.49, float32"},
    notes="cpu only: a study of the demo's draws (the journal's grid at paper scale is journal-gamma-wd's). "
          "`--from-table docs/figures/wd_rescue_cpu.csv --no-train` redraws the committed table."))

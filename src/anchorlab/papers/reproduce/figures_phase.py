"""Phase-diagram figures of the anchor task read from a sweep directory: journal Figs. 5C and 10 on their own
(journal Fig. 3B / 5C / 10 judged from a run table: :mod:`.figures_journal3`; NeurIPS Fig. 2: :mod:`.figures_fig2`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register

if TYPE_CHECKING:
    import pandas as pd


def _cells(sweep_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    from anchorlab.sweep.results import load_sweep_results

    df, cells, _ = load_sweep_results(sweep_dir)
    return df, cells


# ------------------------------------------------------------------ journal Fig. 5C
def make_fig5c(sweep_dir: Path, out: Path, scale: str) -> Made:
    from anchorlab.analysis.registry import sweep_stable_ranks
    from anchorlab.plots.complexity import plot_stable_rank_bubbles
    from anchorlab.plots.save import save_figure

    df, cells = _cells(sweep_dir)
    keys = ["init.gamma", "optim.weight_decay"]
    sr = sweep_stable_ranks(sweep_dir)
    runs = df.drop_duplicates("run_id")[["run_id", *keys]].merge(sr, on="run_id")
    per_cell = runs.groupby(keys, as_index=False).stable_rank.mean()
    table = cells[[*keys, "phase"]].merge(per_cell, on=keys)
    return {"fig5c": table}, {"fig5c.png": save_figure(plot_stable_rank_bubbles(table), out / "fig5c")[0]}


def _phase_rank_corr(t: pd.DataFrame) -> float:
    import pandas as pd

    num = pd.to_numeric(t["phase"].astype(str).str[0], errors="coerce")
    ok = num.notna() & t["stable_rank"].notna()
    if ok.sum() < 3 or num[ok].nunique() < 2:
        return math.nan
    return float(pd.Series(num[ok]).corr(t["stable_rank"][ok], method="spearman"))


register(Figure(
    id="journal-fig5c", cids=("C3",), paper="journal", number="Fig. 5C",
    shows="stable rank of the first-layer query weights (colour) over init rate x weight decay, phase as size",
    sweeps={"demo": "fig3_cpu", "cpu": "journal_fig3_cpu", "paper": "fig3_paper"},
    make=make_fig5c,
    readings=(Reading("stable rank falls as the phase index rises (Spearman of phase vs stable rank)", "negative",
                  lambda t: _phase_rank_corr(t["fig5c"])),),
    notes="Shares its sweep with journal-fig3 (same runs; reproduce both into one --out to train once)."))


# ------------------------------------------------------------------ journal Fig. 10
def make_fig10(sweep_dir: Path, out: Path, scale: str) -> Made:
    import pandas as pd

    from anchorlab.analysis.condensation import condensation_order, condensation_scores, cosine_matrix
    from anchorlab.plots.save import save_figure
    from anchorlab.plots.sweep import plot_matrix_grid
    from anchorlab.papers.runs import run_table
    from anchorlab.train import load_run

    rows, mats = [], {}
    for r in run_table([sweep_dir]).sort_values("run_id").to_dict("records"):
        W = load_run(r["run_dir"]).model.blocks[0].attn.W_Q.weight.detach()
        C = cosine_matrix(W)
        o = condensation_order(C)
        key = (r["init.gamma"], r["optim.weight_decay"])
        mats.setdefault(key, C[o][:, o].numpy())  # the first seed of each cell is drawn
        rows.append({"init.gamma": key[0], "optim.weight_decay": key[1], "seed": r["seed"], **condensation_scores(W)})
    table = pd.DataFrame(rows)
    fig = plot_matrix_grid(mats, row_label="init.gamma", col_label="optim.weight_decay",
                           title="cosine of W_Q(1) rows (reordered), per init rate x weight decay")
    return {"condensation": table}, {"fig10.png": save_figure(fig, out / "fig10")[0]}


def _condensation_trend(t: pd.DataFrame) -> float:
    if t.empty or t["init.gamma"].nunique() < 2:
        return math.nan
    return float(t["init.gamma"].corr(t["mean_abs_cos"], method="spearman"))


register(Figure(
    id="journal-fig10", cids=("C3",), paper="journal", number="Fig. 10 (App. C)",
    shows="condensation of the first-layer query weights across init rates and weight decays",
    sweeps={"demo": "fig3_cpu", "cpu": "journal_fig3_cpu", "paper": "fig3_paper"},
    make=make_fig10,
    readings=(Reading("condensation grows with the init rate (Spearman of gamma vs mean |cos| of W_Q(1) rows)",
                  "positive", lambda t: _condensation_trend(t["condensation"])),),
    notes="Shares its sweep with journal-fig3.", extra="analysis"))


"""The Fig. 2 cell judged the papers' way from a run table (:mod:`anchorlab.sweep.runtable`).

A cell is keyed by :data:`~.lr_readings.TABLE_KEYS` (clock, depth, op set, paper gamma, kind of device,
reading of the peak lrs). :func:`cell_table` gives the papers' cell (mean over seeds of each seed's best
over lrs and training, each mapping on its own: :func:`anchorlab.papers.eval.judgement.paper_cells`) beside the
per-run rates; :func:`seed_table` the seeds' bests behind it; :func:`pair_table` the contrast case by
case (:func:`anchorlab.papers.eval.contrast.case_counts`); :func:`fitted_rows` the run table with each run's
best read only where ID had fitted (:func:`anchorlab.papers.eval.judgement.with_fitted_bests`), for the fitted
reading of the same cells.
"""

from __future__ import annotations

import pandas as pd

from anchorlab.run_status import COMPLETED
from anchorlab.papers.eval.contrast import case_counts
from anchorlab.papers.eval.judgement import paper_cells, seed_bests, with_fitted_bests
from anchorlab.papers.eval.lr_readings import ALL_LRS, CELL_KEYS, PAPER_LR_RANGE, TABLE_KEYS, device_kind, lr_readings

# a run table's columns -> the names anchorlab.papers.eval.judgement and anchorlab.papers.eval.contrast read
JUDGED = {"final.id_acc": "id_acc", "final.ood_inferential_acc": "ood_inferential_acc",
          "final.ood_symmetric_acc": "ood_symmetric_acc", "best.id_acc": "best_id_acc",
          "best.ood_inferential_acc": "best_ood_inferential_acc", "best.ood_symmetric_acc": "best_ood_symmetric_acc",
          "model.n_layers": "n_layers"}
ROW_ORDER = ["clock", "model.n_layers", "op_set", "paper_gamma", "peak_lr", "seed"]   # a Fig. 2 run table's order
FITTED = {"inferential": "best.ood_inferential_acc", "symmetric": "best.ood_symmetric_acc"}


def ordered(rows: pd.DataFrame) -> pd.DataFrame:
    """A run table in the order of the Fig. 2 tables (:data:`ROW_ORDER`)."""
    return rows.sort_values(ROW_ORDER).reset_index(drop=True)


def judged(rows: pd.DataFrame) -> pd.DataFrame:
    """The completed runs of a run table, under the column names the judgement reads (:data:`JUDGED`)."""
    return rows[rows.status.isin(COMPLETED)].rename(columns=JUDGED)


def cell_table(rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9,
               lr_range: tuple[float, float] | None = PAPER_LR_RANGE) -> pd.DataFrame:
    """Run table -> one row per (clock, depth, op set, paper gamma, devices, lrs): the papers' cell beside
    the per-run rates, over every peak and over the peaks in ``lr_range`` (:func:`lr_readings`)."""
    return _all_first(paper_cells(lr_readings(judged(rows), lr_range), TABLE_KEYS, threshold, id_min))


def seed_table(rows: pd.DataFrame, lr_range: tuple[float, float] | None = PAPER_LR_RANGE) -> pd.DataFrame:
    """Run table -> one row per (cell, seed): each mapping's best over the lrs and training (``*_best``)
    and ``n_lrs``, the numbers the papers' cell averages."""
    return _all_first(seed_bests(lr_readings(judged(rows), lr_range), TABLE_KEYS))


def pair_table(rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9, large: float = 0.3,
               small: float = 0.8) -> pd.DataFrame:
    """The contrast case by case: per (clock, depth, device, op set), the (seed, peak lr) cases run at both
    paper gammas ``large`` and ``small``, each pair on its own (final metrics)."""
    r = judged(rows)
    r = r.assign(devices=device_kind(r.device))
    r = r[r.paper_gamma.isin([large, small])].assign(setting=lambda d: d.paper_gamma.map({large: "L", small: "S"}))
    return case_counts(r, "L", "S", id_min, threshold, ["clock", "n_layers", "devices"])


def fitted_rows(rows: pd.DataFrame, curves: pd.DataFrame, id_min: float = 0.9) -> pd.DataFrame:
    """A run table whose best inferential / symmetric accuracies are read only at the evaluations with
    ID >= ``id_min`` (over ``curves``, :func:`anchorlab.papers.runs.curve_table`); a completed run
    without a trajectory is refused, so that no cell mixes the two readings."""
    done = rows.status.isin(COMPLETED).to_numpy()
    out = rows.copy()
    cols = list(FITTED.values())
    out.loc[done, cols] = with_fitted_bests(rows[done], curves, id_min, FITTED)[cols].to_numpy()
    return out


def _all_first(t: pd.DataFrame) -> pd.DataFrame:
    """A table keyed by :data:`TABLE_KEYS` with each cell's "all" reading before its range reading."""
    rest = [c for c in ("seed",) if c in t]
    return (t.assign(_r=t.lrs != ALL_LRS).sort_values([*CELL_KEYS, "_r", *rest], kind="stable")
            .drop(columns="_r").reset_index(drop=True))

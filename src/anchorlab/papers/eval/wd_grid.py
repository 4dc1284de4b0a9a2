"""The init-rate x weight-decay grid (journal Fig. 3B) judged from a run table: cells and rescues.

Input: a run table (:mod:`anchorlab.sweep.runtable`) with ``decay_exponent`` (weight decay x the sum of the
learning rate over the run: AdamW shrinks a weight by about ``exp(-exponent)``) and, optionally, the
``cond/*`` condensation scores. :func:`grid_view` names its columns as the judgement reads them and labels
each run (``phase``: the journal's, from its best ID and best inferential accuracy; ``solution``: final
metrics, :func:`anchorlab.eval.solution.outcome`); :func:`grid_cells` gives the papers' cell per (paper
gamma, weight decay) beside the per-run rates; :func:`rescue_table` asks whether a larger decay turns a
memorizing (gamma, seed) into a composing one.
"""

from __future__ import annotations

import pandas as pd

from anchorlab.run_status import TRAINED
from anchorlab.papers.eval.judgement import paper_cells
from anchorlab.eval.phases import PhaseThresholds, classify_phase
from anchorlab.eval.solution import outcome

# a run table's columns -> the grid's (and the judgement's) names
GRID = {"optim.weight_decay": "weight_decay", "init.gamma": "gamma", "train.data_seed": "data_seed",
        "init.ref_width": "ref_width", "final.id_acc": "id_acc", "final.ood_inferential_acc": "ood_inferential_acc",
        "final.ood_symmetric_acc": "ood_symmetric_acc", "best.id_acc": "best_id_acc",
        "best.ood_inferential_acc": "best_ood_inferential_acc", "best.ood_symmetric_acc": "best_ood_symmetric_acc"}
KEYS = ["paper_gamma", "gamma", "weight_decay"]


def _phase(id_best: float, inferential_best: float, th: PhaseThresholds) -> int | None:
    return classify_phase(id_best, inferential_best, thresholds=th)[0]


def grid_view(rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9) -> pd.DataFrame:
    """The trained runs of a run table (finished or stopped early) under the grid's names (:data:`GRID`),
    with ``phase`` and ``solution``, in (paper gamma, gamma, weight decay, seed, data seed) order."""
    v = rows[rows.status.isin(TRAINED)].rename(columns=GRID)
    th = PhaseThresholds(id_threshold=id_min, ood_threshold=threshold)
    v = v.assign(phase=pd.array([_phase(i, o, th) for i, o in zip(v.best_id_acc, v.best_ood_inferential_acc)],
                                dtype="Int64"),
                 solution=[outcome(i, a, b, threshold, id_min)
                           for i, a, b in zip(v.id_acc, v.ood_inferential_acc, v.ood_symmetric_acc)])
    return v.sort_values([*KEYS, "seed", "data_seed"]).reset_index(drop=True)


def grid_cells(view: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9) -> pd.DataFrame:
    """One row per (paper gamma, gamma, weight decay): the papers' cell (mean over seeds, a seed being an
    (init, data) draw, of each seed's best over lrs and training) beside the per-run rates, the cell's
    journal phase (from its mean best ID and mean best inferential accuracy), the mean ``cond/*`` scores and
    decay exponent, and the rates of runs that compose / memorize (final metrics)."""
    runs = view.assign(draw=view.seed.astype(str) + "/" + view.data_seed.astype(str))
    cells = paper_cells(runs, KEYS, threshold, id_min, seed="draw")
    th = PhaseThresholds(id_threshold=id_min, ood_threshold=threshold)
    cells["phase"] = pd.array([_phase(i, o, th) for i, o in zip(cells.id_best, cells.inferential_best)],
                              dtype="Int64")
    extra = [c for c in view.columns if c.startswith("cond/")] + ["decay_exponent"]
    means = view.groupby(KEYS, dropna=False)[extra].mean().reset_index()
    solved = view.assign(composes=view.solution.eq("composes"), memorizes=view.solution.eq("memorizes"))
    rates = solved.groupby(KEYS, dropna=False)[["composes", "memorizes"]].mean().add_suffix("_rate").reset_index()
    return cells.merge(means, on=KEYS).merge(rates, on=KEYS)


def rescue_table(view: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9) -> pd.DataFrame:
    """Per (gamma, seed, data seed): the run's solution at each weight decay (``wd=<value>``, final metrics)
    and the same by the bests over training (``best wd=<value>``); ``rescued``: it memorizes at the smallest
    decay and composes at some larger one (final metrics); ``rescued_best``: the same by the bests (a run that
    composed during training and lost its fit to the decay counts)."""
    r = view.assign(paper_gamma=view.paper_gamma.fillna(-1.0),
                    best=[outcome(i, a, b, threshold, id_min) for i, a, b in
                          zip(view.best_id_acc, view.best_ood_inferential_acc, view.best_ood_symmetric_acc)])
    keys = ["paper_gamma", "gamma", "seed", "data_seed"]
    out = None
    for col, prefix in (("solution", "wd="), ("best", "best wd=")):
        t = r.pivot_table(index=keys, columns="weight_decay", values=col, aggfunc="first")
        lo = t.columns.min()
        later = t[[c for c in t.columns if c > lo]].eq("composes").any(axis=1)
        flag = (t[lo].eq("memorizes") & later).rename("rescued" if col == "solution" else "rescued_best")
        t = pd.concat([t.rename(columns=lambda w, p=prefix: f"{p}{w:g}"), flag], axis=1)
        out = t if out is None else out.join(t)
    out = out.reset_index()
    out["paper_gamma"] = out.paper_gamma.where(out.paper_gamma >= 0)
    return out

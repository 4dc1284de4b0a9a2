"""The init-rate x weight-decay grid (journal Fig. 3B) judged from a run table: cells and rescues.

Input: a run table (:mod:`anchorlab.sweep.runtable`) with ``decay_exponent`` (weight decay x the sum of the
learning rate over the run: AdamW shrinks a weight by about ``exp(-exponent)``) and, optionally, the
``cond/*`` condensation scores, read by the run table's names (``init.gamma``, ``optim.weight_decay``,
``train.data_seed``, ``final.*``, ``best.*``: the vocabulary of :mod:`anchorlab.papers.eval.judgement`).
:func:`grid_view` labels each run (``phase``: the journal's, from its best ID and best inferential accuracy;
``solution``: final metrics, :func:`anchorlab.eval.solution.outcome`); :func:`grid_cells` gives the papers' cell
per (paper gamma, gamma, weight decay) beside the per-run rates; :func:`rescue_table` asks whether a larger
decay turns a memorizing (gamma, seed) into a composing one.
"""

from __future__ import annotations

import pandas as pd

from anchorlab.run_status import TRAINED
from anchorlab.papers.eval.judgement import BEST, MAPPINGS, paper_cells
from anchorlab.eval.phases import PhaseThresholds, classify_phase
from anchorlab.eval.solution import outcome

KEYS = ["paper_gamma", "init.gamma", "optim.weight_decay"]


def _phase(id_best: float, inferential_best: float, th: PhaseThresholds) -> int | None:
    return classify_phase(id_best, inferential_best, thresholds=th)[0]


def grid_view(rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9) -> pd.DataFrame:
    """The trained runs of a run table (finished or stopped early) with ``phase`` and ``solution``, in (paper
    gamma, gamma, weight decay, seed, data seed) order."""
    v = rows[rows.status.isin(TRAINED)]
    th = PhaseThresholds(id_threshold=id_min, ood_threshold=threshold)
    v = v.assign(phase=pd.array([_phase(i, o, th) for i, o in zip(v[BEST["id"]], v[BEST["inferential"]])],
                                dtype="Int64"),
                 solution=_solutions(v, MAPPINGS, threshold, id_min))
    return v.sort_values([*KEYS, "seed", "train.data_seed"]).reset_index(drop=True)


def _solutions(v: pd.DataFrame, metrics: dict[str, str], threshold: float, id_min: float) -> list[str]:
    """Each run's solution (:func:`anchorlab.eval.solution.outcome`) by ``metrics`` (:data:`MAPPINGS`: final,
    :data:`BEST`: the bests over training)."""
    return [outcome(*m, threshold, id_min) for m in zip(*(v[metrics[k]] for k in ("id", "inferential", "symmetric")))]


def grid_cells(view: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9) -> pd.DataFrame:
    """One row per (paper gamma, gamma, weight decay): the papers' cell (mean over seeds, a seed being an
    (init, data) draw, of each seed's best over lrs and training) beside the per-run rates, the cell's
    journal phase (from its mean best ID and mean best inferential accuracy), the mean ``cond/*`` scores and
    decay exponent, and the rates of runs that compose / memorize (final metrics)."""
    runs = view.assign(draw=view.seed.astype(str) + "/" + view["train.data_seed"].astype(str))
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
    r = view.assign(paper_gamma=view.paper_gamma.fillna(-1.0), best=_solutions(view, BEST, threshold, id_min))
    keys = ["paper_gamma", "init.gamma", "seed", "train.data_seed"]
    out = None
    for col, prefix in (("solution", "wd="), ("best", "best wd=")):
        t = r.pivot_table(index=keys, columns="optim.weight_decay", values=col, aggfunc="first")
        lo = t.columns.min()
        later = t[[c for c in t.columns if c > lo]].eq("composes").any(axis=1)
        flag = (t[lo].eq("memorizes") & later).rename("rescued" if col == "solution" else "rescued_best")
        t = pd.concat([t.rename(columns=lambda w, p=prefix: f"{p}{w:g}"), flag], axis=1)
        out = t if out is None else out.join(t)
    out = out.reset_index()
    out["paper_gamma"] = out.paper_gamma.where(out.paper_gamma >= 0)
    return out

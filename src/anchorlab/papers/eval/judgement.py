"""The papers' judgement of a cell, beside the per-run rate: pure functions over a tidy run table.

NeurIPS §4 (Fig. 2): per cell and seed, 9 learning rates are trained, "the
highest accuracy for the inferential and symmetric mappings is selected"
(each mapping separately, each run's best over training), and the cell's value
is the mean of those bests over seeds. The journal calls OOD accuracy >= 50%
the reasoning phase. This is a different quantity from the rate at which a
single run (one lr, one seed, final metrics) composes: if each lr composes with
probability p, the best of 9 does with 1 - (1 - p)^9. Both are reported.

Input: one row per run with the grouping keys (e.g. ``op_set``, ``setting``),
``seed``, ``peak_lr``, the final metrics ``id_acc``, ``ood_inferential_acc``,
``ood_symmetric_acc`` and each run's best over training of the same,
``best_id_acc``, ``best_ood_inferential_acc``, ``best_ood_symmetric_acc``.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import pandas as pd

from anchorlab.config import ConfigError

MAPPINGS = {"id": "id_acc", "inferential": "ood_inferential_acc", "symmetric": "ood_symmetric_acc"}
BEST = {k: f"best_{v}" for k, v in MAPPINGS.items()}


def _check(runs: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in runs.columns]
    if missing:
        raise ConfigError(f"judgement: run table lacks column(s) {', '.join(missing)}; columns: "
                          f"{', '.join(map(str, runs.columns))}")


def seed_bests(runs: pd.DataFrame, keys: Sequence[str], seed: str = "seed") -> pd.DataFrame:
    """One row per (keys..., seed): ``<mapping>_best`` = the highest of the runs' best-over-training
    accuracies over the learning rates (each mapping on its own), and ``n_lrs`` (runs behind it)."""
    _check(runs, [*keys, seed, *BEST.values()])
    g = runs.groupby([*keys, seed], dropna=False, sort=True)
    out = g[list(BEST.values())].max()
    out.columns = [f"{k}_best" for k in BEST]
    out["n_lrs"] = g.size()
    return out.reset_index()


def fitted_bests(curves: pd.DataFrame, id_min: float = 0.9, run: str = "run_id") -> pd.DataFrame:
    """Each run's best over training read only where the model had fitted the seen pairs: from one row per
    (run, evaluation) with ``id_acc``, ``inferential`` and ``symmetric``
    (:func:`anchorlab.papers.runs.curve_table`), one row per run with
    ``best_ood_inferential_acc`` / ``best_ood_symmetric_acc`` = the highest accuracy over the evaluations
    with ID >= ``id_min`` (0.0 where none had: the run never answered anything while fitted), ``best_id_acc``
    over every evaluation, and ``fitted_evals``. The papers' best over training counts every evaluation,
    also one taken while ID was still fitting; this reading asks whether the cell holds without them."""
    if not 0.0 <= id_min <= 1.0:
        raise ConfigError(f"id_min: must be in [0, 1], got {id_min!r}")
    _check(curves, [run, "id_acc", "inferential", "symmetric"])
    fitted = curves[curves.id_acc >= id_min]
    g = fitted.groupby(run)[["inferential", "symmetric"]].max()
    out = pd.DataFrame(index=pd.Index(curves[run].unique(), name=run))
    out[BEST["inferential"]] = g.inferential.reindex(out.index).fillna(0.0)
    out[BEST["symmetric"]] = g.symmetric.reindex(out.index).fillna(0.0)
    out[BEST["id"]] = curves.groupby(run).id_acc.max().reindex(out.index)
    out["fitted_evals"] = fitted.groupby(run).size().reindex(out.index).fillna(0).astype(int)
    return out.reset_index()


def with_fitted_bests(runs: pd.DataFrame, curves: pd.DataFrame, id_min: float = 0.9,
                      columns: Mapping[str, str] | None = None, run: str = "run_id") -> pd.DataFrame:
    """``runs`` with each run's best inferential / symmetric accuracy (``columns``: mapping -> column, by
    default ``best_ood_*``) replaced by :func:`fitted_bests` over ``curves``; a run without a trajectory is
    refused (ConfigError), so that no table mixes the two readings."""
    cols = dict(columns or {m: BEST[m] for m in ("inferential", "symmetric")})
    _check(runs, [run, *cols.values()])
    lacking = sorted(set(runs[run]) - set(curves[run]))
    if lacking:
        raise ConfigError(f"fitted reading: no trajectory (curves) for run(s) {', '.join(map(str, lacking[:5]))}"
                          f"{' ...' if len(lacking) > 5 else ''}; re-read them from their directories")
    fb = fitted_bests(curves[curves[run].isin(runs[run])], id_min, run).set_index(run)
    return runs.assign(**{col: runs[run].map(fb[BEST[m]]).to_numpy() for m, col in cols.items()})


def per_run_passes(runs: pd.DataFrame, mapping: str, threshold: float, id_min: float = 0.9) -> pd.Series:
    """Whether each run on its own (final metrics) fits (ID >= ``id_min``) and answers ``mapping``
    (``inferential`` / ``symmetric``) at >= ``threshold``."""
    return (runs[MAPPINGS["id"]] >= id_min) & (runs[MAPPINGS[mapping]] >= threshold)


def paper_cells(runs: pd.DataFrame, keys: Sequence[str], threshold: float, id_min: float = 0.9,
                seed: str = "seed") -> pd.DataFrame:
    """One row per cell (the ``keys``' values): the papers' numbers and the per-run rates.

    ``<mapping>_best``: mean over seeds of each seed's best over lrs and training (the papers' cell);
    ``n_seeds``; ``lrs_min`` / ``lrs_max``: the fewest and most lrs a seed of the cell has (unequal: a
    partial cell, whose seeds' bests are taken over different grids); ``<mapping>_final``: mean final
    accuracy over every run of the cell;
    ``inferential_per_run`` / ``symmetric_per_run``: the fraction of the cell's runs (each lr and seed
    on its own, final metrics) with ID >= ``id_min`` and that mapping >= ``threshold``; ``n_runs``;
    ``threshold``, ``id_min``; ``solution``: the cell read on both mappings at once (:func:`cell_solution`).
    """
    if not 0.0 <= threshold <= 1.0 or not 0.0 <= id_min <= 1.0:
        raise ConfigError(f"threshold: must be in [0, 1], got {threshold!r} (id_min {id_min!r})")
    _check(runs, [*keys, seed, *MAPPINGS.values(), *BEST.values()])
    k = ["_cell", *keys]   # a constant key, so that no keys means one cell
    r = runs.assign(_cell=0, inferential_per_run=per_run_passes(runs, "inferential", threshold, id_min).astype(float),
                    symmetric_per_run=per_run_passes(runs, "symmetric", threshold, id_min).astype(float))
    sb = seed_bests(r, k, seed)
    g = sb.groupby(k, dropna=False, sort=True)
    cells = g[[f"{m}_best" for m in BEST]].mean().assign(n_seeds=g.size(), lrs_min=g.n_lrs.min(),
                                                          lrs_max=g.n_lrs.max())
    per_run = r.groupby(k, dropna=False, sort=True).agg(
        **{f"{m}_final": (col, "mean") for m, col in MAPPINGS.items()},
        inferential_per_run=("inferential_per_run", "mean"), symmetric_per_run=("symmetric_per_run", "mean"),
        n_runs=(MAPPINGS["id"], "size"))
    out = pd.concat([cells, per_run], axis=1).reset_index().drop(columns="_cell")
    out["threshold"], out["id_min"] = float(threshold), float(id_min)
    out["solution"] = [cell_solution(i, a, b, threshold, id_min) for i, a, b in
                       zip(out.id_best, out.inferential_best, out.symmetric_best)]
    return out


def cell_solution(id_best: float, inferential_best: float, symmetric_best: float, threshold: float,
                  id_min: float = 0.9) -> str:
    """A papers' cell read on both mappings, as the paper's two panels are read together: ``unfit`` (mean
    best ID < ``id_min``), ``composes`` (inferential >= threshold, symmetric below it), ``memorizes`` (the
    reverse), ``both`` (each mapping reached the threshold at some lr and time: best over training selects
    each mapping on its own, so a cell can pass both), ``neither``."""
    if not id_best >= id_min:
        return "unfit"
    inf, sym = inferential_best >= threshold, symmetric_best >= threshold
    return {(True, False): "composes", (False, True): "memorizes", (True, True): "both"}.get((inf, sym), "neither")


def contrast_cells(runs: pd.DataFrame, large: str, small: str, thresholds: Sequence[float] = (0.5, 0.8),
                   id_min: float = 0.9, by: Sequence[str] = (), case: str = "op_set",
                   setting: str = "setting", seed: str = "seed") -> pd.DataFrame:
    """The headline judged the papers' way: one row per (by..., case, threshold).

    For each setting, its cell (:func:`paper_cells`); ``large_memorizes``: the large-init cell fits
    (mean best ID >= ``id_min``) and its mean best symmetric accuracy >= threshold; ``small_composes``:
    the small-init cell fits and its mean best inferential accuracy >= threshold; ``contrast``: both.
    The stricter reading, ``*_only`` (``large_memorizes_only``, ``small_composes_only``, ``contrast_only``),
    also asks the other mapping's mean best to stay below the threshold (each cell's ``solution`` is
    ``memorizes`` / ``composes``): a small-init cell that composes early and then takes the mirror passes
    the papers' rule but not this one.
    Beside them the per-run rates ``large_memorizes_per_run`` / ``small_composes_per_run`` (fraction of
    that setting's runs, each lr and seed on its own) and each side's numbers, prefixed by its name.
    """
    keys = [*by, case]
    rows = []
    for t in thresholds:
        cells = paper_cells(runs, [*keys, setting], t, id_min, seed)
        side = {}
        for name, kind in ((large, "symmetric"), (small, "inferential")):
            c = cells[cells[setting] == name].drop(columns=[setting, "threshold", "id_min"]).set_index(keys)
            side[name] = c.add_prefix(f"{name}.")
        w = pd.concat([side[large], side[small]], axis=1).reset_index()
        w.insert(len(keys), "threshold", float(t))
        w["large_memorizes"] = (w[f"{large}.id_best"] >= id_min) & (w[f"{large}.symmetric_best"] >= t)
        w["small_composes"] = (w[f"{small}.id_best"] >= id_min) & (w[f"{small}.inferential_best"] >= t)
        w["contrast"] = w.large_memorizes & w.small_composes
        w["large_memorizes_only"] = w[f"{large}.solution"].eq("memorizes")
        w["small_composes_only"] = w[f"{small}.solution"].eq("composes")
        w["contrast_only"] = w.large_memorizes_only & w.small_composes_only
        w["large_memorizes_per_run"] = w[f"{large}.symmetric_per_run"]
        w["small_composes_per_run"] = w[f"{small}.inferential_per_run"]
        rows.append(w)
    return pd.concat(rows, ignore_index=True)


def contrast_rates(cells: pd.DataFrame, large: str, small: str, by: Sequence[str] = ()) -> pd.DataFrame:
    """One row per (by..., threshold) from :func:`contrast_cells`: the papers' rule over cases
    (``paper_contrast_rate``, ``paper_large_memorizes_rate``, ``paper_small_composes_rate``; ``cells``: cases),
    its stricter reading (``paper_contrast_only_rate``: the other mapping's best below the threshold too)
    and the per-run rates over every run (``large_memorizes_per_run``, ``small_composes_per_run``,
    weighted by each case's runs)."""
    rows = []
    for key, g in cells.groupby([*by, "threshold"], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)

        def weighted(col: str, n: str) -> float:
            w = g[n].sum()
            return float((g[col] * g[n]).sum() / w) if w else math.nan

        rows.append({**dict(zip([*by, "threshold"], key)), "cells": len(g),
                     "paper_contrast_rate": float(g.contrast.mean()),
                     "paper_large_memorizes_rate": float(g.large_memorizes.mean()),
                     "paper_small_composes_rate": float(g.small_composes.mean()),
                     "paper_contrast_only_rate": float(g.contrast_only.mean()),
                     "large_memorizes_per_run": weighted(f"{large}.symmetric_per_run", f"{large}.n_runs"),
                     "small_composes_per_run": weighted(f"{small}.inferential_per_run", f"{small}.n_runs"),
                     "runs": int(g[f"{large}.n_runs"].sum() + g[f"{small}.n_runs"].sum())})
    return pd.DataFrame(rows)

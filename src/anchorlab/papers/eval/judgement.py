"""The papers' judgement: the Fig. 2 cell, its two readings over peak lrs, the fitted reading and the contrast
case by case; pure functions over a run table (:func:`anchorlab.papers.runs.run_table`).

NeurIPS §4 (Fig. 2): per cell and seed, 9 learning rates are trained, "the
highest accuracy for the inferential and symmetric mappings is selected"
(each mapping separately, each run's best over training), and the cell's value
is the mean of those bests over seeds. The journal calls OOD accuracy >= 50%
the reasoning phase. This is a different quantity from the rate at which a
single run (one lr, one seed, final metrics) composes: if each lr composes with
probability p, the best of 9 does with 1 - (1 - p)^9. Both are reported.

Input vocabulary: the run table's own names, one row per run: the final metrics ``final.id_acc``,
``final.ood_inferential_acc``, ``final.ood_symmetric_acc`` (:data:`MAPPINGS`), each run's best over training
``best.id_acc``, ``best.ood_inferential_acc``, ``best.ood_symmetric_acc`` (:data:`BEST`), ``seed``, ``peak_lr``,
and the keys a table groups by (``op_set``, ``paper_gamma``, ``clock``, a study's ``setting``, ...); for the Fig. 2
cell also ``status``, ``device`` and ``model.n_layers``. A trajectory (:func:`anchorlab.papers.runs.curve_table`)
has ``run_id``, ``id_acc``, ``inferential`` and ``symmetric``. Outputs are per seed, cell or case and name what
they aggregate: ``<mapping>_best`` (a seed's best over lrs and training; a cell's mean of those over seeds),
``<mapping>_final``, ``<mapping>_per_run``, ``n_runs``, ``solution``, ...

The Fig. 2 cell (:func:`cell_table`) is keyed by :data:`TABLE_KEYS`: clock, depth (``n_layers``: the runs'
``model.n_layers``), op set, paper gamma, the kind of device its runs trained on (``devices``), and the reading
of the peak lrs (``lrs``, :func:`lr_readings`: every peak run, or the peaks inside the paper's corrected range
:data:`PAPER_LR_RANGE`, so that peaks run outside it never move the range cell).

The contrast case by case (:func:`judge`): the same case (op set, seed, peak lr) at a large and a small init, each
run on its own (final metrics). It holds in a case when the large-init run fits (ID >= ``id_min``) and answers the
held-out pair with the mirror's target (symmetric accuracy >= ``acc_min``), and the small-init run fits and
composes (inferential accuracy >= ``acc_min``). The papers' rule over the same runs is :func:`contrast_cells`.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from anchorlab.config import ConfigError
from anchorlab.run_status import COMPLETED

MAPPINGS = {"id": "final.id_acc", "inferential": "final.ood_inferential_acc", "symmetric": "final.ood_symmetric_acc"}
BEST = {"id": "best.id_acc", "inferential": "best.ood_inferential_acc", "symmetric": "best.ood_symmetric_acc"}
# a cell of the Fig. 2 tables; ``devices``: the kind of device its runs trained on (``cpu``, ``cuda``, ...), so
# that the same configs on two machines make two cells, never one that mixes them
CELL_KEYS = ["clock", "n_layers", "op_set", "paper_gamma", "devices"]
TABLE_KEYS = [*CELL_KEYS, "lrs"]   # ... read over every peak lr ("all") or over a range of them
# the paper's peak range [1e-4, 3e-4] after the batch and width corrections (x 1.1, docs/protocol.md),
# fixed before the runs: the papers' rule is read over the peaks inside it and over every peak run
PAPER_LR_RANGE = (1.1e-4, 3.3e-4)
ALL_LRS = "all"
ROW_ORDER = ["clock", "model.n_layers", "op_set", "paper_gamma", "peak_lr", "seed"]   # a Fig. 2 run table's order


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


def fitted_bests(curves: pd.DataFrame, id_min: float = 0.9, run: str = "run_id") -> pd.DataFrame:
    """Each run's best over training read only where the model had fitted the seen pairs: from one row per
    (run, evaluation) with ``id_acc``, ``inferential`` and ``symmetric``
    (:func:`anchorlab.papers.runs.curve_table`), one row per run with
    ``best.ood_inferential_acc`` / ``best.ood_symmetric_acc`` = the highest accuracy over the evaluations
    with ID >= ``id_min`` (0.0 where none had: the run never answered anything while fitted), ``best.id_acc``
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
                      run: str = "run_id") -> pd.DataFrame:
    """``runs`` with each run's best inferential / symmetric accuracy (``best.ood_*``) replaced by
    :func:`fitted_bests` over ``curves``; a run without a trajectory is refused (ConfigError), so that no
    table mixes the two readings."""
    cols = [BEST["inferential"], BEST["symmetric"]]
    _check(runs, [run, *cols])
    lacking = sorted(set(runs[run]) - set(curves[run]))
    if lacking:
        raise ConfigError(f"fitted reading: no trajectory (curves) for run(s) {', '.join(map(str, lacking[:5]))}"
                          f"{' ...' if len(lacking) > 5 else ''}; re-read them from their directories")
    fb = fitted_bests(curves[curves[run].isin(runs[run])], id_min, run).set_index(run)
    return runs.assign(**{col: runs[run].map(fb[col]).to_numpy() for col in cols})


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


# ------------------------------------------------------------------ the contrast case by case
def judge(cases: pd.DataFrame, large: str = "large_init", small: str = "small_init", id_min: float = 0.9,
          acc_min: float = 0.8, by: Sequence[str] = ()) -> pd.DataFrame:
    """One row per case ([by...,] op set, seed[, peak lr]), each run on its own (final metrics): each
    setting's final numbers (``<setting>.<metric>``: ``large_init.id_acc``, ...) and ``large_memorizes``,
    ``small_composes``, ``contrast``."""
    lr = ["peak_lr"] if "peak_lr" in cases.columns else []
    wide = cases.pivot_table(index=[*by, "op_set", "seed", *lr], columns="setting", values=list(MAPPINGS.values()),
                             aggfunc="first")
    wide.columns = [f"{s}.{_metric(m)}" for m, s in wide.columns]
    w = wide.reset_index()
    for c in (f"{x}.{_metric(m)}" for x in (large, small) for m in MAPPINGS.values()):
        if c not in w:
            w[c] = math.nan
    w["large_memorizes"] = (w[f"{large}.id_acc"] >= id_min) & (w[f"{large}.ood_symmetric_acc"] >= acc_min)
    w["small_composes"] = (w[f"{small}.id_acc"] >= id_min) & (w[f"{small}.ood_inferential_acc"] >= acc_min)
    w["contrast"] = w["large_memorizes"] & w["small_composes"]
    return w


def _metric(column: str) -> str:
    """``final.id_acc`` -> ``id_acc``: a final metric's name beside its setting in a case's row."""
    return column.split(".", 1)[1]


def case_counts(cases: pd.DataFrame, large: str, small: str, id_min: float = 0.9, acc_min: float = 0.5,
                by: Sequence[str] = ()) -> pd.DataFrame:
    """Per ([by...,] op set): the cases (seed[, peak lr]) run in both settings, judged each on its own
    (:func:`judge`): ``cases`` and how many have ``contrast``, ``large_memorizes``, ``small_composes``."""
    cols = [*by, "op_set", "cases", "contrast", "large_memorizes", "small_composes"]
    if not len(cases):
        return pd.DataFrame(columns=cols)
    j = judge(cases, large, small, id_min, acc_min, by).dropna(subset=[f"{large}.id_acc", f"{small}.id_acc"])
    return (j.groupby([*by, "op_set"], sort=True).agg(
        cases=("contrast", "size"), contrast=("contrast", "sum"), large_memorizes=("large_memorizes", "sum"),
        small_composes=("small_composes", "sum")).reset_index()[cols])


def rates(judged: pd.DataFrame) -> dict[str, float]:
    """Fractions of cases: contrast, large-init memorizes, small-init composes; and the case count."""
    n = len(judged)
    return {"cases": n, "contrast_rate": float(judged.contrast.mean()) if n else math.nan,
            "large_memorizes_rate": float(judged.large_memorizes.mean()) if n else math.nan,
            "small_composes_rate": float(judged.small_composes.mean()) if n else math.nan}


def rate_map(judged: pd.DataFrame, cases: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """One row per grid point (the ``by`` keys' values): :func:`rates` over its cases, and the
    models' mean steps and wall seconds there (the compute one case costs)."""
    if not by:
        raise ConfigError("rate_map: needs the varied keys (by)")
    cost = cases.groupby(list(by), dropna=False).agg(steps=("steps", "mean"), model_wall_s=("wall_seconds", "mean"))
    rows = [{**dict(zip(by, key if isinstance(key, tuple) else (key,))), **rates(g)}
            for key, g in judged.groupby(list(by), dropna=False, sort=True)]
    return pd.DataFrame(rows).merge(cost.reset_index(), on=list(by), how="left")


# ------------------------------------------------------------------ the Fig. 2 cell from a run table
def lr_range_label(lo: float, hi: float) -> str:
    """``[1.1e-4, 3.3e-4]`` for (1.1e-4, 3.3e-4)."""
    def sci(v: float) -> str:
        m, e = f"{v:.3e}".split("e")
        return f"{m.rstrip('0').rstrip('.')}e{int(e)}"
    return f"[{sci(lo)}, {sci(hi)}]"


def checked_lr_range(lo: float, hi: float) -> tuple[float, float]:
    """(LO, HI) if 0 < LO <= HI, else ValueError."""
    if not 0 < lo <= hi:
        raise ValueError(f"need 0 < LO <= HI, got {lo:g},{hi:g}")
    return lo, hi


def lr_readings(rows: pd.DataFrame, lr_range: tuple[float, float] | None = PAPER_LR_RANGE) -> pd.DataFrame:
    """A run table twice, as the two readings of the papers' rule over peak lrs: every run (``lrs`` = "all")
    and the runs whose peak lr lies in ``lr_range`` (``lrs`` = "[LO, HI]"); ``None``: the first only."""
    out = [rows.assign(lrs=ALL_LRS)]
    if lr_range is not None:
        lo, hi = checked_lr_range(*lr_range)
        inside = rows[(rows.peak_lr >= lo * (1 - 1e-9)) & (rows.peak_lr <= hi * (1 + 1e-9))]
        out.append(inside.assign(lrs=lr_range_label(lo, hi)))
    return pd.concat(out, ignore_index=True)


def device_kind(device: pd.Series) -> pd.Series:
    """``cuda: NVIDIA H200`` -> ``cuda``: the part of a run table's ``device`` that keys its cells."""
    return device.fillna("unrecorded").astype(str).str.split(":").str[0]


def ordered(rows: pd.DataFrame) -> pd.DataFrame:
    """A run table in the order of the Fig. 2 tables (:data:`ROW_ORDER`)."""
    return rows.sort_values(ROW_ORDER).reset_index(drop=True)


def cell_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """The completed runs of a run table with the keys of their Fig. 2 cell that the run table does not name:
    ``n_layers`` (the depth, ``model.n_layers``) and ``devices`` (:func:`device_kind`)."""
    done = rows[rows.status.isin(COMPLETED)]
    return done.assign(n_layers=done["model.n_layers"], devices=device_kind(done.device))


def cell_table(rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9,
               lr_range: tuple[float, float] | None = PAPER_LR_RANGE) -> pd.DataFrame:
    """Run table -> one row per (clock, depth, op set, paper gamma, devices, lrs): the papers' cell beside
    the per-run rates, over every peak and over the peaks in ``lr_range`` (:func:`lr_readings`)."""
    return _all_first(paper_cells(lr_readings(cell_runs(rows), lr_range), TABLE_KEYS, threshold, id_min))


def seed_table(rows: pd.DataFrame, lr_range: tuple[float, float] | None = PAPER_LR_RANGE) -> pd.DataFrame:
    """Run table -> one row per (cell, seed): each mapping's best over the lrs and training (``*_best``)
    and ``n_lrs``, the numbers the papers' cell averages."""
    return _all_first(seed_bests(lr_readings(cell_runs(rows), lr_range), TABLE_KEYS))


def pair_table(rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9, large: float = 0.3,
               small: float = 0.8) -> pd.DataFrame:
    """The contrast case by case: per (clock, depth, device, op set), the (seed, peak lr) cases run at both
    paper gammas ``large`` and ``small``, each pair on its own (final metrics)."""
    r = cell_runs(rows)
    r = r[r.paper_gamma.isin([large, small])].assign(setting=lambda d: d.paper_gamma.map({large: "L", small: "S"}))
    return case_counts(r, "L", "S", id_min, threshold, ["clock", "n_layers", "devices"])


def fitted_rows(rows: pd.DataFrame, curves: pd.DataFrame, id_min: float = 0.9) -> pd.DataFrame:
    """A run table whose best inferential / symmetric accuracies are read only at the evaluations with
    ID >= ``id_min`` (over ``curves``, :func:`anchorlab.papers.runs.curve_table`); a completed run
    without a trajectory is refused, so that no cell mixes the two readings."""
    done = rows.status.isin(COMPLETED).to_numpy()
    out = rows.copy()
    cols = [BEST["inferential"], BEST["symmetric"]]
    out.loc[done, cols] = with_fitted_bests(rows[done], curves, id_min)[cols].to_numpy()
    return out


def _all_first(t: pd.DataFrame) -> pd.DataFrame:
    """A table keyed by :data:`TABLE_KEYS` with each cell's "all" reading before its range reading."""
    rest = [c for c in ("seed",) if c in t]
    return (t.assign(_r=t.lrs != ALL_LRS).sort_values([*CELL_KEYS, "_r", *rest], kind="stable")
            .drop(columns="_r").reset_index(drop=True))

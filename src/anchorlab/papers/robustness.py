"""Robustness of the headline: random anchor op sets x seeds, a large-init and a small-init setting.

A *case* is one op set and one seed. An op set (:mod:`anchorlab.tasks.anchor.opsets`)
draws other steps for the anchors 1..4, another held-out pair and a
non-inferential shift for its mirror; the papers' op set can be included as
case 0 (``include_papers``).

The contrast holds in a case when the large-init model fits (ID >= ``id_min``)
and answers the held-out pair with the mirror's target (symmetric accuracy >=
``acc_min``), and the small-init model fits and composes (inferential accuracy
>= ``acc_min``). The study is a sweep on the one runner (resumable, results in
``results.sqlite``); :func:`case_table` and :func:`rates` read it back.

A *regime map* is the study repeated over a grid of compute settings
(``vary``: dotted key -> values, crossed, applied to every run, e.g.
``train.epochs``, ``task.n_train``, ``model.d_model``, ``optim.peak_lr``,
``train.batch_size``): :func:`rate_map` gives one row of rates per grid point,
with the models' mean wall time and steps, so the rate can be read against
the compute it costs.

*Learning rates* (``peak_lrs``): every case is trained at each peak lr; the
study then reports the papers' judgement beside the per-run rate
(:mod:`anchorlab.papers.eval.judgement`): per (op set, setting, seed) the best over
lrs and training, each mapping on its own, averaged over seeds (``cells.csv``,
``seeds.csv``), and the fraction of single runs that pass (final metrics), at
each threshold (``rates.csv``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pandas as pd

from anchorlab.config import ConfigError, check_range
from anchorlab.papers.eval.judgement import BEST, MAPPINGS
from anchorlab.papers.eval.judgement import case_counts, judge, rate_map, rates  # noqa: F401  (the study's API)
from anchorlab.run_status import COMPLETED
from anchorlab.tasks.anchor.opsets import OpSet, random_op_sets


@dataclass(frozen=True)
class Setting:
    """A named model setting: dotted overrides on the base config (e.g. ``init.gamma``)."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)


# the demo's two settings (demo.DEMO_GAMMAS)
DEFAULT_SETTINGS = (Setting("large_init", {"init.gamma": 0.3}), Setting("small_init", {"init.gamma": 0.45}))


def study_spec(base: str | Mapping[str, Any], op_sets: Sequence[OpSet], seeds: Sequence[int],
               settings: Sequence[Setting] = DEFAULT_SETTINGS, overrides: Sequence[str] = (),
               name: str = "robustness", vary: Mapping[str, Sequence[Any]] | None = None) -> dict[str, Any]:
    """The study as a sweep spec: [vary axes, crossed] x zip(op set) x zip(setting) x zip(seed)."""
    from anchorlab.config import load_yaml

    if len(settings) < 2 or len({s.name for s in settings}) != len(settings):
        raise ConfigError("settings: need at least two settings with distinct names")
    keys = sorted({k for s in settings for k in s.overrides})
    for s in settings:
        missing = [k for k in keys if k not in s.overrides]
        if missing:
            raise ConfigError(f"settings.{s.name}: must set {', '.join(missing)} like the others")
    ops = [o.task_overrides() for o in op_sets]
    spec: dict[str, Any] = {
        "name": name,
        "base": load_yaml(base) if isinstance(base, str) else dict(base),
        "set": list(overrides),
        "zip": [
            {k: [o[k] for o in ops] for k in ("task.anchors", "task.pair_rules")} | {"task.preset": [o["task.preset"] for o in ops]},
            {k: [s.overrides[k] for s in settings] for k in keys},
            {"train.init_seed": list(seeds), "train.data_seed": list(seeds)},
        ],
    }
    reserved = {k for group in spec["zip"] for k in group}
    for k, vals in (vary or {}).items():
        if not isinstance(vals, (list, tuple)) or not vals:
            raise ConfigError(f"vary.{k}: needs a non-empty list of values, got {vals!r}")
        if k in reserved:
            raise ConfigError(f"vary.{k}: is set by the study itself (settings, op sets or seeds); vary another key")
    if vary:
        spec["axes"] = {k: list(v) for k, v in vary.items()}
    return spec


def _setting_of(row: Mapping[str, Any], settings: Sequence[Setting]) -> str:
    for s in settings:
        if all(_same(row.get(k), v) for k, v in s.overrides.items()):
            return s.name
    return "?"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b))
        except (TypeError, ValueError):
            return False
    return a == b


def case_table(rows: pd.DataFrame, settings: Sequence[Setting] = DEFAULT_SETTINGS,
               vary_keys: Sequence[str] = ()) -> pd.DataFrame:
    """One row per run: [the varied keys' values,] op set, seed, setting, peak lr, status, the final ID /
    inferential / symmetric accuracy (``final.*``), each one's best over training (``best.*``), the final train
    loss, steps, wall time: the run table's names.

    ``rows``: the study's runs as run-table rows (:func:`anchorlab.sweep.runtable.run_table`).
    """
    t = rows.reset_index(drop=True)
    if not len(t):
        return pd.DataFrame(columns=[*vary_keys, "op_set", "seed", "setting", "peak_lr", "status", "run_id"])
    keys = sorted({k for s in settings for k in s.overrides})
    setting = [_setting_of(dict(zip(keys, vals)), settings) for vals in zip(*(t[k] for k in keys))] if keys else \
        ["?"] * len(t)
    metrics = [*MAPPINGS.values(), *BEST.values(), "final.train_loss"]
    out = pd.DataFrame({**{k: t[k] if k in t else None for k in vary_keys}, "op_set": t.op_set, "seed": t.seed,
                        "setting": setting, "peak_lr": t.peak_lr, "status": t.status,
                        **{m: t[m] if m in t else pd.Series(math.nan, index=t.index) for m in metrics},
                        "steps": t.steps, "wall_seconds": t.wall_seconds, "run_id": t.run_id})
    return out.sort_values([*vary_keys, "op_set", "seed", "peak_lr", "setting"]).reset_index(drop=True)


def judgement_tables(cases: pd.DataFrame, large: str, small: str, thresholds: Sequence[float] = (0.5, 0.8),
                     id_min: float = 0.9, by: Sequence[str] = ()) -> dict[str, pd.DataFrame]:
    """The papers' judgement beside the per-run rate, from :func:`case_table`'s rows.

    ``seeds``: per ([grid point,] op set, setting, seed) the best over lrs and training of each mapping;
    ``cells``: per ([grid point,] op set, threshold) each setting's papers' cell (mean of those bests over
    seeds), its per-run rate, and the contrast by the papers' rule; ``rates``: per ([grid point,]
    threshold) the papers' rule over op sets (``paper_*``, ``cells``) beside the per-run rates over
    every run (``contrast_rate`` over (op set, seed, lr) cases, ``large_memorizes_rate``,
    ``small_composes_rate``, ``cases``: :func:`rates` of :func:`judge` at that threshold).
    """
    from anchorlab.papers.eval.judgement import contrast_cells, contrast_rates, seed_bests

    ok = cases[cases.status.isin(COMPLETED)]
    cells = contrast_cells(ok, large, small, thresholds, id_min, by)
    paper = contrast_rates(cells, large, small, by)
    per_run = []
    for t in thresholds:
        j = judge(ok, large, small, id_min, t, by)
        for key, g in (j.groupby(list(by), dropna=False, sort=True) if by else [((), j)]):
            key = key if isinstance(key, tuple) else (key,)
            per_run.append({**dict(zip(by, key)), "threshold": float(t), **rates(g)})
    table = paper.merge(pd.DataFrame(per_run), on=[*by, "threshold"], how="outer")
    return {"seeds": seed_bests(ok, [*by, "op_set", "setting"]), "cells": cells, "rates": table}


def fitted_tables(cases: pd.DataFrame, curves: pd.DataFrame, large: str, small: str,
                  thresholds: Sequence[float] = (0.5, 0.8), id_min: float = 0.9,
                  by: Sequence[str] = ()) -> dict[str, pd.DataFrame] | None:
    """:func:`judgement_tables` with each run's best over training read only at the evaluations with ID >=
    ``id_min`` (:func:`anchorlab.papers.eval.judgement.with_fitted_bests` over the runs' trajectories ``curves``,
    :func:`anchorlab.papers.runs.curve_table`; our reading, not the papers'); ``None`` where a completed
    run has no trajectory (then no table mixes the two readings)."""
    from anchorlab.papers.eval.judgement import with_fitted_bests

    ok = cases[cases.status.isin(COMPLETED)]
    curves = curves[curves.run_id.isin(set(ok.run_id))].reset_index(drop=True)
    if not len(ok) or not set(ok.run_id) <= set(curves.run_id):
        return None
    return judgement_tables(with_fitted_bests(ok, curves, id_min), large, small, thresholds, id_min, by)


def judged_files(cases: pd.DataFrame, curves: pd.DataFrame, large: str, small: str,
                 thresholds: Sequence[float] = (0.5, 0.8), id_min: float = 0.9, by: Sequence[str] = ()
                 ) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame] | None, list[tuple[str, pd.DataFrame]]]:
    """:func:`judgement_tables` and :func:`fitted_tables` of one study, with the named tables a study writes:
    ``seeds``, ``cells``, ``rates`` and, where every run has its trajectory in ``curves``
    (:func:`anchorlab.papers.runs.curve_table`), the same as ``<name>_fitted``."""
    jt = judgement_tables(cases, large, small, thresholds, id_min, by)
    fit = fitted_tables(cases, curves, large, small, thresholds, id_min, by)
    names = ("seeds", "cells", "rates")
    return jt, fit, [(k, jt[k]) for k in names] + ([(f"{k}_fitted", fit[k]) for k in names] if fit else [])


def paired_cases(cases: pd.DataFrame, key: str, threshold: float = 0.5, id_min: float = 0.9) -> pd.DataFrame:
    """One row per case (op set, seed, setting, peak lr) with each value of the varied ``key`` side by side:
    final ID / inferential / symmetric accuracy and the solution (:func:`anchorlab.papers.analysis.verdict.outcome`
    at ``threshold``) as ``<metric>@<value>``, and ``same_solution``: every value gives the same one."""
    from anchorlab.eval.solution import outcome

    ok = cases[cases.status.isin(COMPLETED)]
    final = list(MAPPINGS.values())
    ok = ok.assign(solution=[outcome(*v, threshold, id_min) for v in zip(*(ok[c] for c in final))],
                   _value=ok[key].map(lambda v: f"{v:g}" if isinstance(v, float) else str(v)))
    case = ["op_set", "seed", "setting", "peak_lr"]
    wide = ok.pivot_table(index=case, columns="_value", aggfunc="first", values=[*final, "solution"])
    wide.columns = [f"{m.removeprefix('final.')}@{v}" for m, v in wide.columns]
    sol = wide[[c for c in wide.columns if c.startswith("solution@")]]
    wide["same_solution"] = sol.nunique(axis=1).eq(1) & sol.notna().all(axis=1)
    return wide.reset_index()


def summary_lines(rates_table: pd.DataFrame, n_lrs: int, n_seeds: int, id_min: float = 0.9,
                  fitted: pd.DataFrame | None = None) -> list[str]:
    """One line per threshold: the papers' rule and the per-run rate, always together; with ``fitted`` (the
    rates table of :func:`fitted_tables`), a line per threshold with the same rule read only where ID had fitted."""
    out = []
    fit = {r.threshold: r for r in fitted.itertuples(index=False)} if fitted is not None else {}
    for r in rates_table.itertuples(index=False):
        n = int(r.cells)
        out.append(
            f"OOD >= {r.threshold:g} (ID >= {id_min:g}): papers' rule (best of {n_lrs} lr(s) and of training, mean over "
            f"{n_seeds} seed(s)): contrast in {round(r.paper_contrast_rate * n)}/{n} op set(s) (large init "
            f"memorizes {round(r.paper_large_memorizes_rate * n)}/{n}, small init composes "
            f"{round(r.paper_small_composes_rate * n)}/{n}; with the other mapping's best below {r.threshold:g} too: "
            f"{round(r.paper_contrast_only_rate * n)}/{n}); per run (each lr and seed, final): contrast in "
            f"{r.contrast_rate:.0%} of {int(r.cases)} cases (large init memorizes {r.large_memorizes_per_run:.0%}, "
            f"small init composes {r.small_composes_per_run:.0%} of runs)")
        if r.threshold in fit:
            f = fit[r.threshold]
            out.append(f"  the same rule read only at evaluations with ID >= {id_min:g} (ours): contrast in "
                       f"{round(f.paper_contrast_rate * n)}/{n} (large init memorizes "
                       f"{round(f.paper_large_memorizes_rate * n)}/{n}, small init composes "
                       f"{round(f.paper_small_composes_rate * n)}/{n})")
    return out


def run_study(out_dir: str, base: str | Mapping[str, Any] = "demo/small", n_op_sets: int = 5,
              seeds: Sequence[int] = (0, 1, 2), settings: Sequence[Setting] = DEFAULT_SETTINGS,
              overrides: Sequence[str] = (), op_seed: int = 0, workers: int | None = None,
              executor: str = "process", on_result: Any = None, include_papers: bool = True,
              op_sets: Sequence[OpSet] | None = None,
              vary: Mapping[str, Sequence[Any]] | None = None, peak_lrs: Sequence[float] | None = None,
              thresholds: Sequence[float] = (0.5, 0.8), id_min: float = 0.9) -> dict[str, Any]:
    """Run (or resume) the study into ``out_dir``; write ``cases.csv`` (one row per run), ``judged.csv``
    (one row per case and lr, each run on its own at the strictest threshold), ``seeds.csv`` and
    ``cells.csv`` (the papers' judgement, :func:`judgement_tables`), ``rates.csv`` (one row per threshold:
    the papers' rule and the per-run rates); with ``vary``, also ``map.csv`` (one row per grid point,
    :func:`rate_map`), ``paper_map.csv`` (``rates`` per grid point and threshold) and ``regime_map.png``.
    ``peak_lrs``: train every case at each of these peak lrs (``optim.peak_lr``).
    ``seeds_fitted.csv``, ``cells_fitted.csv``, ``rates_fitted.csv``: the same read only where ID had fitted
    (:func:`fitted_tables`; ``res["fitted"]``, None where a run lacks its history).
    Return ``{"rates", "rates_table", "judged", "cases", "seeds", "cells", "fitted", "summary", "files"}`` (and ``"map"``);
    ``summary``: printable lines giving the papers' rule beside the per-run rate."""
    from pathlib import Path

    from anchorlab.io import atomic_write
    from anchorlab.papers.runs import curve_table, run_table
    from anchorlab.sweep.runner import run_sweep

    out = Path(out_dir)
    ops = list(op_sets) if op_sets is not None else random_op_sets(n_op_sets, op_seed, include_papers=include_papers)
    if not thresholds or any(not 0.0 <= t <= 1.0 for t in thresholds):
        raise ConfigError(f"thresholds: need one or more accuracies in [0, 1], got {list(thresholds)!r}")
    axes = dict(vary or {})
    if peak_lrs:
        if "optim.peak_lr" in axes:
            raise ConfigError("peak_lrs: optim.peak_lr is also varied; give the lrs once (--peak-lrs)")
        for lr in peak_lrs:
            check_range("peak_lrs", lr, 0.0, lo_open=True)
        axes["optim.peak_lr"] = list(peak_lrs)
    spec = study_spec(base, ops, seeds, settings, overrides, vary=axes or None)
    ids = set(run_sweep(spec, out, executor=executor, max_workers=workers, on_result=on_result).run_id)
    by = list(vary or {})
    large, small = settings[0].name, settings[1].name
    # this study's runs only: a directory shared with other sweeps (docs/sweeps.md) holds more
    rows = run_table([out])
    cases = case_table(rows[rows.run_id.isin(ids)], settings, by)
    judged = judge(cases, large, small, id_min, max(thresholds), by=by)
    jt, fit, named = judged_files(cases, curve_table([out]), large, small, thresholds, id_min, by)
    r = rates(judged)
    tables = [("cases", cases), ("judged", judged), *named]
    res: dict[str, Any] = {"rates": r, "rates_table": jt["rates"], "judged": judged, "cases": cases,
                           "seeds": jt["seeds"], "cells": jt["cells"], "fitted": fit}
    res["summary"] = summary_lines(jt["rates"], max(len(peak_lrs or ()), 1), len(seeds), id_min,
                                   fit["rates"] if fit else None) if not by else [
        "\nthe papers' rule beside the per-run rates, per grid point and threshold (paper_map.csv):",
        jt["rates"].to_string(index=False, float_format=lambda v: f"{v:.2f}")]
    if by:
        res["map"] = rate_map(judged, cases, by)
        tables += [("map", res["map"]), ("paper_map", jt["rates"])]
    if len(by) == 1:
        res["paired"] = paired_cases(cases, by[0], min(thresholds), id_min)
        tables.append(("paired", res["paired"]))
        n, same = len(res["paired"]), int(res["paired"].same_solution.sum())
        res["summary"].append(f"{by[0]}: the same solution (OOD >= {min(thresholds):g}) at every value in "
                              f"{same} of {n} cases (paired.csv)")
    files = {}
    for name, t in tables:
        files[name] = atomic_write(out / f"{name}.csv", lambda p, t=t: t.to_csv(p, index=False))
    if by:
        from anchorlab.papers.plots.robustness import plot_regime_map
        from anchorlab.plots.save import save_figure

        files["regime_map"] = save_figure(plot_regime_map(res["map"], by, settings[0].name, settings[1].name),
                                          out / "regime_map", dpi=130)[0]
    res["files"] = files
    return res

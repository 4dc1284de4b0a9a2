"""The CPU demo: a large-init and a small-init model on the ``neurips`` anchor task.

Both models share the config ``demo/small`` except the init rate. The demo is
a sweep (axis ``init.gamma``) on the one sweep runner, so it runs in a process
pool (one torch thread per worker), resumes if interrupted, and its results
land in ``DIR/results.sqlite``::

    DIR/runs/<run_id>/                 run directories (DIR/large_init, DIR/small_init link to them)
    DIR/results.sqlite                 the sweep store (`anchorlab report DIR` works)
    DIR/summary.json                   {"models": one object per model (init.gamma, train.init_seed,
                                       final.id_acc, final.ood_*, top deviations, wall time: a run's
                                       values under the run table's names), "rule", "rates" (this run's,
                                       per threshold), "rates_fitted" (the same read only where ID had
                                       fitted), "setting_measured" (the committed study's rate, None where
                                       its tables are not at hand)}
    DIR/{rates,cells,seeds}[_fitted].csv   the papers' rule beside the per-run rate; _fitted: that reading
    DIR/summary.csv                    one row per model
    DIR/ood_over_training.png          (4,3) accuracy under both hypotheses vs step

The default setting's measured rate (:func:`measured`, printed by ``anchorlab demo``) is a research output,
not a constant of the code: it is read from the committed study tables ``demo_rule_native_cpu_{rates,cases}.csv`` in
the figures folder (:func:`anchorlab.io.figures_dir`: ``$ANCHORLAB_FIGURES`` when set, else the clone's
``docs/figures/``). Without them (a plain ``pip install``) the demo runs as usual and says in one line
where the measured rate is.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pandas as pd

from anchorlab.config import ConfigError, load_yaml
from anchorlab.io import MissingResult, atomic_write, figures_file, write_json
from anchorlab.run_status import TRAINED

log = logging.getLogger(__name__)

DEMO_PRESET = "demo/small"
# The two init rates of the demo (std = fan_in ** -gamma); see docs/demo.md.
# small init 0.45: the most robust of the gammas tried at this budget with the authors' conventions
# (measured once: notes/2026-12-code-measurements.md); the measured rate is in docs/demo.md.
DEMO_GAMMAS = {"large_init": 0.3, "small_init": 0.45}

# How the contrast is judged; printed and written into summary.json beside this run's numbers.
RULE = ("contrast: the large-init model answers the mirror (symmetric >= T) and the small-init model composes "
        "(inferential >= T), ID >= 0.9 for both; papers' rule: per op set, each mapping's best over the peak lrs "
        "and over training, mean over seeds; per run: each run's final metrics on its own")
# The study that measured this setting's rate on the default bf16 path (native, train.bf16_path auto); its
# tables are committed as docs/figures/demo_rule_native_cpu_*.csv and read from the figures folder
# (anchorlab.io.figures_dir) by :func:`measured`, never kept in the code. The first study of the setting, on
# autocast and with one op set the generator no longer draws, is demo_rule_cpu_* (docs/results.md, "The demo").
MEASURED_STUDY = "anchorlab robustness --out runs/demo_rule --op-sets 5 --seeds 3 --peak-lrs 1e-3,2e-3,4e-3"
MEASURED_TABLES = "demo_rule_native_cpu"
RELIABLE = 0.8   # the fraction of op sets under the papers' rule a reliable contrast needs

# The summary table's (summary.csv, summary.json's "models") names for a run's values: the run table's
# (anchorlab.sweep.runtable.run_row), beside the table's own columns (model, peak_lr, top_deviations, steps,
# wall_seconds, precision, run_dir).
GAMMA, SEED = "init.gamma", "train.init_seed"
FINAL_METRICS = ("id_acc", "train_acc", "ood_inferential_acc", "ood_symmetric_acc", "ood_other_frac")
INFERENTIAL, SYMMETRIC = "final.ood_inferential_acc", "final.ood_symmetric_acc"


def measured() -> dict[str, Any]:
    """The default setting's measured rate, read from the committed study tables (``demo_rule_native_cpu_rates.csv``
    and ``_cases.csv`` in the figures folder); :class:`~anchorlab.io.MissingResult` when they are absent."""
    what = "the demo's default setting's measured rate"
    rates = pd.read_csv(figures_file(f"{MEASURED_TABLES}_rates.csv", what))
    cases = pd.read_csv(figures_file(f"{MEASURED_TABLES}_cases.csv", what))
    op_sets = int(rates.cells.iloc[0])
    rows = [{"threshold": float(r.threshold), "papers_rule_op_sets": int(round(r.paper_contrast_rate * r.cells)),
             "per_run_contrast_rate": round(float(r.contrast_rate), 3)} for r in rates.itertuples(index=False)]
    return {"study": MEASURED_STUDY, "tables": f"docs/figures/{MEASURED_TABLES}_{{rates,cells,seeds,cases}}.csv",
            "op_sets": op_sets, "seeds": int(cases.seed.nunique()),
            "peak_lrs": sorted(float(v) for v in cases.peak_lr.unique()), "cases": int(rates.cases.iloc[0]),
            "rates": rows, "reliable": max(r["papers_rule_op_sets"] for r in rows) >= RELIABLE * op_sets}


def measured_line(overrides: list[str] | tuple[str, ...] = ()) -> str:
    """One printable line: the default setting's measured rate under the papers' rule and per run, noting the
    ``overrides`` that make this run differ from it (or, outside a clone, that the committed tables are not at
    hand and how to point at them)."""
    try:
        m = measured()
    except MissingResult as e:
        return str(e)
    parts = [f"{r['papers_rule_op_sets']}/{m['op_sets']} op sets at OOD >= {r['threshold']:g}" for r in m["rates"]]
    runs = " / ".join(f"{r['per_run_contrast_rate']:.0%}" for r in m["rates"])
    return (f"the demo's default setting, measured over {m['op_sets']} op sets x {m['seeds']} seeds x "
            f"{len(m['peak_lrs'])} peak lrs (docs/demo.md): papers' rule {', '.join(parts)}; per run {runs} of "
            f"{m['cases']} cases; " + ("at or above" if m["reliable"] else "below")
            + f" the {RELIABLE:.0%} a reliable contrast needs"
            + (f" (this run changes it: --set {' '.join(overrides)})" if overrides else ""))


def plain_verdict(table: pd.DataFrame) -> str:
    """The demo's outcome in one plain sentence, from ``table.attrs["rates"]`` (each run on its own, OOD >= 0.8)."""
    r = table.attrs["rates"]
    n = int(r["cases"])
    if n == 1:
        def acc(model: str, col: str) -> str:
            v = table.loc[table.model == model, col] if {"model", col} <= set(table.columns) else []
            return f" ({col.removeprefix('final.ood_').split('_')[0]} {float(v.iloc[0]):.2f})" if len(v) else ""

        large = ("memorized (answered the mirror)" if r["large_memorizes_rate"] == 1 else
                 "did not memorize at the 0.8 the contrast asks" + acc("large_init", SYMMETRIC))
        small = ("composed" if r["small_composes_rate"] == 1 else
                 "did not compose at the 0.8 the contrast asks" + acc("small_init", INFERENTIAL))
        shown = "shows" if r["contrast_rate"] == 1 else "does not show"
        return (f"In plain words: the large-init model {large} and the small-init model {small}, so this run "
                f"{shown} the papers' contrast; one run is one draw, and the measured rate above says how often "
                f"it holds.")
    k = round(r["contrast_rate"] * n)
    every = "every time" if k == n else "not every time"
    return (f"In plain words: the large-init model memorized and the small-init model composed (the papers' "
            f"contrast) in {k} of {n} seed and lr cases of this demo: {every}.")


def demo_spec(overrides: list[str] | tuple[str, ...] = (), seeds: int = 1,
              peak_lrs: list[float] | tuple[float, ...] | None = None) -> dict[str, Any]:
    """The demo as a sweep spec: ``demo/small`` + overrides, one run per gamma (x seed) (x peak lr)."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ConfigError(f"seeds: must be a positive integer (1 or more), got {seeds!r}")
    for ov in overrides:
        key = ov.split("=", 1)[0].strip()
        if key == "init.gamma" or (key == "optim.peak_lr" and peak_lrs):
            raise ConfigError(f"--set {ov}: the demo sets {key} itself (its two arms' gammas; allowed instead: "
                              f"`anchorlab robustness --setting NAME:init.gamma=G`, or --peak-lrs)")
    spec: dict[str, Any] = {"name": "demo", "base": load_yaml(DEMO_PRESET), "set": list(overrides),
                            "axes": {"init.gamma": list(DEMO_GAMMAS.values())}}
    if peak_lrs:
        spec["axes"]["optim.peak_lr"] = list(peak_lrs)
    if seeds > 1:
        spec["zip"] = [{"train.init_seed": list(range(seeds)), "train.data_seed": list(range(seeds))}]
    return spec


def _label(gamma: float) -> str:
    return next((k for k, g in DEMO_GAMMAS.items() if g == gamma), f"gamma={gamma:g}")


def _row(run_dir: Path) -> dict[str, Any]:
    """One summary row of a finished demo run (re-evaluates it for the deviation histogram); its values named as
    the run table names them (:func:`anchorlab.sweep.runtable.run_row`: ``init.gamma``, ``train.init_seed``,
    ``final.<metric>``), its own columns (``model``, ``top_deviations``, ``precision`` in a word or two) beside."""
    from anchorlab.train import load_run

    res = load_run(run_dir)
    final = res.final
    f = final["final"]
    result = res.task.evaluate(res.model, res.task.eval_data(res.cfg.train.data_seed))
    from anchorlab.tasks.anchor.metrics import top_deviations
    held = [f"{a}{b}" for a, b in res.task.held_out_pairs]
    dev = top_deviations(result.tables["deviations"], held[0]) if held else []
    return {"model": _label(res.cfg.init.gamma), SEED: res.cfg.train.init_seed, GAMMA: res.cfg.init.gamma,
            "peak_lr": res.cfg.optim.peak, **{f"final.{k}": f[k] for k in FINAL_METRICS},
            "top_deviations": ", ".join(f"{d:+d}: {p:.0%}" for d, p in dev),
            "steps": final["steps"], "wall_seconds": round(final["wall_seconds"], 1),
            "precision": precision_label(final.get("precision") or {}), "run_dir": str(run_dir)}


def precision_label(p: dict[str, Any]) -> str:
    """A run's recorded precision in a word or two: ``float32``, ``bf16 native`` or ``bf16 autocast``."""
    if p.get("matmul_dtype") != "bfloat16":
        return p.get("matmul_dtype") or "unrecorded"
    return f"bf16 {p.get('path', 'autocast')}"     # a run recorded before the path existed trained on autocast


def _measured_or_none() -> dict[str, Any] | None:
    try:
        return measured()
    except MissingResult:
        return None


def run_demo(out_dir: str | Path, overrides: list[str] | tuple[str, ...] = (), workers: int = 2,
             progress: bool = False, seeds: int = 1, peak_lrs: list[float] | tuple[float, ...] | None = None,
             thresholds: tuple[float, ...] | list[float] = (0.5, 0.8)) -> pd.DataFrame:
    """Train both demo models (in parallel, resumably) for ``seeds`` seeds (x ``peak_lrs``), write the
    summary files, return the table (one row per model, seed and lr). ``table.attrs["rates"]`` holds the
    per-run contrast rate (OOD >= 0.8), ``attrs["rates_table"]`` the papers' rule beside the per-run
    rates at each threshold (also ``rates.csv``; ``cells.csv``: per setting, the mean over seeds of
    the best over lrs and training), ``attrs["summary"]`` their printed lines."""
    from anchorlab.plots.save import save_figure
    from anchorlab.plots.training import plot_ood_over_training
    from anchorlab.papers.robustness import case_table, judge, judged_files, rates, summary_lines
    from anchorlab.sweep.runtable import history_table
    from anchorlab.papers.runs import curve_table, run_table

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    from anchorlab.sweep.watch import run_watched

    df = run_watched(demo_spec(overrides, seeds, peak_lrs), out, "demo", progress, workers if workers > 1 else None,
                     keys=("id_acc", "ood_inferential_acc", "ood_symmetric_acc"),   # the progress line's metrics
                     executor="process" if workers > 1 else "inprocess")
    runs = df.drop_duplicates("run_id").sort_values("init.gamma")
    failed = runs[~runs.status.isin(TRAINED)]
    if len(failed):
        raise RuntimeError(f"demo runs did not finish: {failed[['run_id', 'status', 'error']].to_dict('records')}")
    rows = [_row(out / "runs" / rid) for rid in runs.run_id]
    for r in rows:  # friendly names next to the run-id directories
        link = out / (r["model"] + ("" if seeds == 1 else f"_seed{r[SEED]}")
                      + (f"_lr{r['peak_lr']:g}" if peak_lrs else ""))
        if not link.exists() and not link.is_symlink():
            try:
                os.symlink(Path("runs") / Path(r["run_dir"]).name, link)
            except OSError:
                pass
    table = pd.DataFrame(rows).sort_values([SEED, "peak_lr", GAMMA]).reset_index(drop=True)
    ran = run_table([out])
    cases = case_table(ran[ran.run_id.isin(set(runs.run_id))])
    table.attrs["rates"] = rates(judge(cases))
    jt, fit, named = judged_files(cases, curve_table([out]), "large_init", "small_init", thresholds)  # fit: ours
    table.attrs["rates_table"] = jt["rates"]
    table.attrs["summary"] = summary_lines(jt["rates"], max(len(peak_lrs or ()), 1), seeds,
                                           fitted=fit["rates"] if fit else None)
    for name, t in named:
        atomic_write(out / f"{name}.csv", lambda p, t=t: t.to_csv(p, index=False))
    rows = table.to_dict("records")
    write_json(out / "summary.json", {"models": rows, "rule": RULE, "rates": jt["rates"].to_dict("records"),
                                      "rates_fitted": fit["rates"].to_dict("records") if fit else None,
                                      "setting_measured": _measured_or_none()})
    atomic_write(out / "summary.csv", lambda p: table.to_csv(p, index=False))
    first = [r for r in rows if (r[SEED], r["peak_lr"]) == (rows[0][SEED], rows[0]["peak_lr"])]
    history = history_table([out])
    hist = {r["model"]: history[history.run_id == Path(r["run_dir"]).name].drop(columns="run_id")
            .dropna(axis=1, how="all").reset_index(drop=True) for r in first}
    save_figure(plot_ood_over_training(hist, {r["model"]: r[GAMMA] for r in first}),
                out / "ood_over_training", formats=("png",), dpi=130)
    return table

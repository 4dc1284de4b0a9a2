"""The early-predictor study as a figure: at one init, which early measurement tells the runs that will
compose from those that will memorize (docs/predictors.md, "The CPU study").

The sweep ``predictors_cpu`` trains the demo's small arm (gamma 0.45, width 128) over 40 seed draws with
``train.log_predictors``; the maker reads one run table (``out/sweep`` and any ``--from-table`` CSVs: a
committed study's ``*_runs.csv``, whose feature rows are read from the same file) and writes::

    runs.csv          one row per (run, fraction of training 0 / 5% / 10% / 100%): the run's solution by final
                      metrics and the features (:func:`study_rows`), the design (init or data seed varied)
    auc.csv           AUC of every feature at every fraction, composes vs memorizes
    verdict.csv       held-out logistic verdicts (cross-validated; trained on one design, tested on the other)
    verdict_model.json  the early verdict fitted on every labelled run at 10% of training (3 best features),
                      where the runs' directories are at hand (its setting is read from their configs)
    predictors.png    AUC per feature at the early fractions
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register, value

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)
FRACTIONS = (0.0, 0.05, 0.1, 1.0)     # 1.0: the trained model (descriptive, not a predictor)
EARLY = (0.0, 0.05, 0.1)              # as predictors_fit.EARLY (kept here: --list imports no pandas)


def study_rows(rows: pd.DataFrame, fractions: Sequence[float] = FRACTIONS, threshold: float = 0.5,
               id_min: float = 0.9) -> pd.DataFrame:
    """Run table -> one row per (run, fraction): the run's metadata (``RUN_COLUMNS``, its ``outcome`` by final
    metrics), ``at_fraction``, ``step`` and the features: read from the run's directory where the row has
    one (:func:`anchorlab.papers.analysis.auc.features_at_fractions`), else from the committed study table the row
    came from (its rows at ``fractions``, in the table's order). Rows read from directories come first, by
    run id; the cross-validated verdicts draw their folds in this order."""
    import numpy as np
    import pandas as pd

    from anchorlab.papers.analysis.auc import features_at_fractions
    from anchorlab.eval.solution import outcome
    from anchorlab.papers.reproduce.predictors_fit import RUN_COLUMNS

    meta = rows.sort_values("run_id").reset_index(drop=True)
    final = ("final.id_acc", "final.ood_inferential_acc", "final.ood_symmetric_acc")
    meta["outcome"] = [outcome(*m, threshold, id_min) for m in zip(*(meta[c] for c in final))]
    meta = meta[RUN_COLUMNS + ["run_dir", "source"]]
    frames = []
    for src, group in meta.groupby("source", sort=False):
        from_dirs = group[group.run_dir.astype(str).str.len() > 0]
        for r in from_dirs.to_dict("records"):
            feats = features_at_fractions(r["run_dir"], fractions).drop(columns="run_dir", errors="ignore")
            frames.append(feats.assign(**{c: r[c] for c in RUN_COLUMNS}))
        committed = group[~group.run_id.isin(from_dirs.run_id)]
        if len(committed):
            old = pd.read_csv(src)
            if "at_fraction" not in old.columns:
                log.warning("%s: no feature rows (at_fraction); its %d runs are left out", src, len(committed))
                continue
            old = old[old.run_id.isin(committed.run_id) & np.isin(old.at_fraction.round(6), np.round(fractions, 6))]
            drop = [c for c in (*RUN_COLUMNS, "design", "run_dir", "source") if c != "run_id" and c in old.columns]
            old = old.drop(columns=drop)
            frames.append(old.drop_duplicates(["run_id", "at_fraction"], keep="last")
                          .merge(committed[RUN_COLUMNS], on="run_id"))
    if not frames:
        return pd.DataFrame(columns=RUN_COLUMNS + ["at_fraction", "step"])
    df = pd.concat(frames, ignore_index=True)
    head = RUN_COLUMNS + ["at_fraction", "step"]
    df = df[head + [c for c in df.columns if c not in head]]
    return df.merge(meta[["run_id", "run_dir"]], on="run_id", how="left")   # the order the folds are drawn in


def make_predictors(rows: pd.DataFrame, out: Path, scale: str, threshold: float = 0.5, id_min: float = 0.9,
                    n_boot: int = 1000) -> Made:
    """The run table -> the tables and files of the module docstring."""
    from anchorlab.io import atomic_write
    from anchorlab.papers.plots.predictors import plot_auc
    from anchorlab.plots.save import save_figure
    from anchorlab.papers.reproduce.predictors_fit import VERDICT_COLUMNS, fit_verdict, study_auc, verdict_table, with_design

    study = with_design(study_rows(rows, FRACTIONS, threshold, id_min))
    if study.empty:
        return {"runs": study}, {}
    auc = study_auc(study, n_boot=n_boot)
    import pandas as pd

    verdict = verdict_table(study) if study.outcome.isin(["composes", "memorizes"]).any() else \
        pd.DataFrame(columns=VERDICT_COLUMNS)
    files: dict[str, Path] = {}
    if len(auc) and auc.auc.notna().any():
        files["predictors.png"] = save_figure(plot_auc(auc, fractions=EARLY), out / "predictors", formats=("png",),
                                              dpi=130)[0]
    try:
        vm = fit_verdict(study, 0.1, 3, verdict)
        files["verdict_model.json"] = atomic_write(out / "verdict_model.json", lambda p: p.write_text(vm.to_json()))
    except ValueError as e:   # no labelled runs at 10%, or no run directory to read the setting from
        log.warning("verdict model not fitted: %s", e)
    return {"runs": study.drop(columns="run_dir"), "auc": auc, "verdict": verdict}, files


def _outcomes(t: pd.DataFrame) -> str:
    runs = t.drop_duplicates("run_id")
    counts = runs.outcome.value_counts()
    return " / ".join(f"{int(counts.get(k, 0))} {k}" for k in ("composes", "memorizes", "neither", "unfit"))


def _best_early_auc(t: pd.DataFrame) -> float:
    e = t[t.at_fraction.isin(EARLY)] if len(t) else t
    return float((e.auc - 0.5).abs().max() + 0.5) if len(e) and e.auc.notna().any() else math.nan


register(Figure(
    id="study-predictors", cids=("EV",), paper="study", number="early predictors",
    shows="at one init (gamma 0.45, width 128), the seeds alone decide composing vs memorizing: AUC of early "
          "measurements (complexity, attention, the held-out pair's margin) and a held-out logistic early verdict",
    sweeps={"cpu": "predictors_cpu"},
    tables=make_predictors,
    readings=(
        Reading("outcomes at one init (final metrics): composes / memorizes / neither / unfit",
              "the papers: the init decides (no seed-level spread reported)", lambda t: _outcomes(t["runs"])),
        Reading("the strongest single early feature (0-10% of training): max |AUC - 0.5| + 0.5", "not in the papers",
              lambda t: _best_early_auc(t["auc"])),
        Reading("early verdict at 10% of training, margin/pair alone, cross-validated AUC", "not in the papers",
              lambda t: value(t["verdict"], "auc", {"at_fraction": 0.1, "model": "margin/pair", "validation": "cv"})),
        Reading("early verdict at 10%, three best features, cross-validated AUC", "not in the papers",
              lambda t: value(t["verdict"], "auc", {"at_fraction": 0.1, "model": "top3", "validation": "cv"})),
    ),
    rules={"cpu": "the demo's small arm (demo/small, gamma 0.45, width 128, the demo's clock), float32; data seed 0 x "
                  "init seeds 0-19 and init seed 0 x data seeds 1-20; evaluations every 5% of training"},
    notes="cpu only: a study of the demo's seeds, not a paper figure. `--from-table docs/figures/predictors_cpu_runs.csv "
          "--no-train` redraws the committed study (the verdict model needs the run directories).",
    extra="analysis"))

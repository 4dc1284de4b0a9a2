"""The early-predictor study's statistics: AUC per feature and time, a cross-validated logistic verdict, and
the verdict model fitted on the study's runs (docs/predictors.md, "The CPU study").

Input: one row per (run, fraction of training) with :data:`RUN_COLUMNS` (the run table's names and ``outcome``),
``at_fraction``, ``step`` and the features (:func:`anchorlab.papers.reproduce.figures_predictors.study_rows`);
``outcome`` is each run's solution by final metrics (:func:`anchorlab.eval.solution.outcome`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from anchorlab.papers.analysis.verdict import SEEDS, VerdictModel, flat_identity

EARLY = (0.0, 0.05, 0.1)              # the fractions of training the verdicts read (before the outcome is seen)
RUN_COLUMNS = ["run_id", "train.data_seed", "train.init_seed", "init.gamma", "final.id_acc",
               "final.ood_inferential_acc", "final.ood_symmetric_acc", "best.ood_inferential_acc",
               "best.ood_symmetric_acc", "outcome"]
VERDICT_COLUMNS = ["at_fraction", "model", "validation", "auc", "accuracy", "n_runs", "n_composes"]


def feature_columns(rows: pd.DataFrame) -> list[str]:
    """The feature columns of :func:`study_rows` (everything that is not run metadata)."""
    return [c for c in rows.columns if c not in RUN_COLUMNS and c not in ("at_fraction", "step", "design", "run_dir")]


def study_auc(rows: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """AUC of every feature at every fraction for "composes" (positive) vs "memorizes" (the runs that
    neither compose nor memorize, or do not fit, are left out)."""
    from anchorlab.papers.analysis.auc import auc_table

    d = rows[rows.outcome.isin(["composes", "memorizes"])].assign(composes=lambda x: x.outcome == "composes")
    return auc_table(d, "composes", feature_columns(rows), "at_fraction", n_boot=n_boot, seed=seed)


def _pipeline(k: int | None):
    from sklearn.feature_selection import SelectKBest, f_classif
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    steps = [StandardScaler()] + ([SelectKBest(f_classif, k=k)] if k else [])
    return make_pipeline(*steps, LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000))


def _scores(y_true: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    from anchorlab.papers.analysis.auc import mann_whitney_auc

    return mann_whitney_auc(p, y_true), float(np.mean((p >= 0.5) == y_true))


def _model(k: int | str | None, cols: list[str]) -> tuple[str, list[int], int | None]:
    """(name, feature column indices, k for the F-test selection) of a model spec: None = all features,
    an int = the k best, a feature name = that feature alone (a model chosen before seeing the data)."""
    if isinstance(k, str):
        return k, [cols.index(k)] if k in cols else [], None
    k_eff = None if k is None or k >= len(cols) else k
    return ("all" if k_eff is None else f"top{k_eff}"), list(range(len(cols))), k_eff


def verdict_table(rows: pd.DataFrame, fractions: Sequence[float] = EARLY,
                  ks: Sequence[int | str | None] = (None, 3, "margin/pair"),
                  split_col: str = "design", folds: int = 5, repeats: int = 20) -> pd.DataFrame:
    """Held-out accuracy of a logistic model ("composes" vs "memorizes") on the features at each fraction.

    Models: standardized features -> L2 logistic regression (C 1, balanced classes) on all features
    (``all``), on the ``k`` best by an F test chosen inside each training fold (``top{k}``), so no
    held-out run informs the fit, or on one named feature (default ``margin/pair``, the direct probe of
    the held-out pair's answer). Validation: stratified ``folds``-fold cross-validation repeated
    ``repeats`` times with shuffled folds (``cv``; fewer folds when a class has fewer runs), the AUC
    and accuracy of each repeat's held-out probabilities averaged over repeats (leave-one-out is not
    used: its AUC is biased low, to 0 for an uninformative feature, because leaving a run out shifts
    the training class balance against it); and, when ``split_col`` is a column with two values,
    training on one and testing on the other (``<a>-><b>``). AUC is the Mann-Whitney AUC of the
    held-out probabilities; accuracy thresholds them at 0.5.
    """
    from anchorlab.extras import require

    require("sklearn", "the early-verdict study (pip install 'anchorlab[analysis]')")
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    feats = feature_columns(rows)
    out = []
    d = rows[rows.outcome.isin(["composes", "memorizes"])]
    for f in fractions:
        g = d[np.isclose(d.at_fraction, f)]
        cols = [c for c in feats if g[c].notna().all() and g[c].std() > 0]
        y = (g.outcome == "composes").to_numpy()
        if len(g) < 4 or y.all() or not y.any():
            continue
        for k in ks:
            name, idx, k_eff = _model(k, cols)
            if not idx:
                continue
            X = g[[cols[i] for i in idx]].to_numpy(np.float64)
            n_splits = min(folds, int(y.sum()), int((~y).sum()))
            if n_splits >= 2:
                reps = [_scores(y, cross_val_predict(
                    _pipeline(k_eff), X, y, method="predict_proba",
                    cv=StratifiedKFold(n_splits, shuffle=True, random_state=r))[:, 1]) for r in range(repeats)]
                auc, acc = np.mean(reps, axis=0)
                out.append({"at_fraction": f, "model": name, "validation": "cv", "auc": float(auc),
                            "accuracy": float(acc), "n_runs": len(g), "n_composes": int(y.sum())})
            if split_col in g.columns and g[split_col].nunique() == 2:
                for a, b in (sorted(g[split_col].unique()), sorted(g[split_col].unique())[::-1]):
                    tr, te = (g[split_col] == a).to_numpy(), (g[split_col] == b).to_numpy()
                    if y[tr].all() or not y[tr].any() or y[te].all() or not y[te].any():
                        continue
                    p = _pipeline(k_eff).fit(X[tr], y[tr]).predict_proba(X[te])[:, 1]
                    auc, acc = _scores(y[te], p)
                    out.append({"at_fraction": f, "model": name, "validation": f"{a}->{b}", "auc": auc,
                                "accuracy": acc, "n_runs": int(te.sum()), "n_composes": int(y[te].sum())})
    return pd.DataFrame(out, columns=VERDICT_COLUMNS)


def fit_verdict(rows: pd.DataFrame, at_fraction: float, k: int | str | None = 3,
                verdict: pd.DataFrame | None = None) -> VerdictModel:
    """The logistic model of :func:`verdict_table` fitted on every "composes" / "memorizes" run at
    ``at_fraction``, as a :class:`~anchorlab.papers.analysis.verdict.VerdictModel`; its ``validation`` is the
    matching cross-validated row of ``verdict`` (computed when None) and its ``setting`` the config
    fields every run shares (seeds aside; needs the ``run_dir`` column)."""
    from anchorlab.train import config_of

    d = rows[rows.outcome.isin(["composes", "memorizes"]) & np.isclose(rows.at_fraction, at_fraction)]
    cols = [c for c in feature_columns(rows) if d[c].notna().all() and d[c].std() > 0]
    if d.empty or not cols:
        raise ValueError(f"fit_verdict: no labelled runs with features at fraction {at_fraction}")
    name, idx, k_eff = _model(k, cols)
    if not idx:
        raise ValueError(f"fit_verdict: feature {k!r} is not among the study's features at {at_fraction}")
    cols = [cols[i] for i in idx]
    pipe = _pipeline(k_eff).fit(d[cols].to_numpy(np.float64), (d.outcome == "composes").to_numpy())
    scaler, lr = pipe[0], pipe[-1]
    keep = pipe[1].get_support() if k_eff else np.ones(len(cols), bool)
    v = verdict if verdict is not None else verdict_table(rows, fractions=(at_fraction,), ks=(k,))
    val = v[np.isclose(v.at_fraction, at_fraction) & (v.model == name) & (v.validation == "cv")]
    flats = [flat_identity(config_of(r)) for r in d.run_dir.unique() if (Path(str(r)) / "config.yaml").exists()]
    if not flats:
        raise ValueError("fit_verdict: none of the runs' directories is at hand to read the fitted setting")
    setting = {key: val0 for key, val0 in flats[0].items()
               if key not in SEEDS and all(f.get(key) == val0 for f in flats[1:])}
    return VerdictModel(
        at_fraction=float(at_fraction), features=tuple(np.array(cols)[keep]),
        mean=tuple(float(x) for x in scaler.mean_[keep]), scale=tuple(float(x) for x in scaler.scale_[keep]),
        coef=tuple(float(x) for x in lr.coef_[0]), intercept=float(lr.intercept_[0]),
        validation={**(val.iloc[0][["auc", "accuracy", "n_runs", "n_composes"]].to_dict() if len(val) else {}),
                    "how": f"{name} features, stratified 5-fold CV x 20 repeats on the study's runs"},
        setting=setting)


def with_design(rows: pd.DataFrame) -> pd.DataFrame:
    """Add ``design``: ``init_varied`` (data seed 0) or ``data_varied`` (init seed 0, data seed > 0)."""
    return rows.assign(design=np.where(rows["train.data_seed"] == 0, "init_varied", "data_varied"))

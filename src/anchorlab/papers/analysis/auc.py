"""AUC of run-level features for a binary outcome, with a bootstrap interval; features of a run
directory at fractions of training (see docs/predictors.md).

AUC is the Mann-Whitney statistic: with ``P`` the feature values of the positive runs (label
true, e.g. "composes") and ``N`` those of the negative runs,
``AUC = mean over (p, n) in P x N of [p > n] + 0.5 [p == n]``: 1 when every positive run scores
above every negative one, 0 when below, 0.5 for no separation. Runs whose feature or label is
missing are left out. The interval is the percentile bootstrap over runs, resampling the positive
and the negative runs separately (class sizes fixed), from ``numpy.random.default_rng(seed)``
afresh for every (feature, time) cell, so a cell's interval does not depend on the other cells.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from anchorlab.config import ConfigError

AUC_COLUMNS = ["feature", "at_fraction", "auc", "auc_lo", "auc_hi", "n_runs"]


def _wins(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """(n_pos, n_neg) matrix of 1 (pos > neg), 0.5 (tie), 0 (pos < neg)."""
    d = pos[:, None] - neg[None, :]
    return (d > 0) + 0.5 * (d == 0)


def mann_whitney_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """AUC of ``scores`` (n,) for boolean ``labels`` (n,), ties 0.5; NaN when a class is empty."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    if s.shape != y.shape:
        raise ConfigError(f"scores and labels must have the same length, got {s.shape} and {y.shape}")
    pos, neg = s[y], s[~y]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    return float(_wins(pos, neg).mean())


def bootstrap_auc(scores: Sequence[float], labels: Sequence[bool], n_boot: int = 1000, seed: int = 0,
                  level: float = 0.95) -> tuple[float, float, float]:
    """(auc, lo, hi): the AUC and the ``level`` percentile interval of ``n_boot`` resamples that draw
    the positive and the negative runs with replacement within their class. NaNs when a class is
    empty; lo = hi = NaN when ``n_boot`` is 0."""
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level: must be in (0, 1), got {level!r}")
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan"), float("nan"), float("nan")
    W = _wins(pos, neg)                                                   # (n_pos, n_neg)
    auc = float(W.mean())
    if n_boot <= 0:
        return auc, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    ip = rng.integers(0, len(pos), size=(n_boot, len(pos)))
    ineg = rng.integers(0, len(neg), size=(n_boot, len(neg)))
    boots = W[ip[:, :, None], ineg[:, None, :]].mean(axis=(1, 2))       # (n_boot,)
    a = (1.0 - level) / 2
    lo, hi = np.quantile(boots, [a, 1.0 - a])
    return auc, float(lo), float(hi)


def auc_table(df: pd.DataFrame, label_col: str, feature_cols: Sequence[str], at_col: str,
              n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """One row per (feature, value of ``at_col``): columns ``feature, at_fraction, auc, auc_lo, auc_hi, n_runs``.

    ``df``: one row per (run, time) with a boolean-like ``label_col`` (true = positive class),
    the features and ``at_col`` (e.g. the fraction of training). ``n_runs`` counts the runs with
    both a label and the feature at that time. Rows are in ``feature_cols`` order, times ascending.
    """
    missing = [c for c in [label_col, at_col, *feature_cols] if c not in df.columns]
    if missing:
        raise ConfigError(f"auc_table: missing columns {missing}; have {list(df.columns)}")
    rows = []
    for f in feature_cols:
        for at, g in df.groupby(at_col, sort=True):
            g = g[g[label_col].notna() & g[f].notna()]
            auc, lo, hi = bootstrap_auc(g[f].to_numpy(np.float64), g[label_col].astype(bool).to_numpy(),
                                        n_boot, seed, level)
            rows.append({"feature": f, "at_fraction": at, "auc": auc, "auc_lo": lo, "auc_hi": hi, "n_runs": len(g)})
    return pd.DataFrame(rows, columns=AUC_COLUMNS)


def features_at_fractions(run_dir: str | Path, fractions: Sequence[float] = (0.0, 0.05, 0.1),
                          prefix: str = "pred/") -> pd.DataFrame:
    """The logged features (metrics named ``prefix...``) of one run at fractions of its training.

    Reads ``metrics.jsonl``; for each fraction f takes the evaluation row whose step is nearest to
    ``f x total_steps`` (total from the run's config). Columns: ``run_dir, at_fraction, step`` and
    the features with the prefix removed; one row per fraction. A run without such rows is an error
    (train it with ``train.log_predictors=true``).
    """
    from anchorlab.train import config_of, steps_plan

    run_dir = Path(run_dir)
    path = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    rows = [r for r in rows if any(k.startswith(prefix) for k in r)]
    if not rows:
        raise ConfigError(f"run {run_dir}: no '{prefix}*' metrics in metrics.jsonl (train with train.log_predictors=true)")
    cfg = config_of(run_dir)
    _, total, every = steps_plan(cfg, cfg.task.n_train)   # the anchor task's training set has exactly n_train rows
    steps = np.array([r["step"] for r in rows])
    out = []
    for f in fractions:
        i = int(np.argmin(np.abs(steps - f * total)))
        r = rows[i]
        feats = {k[len(prefix):]: v for k, v in r.items() if k.startswith(prefix)}
        if abs(steps[i] - f * total) > every / 2 + 0.5:   # no logged evaluation near f: missing, not a neighbour's
            feats = {k: math.nan for k in feats}
        out.append({"run_dir": str(run_dir), "at_fraction": float(f), "step": int(r["step"]), **feats})
    return pd.DataFrame(out)

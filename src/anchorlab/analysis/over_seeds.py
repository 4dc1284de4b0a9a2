"""Numbers of several runs per group (e.g. one run per seed on each side of Fig. 2) as mean and spread.

:func:`spread_over_seeds` turns a per-run table (one row per run, a group column, numeric metric
columns) into one row per (group, metric): ``n`` (runs with a value), ``mean``, ``sd`` (sample
standard deviation, ddof 1; NaN for n < 2), ``min``, ``max``. A group with no run keeps its rows with
``n`` 0 and NaN numbers, so a side that has no run says so instead of vanishing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from anchorlab.config import ConfigError

SPREAD_COLUMNS = ["metric", "n", "mean", "sd", "min", "max"]


def spread_over_seeds(runs: pd.DataFrame, by: str, metrics: Sequence[str] | None = None,
                      groups: Sequence[object] | None = None) -> pd.DataFrame:
    """One row per (``by`` value, metric) in ``groups`` order (default: the values present, sorted), metrics
    in ``metrics`` order (default: every numeric column but ``by``). Columns: ``by``, :data:`SPREAD_COLUMNS`."""
    if by not in runs:
        raise ConfigError(f"by: the per-run table has no column {by!r}; columns: {', '.join(map(str, runs.columns))}")
    if metrics is None:
        metrics = [c for c in runs.columns if c != by and pd.api.types.is_numeric_dtype(runs[c])
                   and not pd.api.types.is_bool_dtype(runs[c])]
    missing = [m for m in metrics if m not in runs]
    if missing:
        raise ConfigError(f"metrics: the per-run table has no column(s) {', '.join(missing)}")
    groups = sorted(runs[by].unique()) if groups is None else list(groups)
    rows = []
    for g in groups:
        part = runs[runs[by] == g]
        for m in metrics:
            v = pd.to_numeric(part[m], errors="coerce").dropna().to_numpy(dtype=float)
            rows.append({by: g, "metric": m, "n": len(v), "mean": float(v.mean()) if len(v) else np.nan,
                         "sd": float(v.std(ddof=1)) if len(v) > 1 else np.nan,
                         "min": float(v.min()) if len(v) else np.nan, "max": float(v.max()) if len(v) else np.nan})
    return pd.DataFrame(rows, columns=[by, *SPREAD_COLUMNS])


def group_mean(spread: pd.DataFrame, by: str, group: object, metric: str) -> float:
    """The ``mean`` of ``metric`` in ``group`` of a :func:`spread_over_seeds` table; NaN when absent."""
    if spread.empty or by not in spread:
        return float("nan")
    row = spread[(spread[by] == group) & (spread.metric == metric)]
    return float(row["mean"].iloc[0]) if len(row) else float("nan")


__all__ = ["SPREAD_COLUMNS", "spread_over_seeds", "group_mean"]

"""Tables of the journal's reasoning checks (Fig. 7C addition, Fig. 7E PrOntoQA); pure compute, figures in
:mod:`anchorlab.plots.reasoning`.

* :func:`compute_addition_grid` (analysis ``addition-grid``): every a + b of
  a trained addition run decoded greedily -> one row per (a, b) and the
  accuracy per split (train / id / ood = the held-out square).
* :func:`grid_mean`: the (a, b) accuracy of several runs averaged (seeds).
* :func:`convergence_table`: per run, the first epoch where a metric reaches a
  threshold (NaN if never), the metrics there and at the end, and the
  generalization error (train - test), from a run table and its history table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from anchorlab.config import ConfigError, check_range

if TYPE_CHECKING:
    from anchorlab.train import RunResult

Tables = dict[str, pd.DataFrame]


@dataclass(frozen=True)
class AdditionGridOptions:
    """``batch_size``: prompts decoded at once."""

    batch_size: int = 1024

    def __post_init__(self) -> None:
        check_range("batch_size", self.batch_size, 1)


def compute_addition_grid(run: RunResult, opts: AdditionGridOptions) -> Tables:
    """``grid``: a, b, split, target, prediction, correct (10,000 rows); ``summary``: split, n, accuracy."""
    from anchorlab.tasks.seq2seq.addition import grid_predictions

    if run.cfg.task.name != "addition":
        raise ConfigError(f"analysis addition-grid: needs an addition run, got task {run.cfg.task.name!r}")
    device = next(run.model.parameters()).device
    grid = grid_predictions(run.model, run.cfg.task, opts.batch_size, device)
    return {"grid": grid, "summary": split_summary(grid)}


def split_summary(grid: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per split of a grid table (columns split, n, accuracy), splits in train/id/ood order."""
    s = grid.groupby("split").correct.agg(n="size", accuracy="mean").reset_index()
    order = {k: i for i, k in enumerate(("train", "id", "ood"))}
    return s.sort_values("split", key=lambda c: c.map(order)).reset_index(drop=True)


def grid_mean(grids: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Mean ``correct`` per (a, b) over runs (columns a, b, split, accuracy, n_runs)."""
    if not grids:
        raise ConfigError("grids: need at least one grid table")
    df = pd.concat(grids, ignore_index=True)
    out = df.groupby(["a", "b", "split"]).correct.agg(accuracy="mean", n_runs="size").reset_index()
    return out


def first_reach(history: Sequence[Mapping[str, Any]], metric: str, threshold: float) -> dict[str, Any] | None:
    """The first evaluation row after step 0 with ``metric >= threshold``; None if none."""
    for row in history:
        v = row.get(metric)
        if row.get("step", 0) > 0 and isinstance(v, (int, float)) and math.isfinite(v) and v >= threshold:
            return dict(row)
    return None


def convergence_table(rows: pd.DataFrame, history: pd.DataFrame, metric: str = "train_acc",
                      threshold: float = 0.99, train: str = "train_acc", test: str = "test_acc",
                      axes: Sequence[str] = ("task.n_train", "init.gamma", "optim.weight_decay", "train.init_seed")
                      ) -> pd.DataFrame:
    """One row per run of a run table (:func:`anchorlab.sweep.runtable.run_table`; its evaluations from the
    history table ``history``, :func:`anchorlab.sweep.runtable.history_table`): the ``axes`` values,
    ``status``, ``converged_epoch`` / ``converged_step`` (first evaluation with ``metric >= threshold``; NaN
    if the run never got there), ``train`` and ``test`` at that evaluation and at the end, and
    ``gen_error`` = train - test at convergence (else at the end)."""
    check_range("threshold", threshold)
    out = []
    for _, f in rows.iterrows():
        hist = _evaluations(history, f.run_id)
        hit = first_reach(hist, metric, threshold)
        last = hist[-1] if hist else {}
        row: dict[str, Any] = {k: _value(f.get(k)) for k in axes}
        at = hit or last
        row.update({"status": f.get("status"), "steps": _value(f.get("steps")),
                    "converged_epoch": hit["epoch"] if hit else math.nan,
                    "converged_step": hit["step"] if hit else math.nan,
                    "train_at": at.get(train, math.nan), "test_at": at.get(test, math.nan),
                    "train_final": last.get(train, math.nan), "test_final": last.get(test, math.nan)})
        row["gen_error"] = row["train_at"] - row["test_at"]
        row.update({f"{k}_at": v for k, v in at.items() if k.startswith(f"{test}/")})
        row["wall_seconds"] = f.get("wall_seconds", math.nan)
        out.append(row)
    return pd.DataFrame(out)


def _evaluations(history: pd.DataFrame, run_id: str) -> list[dict[str, Any]]:
    """One run's rows of a history table, in order, each without ``run_id`` and the metrics it lacks (NaN)."""
    rows = history[history.run_id == run_id].drop(columns="run_id").to_dict("records")
    return [{k: v for k, v in r.items() if _value(v) is not None} for r in rows]


def _value(v: Any) -> Any:
    """A run-table cell as a plain value: None for a missing one (NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v.item() if hasattr(v, "item") else v

"""Headline mechanism numbers of several runs side by side (:func:`compare_runs`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from anchorlab.config import check_range
from anchorlab.analysis.similarity import contrast_of
from anchorlab.analysis.mechanism.flow import FlowScoresOptions, compute_flow_scores
from anchorlab.analysis.mechanism.masks import MaskAnchor2Options, anchor2_masked_cosines
from anchorlab.analysis.mechanism.representations import CosAo2Options, CosV2Options, compute_cos_ao2, compute_cos_v2

if TYPE_CHECKING:
    from anchorlab.train import RunResult

FINAL_METRICS = ("id_acc", "ood_inferential_acc", "ood_symmetric_acc", "commutativity")
FLOW_COLUMNS = ("last->key", "last->anchors", "anchors->key")


@dataclass(frozen=True)
class CompareRunsOptions:
    """The keyword arguments of :func:`compare_runs`: flow inputs, filler draws per probe matrix, seed."""

    n_inputs: int = 1000
    n_draws: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        check_range("n_inputs", self.n_inputs, 1)
        check_range("n_draws", self.n_draws, 1)


def _overall(summary: pd.DataFrame) -> float:
    return float(summary[summary.block == "all"].value.iloc[0])


def run_summary(run: RunResult, n_inputs: int = 1000, n_draws: int = 4, seed: int = 0) -> dict[str, Any]:
    """Headline mechanism numbers of one loaded run (the columns of :func:`compare_runs` after ``gamma``)."""
    fin = (run.final or {}).get("final", {})
    row: dict[str, Any] = {k: fin.get(k, np.nan) for k in FINAL_METRICS}
    summ = compute_flow_scores(run, FlowScoresOptions(n_inputs=n_inputs, by_pair=False, seed=seed))["summary"]
    for layer in sorted(set(summ.layer))[:2]:
        s = summ[summ.layer == layer].set_index("edge").score
        for e in FLOW_COLUMNS:
            row[f"L{layer} {e}"] = float(s.get(e, np.nan))
    for center in (False, True):
        tag = " centered" if center else ""
        ao = compute_cos_ao2(run, CosAo2Options(n_draws=n_draws, seed=seed, center=center))
        v = compute_cos_v2(run, CosV2Options(n_draws=n_draws, seed=seed, center=center))
        row[f"contrast X_ao(2){tag}"] = _overall(ao["summary"])
        row[f"contrast V(2){tag}"] = _overall(v["summary"])
        masked = anchor2_masked_cosines(run, MaskAnchor2Options(n_draws=n_draws, seed=seed, center=center))
        row[f"contrast anchor2-masked{tag}"] = contrast_of(masked)
    return row


def compare_runs(runs: Sequence[str | Path | RunResult], n_inputs: int = 1000, n_draws: int = 4,
                 seed: int = 0) -> pd.DataFrame:
    """One row per run (a run directory or a loaded :class:`~anchorlab.train.RunResult`).

    Columns: ``run``, ``gamma``, final accuracies (NaN without final.json), flow
    scores of layers 0 and 1 (``L0 last->key``, ``L0 last->anchors``, ``L0
    anchors->key``, ``L1 ...``; layers 0-based, head-averaged, on ``n_inputs``
    inputs) and the equal-target cosine contrasts of the X_ao(2), V(2) and
    second-anchor-masking experiments (defaults of each analysis otherwise),
    raw (the papers' cosine) and centered (probe mean subtracted).
    """
    from anchorlab.train import load_run

    rows = []
    for r in runs:
        run = load_run(r) if isinstance(r, (str, Path)) else r
        rows.append({"run": str(run.run_dir), "gamma": run.cfg.init.gamma,
                     **run_summary(run, n_inputs, n_draws, seed)})
    return pd.DataFrame(rows)


__all__ = ["CompareRunsOptions", "compare_runs", "run_summary"]

"""The ``early-verdict`` analysis: a run's early predictors -> will it compose or memorize (4,3)?

The run's features at the verdict model's fraction of training (logged with ``train.log_predictors``;
fraction 0 is computed from the config when none were logged) go through a
:class:`~anchorlab.papers.analysis.verdict.VerdictModel` (``model=FILE``, or by default the model fitted on
``predictors_cpu``, read from ``early_verdict_demo.json`` in the figures folder: ``$ANCHORLAB_FIGURES``, else a
clone's ``docs/figures/``; absent, the analysis stops with one line saying where to put it): the probability
of composing, the verdict, the run's actual outcome when it has finished, each feature's contribution,
and the config fields in which the run differs from the setting the model was fitted in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from anchorlab.config import ConfigError
from anchorlab.config.base import check_range
from anchorlab.papers.analysis.verdict import load_verdict, outcome

if TYPE_CHECKING:
    from anchorlab.train import RunResult


@dataclass(frozen=True)
class EarlyVerdictOptions:
    model: str | None = None      # a verdict model JSON; None -> the figures folder's early_verdict_demo.json
    threshold: float = 0.5        # p(composes) at or above which the verdict is "composes"

    def __post_init__(self) -> None:
        check_range("threshold", self.threshold, 0.0, 1.0, lo_open=True, hi_open=True)


def run_features_at(run_dir: str | Path, cfg: Any, at_fraction: float) -> tuple[int, dict[str, float]]:
    """(step, features) of a run at ``at_fraction`` of training: the logged predictors, or at
    fraction 0 the features of the init (computed from the config) when none were logged."""
    from anchorlab.papers.analysis.auc import features_at_fractions
    from anchorlab.papers.analysis.predictors import features_at_init

    try:
        row = features_at_fractions(run_dir, (at_fraction,)).iloc[0]
    except ConfigError:
        if at_fraction != 0:
            raise
        return 0, features_at_init(cfg)
    return int(row["step"]), {k: v for k, v in row.items() if k not in ("run_dir", "at_fraction", "step")}


def compute_early_verdict(run: RunResult, opts: EarlyVerdictOptions) -> dict[str, pd.DataFrame]:
    """Tables ``verdict`` (one row) and ``features`` (each feature's contribution)."""
    vm = load_verdict(opts.model)
    step, feats = run_features_at(run.run_dir, run.cfg, vm.at_fraction)
    contrib = vm.contributions(feats)
    p = vm.p_composes(feats)
    fin = run.final.get("final", {}) if run.final else {}
    actual = (outcome(fin.get("id_acc", math.nan), fin.get("ood_inferential_acc", math.nan),
                      fin.get("ood_symmetric_acc", math.nan)) if run.final.get("status") else "unfinished")
    diffs = vm.differences(run.cfg)
    verdict = pd.DataFrame([{"at_fraction": vm.at_fraction, "step": step, "p_composes": p,
                             "verdict": "composes" if p >= opts.threshold else "memorizes", "outcome": actual,
                             "validated_auc": vm.validation.get("auc", math.nan),
                             "validated_accuracy": vm.validation.get("accuracy", math.nan),
                             "setting_differs": "; ".join(diffs)}])
    return {"verdict": verdict, "features": contrib}

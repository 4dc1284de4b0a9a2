"""An early verdict: will a run compose or memorize the held-out pair (4,3), read from its early predictors.

A :class:`VerdictModel` is a logistic model on standardized predictor features (docs/predictors.md)
at one fraction of training, fitted on a predictor study's runs by
:func:`anchorlab.papers.reproduce.predictors_fit.fit_verdict` and stored as JSON with its held-out validation and the
setting it was fitted in (every config field shared by the study's runs, seeds aside). It is a
statement about that setting: applied to a run of another setting, the analysis says which fields
differ.

The model fitted on ``predictors_cpu`` is a research output, not package data: it is read from
``early_verdict_demo.json`` in the figures folder (:func:`anchorlab.io.figures_dir`: ``$ANCHORLAB_FIGURES``,
else the clone's ``docs/figures/``). Where that file is absent (a plain ``pip install``) the analysis says
so in one line and the training callback logs no verdict; ``--option model=FILE`` names any other model.

* :func:`outcome` names a trained run's solution (the study's label).
* :mod:`anchorlab.papers.analysis.early_verdict` applies a model to a run (the ``early-verdict`` analysis);
  the training callback of :mod:`anchorlab.papers.analysis.predictors` logs it during training.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from anchorlab.config import ConfigError
from anchorlab.eval.solution import outcome  # noqa: F401  (the solution label: eval owns it)

MODEL_FILE = "early_verdict_demo.json"   # the model fitted on predictors_cpu, in the figures folder
SEEDS = ("name", "train.data_seed", "train.init_seed")   # not part of a fitted setting: the label and the seeds


def flat_identity(cfg: Any) -> dict[str, Any]:
    """A config's identity fields as ``{"section.field": value}`` (nested values JSON-encoded)."""
    from anchorlab.config.base import identity_dict

    out: dict[str, Any] = {}
    for sec, fields in identity_dict(cfg).items():
        if isinstance(fields, Mapping):
            for k, v in fields.items():
                out[f"{sec}.{k}"] = v if isinstance(v, (int, float, str, bool, type(None))) else json.dumps(v,
                                                                                                           sort_keys=True)
        else:
            out[sec] = fields
    return out


@dataclass(frozen=True)
class VerdictModel:
    """``p(composes) = sigmoid(intercept + sum_i coef_i (x_i - mean_i) / scale_i)`` over ``features`` at
    ``at_fraction`` of training."""

    at_fraction: float
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    validation: dict[str, Any] = field(default_factory=dict)   # auc, accuracy, n_runs, how
    setting: dict[str, Any] = field(default_factory=dict)      # config fields shared by the fitted runs

    def __post_init__(self) -> None:
        n = len(self.features)
        if not n or any(len(v) != n for v in (self.mean, self.scale, self.coef)):
            raise ConfigError("verdict model: features, mean, scale and coef must be non-empty and of one length")

    def contributions(self, feats: Mapping[str, float]) -> pd.DataFrame:
        """One row per feature: value, standardized value, coefficient, contribution to the logit."""
        missing = [f for f in self.features if f not in feats or not math.isfinite(float(feats[f]))]
        if missing:
            raise ConfigError(f"verdict model: the run lacks feature(s) {', '.join(missing)} at "
                              f"{self.at_fraction:.0%} of training (train it with train.log_predictors=true)")
        rows = []
        for f, m, s, c in zip(self.features, self.mean, self.scale, self.coef):
            z = (float(feats[f]) - m) / s
            rows.append({"feature": f, "value": float(feats[f]), "standardized": z, "coef": c, "contribution": c * z})
        return pd.DataFrame(rows)

    def p_composes(self, feats: Mapping[str, float]) -> float:
        logit = self.intercept + float(self.contributions(feats).contribution.sum())
        return 1.0 / (1.0 + math.exp(-logit))

    def differences(self, cfg: Any) -> list[str]:
        """``field: run value != fitted value`` for every setting field in which ``cfg`` differs."""
        mine = flat_identity(cfg)
        return [f"{k}: {mine.get(k)!r} != {v!r}" for k, v in sorted(self.setting.items()) if mine.get(k) != v]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> VerdictModel:
        d = json.loads(text)
        return cls(**{**d, **{k: tuple(d[k]) for k in ("features", "mean", "scale", "coef")}})


def default_model_path() -> Path:
    """Where the default verdict model (fitted on ``predictors_cpu``) is read from; it may be absent."""
    from anchorlab.io import figures_dir

    return figures_dir() / MODEL_FILE


def load_verdict(path: str | Path | None = None) -> VerdictModel:
    """The verdict model at ``path``; the default one (:func:`default_model_path`) when None."""
    if path is None:
        from anchorlab.io import MissingResult, figures_file

        try:
            p = figures_file(MODEL_FILE, "early-verdict: the default verdict model")
        except MissingResult as e:
            raise ConfigError(f"{e}; or name a model with --option model=FILE") from None
    else:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"early-verdict: model={p}: no such file (a verdict model JSON)")
    return VerdictModel.from_json(p.read_text())

"""An early verdict: will a run compose or memorize the held-out pair (4,3), read from its early predictors.

A :class:`VerdictModel` is a logistic model on standardized predictor features (docs/predictors.md)
at one fraction of training, fitted on a predictor study's runs by
:func:`anchorlab.predictor_study.fit_verdict` and stored as JSON with its held-out validation and the
setting it was fitted in (every config field shared by the study's runs, seeds aside). It is a
statement about that setting: applied to a run of another setting, the analysis says which fields
differ.

* :func:`outcome` names a trained run's solution (the study's label).
* :mod:`anchorlab.analysis.early_verdict` applies a model to a run (the ``early-verdict`` analysis);
  the training callback of :mod:`anchorlab.analysis.predictors` logs it during training.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..config import ConfigError

BUILTIN = Path(__file__).with_name("early_verdict_demo.json")
SEEDS = ("name", "train.data_seed", "train.init_seed")   # not part of a fitted setting: the label and the seeds


def outcome(id_acc: float, inferential: float, symmetric: float, threshold: float = 0.5,
            id_min: float = 0.9) -> str:
    """A trained run's solution of the held-out pair: ``unfit`` below ``id_min`` ID accuracy; else
    ``composes`` / ``memorizes`` when the inferential / symmetric accuracy reaches ``threshold`` (the
    journal's 0.5; the two answers differ, so at most one can pass 0.5), ``neither`` otherwise. A
    mapping the task does not define (NaN, e.g. no mirror pair) never passes and never outranks the other."""
    if not id_acc >= id_min:
        return "unfit"
    if inferential >= threshold and not symmetric >= inferential:
        return "composes"
    if symmetric >= threshold and not inferential >= symmetric:
        return "memorizes"
    return "neither"


def flat_identity(cfg: Any) -> dict[str, Any]:
    """A config's identity fields as ``{"section.field": value}`` (nested values JSON-encoded)."""
    from ..config.base import identity_dict

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


def load_verdict(path: str | Path | None = None) -> VerdictModel:
    """The verdict model at ``path``; the built-in one (fitted on ``predictors_cpu``) when None."""
    p = Path(path) if path is not None else BUILTIN
    if not p.exists():
        raise ConfigError(f"early-verdict: no verdict model at {p}" + (
            "" if path is not None else " (this install ships none: fit one with "
                                        "`python -m anchorlab.predictor_study SWEEP --fit-verdict FILE`)"))
    return VerdictModel.from_json(p.read_text())

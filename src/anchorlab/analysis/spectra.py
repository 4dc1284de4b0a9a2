"""Singular values and stable rank of weight matrices (journal §VI-C, Fig. 5C).

Stable rank
    ``srank(W) = ||W||_F^2 / ||W||_2^2 = sum_i s_i^2 / s_1^2`` with ``s_1 >= s_2 >= ...`` the
    singular values. It lies in ``[1, rank(W)]``, is invariant to scaling and to orthogonal
    transforms on either side, and is NaN for an all-zero matrix (0/0). The journal applies it
    to the first layer's query matrix with all heads merged, ``blocks.0.attn.W_Q.weight`` of
    shape ``(n_heads * d_head, d_model)``.

All numbers are computed in float64 on the CPU from a detached copy, so results do not depend
on the device or on the parameter's dtype.

:class:`ComplexityCallback` bundles stable rank, condensation (:mod:`.condensation`) and
embedding-structure scores (:mod:`.embedding`) into one flat ``{metric: float}`` dict for a
training loop to log at evaluation steps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from anchorlab.config import ConfigError
from anchorlab.analysis.condensation import condensation_scores
from anchorlab.analysis.embedding import (DEFAULT_TOKENS, covariance_participation_ratio, difference_consistency,
                        ordinal_probe_r2, ordinal_rank_correlation)

log = logging.getLogger(__name__)

DEFAULT_PARAM = "blocks.0.attn.W_Q.weight"


def _as_matrix(W: torch.Tensor, name: str = "W") -> torch.Tensor:
    """Detached float64 CPU copy of a 2-D tensor; ConfigError otherwise."""
    if not isinstance(W, torch.Tensor):
        raise ConfigError(f"{name}: must be a torch.Tensor, got {type(W).__name__}")
    if W.ndim != 2:
        raise ConfigError(f"{name}: must be a 2-D matrix, got shape {tuple(W.shape)}")
    if W.numel() == 0:
        raise ConfigError(f"{name}: must be non-empty, got shape {tuple(W.shape)}")
    return W.detach().to(device="cpu", dtype=torch.float64)


def as_param_dict(params: Mapping[str, torch.Tensor] | nn.Module) -> dict[str, torch.Tensor]:
    """``dict(model.named_parameters())`` for a module; a plain dict copy of a mapping/state_dict."""
    if isinstance(params, nn.Module):
        return dict(params.named_parameters())
    if isinstance(params, Mapping):
        return dict(params)
    raise ConfigError(f"params: must be an nn.Module or a mapping name -> tensor, got {type(params).__name__}")


def get_param(params: Mapping[str, torch.Tensor], name: str, arg: str = "name") -> torch.Tensor:
    """``params[name]``, or a ConfigError listing the 2-D parameter names that exist."""
    if name not in params:
        avail = [k for k, v in params.items() if isinstance(v, torch.Tensor) and v.ndim == 2]
        shown = ", ".join(repr(a) for a in avail[:12]) + (", ..." if len(avail) > 12 else "")
        raise ConfigError(f"{arg}: no parameter {name!r}; 2-D parameters are: {shown}")
    return params[name]


def singular_values(W: torch.Tensor) -> torch.Tensor:
    """Singular values of ``W`` (m, n), descending, float64, shape (min(m, n),)."""
    return torch.linalg.svdvals(_as_matrix(W))


def _stable_rank_from_sv(s: torch.Tensor) -> float:
    top = float(s[0])
    if top == 0.0:
        return math.nan
    return float((s / top).pow(2).sum())  # divide first: no under/overflow for tiny/huge weights


def stable_rank(W: torch.Tensor) -> float:
    """``||W||_F^2 / ||W||_2^2`` of ``W`` (m, n); in [1, min(m, n)]; NaN for the zero matrix."""
    return _stable_rank_from_sv(singular_values(W))


def stable_rank_table(params: Mapping[str, torch.Tensor] | nn.Module,
                      names: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per 2-D parameter (or per selected name), in parameter order.

    Columns: ``name``, ``shape`` (``"rowsxcols"``), ``stable_rank``, ``frobenius`` (||W||_F),
    ``spectral`` (||W||_2 = s_1), ``n_singular`` (min(rows, cols)). Selecting a name that is
    missing or not 2-D raises :class:`ConfigError`.
    """
    p = as_param_dict(params)
    if names is None:
        selected = [k for k, v in p.items() if isinstance(v, torch.Tensor) and v.ndim == 2]
    else:
        selected = [str(n) for n in names]
        for n in selected:
            if get_param(p, n, "names").ndim != 2:
                raise ConfigError(f"names: parameter {n!r} must be 2-D, got shape {tuple(p[n].shape)}")
    rows = []
    for n in selected:
        s = singular_values(p[n])
        rows.append({
            "name": n,
            "shape": "x".join(str(d) for d in p[n].shape),
            "stable_rank": _stable_rank_from_sv(s),
            "frobenius": float(s.pow(2).sum().sqrt()),
            "spectral": float(s[0]),
            "n_singular": int(s.numel()),
        })
    return pd.DataFrame(rows, columns=["name", "shape", "stable_rank", "frobenius", "spectral", "n_singular"])


@dataclass(frozen=True)
class ComplexityCallback:
    """Complexity metrics of a model as a flat dict, for logging next to accuracy.

    Called as ``cb(step, model)``; returns ``{}`` unless ``step % every == 0``. Keys:

    - ``stable_rank/<name>`` for each name in ``param_names``;
    - ``condensation/<score>`` (see :func:`condensation_scores`) of ``condensation_param``'s rows;
    - ``embedding/ordinal_spearman``, ``embedding/ordinal_r2``, ``embedding/diff_consistency_<s>``
      for each s in ``diff_steps``, ``embedding/cov_participation_ratio`` of ``embedding_param``'s
      rows ``token_ids``.

    Set ``condensation_param`` or ``embedding_param`` to ``None`` to skip that group. A missing
    parameter or a token id beyond the vocabulary raises :class:`ConfigError` on the first call.
    """

    param_names: tuple[str, ...] = (DEFAULT_PARAM, "embed.weight")
    every: int = 1
    condensation_param: str | None = DEFAULT_PARAM
    embedding_param: str | None = "embed.weight"
    token_ids: tuple[int, ...] = DEFAULT_TOKENS
    threshold: float = 0.9
    signed: bool = False
    n_components: int = 2
    diff_steps: tuple[int, ...] = (3, 4)

    def __post_init__(self) -> None:
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise ConfigError(f"every: must be an integer >= 1, got {self.every!r}")
        if isinstance(self.param_names, str):
            raise ConfigError("param_names: must be a tuple of parameter names, got a single string")
        object.__setattr__(self, "param_names", tuple(self.param_names))
        object.__setattr__(self, "token_ids", tuple(int(t) for t in self.token_ids))
        object.__setattr__(self, "diff_steps", tuple(int(s) for s in self.diff_steps))
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"threshold: must be in (0, 1], got {self.threshold!r}")
        if self.condensation_param is not None:  # fail before training, not at the first evaluation
            from anchorlab.extras import require
            require("scipy.cluster.hierarchy", "train.log_complexity (condensation clustering)")

    @torch.no_grad()
    def __call__(self, step: int, model: nn.Module | Mapping[str, torch.Tensor]) -> dict[str, float]:
        if step % self.every != 0:
            return {}
        p = as_param_dict(model)
        out: dict[str, float] = {}
        for n in self.param_names:
            out[f"stable_rank/{n}"] = stable_rank(get_param(p, n, "param_names"))
        if self.condensation_param is not None:
            W = get_param(p, self.condensation_param, "condensation_param")
            for k, v in condensation_scores(W, threshold=self.threshold, signed=self.signed).items():
                out[f"condensation/{k}"] = float(v)
        if self.embedding_param is not None:
            E = get_param(p, self.embedding_param, "embedding_param").detach().to("cpu", torch.float64)
            out["embedding/ordinal_spearman"] = ordinal_rank_correlation(E, self.token_ids, self.n_components)
            out["embedding/ordinal_r2"] = ordinal_probe_r2(E, self.token_ids, self.n_components)
            for s, v in difference_consistency(E, self.token_ids, self.diff_steps).items():
                out[f"embedding/diff_consistency_{s}"] = v
            out["embedding/cov_participation_ratio"] = covariance_participation_ratio(E, self.token_ids)
        log.debug("complexity metrics at step %d: %s", step, out)
        return out

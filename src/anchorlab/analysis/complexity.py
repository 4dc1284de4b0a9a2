"""Complexity analyses of any trained transformer run, as pure functions (tables out).

Each analysis is an options dataclass plus ``compute_<name>(run, opts) ->
{table name: DataFrame}`` (first table = the main one); figures live in
:mod:`anchorlab.plots.complexity`, and :mod:`anchorlab.analysis.registry` ties
names, options, files and figures together. See ``docs/complexity.md``.

  condensation   cosine of a matrix's rows (clustered order) + condensation scores   NeurIPS Fig. 5a,b
  embedding      PCA of token embeddings + ordinal scores                           NeurIPS Fig. 5c,d
  cov-spectrum   eigenvalues of the token-embedding covariance (final weights)      NeurIPS Fig. 7
  stable-rank    stable rank of every 2-D parameter                                 journal Fig. 5C

They read weights only, so they work for every task (anchor, SCAN, COGS,
pairs). Token defaults depend on the task: the anchor task studies tokens
40..79 (the papers' PCA plots); other tasks all token ids, or the first
:data:`MAX_DEFAULT_TOKENS` of a larger vocabulary. For the covariance spectrum
over training use :class:`~anchorlab.analysis.spectra.ComplexityCallback`.

Multi-run tables: :func:`complexity_summary` (scores of several runs side by
side) and :func:`sweep_stable_ranks` (journal Fig. 5C, used by the sweep report).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from anchorlab.config import ConfigError, check_range
from anchorlab.analysis.condensation import condensation_order, condensation_scores, cosine_matrix
from anchorlab.analysis.embedding import (DEFAULT_TOKENS, covariance_spectra_by_step, difference_consistency, embedding_pca,
                        ordinal_probe_r2, ordinal_rank_correlation)
from anchorlab.analysis.spectra import DEFAULT_PARAM, as_param_dict, get_param, stable_rank, stable_rank_table

if TYPE_CHECKING:
    from anchorlab.train import RunResult

log = logging.getLogger(__name__)

EMBEDDING = "embed.weight"
MAX_DEFAULT_TOKENS = 100
ANCHOR_DIFF_STEPS = (3, 4)  # the papers' +3 / +4 arrows (two anchors' shifts)


# ------------------------------------------------------------------ defaults per task
def default_token_ids(run: RunResult, given: Sequence[int] | None = None) -> list[int]:
    """``given``; else 40..79 on the anchor task, else every token id (the first
    :data:`MAX_DEFAULT_TOKENS` when the vocabulary is larger)."""
    if given is not None:
        return [int(t) for t in given]
    if run.cfg.task.name == "anchor":
        return list(DEFAULT_TOKENS)
    vocab = int(get_param(as_param_dict(run.model), EMBEDDING, "embedding").shape[0])
    if vocab > MAX_DEFAULT_TOKENS:
        log.info("%s run: vocabulary %d; using the first %d token ids", run.cfg.task.name, vocab, MAX_DEFAULT_TOKENS)
    return list(range(min(vocab, MAX_DEFAULT_TOKENS)))


def default_diff_steps(run: RunResult, given: Sequence[int] | None = None) -> tuple[int, ...]:
    """``given``; else (3, 4) on the anchor task, else none (token ids carry no arithmetic elsewhere)."""
    if given is not None:
        return tuple(int(s) for s in given)
    return ANCHOR_DIFF_STEPS if run.cfg.task.name == "anchor" else ()


def ordinal_scores(E: torch.Tensor, token_ids: Sequence[int], steps: Sequence[int]) -> dict[str, float]:
    """``ordinal_spearman``, ``ordinal_r2`` (2 PCs) and ``diff_consistency_<s>`` per step of ``E[token_ids]``."""
    out = {"ordinal_spearman": ordinal_rank_correlation(E, token_ids),
           "ordinal_r2": ordinal_probe_r2(E, token_ids)}
    if steps:
        out.update({f"diff_consistency_{s}": v for s, v in difference_consistency(E, token_ids, steps).items()})
    return out


def _matrix(run: RunResult, name: str, arg: str) -> torch.Tensor:
    return get_param(as_param_dict(run.model), name, arg)


# ------------------------------------------------------------------ options
@dataclass(frozen=True)
class CondensationOptions:
    """``param``: the matrix whose rows (neurons' input weights) are compared (default the
    first layer's merged query weights); ``threshold``: cosine above which rows count as one group."""

    param: str = DEFAULT_PARAM
    threshold: float = 0.9

    def __post_init__(self) -> None:
        check_range("threshold", self.threshold, 0.0, 1.0, lo_open=True)


@dataclass(frozen=True)
class EmbeddingOptions:
    """``tokens``: token ids to embed (None = the task's default, see the module doc);
    ``diff_steps``: steps s for the +s arrows and difference-consistency scores (None = (3, 4)
    on the anchor task, none otherwise)."""

    tokens: tuple[int, ...] | None = None
    diff_steps: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if 0 in (self.diff_steps or ()):
            raise ConfigError(f"diff_steps: must be nonzero, got {list(self.diff_steps)}")


@dataclass(frozen=True)
class CovSpectrumOptions:
    """``tokens``: token ids (None = the task's default); ``top_k``: leading eigenvalues kept."""

    tokens: tuple[int, ...] | None = None
    top_k: int = 10

    def __post_init__(self) -> None:
        check_range("top_k", self.top_k, 1)


@dataclass(frozen=True)
class StableRankOptions:
    """No options: every 2-D parameter, in parameter order."""


# ------------------------------------------------------------------ analyses
def compute_condensation(run: RunResult, opts: CondensationOptions) -> dict[str, pd.DataFrame]:
    """Condensation of the rows of ``opts.param`` W (n, d).

    Tables: ``scores`` (main; one row: param, then every key of
    :func:`~anchorlab.analysis.condensation.condensation_scores`) and ``cosine``
    (i, j, neuron_i, neuron_j, cosine: the (n, n) row-cosine matrix in long form,
    i / j = place in the clustered order, neuron_* = row index in W).
    """
    W = _matrix(run, opts.param, "param")
    C = cosine_matrix(W)                                            # (n, n) float64
    order = condensation_order(C).numpy()                           # (n,)
    C = C.numpy()
    i, j = np.divmod(np.arange(len(order) ** 2), len(order))         # (n*n,) each, row-major
    cos = pd.DataFrame({"i": i, "j": j, "neuron_i": order[i], "neuron_j": order[j],
                        "cosine": C[order[i], order[j]]})
    scores = pd.DataFrame([{"param": opts.param, **condensation_scores(W, threshold=opts.threshold)}])
    return {"scores": scores, "cosine": cos}


def compute_embedding(run: RunResult, opts: EmbeddingOptions) -> dict[str, pd.DataFrame]:
    """PCA of the token embeddings ``E[tokens]`` (n, d_model).

    Tables: ``pca`` (main; token, pc1, pc2; ``attrs`` hold the explained variance) and
    ``summary`` (metric, step, value): ``explained_variance_ratio_1/2``, ``ordinal_spearman``,
    ``ordinal_r2`` and ``diff_consistency`` per step s (``step`` = s; missing for the others).
    """
    E = _matrix(run, EMBEDDING, "embedding")
    tokens = default_token_ids(run, opts.tokens)
    steps = default_diff_steps(run, opts.diff_steps)
    pca = embedding_pca(E, tokens)
    scores = ordinal_scores(E, tokens, steps)
    rows = [dict(metric=f"explained_variance_ratio_{k + 1}", step=None, value=v)
            for k, v in enumerate(pca.attrs["explained_variance_ratio"])]
    rows += [dict(metric=k, step=None, value=scores[k]) for k in ("ordinal_spearman", "ordinal_r2")]
    rows += [dict(metric="diff_consistency", step=s, value=scores[f"diff_consistency_{s}"]) for s in steps]
    summary = pd.DataFrame(rows, columns=["metric", "step", "value"]).astype({"step": "Int64"})
    return {"pca": pca, "summary": summary}


def compute_cov_spectrum(run: RunResult, opts: CovSpectrumOptions) -> dict[str, pd.DataFrame]:
    """Tables: ``spectrum`` (main; step, index, eigenvalue: the ``top_k`` largest eigenvalues of
    the covariance of ``E[tokens]``, index 1 = largest, step = the run's last step)."""
    E = _matrix(run, EMBEDDING, "embedding")
    step = int((run.final or {}).get("steps", 0) or 0)
    spectrum = covariance_spectra_by_step({step: E}, default_token_ids(run, opts.tokens), top_k=opts.top_k)
    return {"spectrum": spectrum}


def compute_stable_rank(run: RunResult, opts: StableRankOptions) -> dict[str, pd.DataFrame]:
    """Tables: ``stable_rank`` (main; :func:`~anchorlab.analysis.spectra.stable_rank_table`:
    name, shape, stable_rank, frobenius, spectral, n_singular; one row per 2-D parameter)."""
    return {"stable_rank": stable_rank_table(run.model)}


# ------------------------------------------------------------------ several runs
@dataclass(frozen=True)
class ComplexitySummaryOptions:
    """The keyword arguments of :func:`complexity_summary`."""

    param: str = DEFAULT_PARAM
    tokens: tuple[int, ...] | None = None
    threshold: float = 0.9

    def __post_init__(self) -> None:
        check_range("threshold", self.threshold, 0.0, 1.0, lo_open=True)


def complexity_summary(runs: Sequence[str | Path | RunResult], param: str = DEFAULT_PARAM,
                       tokens: Sequence[int] | None = None, threshold: float = 0.9) -> pd.DataFrame:
    """One row per run (a directory or a loaded run): run, gamma, d_model, weight_decay, the
    stable rank and condensation scores of ``param``, and the ordinal scores of the embedding
    (tokens and +s steps default per task, as :func:`compute_embedding`)."""
    from anchorlab.train import load_run

    rows = []
    for r in runs:
        run = load_run(r) if isinstance(r, (str, Path)) else r
        cfg = run.cfg
        W, E = _matrix(run, param, "param"), _matrix(run, EMBEDDING, "embedding")
        s = condensation_scores(W, threshold=threshold)
        rows.append({"run": str(run.run_dir), "gamma": cfg.init.gamma, "d_model": cfg.model.d_model,
                     "weight_decay": cfg.optim.weight_decay, "stable_rank": stable_rank(W),
                     "largest_group_frac": s["largest_group_frac"],
                     "effective_directions": s["effective_directions"], "mean_abs_cos": s["mean_abs_cos"],
                     **ordinal_scores(E, default_token_ids(run, tokens), default_diff_steps(run))})
    return pd.DataFrame(rows)


def sweep_stable_ranks(sweep_dir: str | Path, param: str = DEFAULT_PARAM) -> pd.DataFrame:
    """Stable rank of ``param`` (default: the merged first-layer query weights, all heads)
    for every finished run of a sweep: DataFrame(run_id, stable_rank)."""
    from anchorlab.train import load_run

    rows = []
    for rd in sorted((Path(sweep_dir) / "runs").glob("*")):
        if not (rd / "model.safetensors").exists():
            continue
        rows.append({"run_id": rd.name, "stable_rank": stable_rank(_matrix(load_run(rd), param, "param"))})
    return pd.DataFrame(rows, columns=["run_id", "stable_rank"])


__all__ = ["CondensationOptions", "EmbeddingOptions", "CovSpectrumOptions", "StableRankOptions",
           "ComplexitySummaryOptions",
           "compute_condensation", "compute_embedding", "compute_cov_spectrum", "compute_stable_rank",
           "complexity_summary", "sweep_stable_ranks", "default_token_ids", "default_diff_steps",
           "ordinal_scores", "MAX_DEFAULT_TOKENS"]

"""Structure of the token embedding (NeurIPS Fig. 5c,d and App. B Fig. 7; journal Fig. 5B).

All functions take the embedding matrix ``E`` (vocab, d_model) — ``embed.weight`` — and the
token ids to study (default 40..79, as in the papers' PCA plots). ``X = E[token_ids]`` (n, d)
is centred over the selected tokens; nothing else is fitted.

- PCA: ``X_c = U S V^T``; PC k scores are ``X_c V[:, k]``; explained variance ``S_k^2 / (n-1)``.
  Each PC's sign is fixed so that its scores have non-negative covariance with the token value.
- Covariance spectrum: eigenvalues of ``X_c^T X_c / (n - 1)`` (d, d), descending (there are at
  most n - 1 nonzero ones).
- Ordinal scores: see :func:`ordinal_rank_correlation`, :func:`ordinal_probe_r2`,
  :func:`difference_consistency`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from anchorlab.config import ConfigError


def rankdata(x) -> np.ndarray:
    """Ranks 1..n of ``x`` (n,), ties get their average rank (as ``scipy.stats.rankdata``)."""
    return pd.Series(np.asarray(x, dtype=np.float64)).rank(method="average").to_numpy()

log = logging.getLogger(__name__)

DEFAULT_TOKENS: tuple[int, ...] = tuple(range(40, 80))


def _select(E: torch.Tensor, token_ids: Sequence[int], min_tokens: int = 2) -> tuple[torch.Tensor, np.ndarray]:
    """(X (n, d) float64 CPU, ids (n,)) after validating ``E`` and ``token_ids``."""
    if not isinstance(E, torch.Tensor) or E.ndim != 2:
        shape = tuple(E.shape) if isinstance(E, torch.Tensor) else type(E).__name__
        raise ConfigError(f"E: must be a 2-D embedding matrix (vocab, d_model), got {shape}")
    ids = np.asarray(list(token_ids), dtype=np.int64)
    if ids.ndim != 1 or len(ids) < min_tokens:
        raise ConfigError(f"token_ids: need at least {min_tokens} token ids, got {len(ids)}")
    if len(np.unique(ids)) != len(ids):
        raise ConfigError("token_ids: must be distinct")
    vocab = E.shape[0]
    if ids.min() < 0 or ids.max() >= vocab:
        raise ConfigError(f"token_ids: must lie in [0, {vocab - 1}] (vocab size {vocab}), "
                          f"got range [{ids.min()}, {ids.max()}]")
    X = E.detach().to(device="cpu", dtype=torch.float64)[torch.from_numpy(ids)]
    return X, ids


def _pca(X: torch.Tensor, ids: np.ndarray, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores (n, k), explained variance (k,)) of the centred rows of X, sign-fixed by token value."""
    Xc = X - X.mean(0, keepdim=True)
    U, S, _ = torch.linalg.svd(Xc, full_matrices=False)
    scores = U[:, :k] * S[:k]                                      # (n, k) = Xc V_k
    v = torch.from_numpy(ids.astype(np.float64))
    sign = torch.sign((v - v.mean()) @ scores)
    sign[sign == 0] = 1.0
    return scores * sign, S[:k].pow(2) / (X.shape[0] - 1)


def _check_k(n_components: int, X: torch.Tensor) -> int:
    kmax = min(X.shape)
    if isinstance(n_components, bool) or not isinstance(n_components, int) or not 1 <= n_components <= kmax:
        raise ConfigError(f"n_components: must be an integer in [1, {kmax}] "
                          f"(min of n_tokens, d_model), got {n_components!r}")
    return n_components


def embedding_pca(E: torch.Tensor, token_ids: Sequence[int] = DEFAULT_TOKENS,
                  n_components: int = 2) -> pd.DataFrame:
    """PCA of the embeddings ``E[token_ids]`` (n, d) -> DataFrame ``token, pc1, ..., pc<k>``.

    ``df.attrs["explained_variance"]`` and ``df.attrs["explained_variance_ratio"]`` hold the
    variance of each kept PC and its fraction of the total variance of the selected rows.
    """
    X, ids = _select(E, token_ids)
    k = _check_k(n_components, X)
    scores, var = _pca(X, ids, k)
    total = float((X - X.mean(0)).pow(2).sum() / (X.shape[0] - 1))
    df = pd.DataFrame(scores.numpy(), columns=[f"pc{i + 1}" for i in range(k)])
    df.insert(0, "token", ids)
    df.attrs["explained_variance"] = [float(x) for x in var]
    df.attrs["explained_variance_ratio"] = [float(x) / total if total > 0 else float("nan") for x in var]
    return df


def covariance_spectrum(E: torch.Tensor, token_ids: Sequence[int] = DEFAULT_TOKENS,
                        top_k: int | None = None) -> torch.Tensor:
    """Eigenvalues (d,) — or the ``top_k`` largest — of the covariance ``X_c^T X_c / (n-1)`` of the
    embeddings ``X = E[token_ids]`` (n, d), descending, float64 (computed as squared singular
    values of ``X_c``, so never negative; entries beyond n-1 are 0)."""
    X, _ = _select(E, token_ids)
    n, d = X.shape
    s = torch.linalg.svdvals(X - X.mean(0, keepdim=True))
    ev = torch.zeros(d, dtype=torch.float64)
    ev[: s.numel()] = s.pow(2) / (n - 1)
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ConfigError(f"top_k: must be a positive integer or None, got {top_k!r}")
        ev = ev[:top_k]
    return ev


def covariance_spectra_by_step(embeddings: Mapping[int, torch.Tensor], token_ids: Sequence[int] = DEFAULT_TOKENS,
                               top_k: int | None = 10) -> pd.DataFrame:
    """Tidy table ``step, index, eigenvalue`` (index 1 = largest) from ``{step: E (vocab, d)}``."""
    rows = []
    for step in sorted(embeddings):
        ev = covariance_spectrum(embeddings[step], token_ids, top_k)
        rows += [{"step": int(step), "index": i + 1, "eigenvalue": float(x)} for i, x in enumerate(ev)]
    return pd.DataFrame(rows, columns=["step", "index", "eigenvalue"])


def covariance_participation_ratio(E: torch.Tensor, token_ids: Sequence[int] = DEFAULT_TOKENS) -> float:
    """``(sum lambda)^2 / sum lambda^2`` of :func:`covariance_spectrum`: the number of directions
    the selected embeddings effectively spread over (1 for points on a line; NaN if all equal)."""
    ev = covariance_spectrum(E, token_ids)
    s2 = float(ev.pow(2).sum())
    return float(ev.sum()) ** 2 / s2 if s2 > 0 else float("nan")


def top_variance_fraction(E: torch.Tensor, token_ids: Sequence[int] = DEFAULT_TOKENS, k: int = 2) -> float:
    """The share of the covariance's trace in its ``k`` largest eigenvalues (:func:`covariance_spectrum`):
    near 1 when the selected embeddings lie in a k-dimensional subspace (the papers' "a small number of
    large eigenvalues"), about k / min(n - 1, d) when they spread evenly; NaN if all embeddings are equal."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k: must be a positive integer, got {k!r}")
    ev = covariance_spectrum(E, token_ids)
    total = float(ev.sum())
    return float(ev[:k].sum()) / total if total > 0 else float("nan")


def step_directions(E: torch.Tensor, token_ids: Sequence[int] = DEFAULT_TOKENS, steps: Sequence[int] = (3, 4),
                    n_components: int = 2) -> dict[str, float]:
    """The step lattice in the leading PC plane (NeurIPS Fig. 5c: tokens ordered "with intervals of 3 and 4
    from two directions"). In the plane of the first ``n_components`` PC scores of ``E[token_ids]``, for each
    step s the unit differences ``u_v = (P[v+s] - P[v]) / |P[v+s] - P[v]|`` over every pair in the tokens:
    ``consistency_<s>`` = the length of their mean (1 when every +s move points the same way in the plane, about
    ``1/sqrt(#pairs)`` for unstructured points); ``angle_deg`` = the angle between the mean +s directions of
    the first two steps (0: one line, the steps along one direction; well between 0 and 180: two directions);
    ``share_<s>`` = the mean in-plane share of the full difference's length (how much of each +s move the
    plane holds)."""
    X, ids = _select(E, token_ids, min_tokens=3)
    k = _check_k(n_components, X)
    scores, _ = _pca(X, ids, k)
    pos = {int(t): i for i, t in enumerate(ids)}
    out: dict[str, float] = {}
    means = []
    for s in steps:
        pairs = [(pos[v], pos[v + int(s)]) for v in pos if v + int(s) in pos]
        if not pairs or int(s) == 0:
            raise ConfigError(f"steps: no token pairs (v, v+{s}) among token_ids")
        a, b = (torch.tensor(x) for x in zip(*pairs))
        D = scores[b] - scores[a]                                  # (m, k) in the PC plane
        full = (X[b] - X[a]).norm(dim=1)                           # (m,) in the full space
        n = D.norm(dim=1)
        keep = n > 0
        m = (D[keep] / n[keep, None]).mean(0)
        means.append(m)
        out[f"consistency_{int(s)}"] = float(m.norm())
        out[f"share_{int(s)}"] = float((n[full > 0] / full[full > 0]).mean())
    if len(means) >= 2:
        c = float(means[0] @ means[1] / (means[0].norm() * means[1].norm()).clamp_min(1e-300))
        out["angle_deg"] = float(np.degrees(np.arccos(np.clip(c, -1.0, 1.0))))
    return out


def ordinal_rank_correlation(E: torch.Tensor, token_ids: Sequence[int] = DEFAULT_TOKENS,
                             n_components: int = 2) -> float:
    """``max_k |Spearman(token value, PC k score)|`` over the leading ``n_components`` PCs of
    ``E[token_ids]`` (n, d). 1 when tokens are ordered by value along some leading PC; about
    ``sqrt(2 / (pi (n-1)))`` per PC for an unstructured embedding. A PC with constant scores
    contributes 0."""
    X, ids = _select(E, token_ids, min_tokens=3)
    scores, var = _pca(X, ids, _check_k(n_components, X))
    rv = rankdata(ids)
    rv = (rv - rv.mean()) / np.linalg.norm(rv - rv.mean())
    best = 0.0
    top = float(var[0])
    for col, v in zip(scores.numpy().T, var.tolist()):
        if top <= 0 or v <= 1e-12 * top:                           # numerically empty PC
            continue
        r = rankdata(col)
        r = r - r.mean()
        best = max(best, abs(float(rv @ r / np.linalg.norm(r))))
    return best


def ordinal_probe_r2(E: torch.Tensor, token_ids: Sequence[int] = DEFAULT_TOKENS, n_components: int = 2) -> float:
    """In-sample R^2 of the least-squares fit (with intercept) of token value on the leading
    ``n_components`` PC scores of ``E[token_ids]`` (n, d).

    1 when value is an affine function of the position in the PC plane — a line ordered by value,
    or the papers' lattice where +3 and +4 are two fixed displacements. For unstructured embeddings
    its expectation is about ``n_components / (n - 1)``.
    """
    X, ids = _select(E, token_ids, min_tokens=3)
    k = _check_k(n_components, X)
    if k >= len(ids) - 1:
        raise ConfigError(f"n_components: must be < n_tokens - 1 = {len(ids) - 1} for a meaningful R^2, got {k}")
    scores, _ = _pca(X, ids, k)
    y = ids.astype(np.float64)
    A = np.column_stack([np.ones(len(y)), scores.numpy()])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = y - A @ coef
    return float(1.0 - resid @ resid / ((y - y.mean()) @ (y - y.mean())))


def difference_consistency(E: torch.Tensor, token_ids: Sequence[int] = DEFAULT_TOKENS,
                           steps: Sequence[int] = (3, 4)) -> dict[int, float]:
    """For each step s: mean over v of ``cos(D_v, mean_v D_v)`` where ``D_v = E[v+s] - E[v]`` (d,)
    for every v with both v and v+s in ``token_ids``; computed in the full d_model space.

    1 when every step-s difference is the same vector (tokens form arithmetic sequences of
    common difference s along one direction); about ``1/sqrt(#pairs)`` or less for unstructured
    embeddings. A zero difference vector counts as cosine 0; NaN if no pair exists or the mean
    difference is 0.
    """
    X, ids = _select(E, token_ids)
    pos = {int(t): i for i, t in enumerate(ids)}
    out: dict[int, float] = {}
    for s in steps:
        s = int(s)
        if s == 0:
            raise ConfigError("steps: must be nonzero integers, got 0")
        pairs = [(pos[v], pos[v + s]) for v in pos if v + s in pos]
        if not pairs:
            log.warning("difference_consistency: no token pairs (v, v+%d) among token_ids", s)
            out[s] = float("nan")
            continue
        a, b = (torch.tensor(x) for x in zip(*pairs))
        D = X[b] - X[a]                                            # (m, d)
        mean = D.mean(0)
        mn = float(mean.norm())
        if mn == 0.0:
            out[s] = float("nan")
            continue
        dn = D.norm(dim=1)
        cos = torch.where(dn > 0, (D @ mean) / (dn.clamp_min(1e-300) * mn), torch.zeros_like(dn))
        out[s] = float(cos.mean())
    return out

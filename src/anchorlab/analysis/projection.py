"""2-D embeddings of activations (NeurIPS Fig. 3b; journal Fig. 4C).

:func:`embed_2d` maps (N, d) vectors to (N, 2) with t-SNE (scikit-learn, an
optional dependency: without it PCA is used and a warning is logged) or PCA.
t-SNE is slow on CPU (measured once: notes/2026-12-code-measurements.md),
so callers cap the number of points with :func:`subsample_index` first.

:func:`activation_embedding` runs a model, takes the last-position activation
at a hook point (optionally under attention masks) and embeds it: the t-SNE of
``blocks.0.hook_ao`` (X_ao(1)) coloured by anchor pair is NeurIPS Fig. 3b; the
same with the key token masked is journal Fig. 4C.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from anchorlab.config import ConfigError
from anchorlab.tasks.anchor import AnchorData, pair_label
from anchorlab.analysis.masking import EdgeMask, output_vectors

log = logging.getLogger(__name__)
METHODS = ("tsne", "pca")


def subsample_index(n: int, max_points: int | None, seed: int = 0) -> np.ndarray:
    """Sorted indices of at most ``max_points`` of ``n`` rows, chosen at random
    with ``seed`` (all rows, in order, when ``n <= max_points`` or no cap)."""
    if max_points is None or n <= max_points:
        return np.arange(n)
    if max_points < 1:
        raise ConfigError(f"max_points: must be >= 1, got {max_points}")
    return np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))


def pca_2d(X: np.ndarray) -> np.ndarray:
    """Projection of the centred rows on the top two principal axes: (N, d) -> (N, 2)
    (zero-padded when the data span fewer than two dimensions)."""
    Xc = X - X.mean(0, keepdims=True)
    _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    out = Xc @ vt[:2].T
    if out.shape[1] < 2:
        out = np.pad(out, ((0, 0), (0, 2 - out.shape[1])))
    # Fix the sign of each axis so results do not flip between LAPACK builds.
    signs = np.sign(out[np.abs(out).argmax(0), np.arange(2)])
    return out * np.where(signs == 0, 1, signs)


def _thread_limit(threads: int | None):
    import contextlib

    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(threads)


def embed_2d(X: np.ndarray | torch.Tensor, method: str = "tsne", max_points: int | None = 2000,
             seed: int = 0, perplexity: float = 30.0, threads: int | None = 1) -> np.ndarray:
    """(N, d) -> (M, 2) with M = min(N, max_points).

    When N exceeds ``max_points`` the rows ``subsample_index(N, max_points,
    seed)`` are embedded (subsample first yourself to keep labels aligned).
    t-SNE: scikit-learn, PCA initialisation, perplexity capped at (M-1)/3,
    run with at most ``threads`` OpenMP/BLAS threads (None: library default;
    on a shared CPU more threads spin and run slower; measured once: notes/2026-12-code-measurements.md).
    """
    if method not in METHODS:
        raise ConfigError(f"method: must be one of {', '.join(METHODS)}, got {method!r}")
    X = X.detach().cpu().double().numpy() if isinstance(X, torch.Tensor) else np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ConfigError(f"X: expected a (N, d) matrix, got shape {X.shape}")
    X = X[subsample_index(len(X), max_points, seed)]
    if method == "tsne" and len(X) >= 4:
        try:
            from sklearn.manifold import TSNE
        except ImportError:
            log.warning("scikit-learn is not installed; using PCA instead of t-SNE")
        else:
            perp = float(min(perplexity, (len(X) - 1) / 3))
            tsne = TSNE(n_components=2, init="pca", perplexity=perp, random_state=seed)
            with _thread_limit(threads):
                return tsne.fit_transform(X)
    return pca_2d(X)


def activation_embedding(model: torch.nn.Module, data: AnchorData, hook: str,
                         masks: Sequence[EdgeMask] = (), method: str = "tsne",
                         max_points: int | None = 2000, seed: int = 0) -> pd.DataFrame:
    """Embed the last-position activation at ``hook`` of (a subsample of) ``data``.

    Returns DataFrame(pair, a1, a2, key, key_pos, x, y), one row per embedded
    input; ``pair`` is the label like ``"34"``.
    """
    idx = subsample_index(len(data), max_points, seed)
    t = torch.as_tensor(idx, dtype=torch.long)
    sub = AnchorData(*(f[t] for f in (data.tokens, data.targets, data.pair, data.key, data.key_pos)))
    vecs = output_vectors(model, sub, masks, hook)
    xy = embed_2d(vecs, method=method, max_points=None, seed=seed)
    pairs = sub.pair.tolist()
    return pd.DataFrame(dict(pair=[pair_label(tuple(p)) for p in pairs], a1=sub.pair[:, 0].numpy(),
                             a2=sub.pair[:, 1].numpy(), key=sub.key.numpy(), key_pos=sub.key_pos.numpy(),
                             x=xy[:, 0], y=xy[:, 1]))


__all__ = ["embed_2d", "pca_2d", "subsample_index", "activation_embedding", "METHODS"]

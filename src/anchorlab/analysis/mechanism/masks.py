"""Attention-edge masking (journal Fig. 4): ``mask-key`` and ``mask-anchor2``.

Both add an ``accuracy`` table: per-pair accuracy with nothing, the key, or the
second anchor masked (same layers / renormalization as the analysis), on
``n_accuracy`` inputs per pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from anchorlab.config import check_choice
from anchorlab.tasks.anchor import SPLITS
from anchorlab.analysis.masking import default_output_hook, mask_accuracy, standard_masks
from anchorlab.analysis.projection import METHODS, activation_embedding
from anchorlab.analysis.similarity import contrast_of, single_anchor_similarity
from anchorlab.analysis.mechanism.common import check_positive, key_positions, per_pair

if TYPE_CHECKING:
    from anchorlab.train import RunResult


@dataclass(frozen=True)
class MaskKeyOptions:
    """Key token masked in ``layers`` (None = every layer); embed the
    last-position activation at ``hook`` (None = last layer's hook_do) of
    ``n_per_pair`` inputs per anchor pair with ``method``. The accuracy table
    uses ``n_accuracy`` inputs per pair."""

    n_per_pair: int = 50
    layers: tuple[int, ...] | None = None
    hook: str | None = None
    method: str = "tsne"
    renormalize: bool = False
    split: str = "test"
    key_positions: tuple[int, ...] | None = None
    n_accuracy: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        check_positive(self, "n_per_pair", "n_accuracy")
        check_choice("method", self.method, METHODS)
        check_choice("split", self.split, SPLITS)


@dataclass(frozen=True)
class MaskAnchor2Options:
    """Second anchor masked in ``layers`` (None = all); outputs at ``hook``
    (None = last layer's hook_do) for (x; a1) with x = g - step(a1), g in
    ``g_values`` (None = 12 central values); fillers fixed per draw, key at
    ``key_pos``, cosine averaged over ``n_draws`` filler draws; ``center``
    subtracts the mean output of the probes before the cosine."""

    g_values: tuple[int, ...] | None = None
    layers: tuple[int, ...] | None = None
    hook: str | None = None
    renormalize: bool = False
    key_pos: int = 2
    n_draws: int = 4
    center: bool = False
    split: str = "test"
    key_positions: tuple[int, ...] | None = None
    n_accuracy: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        check_positive(self, "n_draws", "n_accuracy")
        check_choice("split", self.split, SPLITS)


def accuracy_under_masks(run: RunResult, opts: MaskKeyOptions | MaskAnchor2Options) -> pd.DataFrame:
    """Per-pair accuracy with no mask, the key masked and the second anchor masked (``opts.layers``,
    ``opts.renormalize``) on ``opts.n_accuracy`` inputs per pair: DataFrame(mask, pair, role, hypothesis, acc, n)."""
    L = len(run.model.blocks)
    data = per_pair(run.task, opts.n_accuracy, opts.split, np.random.default_rng([opts.seed, 1]),
                    key_positions(run.task, opts.key_positions))
    masks = {k: standard_masks(k, L, opts.layers, opts.renormalize) for k in ("none", "key", "anchor2")}
    return mask_accuracy(run.model, run.task, data, masks)


def compute_mask_key(run: RunResult, opts: MaskKeyOptions) -> dict[str, pd.DataFrame]:
    """The key masked: 2-D embedding of the output vectors, one point per input.

    Tables: ``embedding`` (main; pair, a1, a2, key, key_pos, x, y, hook;
    ``n_per_pair`` rows per pair) and ``accuracy`` (:func:`accuracy_under_masks`).
    """
    model, task = run.model, run.task
    data = per_pair(task, opts.n_per_pair, opts.split, np.random.default_rng(opts.seed),
                    key_positions(task, opts.key_positions))
    masks = standard_masks("key", len(model.blocks), opts.layers, opts.renormalize)
    hook = opts.hook or default_output_hook(model)
    df = activation_embedding(model, data, hook, masks, opts.method, max_points=None, seed=opts.seed)
    df["hook"] = hook
    return {"embedding": df, "accuracy": accuracy_under_masks(run, opts)}


def compute_mask_anchor2(run: RunResult, opts: MaskAnchor2Options) -> dict[str, pd.DataFrame]:
    """The second anchor masked: cosine of the outputs of (x; a1) probes, grouped by g = x + step(a1).

    Tables: ``cosine`` (main; :func:`~anchorlab.analysis.similarity.single_anchor_similarity`
    columns plus ``hook``: the full N x N self-similarity, N = |g_values| x anchors), ``summary``
    (metric, value: ``equal_g_contrast``) and ``accuracy`` (:func:`accuracy_under_masks`).
    """
    df = anchor2_masked_cosines(run, opts)
    summary = pd.DataFrame([dict(metric="equal_g_contrast", value=contrast_of(df))])
    return {"cosine": df, "summary": summary, "accuracy": accuracy_under_masks(run, opts)}


def anchor2_masked_cosines(run: RunResult, opts: MaskAnchor2Options) -> pd.DataFrame:
    """The ``cosine`` table of :func:`compute_mask_anchor2` alone (no accuracy table)."""
    model = run.model
    masks = standard_masks("anchor2", len(model.blocks), opts.layers, opts.renormalize)
    hook = opts.hook or default_output_hook(model)
    df = single_anchor_similarity(model, run.task, masks, hook, opts.g_values, opts.key_pos, opts.n_draws,
                                  opts.seed, opts.center)
    df["hook"] = hook
    return df


__all__ = ["MaskKeyOptions", "MaskAnchor2Options", "accuracy_under_masks", "anchor2_masked_cosines",
           "compute_mask_key", "compute_mask_anchor2"]

"""Representations at fixed hook points (NeurIPS Figs. 3b, 4): ``tsne-ao1``, ``cos-ao2``, ``cos-v2``.

``cos-ao2`` / ``cos-v2`` share one table layout: two K x K cross-similarity
blocks of probe inputs (see :func:`anchorlab.analysis.similarity.triangle_similarity`)
and their equal-target contrasts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from anchorlab.config import ConfigError, check_choice, check_range
from anchorlab.tasks.anchor import SPLITS
from anchorlab.analysis.attention import sample_inputs
from anchorlab.analysis.projection import METHODS, activation_embedding
from anchorlab.analysis.similarity import ao_similarity, contrast_of, v_similarity
from anchorlab.analysis.mechanism.common import check_positive, key_positions

if TYPE_CHECKING:
    from anchorlab.train import RunResult


@dataclass(frozen=True)
class TsneAo1Options:
    """Last-position ``blocks.{layer}.hook_ao`` of ``n_inputs`` sequences over
    all pairs, embedded with ``method`` on at most ``max_points`` of them."""

    n_inputs: int = 10000
    max_points: int = 2000
    method: str = "tsne"
    layer: int = 0
    split: str = "train"
    key_positions: tuple[int, ...] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        check_positive(self, "n_inputs", "max_points")
        check_range("layer", self.layer, 0)
        check_choice("method", self.method, METHODS)
        check_choice("split", self.split, SPLITS)


def _check_probe_options(opts: CosAo2Options | CosV2Options) -> None:
    check_positive(opts, "n_draws")
    if len(opts.keys) < 2:
        raise ConfigError(f"keys: need at least two key values, got {list(opts.keys)}")
    if (opts.lower is None) != (opts.upper is None):
        raise ConfigError("lower/upper: give both or neither")


@dataclass(frozen=True)
class CosAo2Options:
    """``lower``/``upper``: (row pair, column pair); None = the paper's
    ((3,3),(2,2)) and ((1,2),(1,3)). ``layer`` None = 1. ``center`` subtracts
    the mean vector of all probes before the cosine (the paper: raw cosine)."""

    keys: tuple[int, ...] = tuple(range(30, 41))
    lower: tuple[tuple[int, int], tuple[int, int]] | None = None
    upper: tuple[tuple[int, int], tuple[int, int]] | None = None
    layer: int | None = None
    key_pos: int = 2
    n_draws: int = 4
    center: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        _check_probe_options(self)


@dataclass(frozen=True)
class CosV2Options:
    """``lower``/``upper``: (row anchor, column anchor); None = (4, 3) and (1, 2).
    ``layer`` None = 1; ``center`` as in :class:`CosAo2Options`."""

    keys: tuple[int, ...] = tuple(range(30, 41))
    lower: tuple[int, int] | None = None
    upper: tuple[int, int] | None = None
    layer: int | None = None
    key_pos: int = 2
    n_draws: int = 4
    center: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        _check_probe_options(self)


def compute_tsne_ao1(run: RunResult, opts: TsneAo1Options) -> dict[str, pd.DataFrame]:
    """Tables: ``embedding`` (main; pair, a1, a2, key, key_pos, x, y, hook; at most
    ``max_points`` rows of the ``n_inputs`` sampled)."""
    model, task = run.model, run.task
    if opts.layer >= len(model.blocks):
        raise ConfigError(f"layer: must be in 0..{len(model.blocks) - 1}, got {opts.layer}")
    data = sample_inputs(task, opts.n_inputs, task.pairs, opts.split, np.random.default_rng(opts.seed),
                         key_positions(task, opts.key_positions))
    hook = f"blocks.{opts.layer}.hook_ao"
    df = activation_embedding(model, data, hook, (), opts.method, opts.max_points, opts.seed)
    df["hook"] = hook
    return {"embedding": df}


def _blocks(opts: CosAo2Options | CosV2Options) -> dict | None:
    return None if opts.lower is None else {"lower": opts.lower, "upper": opts.upper}


def probe_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``cosine`` (the similarity table itself) and ``summary`` (metric, block, value): the
    equal-target contrast over all cells, then per block."""
    rows = [dict(metric="equal_target_contrast", block="all", value=contrast_of(df))]
    rows += [dict(metric="equal_target_contrast", block=b, value=contrast_of(df[df.block == b]))
             for b in dict.fromkeys(df.block)]
    return {"cosine": df, "summary": pd.DataFrame(rows)}


def compute_cos_ao2(run: RunResult, opts: CosAo2Options) -> dict[str, pd.DataFrame]:
    """X_ao(2) at the last position of probes (y; row pair) vs (x; column pair).

    Tables: ``cosine`` (main; block, row_key, col_key, row_pair, col_pair, row_target,
    col_target, equal, cosine, cosine_sd, shown: 2 x K x K rows) and ``summary``
    (:func:`probe_tables`).
    """
    return probe_tables(ao_similarity(run.model, run.task, opts.keys, _blocks(opts), opts.layer, opts.key_pos,
                                      opts.n_draws, opts.seed, opts.center))


def compute_cos_v2(run: RunResult, opts: CosV2Options) -> dict[str, pd.DataFrame]:
    """V(2) at the first-anchor position of probes (y; row anchor) vs (x; column anchor).

    Tables as :func:`compute_cos_ao2`, with ``row_anchor`` / ``col_anchor`` for the pair columns.
    """
    return probe_tables(v_similarity(run.model, run.task, opts.keys, _blocks(opts), opts.layer, opts.key_pos,
                                     opts.n_draws, opts.seed, opts.center))


__all__ = ["TsneAo1Options", "CosAo2Options", "CosV2Options", "compute_tsne_ao1", "compute_cos_ao2",
           "compute_cos_v2", "probe_tables"]

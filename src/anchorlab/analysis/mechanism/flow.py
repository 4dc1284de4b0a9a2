"""Information flow through attention (NeurIPS Fig. 3a,c): ``flow`` (one input) and ``flow-scores`` (many).

Both return tables only; the figures are :func:`anchorlab.plots.mechanism.flow_figure`
and :func:`~anchorlab.plots.mechanism.flow_scores_figure`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from anchorlab.config import ConfigError, check_choice, check_range
from anchorlab.tasks.anchor import SPLITS, AnchorTask, pair_label
from anchorlab.analysis.attention import (attention_patterns, flow_graph, flow_scores, flow_summary, output_contributions,
                                         position_roles, sample_inputs)
from anchorlab.analysis.mechanism.common import (PAPER_EXAMPLE, PAPER_EXAMPLE_KEY_POS, check_positive, key_positions,
                                              paper_example_fits)

if TYPE_CHECKING:
    from anchorlab.train import RunResult


PAIR_SETS = ("all", "held_out")
WEIGHTS = ("attention", "contribution")


@dataclass(frozen=True)
class FlowOptions:
    """``tokens``: one input (default: the NeurIPS example when it fits the
    task, else a sampled held-out-pair input); ``key_pos`` is required with
    ``tokens``; ``head``: one head (None = mean over heads); lines below
    ``threshold`` are faint. ``weight``: ``attention`` draws each edge by its
    attention weight, ``contribution`` by the share of it that reaches the last
    position's output (as :class:`FlowScoresOptions`; skip path weighted ``residual``)."""

    tokens: tuple[int, ...] | None = None
    key_pos: int | None = None
    head: int | None = None
    threshold: float = 0.05
    weight: str = "attention"
    residual: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.tokens is not None and self.key_pos is None:
            raise ConfigError("key_pos: required when tokens is given")
        check_range("threshold", self.threshold, 0.0, 1.0)
        check_choice("weight", self.weight, WEIGHTS)
        check_range("residual", self.residual, 0.0, 1.0)


@dataclass(frozen=True)
class FlowScoresOptions:
    """``n_inputs`` sampled sequences over ``pairs`` (``all``: every pair of the task; ``held_out``: the
    held-out pairs, the inputs NeurIPS Fig. 3 draws) with keys from ``split``; ``key_positions`` default
    0..T-4 (the last token is a filler); ``by_pair`` adds per-pair rows. ``weight``: ``attention`` scores
    each edge by its attention weight, ``contribution`` by the share of it that reaches the last position's
    output (:func:`~anchorlab.analysis.attention.output_contributions`, skip path weighted ``residual``)."""

    n_inputs: int = 2000
    split: str = "train"
    key_positions: tuple[int, ...] | None = None
    by_pair: bool = True
    pairs: str = "all"
    weight: str = "attention"
    residual: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        check_positive(self, "n_inputs")
        check_choice("split", self.split, SPLITS)
        check_choice("pairs", self.pairs, PAIR_SETS)
        check_choice("weight", self.weight, WEIGHTS)
        check_range("residual", self.residual, 0.0, 1.0)


def _flow_input(task: AnchorTask, opts: FlowOptions) -> tuple[torch.Tensor, int]:
    """The input to draw, (T,) tokens, and its key position."""
    T = task.cfg.seq_len
    if opts.tokens is not None:
        tokens, kp = torch.tensor(opts.tokens, dtype=torch.long), int(opts.key_pos)
        if len(tokens) != T:
            raise ConfigError(f"tokens: expected {T} tokens, got {len(tokens)}")
        if not 0 <= kp <= T - 3:
            raise ConfigError(f"key_pos: must be in 0..{T - 3}, got {kp}")
        return tokens, kp
    if paper_example_fits(task):
        return torch.tensor(PAPER_EXAMPLE), PAPER_EXAMPLE_KEY_POS
    pairs = task.held_out_pairs or task.pairs
    d = sample_inputs(task, 1, pairs, "test", np.random.default_rng(opts.seed), key_positions(task, None))
    return d.tokens[0], int(d.key_pos[0])


def compute_flow(run: RunResult, opts: FlowOptions) -> dict[str, pd.DataFrame]:
    """Every attention edge of one input.

    Tables: ``edges`` (main; :func:`~anchorlab.analysis.attention.flow_graph`
    columns plus ``query_token``, ``source_token``, ``head`` = "mean" or the
    head index; one row per layer x causal (query, source) pair; by attention a
    query row's weights sum to 1, by contribution to the share of that query's
    stream that reaches the last output) and ``input`` (position, token, role,
    prediction = the model's argmax at that position, target = the inferential
    target at the last position when both anchors are task anchors, else missing).
    """
    model, task = run.model, run.task
    tokens, kp = _flow_input(task, opts)
    pats = attention_patterns(model, tokens[None])  # (L, 1, H, T, T)
    if opts.weight == "contribution":
        pats = output_contributions(pats, opts.residual)
    pat = pats[:, 0].float()  # (L, H, T, T)
    H = pat.shape[1]
    if opts.head is not None and not 0 <= opts.head < H:
        raise ConfigError(f"head: must be in 0..{H - 1}, got {opts.head}")
    P = pat.mean(1) if opts.head is None else pat[:, opts.head]  # (L, T, T)
    with torch.no_grad():
        pred = model(tokens[None].to(next(model.parameters()).device))[0].argmax(-1).cpu()  # (T,)
    edges = flow_graph(P, kp)
    tok = tokens.numpy()
    edges["query_token"] = tok[edges["query"].to_numpy()]
    edges["source_token"] = tok[edges["source"].to_numpy()]
    edges["head"] = "mean" if opts.head is None else str(opts.head)
    T = len(tok)
    pair = (int(tok[kp + 1]), int(tok[kp + 2]))
    target = pd.array([pd.NA] * T, dtype="Int64")
    if set(pair) <= set(task.cfg.anchors):
        target[T - 1] = int(tok[kp]) + task.inferential_shift(pair)
    inp = pd.DataFrame({"position": np.arange(T), "token": tok, "role": position_roles(kp, T),
                        "prediction": pred.numpy(), "target": target})
    return {"edges": edges, "input": inp}


def compute_flow_scores(run: RunResult, opts: FlowScoresOptions) -> dict[str, pd.DataFrame]:
    """Mean role-to-role attention (or contribution, ``opts.weight``) over ``n_inputs`` sampled inputs.

    Tables: ``scores`` (main; :func:`~anchorlab.analysis.attention.flow_scores`:
    layer, head, edge, query, source, group ("all" and, with ``by_pair``, one
    per pair), score, n) and ``summary`` (layer, edge, score: head-averaged,
    group "all", plus the combined ``last->anchors`` / ``anchors->key`` edges).
    """
    task = run.task
    pairs = task.pairs if opts.pairs == "all" else task.held_out_pairs
    if not pairs:
        raise ConfigError("pairs: the task holds no pair out; use pairs: all")
    data = sample_inputs(task, opts.n_inputs, pairs, opts.split, np.random.default_rng(opts.seed),
                         key_positions(task, opts.key_positions))
    pats = attention_patterns(run.model, data.tokens)
    if opts.weight == "contribution":
        pats = output_contributions(pats, opts.residual)
    groups = [pair_label(tuple(p)) for p in data.pair.tolist()] if opts.by_pair else None
    df = flow_scores(pats, data.key_pos, group=groups)
    return {"scores": df, "summary": flow_summary(df)}


__all__ = ["FlowOptions", "FlowScoresOptions", "compute_flow", "compute_flow_scores"]

"""Optimizer groups and the papers' learning-rate schedule."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.autograd.graph import increment_version

from anchorlab.config import OptimConfig
from anchorlab.model.roles import param_infos

NO_DECAY_ROLES = ("norm", "bias")


def param_groups(model: nn.Module, cfg: OptimConfig) -> list[dict]:
    """AdamW groups: ``optim.decay='all'`` decays every parameter; ``'matrices'`` spares norms and biases.

    Each group carries the parameter names; every trainable parameter is in
    exactly one group (asserted).
    """
    decay, no_decay = [], []
    for info in param_infos(model):
        p = getattr(info.module, info.kind)
        if not p.requires_grad:
            continue
        (no_decay if info.role in NO_DECAY_ROLES and cfg.decay == "matrices" else decay).append(
            (info.name, p))
    groups = [
        {"params": [p for _, p in decay], "names": [n for n, _ in decay], "weight_decay": cfg.weight_decay},
        {"params": [p for _, p in no_decay], "names": [n for n, _ in no_decay], "weight_decay": 0.0},
    ]
    n_grouped = sum(len(g["params"]) for g in groups)
    n_params = sum(1 for p in model.parameters() if p.requires_grad)
    assert n_grouped == n_params, f"{n_grouped} grouped parameters but the model has {n_params}"
    return [g for g in groups if g["params"]]


def make_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups`. ``foreach=True`` also on the CPU (torch picks the per-tensor loop there):
    the same update to the bit, with fewer kernel launches (tests/test_optim_foreach.py). ``optim.fused``:
    torch's fused kernel instead (one pass per tensor; the same algorithm, other bits; opt-in), as
    :class:`FusedAdamW`."""
    if cfg.fused:
        return FusedAdamW(param_groups(model, cfg), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, fused=True)
    return torch.optim.AdamW(param_groups(model, cfg), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, foreach=True)


class FusedAdamW(torch.optim.AdamW):
    """torch's fused AdamW, whose kernel writes the parameters without moving their version counters (torch
    2.13; the ``foreach`` update moves them). A cache keyed on those counters, the native bfloat16 path's
    weight copies (model/bf16.py), would keep the weights of the first step; each step moves them."""

    def step(self, closure=None):
        loss = super().step(closure)
        mark_updated(self)
        return loss


def mark_updated(opt: torch.optim.Optimizer) -> None:
    """Move the version counter of every parameter a fused AdamW step just wrote (those with a gradient):
    what an in-place update does, and what tells the native path's weight cache its copies are stale."""
    if opt.defaults.get("fused"):
        increment_version([p for g in opt.param_groups for p in g["params"] if p.grad is not None])


def lr_at(step: int, steps_per_epoch: int, cfg: OptimConfig) -> float:
    """Learning rate for optimizer step ``step`` (0-based), stepped per batch.

    Linear warmup from ``lr`` to the peak (``cfg.peak``) over
    ``warmup_epochs``; then cosine from the peak to ``min_lr`` over
    ``cosine_epochs``; then ``min_lr``.
    """
    e = step / max(steps_per_epoch, 1)
    peak = cfg.peak
    if e < cfg.warmup_epochs:
        return cfg.lr + (peak - cfg.lr) * e / cfg.warmup_epochs
    t = e - cfg.warmup_epochs
    if cfg.cosine_epochs > 0 and t < cfg.cosine_epochs:
        return cfg.min_lr + (peak - cfg.min_lr) * 0.5 * (1.0 + math.cos(math.pi * t / cfg.cosine_epochs))
    return cfg.min_lr if cfg.cosine_epochs > 0 else peak


def lr_sum(steps_per_epoch: int, total_steps: int, cfg: OptimConfig) -> float:
    """Sum of the learning rate over ``total_steps`` optimizer steps of the schedule (:func:`lr_at`).

    AdamW's decoupled decay multiplies a weight by ``1 - lr * wd`` each step, about
    ``exp(-wd * lr_sum)`` over training: ``wd * lr_sum`` is the run's decay exponent, the quantity to
    match when weight-decay rows are moved to another optimizer clock.
    """
    return float(math.fsum(lr_at(s, steps_per_epoch, cfg) for s in range(int(total_steps))))

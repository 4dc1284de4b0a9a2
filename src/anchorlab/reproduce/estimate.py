"""Rough compute of a sweep, for ``anchorlab reproduce --list``.

Training FLOPs of a transformer run ~ 6 x (multiply-adds per token) x tokens:
per token ``n_layers * (4 d_model H d_head + 2 d_model d_ff) + d_model * vocab``
multiply-adds (attention scores ignored, they are small at these lengths),
``batch_size * max_len`` tokens per step, steps from the config. Runs whose
size this cannot know (a U-Net, a data size read from files) are counted
apart and never turned into a number. Times assume two rates, printed with
every estimate:

* CPU: ``CPU_FLOPS`` per worker process, *measured*: the CPU demo trains its
  width-128 model 4,680 steps in ~222 s on one thread of the 2-core
  development machine, 1e11 FLOP/s by this count (the count is of the full
  sequence; the trained positions are fewer, which is why it exceeds the
  matmul peak: read it as "demo-model steps per second", not as hardware FLOP/s);
* GPU: ``GPU_FLOPS``, *stated, not measured*: about a quarter of an H100's
  dense bf16 peak.
"""

from __future__ import annotations

import math
from typing import Any

CPU_FLOPS = 1.0e11
GPU_FLOPS = 2.0e14
ASSUMPTIONS = (f"CPU hours at {CPU_FLOPS:.0e} FLOP/s per worker (measured: the CPU demo's training rate on one "
               f"thread of a 2-core machine); GPU hours at {GPU_FLOPS:.0e} FLOP/s (stated: about a quarter of an "
               "H100's dense bf16 peak, not measured)")
TRANSFORMER_FIELDS = ("n_layers", "d_model", "n_heads", "d_head", "d_ff", "vocab_size", "max_len")


def unknown_reason(cfg: Any) -> str | None:
    """Why a run's FLOPs cannot be counted without reading data or timing it (None when they can)."""
    if not all(hasattr(cfg.model, k) for k in TRANSFORMER_FIELDS):
        return f"model.arch {cfg.model.arch!r} is not counted"
    if not (getattr(cfg.task, "n_train", 0) or getattr(cfg.task, "train_size", 0) or cfg.train.max_steps):
        return "steps depend on the data files"
    return None


def run_flops(cfg: Any) -> float:
    """Training FLOPs of one run by the count above; NaN if its size is unknown (:func:`unknown_reason`)."""
    if unknown_reason(cfg) is not None:
        return math.nan
    m = cfg.model
    per_token = m.n_layers * (4 * m.d_model * m.n_heads * m.d_head + 2 * m.d_model * m.d_ff) + m.d_model * m.vocab_size
    n_train = getattr(cfg.task, "n_train", 0) or getattr(cfg.task, "train_size", 0)
    steps = cfg.train.plan(n_train)[1] if n_train else cfg.train.max_steps
    return 6.0 * per_token * cfg.train.batch_size * m.max_len * steps


def sweep_compute(cfgs: list[Any], workers: int = 2) -> dict[str, Any]:
    """``{"runs", "unknown", "reasons", "pflop", "cpu_hours" (with ``workers`` processes), "gpu_hours"}``.

    The totals cover the runs of known size (``runs - unknown``); they are 0
    when none is known, never NaN.
    """
    flops = [run_flops(c) for c in cfgs]
    reasons = sorted({r for c in cfgs if (r := unknown_reason(c)) is not None})
    total = sum(f for f in flops if not math.isnan(f))
    return {"runs": len(cfgs), "unknown": sum(math.isnan(f) for f in flops), "reasons": reasons,
            "pflop": total / 1e15, "cpu_hours": total / CPU_FLOPS / 3600 / max(workers, 1),
            "gpu_hours": total / GPU_FLOPS / 3600}


def describe_compute(c: dict[str, Any]) -> str:
    """One line of :func:`sweep_compute`'s result: the totals, and the runs they leave out and why."""
    if c["unknown"] == c["runs"]:
        return f"compute not estimated ({'; '.join(c['reasons'])})"
    cost = f"~{c['pflop']:.3g} PFLOP, ~{c['cpu_hours']:.3g} h on this CPU, ~{c['gpu_hours']:.3g} h on one GPU"
    if c["unknown"]:
        cost += f"; {c['unknown']} run(s) not counted ({'; '.join(c['reasons'])})"
    return cost

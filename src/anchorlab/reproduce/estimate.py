"""Rough compute of a sweep, for ``anchorlab reproduce --list``.

Training FLOPs of a transformer run ~ 6 x (multiply-adds per token) x tokens:
per token ``n_layers * (4 d_model H d_head + 2 d_model d_ff) + d_model * vocab``
multiply-adds (attention scores ignored, they are small at these lengths),
``batch_size * max_len`` tokens per step, steps from the config (data sizes
that need reading files count as unknown). Times are nominal:

* CPU: ``CPU_FLOPS`` per worker process, calibrated on the CPU demo (4,680
  steps of the width-128 model in ~222 s on one thread of the 2-core
  development machine; the last-position trimming makes the nominal rate
  exceed the measured matmul peak, which is why it is called nominal);
* GPU: ``GPU_FLOPS``, an assumption (about a quarter of an H100's dense bf16
  peak), not a measurement: no GPU figure has been taken yet.
"""

from __future__ import annotations

import math
from typing import Any

CPU_FLOPS = 1.0e11
GPU_FLOPS = 2.0e14


def run_flops(cfg: Any) -> float:
    """Nominal training FLOPs of one run; NaN if its size is unknown without reading data."""
    from ..train.run import steps_plan

    m = cfg.model
    needed = ("n_layers", "d_model", "n_heads", "d_head", "d_ff", "vocab_size", "max_len")
    if not all(hasattr(m, k) for k in needed):
        return math.nan
    per_token = m.n_layers * (4 * m.d_model * m.n_heads * m.d_head + 2 * m.d_model * m.d_ff) + m.d_model * m.vocab_size
    n_train = getattr(cfg.task, "n_train", 0) or getattr(cfg.task, "train_size", 0)
    if not n_train:
        if cfg.train.max_steps:
            steps = cfg.train.max_steps
        else:
            return math.nan
    else:
        steps = steps_plan(cfg, n_train)[1]
    return 6.0 * per_token * cfg.train.batch_size * m.max_len * steps


def sweep_compute(cfgs: list[Any], workers: int = 2) -> dict[str, float]:
    """``{"runs", "pflop", "cpu_hours" (with ``workers`` processes), "gpu_hours"}``; NaN parts stay NaN."""
    flops = [run_flops(c) for c in cfgs]
    total = sum(f for f in flops if not math.isnan(f)) if flops else 0.0
    unknown = sum(math.isnan(f) for f in flops)
    if unknown == len(flops) and flops:
        total = math.nan
    return {"runs": len(cfgs), "unknown": unknown, "pflop": total / 1e15,
            "cpu_hours": total / CPU_FLOPS / 3600 / max(workers, 1), "gpu_hours": total / GPU_FLOPS / 3600}

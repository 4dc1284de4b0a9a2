"""Rough compute of a sweep, for ``anchorlab reproduce --list``.

Training FLOPs of a transformer run ~ 6 x (multiply-adds per token) x tokens:
per token ``n_layers * (4 d_model H d_head + 2 d_model d_ff) + d_model * vocab``
multiply-adds (attention scores ignored, they are small at these lengths),
``batch_size * max_len`` tokens per step, steps from the config. Runs whose
size this cannot know (a U-Net, a data size read from files) are counted
apart and never turned into a number. Times assume two rates, printed with
every estimate (measured once: notes/2026-12-code-measurements.md):

* CPU: ``CPU_FLOPS`` per worker process, the CPU demo's training rate on one
  thread by this count (the count is of the full sequence; the trained
  positions are fewer, which is why it exceeds the matmul peak: read it as
  "demo-model steps per second", not as hardware FLOP/s);
* CPU with bfloat16 matmuls: ``CPU_BF16_FLOPS`` per worker, the rate of the
  Fig. 2 clock map's runs on a CPU with bf16 units by this count; machines of
  one kind differ, so read a CPU estimate as its fast end. It applies to the runs whose
  ``train.amp`` resolves to bf16 on this CPU (``bf16``, or ``auto`` where the
  CPU has bf16 units: train/precision.py); the others use ``CPU_FLOPS``;
* CPU with bfloat16 matmuls but no bf16 units (``train.amp: bf16`` there):
  ``CPU_EMULATED_BF16_FLOPS``, a fraction of ``CPU_FLOPS``: the bf16 matmuls
  are emulated there and slower than float32;
* GPU: ``GPU_FLOPS`` per GPU, the rate of the Fig. 2 cell's runs in float32
  (``train.amp: auto`` keeps float32 on CUDA), trained as stacks with
  ``train.compile: true``, by this count. Small models
  in float32 are far from the chip's peak, so wider models and bf16 run
  faster than this: read GPU hours as an upper bound.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

from anchorlab.config.precision_rules import matmul_amp

CPU_FLOPS = 1.0e11
CPU_BF16_FLOPS = 2.5e11
CPU_EMULATED_BF16_FLOPS = CPU_FLOPS / 10
GPU_FLOPS = 8.0e12
ASSUMPTIONS = (f"CPU hours at {CPU_FLOPS:.0e} FLOP/s per worker (measured: the CPU demo's training rate on one "
               f"thread of a 2-core machine), {CPU_BF16_FLOPS:.1e} for runs with bf16 matmuls on a CPU with bf16 "
               f"units (measured: the Fig. 2 clock map's runs on a 2-core AVX512-BF16 machine; another machine of the "
               f"same flags ran them 2x slower); GPU hours at "
               f"{GPU_FLOPS:.0e} FLOP/s (measured: width-128 Fig. 2 cell runs in float32, stacks of 6, on one H200; "
               "wider models and bf16 run faster)")
TRANSFORMER_FIELDS = ("n_layers", "d_model", "n_heads", "d_head", "d_ff", "vocab_size", "max_len")


def unknown_reason(cfg: Any) -> str | None:
    """Why a run's FLOPs cannot be counted without reading data or timing it (None when they can)."""
    if not all(hasattr(cfg.model, k) for k in TRANSFORMER_FIELDS):
        return f"model.arch {cfg.model.arch!r} is not counted"
    if cfg.planned_steps() is None:
        return "steps depend on the data files"
    return None


def run_flops(cfg: Any) -> float:
    """Training FLOPs of one run by the count above; NaN if its size is unknown (:func:`unknown_reason`)."""
    if unknown_reason(cfg) is not None:
        return math.nan
    m = cfg.model
    per_token = m.n_layers * (4 * m.d_model * m.n_heads * m.d_head + 2 * m.d_model * m.d_ff) + m.d_model * m.vocab_size
    return 6.0 * per_token * cfg.train.batch_size * m.max_len * cfg.planned_steps()


@functools.lru_cache(maxsize=1)
def cpu_has_bf16_flags() -> bool:
    """Whether /proc/cpuinfo lists ``amx_bf16`` or ``avx512_bf16`` (False where it cannot be read). The run
    itself asks torch (train/precision.py); the estimate reads the flags so that ``reproduce --list``
    stays free of torch."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return re.search(r"\b(amx_bf16|avx512_bf16)\b", text) is not None


def cpu_rate(cfg: Any, bf16_units: bool | None = None) -> float:
    """FLOP/s per CPU worker for ``cfg``: its ``train.amp`` resolved on this CPU by the run's own rule
    (:func:`anchorlab.config.precision_rules.matmul_amp`; ``bf16_units``: None reads this CPU's flags):
    ``CPU_BF16_FLOPS`` for bf16 on bf16 units, ``CPU_EMULATED_BF16_FLOPS`` for bf16 without them,
    else ``CPU_FLOPS``."""
    units = cpu_has_bf16_flags() if bf16_units is None else bf16_units
    if matmul_amp(getattr(cfg.train, "amp", "none"), "cpu", units) != "bf16":
        return CPU_FLOPS
    return CPU_BF16_FLOPS if units else CPU_EMULATED_BF16_FLOPS


def sweep_compute(cfgs: list[Any], workers: int = 2, bf16_units: bool | None = None) -> dict[str, Any]:
    """``{"runs", "unknown", "reasons", "pflop", "cpu_hours" (with ``workers`` processes), "gpu_hours"}``.

    The totals cover the runs of known size (``runs - unknown``); they are 0
    when none is known, never NaN. CPU hours use each run's :func:`cpu_rate`.
    """
    flops = [run_flops(c) for c in cfgs]
    reasons = sorted({r for c in cfgs if (r := unknown_reason(c)) is not None})
    known = [(f, c) for f, c in zip(flops, cfgs) if not math.isnan(f)]
    total = sum(f for f, _ in known)
    cpu_seconds = sum(f / cpu_rate(c, bf16_units) for f, c in known)
    return {"runs": len(cfgs), "unknown": sum(math.isnan(f) for f in flops), "reasons": reasons,
            "pflop": total / 1e15, "cpu_hours": cpu_seconds / 3600 / max(workers, 1),
            "gpu_hours": total / GPU_FLOPS / 3600}


def describe_compute(c: dict[str, Any]) -> str:
    """One line of :func:`sweep_compute`'s result: the totals, and the runs they leave out and why."""
    if c["unknown"] == c["runs"]:
        return f"compute not estimated ({'; '.join(c['reasons'])})"
    cost = f"~{c['pflop']:.3g} PFLOP, ~{c['cpu_hours']:.3g} h on this CPU, ~{c['gpu_hours']:.3g} h on one GPU"
    if c["unknown"]:
        cost += f"; {c['unknown']} run(s) not counted ({'; '.join(c['reasons'])})"
    return cost

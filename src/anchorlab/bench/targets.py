"""The bf16 targets of the training step, printed as met / not met for the CPU they ran on (never asserted).

On a CPU with bfloat16 matrix units (AMX or AVX512-BF16): each bf16 precision's step at the demo shape
>= 2.5x the float32 step (stretch 3x), and at the paper shape >= 40% of the bf16 matmul peak (stretch 50%).
On a CPU without them the targets do not apply (bfloat16 is emulated there) and the lines say so.
"""

from __future__ import annotations

import pandas as pd

from ..train.precision import CpuMatrixUnits

TARGET_DEMO_SPEEDUP, STRETCH_DEMO_SPEEDUP = 2.5, 3.0   # bf16 step / fp32 step at the demo shape
TARGET_PAPER_PEAK, STRETCH_PAPER_PEAK = 0.40, 0.50     # bf16 step's GFLOP/s / the bf16 matmul peak at the paper shape


def _judge(x: float, target: float, stretch: float, applies: bool, fmt: str) -> str:
    if not applies:
        return f"target >= {fmt.format(target)}, stretch {fmt.format(stretch)}: not applicable here"
    return (f"target >= {fmt.format(target)}: {'met' if x >= target else 'not met'}; "
            f"stretch {fmt.format(stretch)}: {'met' if x >= stretch else 'not met'}")


def verdicts(steps: pd.DataFrame, units: CpuMatrixUnits, cpu: str) -> list[str]:
    """The target lines for a steps table (shape, precision, path, ms_per_step, pct_of_peak): a first line
    naming the CPU and its bfloat16 units, then one line per bf16 precision and target it measured."""
    lines = [f"targets on {cpu} ({units.describe()}), measured, not asserted:"]
    if not units.bf16:
        lines.append("bfloat16 targets do not apply: this CPU has no bfloat16 matrix units; "
                     "train.amp=auto trains in float32 here")
    if steps.empty:
        return lines
    s = steps.set_index(["shape", "precision"])
    bf16 = [p for p in dict.fromkeys(steps.precision) if p != "fp32"]
    for p in bf16:
        if ("demo", "fp32") in s.index and ("demo", p) in s.index:
            row = s.loc[("demo", p)]
            x = s.loc[("demo", "fp32"), "ms_per_step"] / row.ms_per_step
            lines.append(f"demo shape, {p} ({row.get('path', '?')} path): step {x:.2f}x the fp32 step "
                         f"({_judge(x, TARGET_DEMO_SPEEDUP, STRETCH_DEMO_SPEEDUP, units.bf16, '{:g}x')})")
    for p in bf16:
        if ("paper", p) in s.index:
            row = s.loc[("paper", p)]
            f = row.pct_of_peak / 100
            lines.append(f"paper shape, {p} ({row.get('path', '?')} path): step at {f:.0%} of the bf16 matmul "
                         f"peak ({_judge(f, TARGET_PAPER_PEAK, STRETCH_PAPER_PEAK, units.bf16, '{:.0%}')})")
    return lines


__all__ = ["STRETCH_DEMO_SPEEDUP", "STRETCH_PAPER_PEAK", "TARGET_DEMO_SPEEDUP", "TARGET_PAPER_PEAK", "verdicts"]

"""The bf16 targets of the training step, printed as met / not met for the CPU they ran on (never asserted).

On a CPU with bfloat16 matrix units (AMX or AVX512-BF16): each bf16 precision's step at the demo shape
>= 2.5x the float32 step (stretch 3x), and at the paper shape >= 40% of the bf16 matmul peak (stretch 50%).
On a CPU without them the targets do not apply (bfloat16 is emulated there) and the lines say so.
A bench of several rounds is judged by its median round (the speed-up against the same round's float32
step), and the line gives the range over the rounds.
"""

from __future__ import annotations

import pandas as pd

from anchorlab.train.precision import CpuMatrixUnits

TARGET_DEMO_SPEEDUP, STRETCH_DEMO_SPEEDUP = 2.5, 3.0   # bf16 step / fp32 step at the demo shape
TARGET_PAPER_PEAK, STRETCH_PAPER_PEAK = 0.40, 0.50     # bf16 step's GFLOP/s / the bf16 matmul peak at the paper shape


def _judge(x: float, target: float, stretch: float, applies: bool, fmt: str) -> str:
    if not applies:
        return f"target >= {fmt.format(target)}, stretch {fmt.format(stretch)}: not applicable here"
    return (f"target >= {fmt.format(target)}: {'met' if x >= target else 'not met'}; "
            f"stretch {fmt.format(stretch)}: {'met' if x >= stretch else 'not met'}")


def speedups(steps: pd.DataFrame) -> list[float]:
    """Each row's speed-up: the fp32 step of the same shape and round over its own (NaN without one); a
    table without a ``round`` column is one round."""
    rnd = steps["round"] if "round" in steps else pd.Series(1, index=steps.index)
    base = steps.assign(round=rnd)[steps.precision == "fp32"].set_index(["shape", "round"]).ms_per_step
    return [base.get((s, r), float("nan")) / ms for s, r, ms in zip(steps["shape"], rnd, steps.ms_per_step)]


def round_summary(steps: pd.DataFrame) -> pd.DataFrame:
    """Per shape and precision (and the path that ran): the rounds' median, min and max of ms_per_step and
    of the speed-up against the same round's fp32 step, and the median % of peak. A table without a
    ``round`` column is one round."""
    cols = ["shape", "precision", "path", "rounds", "ms_median", "ms_min", "ms_max", "speedup_median",
            "speedup_min", "speedup_max", "pct_of_peak_median"]
    if steps.empty:
        return pd.DataFrame(columns=cols)
    t = steps.assign(x=speedups(steps), path=steps["path"] if "path" in steps else "?")
    g = t.groupby(["shape", "precision", "path"], sort=False)
    out = pd.DataFrame({"rounds": g.size(), "ms_median": g.ms_per_step.median(), "ms_min": g.ms_per_step.min(),
                        "ms_max": g.ms_per_step.max(), "speedup_median": g.x.median(), "speedup_min": g.x.min(),
                        "speedup_max": g.x.max(), "pct_of_peak_median": g.pct_of_peak.median()}).reset_index()
    return out[cols]


def verdicts(steps: pd.DataFrame, units: CpuMatrixUnits, cpu: str) -> list[str]:
    """The target lines for a steps table (shape, precision, path, ms_per_step, pct_of_peak; ``round`` where
    the bench ran several): a first line naming the CPU and its bfloat16 units, then one line per bf16
    precision and target it measured, judged by the median round."""
    lines = [f"targets on {cpu} ({units.describe()}), measured, not asserted:"]
    if not units.bf16:
        lines.append("bfloat16 targets do not apply: this CPU has no bfloat16 matrix units; "
                     "train.amp=auto trains in float32 here")
    if steps.empty:
        return lines
    summ = round_summary(steps)
    s = summ.drop_duplicates(["shape", "precision"]).set_index(["shape", "precision"])

    def spread(row: pd.Series, lo: float, hi: float, fmt: str) -> str:
        if row.rounds < 2:
            return ""
        return f" (median of {row.rounds} rounds, {fmt.format(lo)}-{fmt.format(hi)})"

    bf16 = [p for p in dict.fromkeys(steps.precision) if p != "fp32"]
    for p in bf16:
        if ("demo", "fp32") in s.index and ("demo", p) in s.index:
            row = s.loc[("demo", p)]
            x = row.speedup_median
            lines.append(f"demo shape, {p} ({row.path} path): step {x:.2f}x the fp32 step"
                         f"{spread(row, row.speedup_min, row.speedup_max, '{:.2f}x')} "
                         f"({_judge(x, TARGET_DEMO_SPEEDUP, STRETCH_DEMO_SPEEDUP, units.bf16, '{:g}x')})")
    for p in bf16:
        if ("paper", p) in s.index:
            row = s.loc[("paper", p)]
            f = row.pct_of_peak_median / 100
            g = steps[(steps["shape"] == "paper") & (steps.precision == p)].pct_of_peak / 100
            lines.append(f"paper shape, {p} ({row.path} path): step at {f:.0%} of the bf16 matmul peak"
                         f"{spread(row, g.min(), g.max(), '{:.0%}')} "
                         f"({_judge(f, TARGET_PAPER_PEAK, STRETCH_PAPER_PEAK, units.bf16, '{:.0%}')})")
    return lines


__all__ = ["STRETCH_DEMO_SPEEDUP", "STRETCH_PAPER_PEAK", "TARGET_DEMO_SPEEDUP", "TARGET_PAPER_PEAK", "round_summary",
           "speedups", "verdicts"]

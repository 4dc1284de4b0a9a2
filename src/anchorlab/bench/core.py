"""``anchorlab bench``'s one entry point (:func:`run_bench`), its result and its printout."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch

from anchorlab.train.precision import CpuMatrixUnits, cpu_matrix_units, cpu_model_name
from anchorlab.train.run import numerics
from anchorlab.bench.gemm import layout_pivot, measure_layouts, peaks
from anchorlab.bench.shapes import Clock, check_names, clock_fn, dtype_of, shape_config, train_flops_per_sample
from anchorlab.bench.steps import profile_compare, time_steps
from anchorlab.bench.targets import round_summary, speedups, verdicts

log = logging.getLogger(__name__)

STEP_COLUMNS = ["shape", "precision", "round", "path", "weight_t", "d_model", "d_ff", "batch", "steps", "ms_per_step",
                "gflops", "pct_of_peak", "speedup_vs_fp32", "cast_share", "forward_ms", "backward_ms", "optimizer_ms",
                "page_faults_per_step", "overrides"]


@dataclass(frozen=True)
class BenchResult:
    units: CpuMatrixUnits
    threads: int
    clock: str
    layouts: pd.DataFrame             # shape, linear, dtype, layout, m, k, n, gflops, pct_of_peak
    steps: pd.DataFrame               # STEP_COLUMNS
    profiles: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)   # whole step, by category
    splits: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)     # forward + backward split
    malloc_retain: bool = True
    cpu: str = ""
    cuda_steps: pd.DataFrame | None = None
    cuda_layouts: pd.DataFrame | None = None
    cuda_note: str = ""               # why the GPU bench did not run ("" when it ran)
    overrides: tuple[str, ...] = ()   # --set, applied to every step's config (CPU and GPU)

    def peak(self, dtype: str) -> float:
        """A dtype's ("fp32" / "bf16") peak GFLOP/s on this CPU: its best GEMM row."""
        return float(peaks(self.layouts).get(dtype, float("nan")))

    @property
    def rounds(self) -> int:
        return int(self.steps["round"].max()) if "round" in self.steps and len(self.steps) else 1

    def summary(self) -> pd.DataFrame:
        """Per shape and precision over the rounds: median (min-max) of the step and the speed-up."""
        return round_summary(self.steps)

    def verdicts(self) -> list[str]:
        return verdicts(self.steps, self.units, self.cpu or "unknown CPU")

    def profile_compare(self) -> pd.DataFrame:
        return profile_compare(self.splits)


def run_bench(shapes: Sequence[str] = ("demo", "paper"), precisions: Sequence[str] = ("fp32", "bf16", "bf16-native"),
              steps: dict[str, int] | None = None, warmup: int = 2, threads: int = 1, clock: str | Clock = "wall",
              profile: bool = False, min_seconds: float = 0.6, emulated_steps: int = 1,
              malloc_retain: bool = True, cuda: bool = True, cuda_kw: dict | None = None,
              overrides: Sequence[str] = (), rounds: int = 1) -> BenchResult:
    """Measure the GEMM layouts and the steps (see :mod:`anchorlab.bench`). ``steps``: timed steps per shape
    (default demo 20, paper 4); bf16 on a CPU without bf16 units is capped at ``emulated_steps`` (its
    matmuls are emulated and slow; measured once: notes/2026-12-code-measurements.md) with no warm-up and no
    profile. ``malloc_retain``: as ``train.malloc_retain`` (process-wide once set: compare both settings
    in two processes). ``cuda``: also :func:`anchorlab.bench.cuda.cuda_bench` (``cuda_kw``), which skips
    where there is no CUDA device. ``overrides`` (``--set KEY=VALUE``): applied to every step's config, the
    CPU's and the GPU bench's, e.g. ``optim.fused=true`` (not the precision's own ``train.amp`` /
    ``train.bf16_path``). ``rounds``: the step timings that many times over, every precision once per round
    in turn (so a slow spell of a shared machine falls on all of them); ``speedup_vs_fp32`` is against the
    same round's float32 step, the targets read the median round, and only the first round is profiled."""
    check_names(shapes, precisions)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"--rounds: must be a whole number >= 1, got {rounds!r}")
    overrides = tuple(overrides)
    shape_config(shapes[0], extra=overrides)   # a bad --set: its one-line error before anything is timed
    steps = {"demo": 20, "paper": 4, **(steps or {})}
    tick = clock_fn(clock)
    units = cpu_matrix_units()
    dtypes = sorted({dtype_of(p) for p in precisions})
    # the run's own numeric switches (threads, flush-to-zero, malloc_retain), restored after
    switches = shape_config(shapes[0], extra=(f"train.threads={threads}", f"train.malloc_retain={malloc_retain}"))
    with numerics(switches, torch.device("cpu")):
        layouts = measure_layouts(shapes, dtypes, tick, min_seconds)
        peak = peaks(layouts)
        rows, profiles, splits = [], {}, {}
        for rnd in range(1, rounds + 1):
            for name in shapes:
                for p in precisions:
                    cfg = shape_config(name, p, extra=overrides)
                    n, w, prof_this = steps[name], warmup, profile and rnd == 1
                    if dtype_of(p) == "bf16" and not units.bf16:
                        n, w, prof_this = min(n, emulated_steps), 0, False
                    t, prof = time_steps(cfg, n, w, tick, prof_this)
                    flops = train_flops_per_sample(cfg.model, cfg.task.seq_len) * cfg.train.batch_size
                    gf = flops / t.seconds / 1e9
                    rows.append({"shape": name, "precision": p, "round": rnd, "path": t.path, "weight_t": t.weight_t,
                                 "d_model": cfg.model.d_model, "d_ff": cfg.model.d_ff, "batch": cfg.train.batch_size,
                                 "steps": n, "ms_per_step": 1e3 * t.seconds, "gflops": gf,
                                 "pct_of_peak": 100 * gf / peak[dtype_of(p)], "cast_share": t.cast_share,
                                 "forward_ms": 1e3 * t.forward, "backward_ms": 1e3 * t.backward,
                                 "optimizer_ms": 1e3 * t.optimizer, "page_faults_per_step": t.page_faults,
                                 "overrides": " ".join(overrides)})
                    if prof is not None:
                        profiles[(name, p)] = prof
                    if t.split is not None:
                        splits[(name, p)] = t.split
    steps_df = pd.DataFrame(rows, columns=[c for c in STEP_COLUMNS if c != "speedup_vs_fp32"])
    steps_df.insert(STEP_COLUMNS.index("speedup_vs_fp32"), "speedup_vs_fp32", speedups(steps_df))
    gpu: tuple = (None, None, "the GPU bench not asked for")
    if cuda:
        from anchorlab.bench.cuda import cuda_bench

        try:
            gpu = cuda_bench(**{"precisions": list(precisions), "overrides": overrides, **(cuda_kw or {})})
        except Exception as e:  # noqa: BLE001 -- a failing GPU part must not lose the CPU tables measured above
            log.exception("the GPU bench failed")
            gpu = (None, None, f"the GPU bench failed: {type(e).__name__}: {e}")
    return BenchResult(units, threads, clock if isinstance(clock, str) else "custom", layouts, steps_df, profiles,
                       splits, malloc_retain, cpu_model_name() or "unknown CPU", *gpu, overrides=overrides)


def format_result(r: BenchResult) -> str:
    """The tables and verdicts as plain text (what ``anchorlab bench`` prints)."""
    out = [f"CPU: {r.cpu}; torch {torch.__version__}; {r.units.describe()}; {r.threads} thread(s); clock {r.clock}; "
           f"malloc_retain {'on' if r.malloc_retain else 'off'}"
           + (f"; every step with {' '.join(r.overrides)}" if r.overrides else ""),
           "", "FFN GEMMs per layout (NT forward x @ W.T, NN input gradient g @ W, TN weight gradient g.T @ x); "
           "peak per dtype = its best row:"]
    out.append(layout_pivot(r.layouts).round(1).to_string(index=False))
    out += ["", "training step (path: what ran; weight_t: the native forward's W.T, a copy or W's view "
            "(train.bf16_wt); "
            "cast_share: casts / forward+backward operator time):",
            r.steps.drop(columns="overrides").round(3).to_string(index=False)]
    if r.rounds > 1:
        out += ["", f"over the {r.rounds} rounds (median, min, max; speed-up against the same round's fp32 step):",
                r.summary().round(3).to_string(index=False)]
    for (shape, p), prof in r.profiles.items():
        out += ["", f"operator time, {shape} {p}, whole step (self CPU ms per step):",
                prof.round(3).to_string(index=False)]
    if r.splits:
        out += ["", "forward + backward operator split, side by side (self CPU ms per step and share):",
                r.profile_compare().round(3).to_string(index=False)]
    if r.cuda_steps is not None:
        out += ["", "CUDA: training step (models: 1 = one model, more = a stack):",
                r.cuda_steps.drop(columns="overrides", errors="ignore").round(2).to_string(index=False)]
        if r.cuda_layouts is not None:
            out += ["", "CUDA: FFN GEMMs per layout:", layout_pivot(r.cuda_layouts).round(1).to_string(index=False)]
    elif r.cuda_note:
        out += ["", r.cuda_note]
    out += [""] + r.verdicts()
    return "\n".join(out)


__all__ = ["STEP_COLUMNS", "BenchResult", "format_result", "run_bench"]

"""``anchorlab bench``: this machine's matmul peak per dtype and the training step per precision.

Three tidy tables, all measured in one process with the same thread count and clock:

* **peaks** -- dense matmul FLOP/s per dtype (float32, bfloat16) at the shapes the
  training step multiplies (the FFN's ``(B*T) x d_model @ d_model x d_ff`` and back,
  per shape preset); a dtype's *peak* is its best row.
* **steps** -- the training step (:func:`anchorlab.train.single.train_step`: loss,
  backward, clipping, AdamW, exactly the loop's code) per shape x precision:
  ms/step, achieved GFLOP/s (analytic count, :func:`train_flops_per_sample`),
  % of that dtype's peak, speed-up over float32, and the step split into its
  phases (forward, backward, optimizer) and the minor page faults per step.
* **profile** (``profile=True``) -- the forward+backward's operator time grouped
  into matmul / activation / softmax / layernorm / casts / other (torch.profiler).

Shapes: ``demo`` is ``demo/small`` (d_model 128, d_ff 512, batch 256, 2 layers);
``paper`` is ``neurips/paper`` (d_model 400, d_ff 1200, batch 2048, 2 layers).
Precisions: ``fp32`` (``train.amp=none``) and ``bf16`` (``train.amp=bf16``:
bfloat16 autocast, float32 master weights and AdamW state).

Nothing here is a test: the targets (bf16 >= 3x fp32 at the demo shape, >= 40% of
the bf16 peak at the paper shape) are printed as met / not met, never asserted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from ..config import ExperimentConfig, ModelConfig, load_config
from ..tasks.base import build_task
from ..train.optim import make_optimizer
from ..train.precision import CpuMatrixUnits, Precision, autocast, cpu_matrix_units
from ..train.run import init_model, numerics
from ..train.single import train_step

log = logging.getLogger(__name__)

SHAPES = {  # name -> (preset, overrides); data kept small: the step's cost does not depend on n_train
    "demo": ("demo/small", ("task.n_train=20000",)),
    "paper": ("neurips/paper", ("task.n_train=20000", "train.batch_size=2048")),
}
PRECISIONS = {"fp32": "none", "bf16": "bf16"}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TARGET_DEMO_SPEEDUP = 3.0
TARGET_PAPER_PEAK = 0.40


def train_flops_per_sample(m: ModelConfig, seq_len: int) -> float:
    """Analytic fwd+bwd FLOPs of one training sequence of the anchor task (bwd = 2 x fwd).

    The loss reads the last position only, so the last layer needs keys and values at every
    position but its query, W_O, FFN and the readout at the last position only::

      6 * T * (L-1) * (4 * d_model * H * d_head + 2 * d_model * d_ff)   layers 1..L-1
      + 12 * (L-1) * H * T^2 * d_head                                   their Q K^T and pattern V
      + 6 * (2 * T * d_model * H * d_head                               last layer: K, V everywhere,
             + 2 * d_model * H * d_head + 2 * d_model * d_ff)           Q, W_O, FFN at the last position
      + 12 * H * T * d_head                                             its one attention row
      + 6 * d_model * V                                                 readout, last position only
    """
    T, L, H = seq_len, m.n_layers, m.n_heads
    qkvo, ffn = 4 * m.d_model * H * m.d_head, 2 * m.d_model * m.d_ff      # MACs per position
    matmul = T * (L - 1) * (qkvo + ffn) + T * qkvo // 2 + qkvo // 2 + ffn  # last layer trimmed
    attn = 4 * H * m.d_head * ((L - 1) * T * T + T)  # fwd: Q K^T and pattern V, 2 FLOPs per MAC
    return 6.0 * matmul + 3.0 * attn + 6.0 * m.d_model * m.vocab_size


def clock_fn(name: str) -> Callable[[], float]:
    """``wall`` (perf_counter) or ``process`` (this process's CPU seconds: fair on a shared machine)."""
    if name not in ("wall", "process"):
        raise ValueError(f"--clock: must be 'wall' or 'process', got {name!r}")
    return time.perf_counter if name == "wall" else time.process_time


def matmul_gflops(m: int, k: int, n: int, dtype: torch.dtype, clock: Callable[[], float],
                  min_seconds: float = 0.3, generator: torch.Generator | None = None) -> float:
    """GFLOP/s of ``(m, k) @ (k, n)`` in ``dtype`` on the CPU (repeated for at least ``min_seconds``)."""
    g = generator or torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, n, generator=g).to(dtype)
    a @ b
    reps, t = 0, clock()
    while True:
        a @ b
        reps += 1
        dt = clock() - t
        if dt >= min_seconds:
            return 2.0 * m * k * n * reps / dt / 1e9


def peak_shapes(shapes: Sequence[str]) -> list[tuple[str, int, int, int]]:
    """(label, m, k, n) of the matmuls that set each dtype's peak: each shape's FFN both ways.

    (No big square matmul: where bfloat16 is emulated one 2048^3 product takes about a minute.)"""
    out = []
    for name in shapes:
        cfg = shape_config(name, "none")
        rows = cfg.train.batch_size * cfg.task.seq_len
        d, f = cfg.model.d_model, cfg.model.d_ff
        out += [(f"{name} ffn in", rows, d, f), (f"{name} ffn out", rows, f, d)]
    return out


def measure_peaks(shapes: Sequence[str], precisions: Sequence[str], clock: Callable[[], float],
                  min_seconds: float = 0.3) -> pd.DataFrame:
    """Tidy: precision, label, m, k, n, gflops (one row per dtype x matmul shape)."""
    rows = []
    for label, m, k, n in peak_shapes(shapes):
        for p in precisions:
            rows.append({"precision": p, "label": label, "m": m, "k": k, "n": n,
                         "gflops": matmul_gflops(m, k, n, DTYPES[p], clock, min_seconds)})
    return pd.DataFrame(rows)


def shape_config(name: str, amp: str, extra: Sequence[str] = ()) -> ExperimentConfig:
    if name not in SHAPES:
        raise ValueError(f"--shapes: unknown shape {name!r}; choose from {', '.join(SHAPES)}")
    preset, over = SHAPES[name]
    return load_config(preset, [*over, f"train.amp={amp}", *extra])


@dataclass
class StepTiming:
    seconds: float          # per step
    forward: float          # per step, each phase
    backward: float
    optimizer: float
    steps: int
    page_faults: float      # minor page faults per step (getrusage; NaN where unavailable)


def time_steps(cfg: ExperimentConfig, steps: int, warmup: int, clock: Callable[[], float],
               profile: bool = False) -> tuple[StepTiming, pd.DataFrame | None]:
    """Time ``steps`` training steps of ``cfg`` on the CPU after ``warmup`` untimed ones.

    The total is timed around :func:`train_step` itself; a second pass of the same
    number of steps times forward / backward / optimizer separately (CPU ops are
    synchronous, so the split is exact up to timer overhead).
    """
    task = build_task(cfg.task)
    model, _ = init_model(cfg)
    opt = make_optimizer(model, cfg.optim)
    data = task.train_data(cfg.train.data_seed)
    B = cfg.train.batch_size
    amp = autocast(Precision(cfg.train.amp, cfg.train.amp, "bench"), torch.device("cpu"))
    batches = [data.batch(torch.arange(i * B, (i + 1) * B) % len(data)) for i in range(4)]
    clip = cfg.optim.clip_norm

    def step(i: int) -> None:
        train_step(model, model, opt, task, batches[i % len(batches)], amp, clip)

    for i in range(warmup):
        step(i)
    f0 = _minor_faults()
    t = clock()
    for i in range(steps):
        step(i)
    total = (clock() - t) / steps
    faults = (_minor_faults() - f0) / steps
    fw = bw = op = 0.0
    for i in range(steps):
        t0 = clock()
        with amp:
            loss = task.loss(model, batches[i % len(batches)])
        t1 = clock()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t2 = clock()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        t3 = clock()
        fw, bw, op = fw + t1 - t0, bw + t2 - t1, op + t3 - t2
    prof = profile_steps(lambda i: step(i), steps) if profile else None
    return StepTiming(total, fw / steps, bw / steps, op / steps, steps, faults), prof


def _minor_faults() -> float:
    """This process's minor page faults so far (a load-independent count of fresh-memory touches)."""
    try:
        import resource
    except ImportError:   # not on Windows
        return float("nan")
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


CATEGORIES = (  # (category, substrings of aten op names), first match wins
    ("matmul", ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "mkldnn", "aten::_mm")),
    ("activation", ("relu", "clamp_min", "threshold_backward", "gelu")),
    ("softmax", ("softmax",)),
    ("layernorm", ("layer_norm",)),
    ("casts", ("aten::copy_", "aten::_to_copy", "aten::to")),
    ("optimizer", ("lerp", "addcdiv", "addcmul", "aten::sqrt", "_foreach")),
)


def categorize(op: str) -> str:
    for cat, keys in CATEGORIES:
        if any(k in op for k in keys):
            return cat
    return "other"


def profile_steps(step: Callable[[int], None], steps: int) -> pd.DataFrame:
    """Self CPU time per operator category over ``steps`` steps -> category, ms_per_step, share."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as p:
        for i in range(steps):
            step(i)
    per: dict[str, float] = {}
    for ev in p.key_averages():
        if ev.key.startswith("aten::") or ev.key.startswith("mkldnn"):
            per[categorize(ev.key)] = per.get(categorize(ev.key), 0.0) + ev.self_cpu_time_total / 1e3
    df = pd.DataFrame([{"category": k, "ms_per_step": v / steps} for k, v in per.items()])
    if df.empty:
        return df
    df["share"] = df.ms_per_step / df.ms_per_step.sum()
    return df.sort_values("ms_per_step", ascending=False, ignore_index=True)


@dataclass
class BenchResult:
    units: CpuMatrixUnits
    threads: int
    clock: str
    peaks: pd.DataFrame
    steps: pd.DataFrame
    profiles: dict[tuple[str, str], pd.DataFrame]
    malloc_retain: bool = True

    def peak(self, precision: str) -> float:
        rows = self.peaks[self.peaks.precision == precision]
        return float(rows.gflops.max()) if len(rows) else float("nan")

    def verdicts(self) -> list[str]:
        """The targets, each met / not met / not measured, and why bf16 is not the default where it is not."""
        lines = []
        s = self.steps.set_index(["shape", "precision"])
        verdict = (lambda ok: "met" if ok else "not met") if self.units.bf16 else (lambda ok: "not applicable here")
        if not self.units.bf16:
            lines.append(f"bfloat16 targets do not apply: this CPU has no bfloat16 matrix units "
                         f"({self.units.describe()}); train.amp=auto trains in float32 here")
        if ("demo", "fp32") in s.index and ("demo", "bf16") in s.index:
            x = s.loc[("demo", "fp32"), "ms_per_step"] / s.loc[("demo", "bf16"), "ms_per_step"]
            ok = verdict(x >= TARGET_DEMO_SPEEDUP)
            lines.append(f"demo shape: bf16 step {x:.2f}x the fp32 step (target >= {TARGET_DEMO_SPEEDUP:g}x): {ok}")
        if ("paper", "bf16") in s.index:
            f = s.loc[("paper", "bf16"), "pct_of_peak"] / 100
            ok = verdict(f >= TARGET_PAPER_PEAK)
            lines.append(f"paper shape: bf16 step at {f:.0%} of the bf16 matmul peak "
                         f"(target >= {TARGET_PAPER_PEAK:.0%}): {ok}")
        return lines


def run_bench(shapes: Sequence[str] = ("demo", "paper"), precisions: Sequence[str] = ("fp32", "bf16"),
              steps: dict[str, int] | None = None, warmup: int = 2, threads: int = 1, clock: str = "wall",
              profile: bool = False, min_seconds: float = 0.3, emulated_steps: int = 1,
              malloc_retain: bool = True) -> BenchResult:
    """Measure peaks and steps (see the module docstring). ``steps``: timed steps per shape
    (default demo 20, paper 4); bf16 on a CPU without bf16 units is capped at ``emulated_steps``
    (its matmuls are emulated and slow: 43 s a paper-shape step on an AVX2 EPYC) with no warm-up
    and no profile. ``malloc_retain``: as ``train.malloc_retain`` (process-wide once set: compare
    both settings in two processes)."""
    for p in precisions:
        if p not in PRECISIONS:
            raise ValueError(f"--precisions: unknown precision {p!r}; choose from {', '.join(PRECISIONS)}")
    for name in shapes:
        shape_config(name, "none")      # validates the name early
    steps = {"demo": 20, "paper": 4, **(steps or {})}
    tick = clock_fn(clock)
    units = cpu_matrix_units()
    # the run's own numeric switches (threads, flush-to-zero, malloc_retain), restored after
    switches = shape_config(shapes[0], "none", (f"train.threads={threads}", f"train.malloc_retain={malloc_retain}"))
    with numerics(switches, torch.device("cpu")):
        peaks = measure_peaks(shapes, precisions, tick, min_seconds)
        peak = peaks.groupby("precision").gflops.max().to_dict()
        rows, profiles = [], {}
        for name in shapes:
            for p in precisions:
                cfg = shape_config(name, PRECISIONS[p])
                n, w, prof_this = steps[name], warmup, profile
                if p == "bf16" and not units.bf16:
                    n, w, prof_this = min(n, emulated_steps), 0, False
                t, prof = time_steps(cfg, n, w, tick, prof_this)
                flops = train_flops_per_sample(cfg.model, cfg.task.seq_len) * cfg.train.batch_size
                gf = flops / t.seconds / 1e9
                rows.append({"shape": name, "precision": p, "d_model": cfg.model.d_model, "d_ff": cfg.model.d_ff,
                             "batch": cfg.train.batch_size, "steps": n, "ms_per_step": 1e3 * t.seconds,
                             "gflops": gf, "pct_of_peak": 100 * gf / peak[p],
                             "forward_ms": 1e3 * t.forward, "backward_ms": 1e3 * t.backward,
                             "optimizer_ms": 1e3 * t.optimizer, "page_faults_per_step": t.page_faults})
                if prof is not None:
                    profiles[(name, p)] = prof
    steps_df = pd.DataFrame(rows)
    if len(steps_df):
        base = steps_df[steps_df.precision == "fp32"].set_index("shape").ms_per_step
        steps_df["speedup_vs_fp32"] = [base.get(s, float("nan")) / ms
                                       for s, ms in zip(steps_df["shape"], steps_df.ms_per_step)]
    return BenchResult(units, threads, clock, peaks, steps_df, profiles, malloc_retain)


def format_result(r: BenchResult) -> str:
    """The tables and verdicts as plain text (what ``anchorlab bench`` prints)."""
    import platform

    cpu = _cpu_name() or platform.processor() or "unknown CPU"
    out = [f"CPU: {cpu}; torch {torch.__version__}; {r.units.describe()}; {r.threads} thread(s); clock {r.clock}; "
           f"malloc_retain {'on' if r.malloc_retain else 'off'}",
           "", "matmul GFLOP/s (peak per dtype = its best row):"]
    piv = r.peaks.pivot_table(index=["label", "m", "k", "n"], columns="precision", values="gflops", sort=False)
    out.append(piv.round(1).reset_index().to_string(index=False))
    out += ["", "training step:"]
    cols = ["shape", "precision", "batch", "steps", "ms_per_step", "gflops", "pct_of_peak", "speedup_vs_fp32",
            "forward_ms", "backward_ms", "optimizer_ms", "page_faults_per_step"]
    out.append(r.steps[cols].round(2).to_string(index=False))
    for (shape, p), prof in r.profiles.items():
        out += ["", f"operator time, {shape} {p} (self CPU ms per step):", prof.round(3).to_string(index=False)]
    out += [""] + r.verdicts()
    return "\n".join(out)


def _cpu_name() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


__all__ = ["BenchResult", "SHAPES", "format_result", "matmul_gflops", "run_bench", "train_flops_per_sample"]

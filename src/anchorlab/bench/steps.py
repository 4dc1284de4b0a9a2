"""The training step of ``anchorlab bench``: its time, its phases, and where its operator time goes.

:func:`time_steps` times :func:`anchorlab.train.single.train_step` (the loop's own code: loss, backward,
clipping, AdamW; over flat buffers as the loop has them, ``train.flat_params``) in the precision a config
resolves to on this CPU and in the loop's own step context (:func:`anchorlab.train.precision.step_context`:
autocast, the native bfloat16 path or none), and reports the path that ran
(:attr:`anchorlab.train.precision.Precision.path`), not the one asked for.

The profile (torch.profiler, self CPU time of each ``aten::`` operator) is split twice:

* over the whole step, by :data:`CATEGORIES` (:func:`profile_steps`'s table);
* over the forward + backward alone (every operator outside ``Optimizer.step`` and outside the AdamW /
  clipping arithmetic), by :data:`SPLIT` -- matmul / casts / softmax / layernorm / activation / other --
  whose ``casts`` share is the step's *cast share* (``aten::copy_``, ``to``, ``_to_copy``: the float32 <->
  bfloat16 conversions of activations, outputs and gradients, and plain copies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch

from anchorlab.config import ExperimentConfig
from anchorlab.tasks.base import build_task
from anchorlab.train.flat import FlatAdamW, clip_gradients
from anchorlab.train.optim import make_optimizer
from anchorlab.train.precision import Precision, resolve_precision, step_context
from anchorlab.train.run import init_model
from anchorlab.train.single import train_step
from anchorlab.bench.shapes import Clock

CATEGORIES = (  # (category, substrings of aten op names), first match wins
    ("matmul", ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "mkldnn", "aten::_mm")),
    ("activation", ("relu", "clamp_min", "threshold_backward", "gelu")),
    ("softmax", ("softmax",)),
    ("layernorm", ("layer_norm",)),
    ("casts", ("aten::copy_", "aten::_to_copy", "aten::to")),
    ("optimizer", ("lerp", "addcdiv", "addcmul", "aten::sqrt", "_foreach")),
)
SPLIT = ("matmul", "casts", "softmax", "layernorm", "activation", "other")   # the forward + backward's split


def categorize(op: str) -> str:
    for cat, keys in CATEGORIES:
        if any(k in op for k in keys):
            return cat
    return "other"


@dataclass(frozen=True)
class StepTiming:
    seconds: float          # per step
    forward: float          # per step, each phase
    backward: float
    optimizer: float
    steps: int
    page_faults: float      # minor page faults per step (getrusage; NaN where unavailable)
    path: str = "fp32"      # the path that ran (Precision.path)
    cast_share: float = float("nan")   # casts / forward+backward operator time (NaN unless profiled)
    split: pd.DataFrame | None = None  # the forward+backward's split (fwd_bwd_split; None unless profiled)
    weight_t: str = ""      # the native path's forward W.T: "copy" or "view" (train.bf16_wt); "" on the others


def bench_precision(cfg: ExperimentConfig, device: torch.device | None = None) -> Precision:
    """``cfg``'s precision resolved on ``device`` (default the CPU), as a run resolves it."""
    return resolve_precision(cfg.train.amp, device or torch.device("cpu"), bf16_path=cfg.train.bf16_path,
                             dtype=cfg.train.dtype)


def time_steps(cfg: ExperimentConfig, steps: int, warmup: int, clock: Clock, profile: bool = False
               ) -> tuple[StepTiming, pd.DataFrame | None]:
    """Time ``steps`` training steps of ``cfg`` on the CPU after ``warmup`` untimed ones.

    The total is timed around :func:`train_step` itself; a second pass of the same number of steps
    times forward / backward / optimizer separately (CPU ops are synchronous, so the split is exact up
    to timer overhead). ``profile``: a third pass under torch.profiler -> the whole step's operator
    table (category, ms_per_step, share) and the cast share of the forward + backward.
    """
    task = build_task(cfg.task)
    model, _ = init_model(cfg)
    opt = make_optimizer(model, cfg.optim)
    if cfg.train.flat_params:   # as the single loop does (train/single.py)
        opt = FlatAdamW.from_optimizer(model, opt)
    data = task.train_data(cfg.train.data_seed)
    B = cfg.train.batch_size
    precision = bench_precision(cfg)
    amp = step_context(precision, torch.device("cpu"), model, wt=cfg.train.bf16_wt)   # as the single loop runs it
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
            clip_gradients(model, opt, clip)
        opt.step()
        after = getattr(amp, "after_step", None)    # the native path's copies, as train_step casts them
        if after is not None:
            after()
        t3 = clock()
        fw, bw, op = fw + t1 - t0, bw + t2 - t1, op + t3 - t2
    prof, split = None, None
    if profile:
        events = profile_events(step, steps)
        prof, split = category_table(events, steps), fwd_bwd_split(events, steps)
    share = cast_share(split) if split is not None else float("nan")
    weight_t = ("copy" if amp.weights.transposed_copy else "view") if precision.path == "native" else ""
    return StepTiming(total, fw / steps, bw / steps, op / steps, steps, faults, precision.path, share, split,
                      weight_t), prof


def _minor_faults() -> float:
    """This process's minor page faults so far (a load-independent count of fresh-memory touches)."""
    try:
        import resource
    except ImportError:   # not on Windows
        return float("nan")
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def profile_events(step: Callable[[int], None], steps: int) -> list[tuple[str, float, bool]]:
    """``steps`` steps under torch.profiler -> (aten op, self CPU ms, inside the optimizer step) per call."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as p:
        for i in range(steps):
            step(i)
    out = []
    for ev in p.events():
        if not (ev.name.startswith("aten::") or ev.name.startswith("mkldnn")):
            continue
        parent, in_opt = ev.cpu_parent, False
        while parent is not None and not in_opt:
            in_opt, parent = parent.name.startswith("Optimizer."), parent.cpu_parent
        out.append((ev.name, ev.self_cpu_time_total / 1e3, in_opt))
    return out


def category_table(events: list[tuple[str, float, bool]], steps: int) -> pd.DataFrame:
    """The whole step's operator time by :data:`CATEGORIES` -> category, ms_per_step, share."""
    per: dict[str, float] = {}
    for name, ms, _ in events:
        per[categorize(name)] = per.get(categorize(name), 0.0) + ms
    df = pd.DataFrame([{"category": k, "ms_per_step": v / steps} for k, v in per.items()])
    if df.empty:
        return df
    df["share"] = df.ms_per_step / df.ms_per_step.sum()
    return df.sort_values("ms_per_step", ascending=False, ignore_index=True)


def profile_steps(step: Callable[[int], None], steps: int) -> pd.DataFrame:
    """Self CPU time per operator category over ``steps`` steps -> category, ms_per_step, share."""
    return category_table(profile_events(step, steps), steps)


def fwd_bwd_split(events: list[tuple[str, float, bool]], steps: int) -> pd.DataFrame:
    """The forward + backward's operator time by :data:`SPLIT` (every category present, 0 where none):
    category, ms_per_step, share. The optimizer step and the AdamW / clipping arithmetic are left out."""
    per = dict.fromkeys(SPLIT, 0.0)
    for name, ms, in_opt in events:
        cat = categorize(name)
        if in_opt or cat == "optimizer":
            continue
        per[cat if cat in per else "other"] += ms
    df = pd.DataFrame([{"category": k, "ms_per_step": v / steps} for k, v in per.items()])
    total = df.ms_per_step.sum()
    df["share"] = df.ms_per_step / total if total > 0 else float("nan")
    return df


def cast_share(split: pd.DataFrame) -> float:
    """The casts' share of a :func:`fwd_bwd_split`."""
    return float(split.set_index("category").share.get("casts", float("nan")))


def profile_compare(splits: dict[tuple[str, str], pd.DataFrame]) -> pd.DataFrame:
    """The forward + backward splits side by side (before: autocast, after: native, with float32 beside
    them where profiled): per shape and category, each precision's ms_per_step and share."""
    out = []
    for shape in dict.fromkeys(s for s, _ in splits):
        by = {p: splits[(s, p)].set_index("category") for s, p in splits if s == shape}
        for cat in SPLIT:
            row: dict[str, object] = {"shape": shape, "category": cat}
            for p, t in by.items():
                row[f"{p}_ms"], row[f"{p}_share"] = t.ms_per_step[cat], t.share[cat]
            out.append(row)
    return pd.DataFrame(out)


__all__ = ["CATEGORIES", "SPLIT", "StepTiming", "bench_precision", "cast_share", "categorize", "category_table",
           "fwd_bwd_split", "profile_compare", "profile_events", "profile_steps", "time_steps"]

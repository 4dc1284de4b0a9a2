"""``anchorlab bench`` on a CUDA device: one model and a stack of G at the paper's shape, % of the peak.

Where no CUDA device is present :func:`cuda_bench` returns no table and the reason, and the bench
says it skipped. The step is timed through the training entry points themselves (:func:`anchorlab.train.train`
for one model, :func:`anchorlab.train.stacked.train_stack` for a stack) in a temporary directory: the runs
train ``2 * steps`` steps with evaluations at 0, ``steps`` and ``2 * steps``; the first ``steps`` are the
warm-up and the time per step is the interval between the last two evaluations less the last ones' own
``eval_seconds`` (every model's, for a stack). The peak is the best FFN GEMM of the shape on the device
(:mod:`.gemm`'s layouts). ``overrides`` (the bench's ``--set``) apply to every config, as on the CPU; a
stack they make impossible (``optim.fused=true``: a stack's update is the foreach one) keeps its row,
untimed, with the one-line reason in ``note``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from anchorlab.config import ConfigError, ExperimentConfig
from anchorlab.train import train
from anchorlab.train.precision import resolve_precision
from anchorlab.train.stacked import check_stackable, train_stack
from anchorlab.bench.gemm import measure_layouts, peaks
from anchorlab.bench.shapes import Clock, check_names, clock_fn, dtype_of, shape_config, train_flops_per_sample


def synced(clock: Clock, device: torch.device) -> Clock:
    """``clock`` read after the device's queued work has finished."""
    if device.type != "cuda":
        return clock

    def read() -> float:
        torch.cuda.synchronize(device)
        return clock()
    return read


def stack_configs(cfg: ExperimentConfig, models: int) -> list[ExperimentConfig]:
    """``models`` configs of one stack: the shape's config with init seeds 0..models-1."""
    return [_with(cfg, [f"train.init_seed={g}"]) for g in range(models)]


def _with(cfg: ExperimentConfig, overrides: Sequence[str]) -> ExperimentConfig:
    from anchorlab.config import experiment_from_dict
    return experiment_from_dict(cfg.to_dict(), list(overrides))


def time_trained(cfg: ExperimentConfig, models: int, steps: int, out: Path, clock: Clock,
                 device: torch.device) -> tuple[float, str]:
    """Seconds per step of ``models`` models trained together (1: the single loop, more: a stack) and the
    path that ran (final.json's ``precision.path``)."""
    cfg = _with(cfg, [f"train.max_steps={2 * steps}", f"train.eval_every={steps}",
                      f"train.checkpoint_every={2 * steps}", f"train.device={device.type}"])
    stamps: dict[int, float] = {}

    def stamp(step: int, model: torch.nn.Module) -> dict[str, float]:
        stamps[step] = clock()      # after a model's evaluation at `step`: the last read is after every model's
        return {}

    if models == 1:
        finals: list[dict[str, Any]] = [train(cfg, out / "m0", callbacks=[stamp]).final]
    else:
        finals = train_stack(stack_configs(cfg, models), [out / f"m{g}" for g in range(models)], device,
                             callbacks=[stamp])
    evals = sum(_eval_seconds(out / f"m{g}", 2 * steps) for g in range(models))   # the last evaluations' own time
    return (stamps[2 * steps] - stamps[steps] - evals) / steps, str(finals[0].get("precision", {}).get("path", ""))


def _eval_seconds(run_dir: Path, step: int) -> float:
    import json

    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["step"] == step:
            return float(row.get("eval_seconds", 0.0))
    return 0.0


def device_bench(device: torch.device, shape: str = "paper", precisions: Sequence[str] = ("fp32", "bf16"),
                 stacks: Sequence[int] = (1, 16), steps: int = 10, clock: str | Clock = "wall",
                 min_seconds: float = 0.3, overrides: Sequence[str] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(steps, layouts) on ``device``: per precision and stack size the ms per step, the GFLOP/s of all
    its models and the % of that dtype's peak on the device; the shape's FFN GEMMs per layout.
    ``overrides``: config overrides for every run (recorded in the ``overrides`` column). A stack size
    they rule out, or a precision the device cannot run (``bf16-native`` off the CPU), is not timed; its row
    says why in ``note``."""
    check_names([shape], precisions)
    overrides = tuple(overrides)
    cfgs = {p: shape_config(shape, p, extra=overrides) for p in precisions}   # a bad override: before timing
    tick = synced(clock_fn(clock), device)
    layouts = measure_layouts([shape], sorted({dtype_of(p) for p in precisions}), tick, min_seconds, device)
    peak = peaks(layouts)
    rows = []
    for p, cfg in cfgs.items():
        flops = train_flops_per_sample(cfg.model, cfg.task.seq_len) * cfg.train.batch_size
        for g in stacks:
            row = {"device": _name(device), "shape": shape, "precision": p, "path": "", "models": g,
                   "steps": steps, "ms_per_step": float("nan"), "gflops": float("nan"),
                   "pct_of_peak": float("nan"), "overrides": " ".join(overrides), "note": ""}
            try:
                resolve_precision(cfg.train.amp, device, bf16_path=cfg.train.bf16_path, dtype=cfg.train.dtype)
                if g > 1:
                    check_stackable(stack_configs(cfg, g))
            except ConfigError as e:   # a path the device cannot run (native off the CPU), a stack ruled out
                rows.append({**row, "note": f"not timed: {e}"})
                continue
            with tempfile.TemporaryDirectory(prefix="anchorlab-bench-") as tmp:
                sec, path = time_trained(cfg, g, steps, Path(tmp), tick, device)
            gf = g * flops / sec / 1e9
            rows.append({**row, "path": path, "ms_per_step": 1e3 * sec, "gflops": gf,
                         "pct_of_peak": 100 * gf / peak[dtype_of(p)]})
    return pd.DataFrame(rows), layouts


def _name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return device.type


def cuda_bench(**kw: Any) -> tuple[pd.DataFrame | None, pd.DataFrame | None, str]:
    """:func:`device_bench` on the first CUDA device -> (steps, layouts, "") or (None, None, why skipped)."""
    if not torch.cuda.is_available():
        return None, None, "no CUDA device: the GPU bench skipped"
    return (*device_bench(torch.device("cuda"), **kw), "")


__all__ = ["cuda_bench", "device_bench", "stack_configs", "synced", "time_trained"]

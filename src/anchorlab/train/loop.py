"""Training one model on the anchor task: the run directory is the record.

``run_experiment(cfg, out_dir)`` writes::

    out_dir/config.yaml       full config
    out_dir/param_table.csv   name, role, shape, fan_in, gamma, target/measured std, lr, weight decay
    out_dir/metrics.jsonl     one line per evaluation (step, epoch, lr, train_loss, metrics)
    out_dir/checkpoint.pt     latest state (model, optimizer, step), written atomically
    out_dir/model.safetensors final weights
    out_dir/final.json        run_id, status, final and best metrics, history, versions, timings

Re-running on the same directory resumes from the checkpoint and produces the
same numbers as an uninterrupted run: the data order of epoch ``e`` depends
only on ``(data_seed, e)``, and checkpoints are taken at evaluation steps.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F

from ..config import ConfigError, ExperimentConfig, dump_config, experiment_from_dict
from ..eval.metrics import evaluate
from ..io import read_json, write_json, write_text
from ..model.init import apply_init_rate
from ..model.transformer import Transformer, build_model
from ..tasks.anchor import AnchorTask
from .checkpoint import load_checkpoint, versions
from .fit import fit
from .fit import steps_plan as _steps_plan

log = logging.getLogger(__name__)
Callback = Callable[[int, torch.nn.Module], dict[str, float]]


@dataclass
class RunResult:
    model: Transformer
    task: AnchorTask
    final: dict[str, Any]
    run_dir: Path


def pick_device(spec: str) -> torch.device:
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"train.device: {spec!r} requested but CUDA is not available; use 'cpu' or 'auto'")
    return torch.device(spec)


@contextlib.contextmanager
def numerics(cfg: ExperimentConfig, device: torch.device):
    """Process-wide numeric switches for the duration of a run, restored after."""
    t = cfg.train
    old_threads = torch.get_num_threads()
    old_tf32 = torch.backends.cuda.matmul.allow_tf32 if torch.cuda.is_available() else None
    if t.threads:
        torch.set_num_threads(t.threads)
    if device.type == "cpu":
        torch.set_flush_denormal(t.flush_denormal)
    if old_tf32 is not None:
        torch.backends.cuda.matmul.allow_tf32 = t.tf32
        torch.backends.cudnn.allow_tf32 = t.tf32
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        if device.type == "cpu":
            torch.set_flush_denormal(False)
        if old_tf32 is not None:
            torch.backends.cuda.matmul.allow_tf32 = old_tf32


def init_model(cfg: ExperimentConfig) -> tuple[Transformer, pd.DataFrame]:
    """Build the model and apply the init rate with the init seed (CPU, float32/64)."""
    model = build_model(cfg.model)
    gen = torch.Generator().manual_seed(cfg.train.init_seed)
    table = apply_init_rate(model, cfg.init, generator=gen)
    if cfg.train.dtype == "float64":
        model = model.double()
    return model, table


def steps_plan(cfg: ExperimentConfig) -> tuple[int, int, int]:
    """(steps_per_epoch, total_steps, eval_every) of an anchor-task run."""
    return _steps_plan(cfg, cfg.task.n_train)


def check_run_dir(run_dir: Path, cfg: ExperimentConfig) -> None:
    """Refuse a directory that holds a different run (its config.yaml has another run id)."""
    cfg_path = run_dir / "config.yaml"
    if cfg_path.exists():
        import yaml
        old = experiment_from_dict(yaml.safe_load(cfg_path.read_text()))
        if old.run_id() != cfg.run_id():
            raise ConfigError(f"out_dir {run_dir}: holds a different run ({old.run_id()} != {cfg.run_id()}); "
                              "use another directory")


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, *, callbacks: Iterable[Callback] = (),
                   progress: bool = False, stop_after_step: int | None = None) -> dict[str, Any]:
    """Train one model; write the run directory; return the final.json dict.

    ``stop_after_step`` ends the process-local loop early (after the
    checkpoint at that step) without writing final.json — used to test resume.
    """
    return train(cfg, out_dir, callbacks=callbacks, progress=progress,
                 stop_after_step=stop_after_step).final


def train(cfg: ExperimentConfig, out_dir: str | Path, *, callbacks: Iterable[Callback] = (),
          progress: bool = False, stop_after_step: int | None = None) -> RunResult:
    run_dir = Path(out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    check_run_dir(run_dir, cfg)
    write_text(run_dir / "config.yaml", dump_config(cfg))
    device = pick_device(cfg.train.device)
    callbacks = list(callbacks)
    if cfg.train.log_complexity:
        from ..analysis.spectra import ComplexityCallback
        callbacks.append(ComplexityCallback())
    with numerics(cfg, device):
        return _train(cfg, run_dir, device, list(callbacks), progress, stop_after_step)


def _train(cfg: ExperimentConfig, run_dir: Path, device: torch.device, callbacks: list[Callback],
           progress: bool, stop_after_step: int | None) -> RunResult:
    task = AnchorTask(cfg.task)
    data = task.train_data(cfg.train.data_seed)
    eval_sets = task.eval_sets(cfg.train.data_seed)
    tokens, targets = data.tokens.to(device), data.targets.to(device)

    def batch_loss(fwd, idx: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(fwd(tokens[idx], last_only=True).float(), targets[idx])  # last token only

    r = fit(cfg, run_dir, device, n_train=len(data), batch_loss=batch_loss,
            evaluate=lambda m: evaluate(m, task, eval_sets)[0], callbacks=callbacks, progress=progress,
            stop_after_step=stop_after_step, postfix=("id_acc", "ood_acc"))
    if r.status == "interrupted":
        return RunResult(r.model, task, {"status": "interrupted", "step": r.step}, run_dir)
    final = finalize(cfg, run_dir, r.history, r.status, r.wall_seconds, r.step)
    return RunResult(r.model, task, final, run_dir)


def finalize(cfg: ExperimentConfig, run_dir: Path, history: list[dict[str, Any]], status: str,
             wall: float, step: int) -> dict[str, Any]:
    last = history[-1] if history else {}
    skip = {"step", "epoch", "lr", "wall_seconds", "eval_seconds"}
    metrics = [k for k in last if k not in skip and isinstance(last[k], (int, float))]
    best = {}
    for k in metrics:
        vals = [h[k] for h in history[1:] if isinstance(h.get(k), (int, float)) and math.isfinite(h[k])]
        if vals:
            best[k] = min(vals) if k.endswith("loss") or k == "ood_other_frac" else max(vals)
    final = {"run_id": cfg.run_id(), "name": cfg.name, "status": status, "steps": step,
             "final": {k: last[k] for k in metrics}, "best": best, "history": history,
             "wall_seconds": wall, "versions": versions(), "config": cfg.to_dict()}
    write_json(run_dir / "final.json", final)
    return final


def load_run(run_dir: str | Path, device: str = "cpu") -> RunResult:
    """Rebuild a trained model (final weights, else the checkpoint) from a run directory."""
    import yaml

    from .checkpoint import load_weights

    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").exists():
        raise ConfigError(f"run {run_dir}: no config.yaml; not a run directory")
    cfg = experiment_from_dict(yaml.safe_load((run_dir / "config.yaml").read_text()))
    model = build_model(cfg.model)
    if (run_dir / "model.safetensors").exists():
        load_weights(run_dir / "model.safetensors", model)
    else:
        ck = load_checkpoint(run_dir)
        if ck is None:
            raise ConfigError(f"run {run_dir}: no model.safetensors or checkpoint.pt")
        model.load_state_dict(ck["model"])
    final = read_json(run_dir / "final.json") if (run_dir / "final.json").exists() else {}
    return RunResult(model.to(device).eval(), AnchorTask(cfg.task), final, run_dir)


def config_of(run_dir: str | Path) -> ExperimentConfig:
    import yaml
    return experiment_from_dict(yaml.safe_load((Path(run_dir) / "config.yaml").read_text()))

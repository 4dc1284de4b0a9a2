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
import json
import logging
import math
import time
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
from .checkpoint import load_checkpoint, save_checkpoint, save_weights, versions
from .optim import lr_at, make_optimizer

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


def epoch_permutation(n: int, data_seed: int, epoch: int) -> torch.Tensor:
    """Data order of one epoch, a function of (data_seed, epoch) only."""
    g = torch.Generator().manual_seed((data_seed * 1_000_003 + epoch) % (2**63 - 1))
    return torch.randperm(n, generator=g)


def steps_plan(cfg: ExperimentConfig) -> tuple[int, int, int]:
    """(steps_per_epoch, total_steps, eval_every); the last partial batch is dropped."""
    spe = max(cfg.task.n_train // cfg.train.batch_size, 1)
    total = max(int(round(cfg.train.epochs * spe)), 1)
    if cfg.train.max_steps:
        total = min(total, cfg.train.max_steps)
    return spe, total, cfg.train.eval_every or spe


def _check_dir(run_dir: Path, cfg: ExperimentConfig) -> None:
    cfg_path = run_dir / "config.yaml"
    if cfg_path.exists():
        import yaml
        old = experiment_from_dict(yaml.safe_load(cfg_path.read_text()))
        if old.run_id() != cfg.run_id():
            raise ConfigError(f"out_dir {run_dir}: holds a different run ({old.run_id()} != {cfg.run_id()}); "
                              "use another directory")


def _read_history(run_dir: Path, upto_step: int) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["step"] <= upto_step]


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
    _check_dir(run_dir, cfg)
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
    t0 = time.perf_counter()
    task = AnchorTask(cfg.task)
    data = task.train_data(cfg.train.data_seed)
    eval_sets = task.eval_sets(cfg.train.data_seed)
    tokens, targets = data.tokens.to(device), data.targets.to(device)

    model, table = init_model(cfg)
    model.to(device)
    opt = make_optimizer(model, cfg.optim)
    lr_of = {n: g for g in opt.param_groups for n in g["names"]}
    table["lr"] = cfg.optim.lr
    table["lr_peak"] = cfg.optim.lr * cfg.optim.warmup_multiplier
    table["weight_decay"] = [lr_of[n]["weight_decay"] for n in table.name]
    from ..io import atomic_write
    atomic_write(run_dir / "param_table.csv", lambda p: table.to_csv(p, index=False))

    spe, total, eval_every = steps_plan(cfg)
    ckpt_every = cfg.train.checkpoint_every or eval_every
    step, wall_before = 0, 0.0
    ck = load_checkpoint(run_dir, map_location=device)
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        step, wall_before = int(ck["step"]), float(ck.get("wall_seconds", 0.0))
        log.info("resumed %s at step %d", run_dir, step)
    history = _read_history(run_dir, step)
    write_text(run_dir / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in history))

    fwd = torch.compile(model) if cfg.train.compile else model
    amp = (torch.autocast(device_type=device.type, dtype=torch.bfloat16)
           if cfg.train.amp == "bf16" else contextlib.nullcontext())
    B = cfg.train.batch_size
    status, loss_sum, loss_n = "finished", torch.zeros((), device=device), 0
    perm, perm_epoch = None, -1
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=total, initial=step, desc=cfg.name, unit="step", dynamic_ncols=True)

    def record(step_now: int) -> dict[str, Any]:
        metrics, _, _ = evaluate(model, task, eval_sets)
        row = {"step": step_now, "epoch": step_now / spe, "lr": lr_at(max(step_now - 1, 0), spe, cfg.optim),
               "train_loss": float(loss_sum) / max(loss_n, 1) if loss_n else math.nan,
               "wall_seconds": wall_before + time.perf_counter() - t0}
        for cb in callbacks:
            row.update(cb(step_now, model))
        row.update(metrics)
        with open(run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        history.append(row)
        return row

    if not history:
        record(0)
    model.train()
    while step < total:
        epoch = step // spe
        if epoch != perm_epoch:
            perm, perm_epoch = epoch_permutation(len(data), cfg.train.data_seed, epoch).to(device), epoch
        idx = perm[(step % spe) * B:(step % spe + 1) * B]
        lr = lr_at(step, spe, cfg.optim)
        for g in opt.param_groups:
            g["lr"] = lr
        with amp:
            logits = fwd(tokens[idx], last_only=True)
            loss = F.cross_entropy(logits.float(), targets[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.optim.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.clip_norm)
        opt.step()
        step += 1
        loss_sum += loss.detach()
        loss_n += 1
        if bar is not None:
            bar.update(1)
        if step % eval_every == 0 or step == total:
            if not math.isfinite(float(loss_sum)):
                status = "diverged"
                record(step)
                break
            row = record(step)
            loss_sum.zero_()
            loss_n = 0
            if bar is not None:
                bar.set_postfix(loss=f"{row['train_loss']:.3g}", id=f"{row['id_acc']:.2f}",
                                ood=f"{row['ood_acc']:.2f}")
            if step % ckpt_every == 0 or step == total:
                save_checkpoint(run_dir, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                          "step": step, "wall_seconds": wall_before + time.perf_counter() - t0})
            if stop_after_step is not None and step >= stop_after_step and step < total:
                if bar is not None:
                    bar.close()
                return RunResult(model, task, {"status": "interrupted", "step": step}, run_dir)
    if bar is not None:
        bar.close()

    save_weights(run_dir / "model.safetensors", model, {"run_id": cfg.run_id()})
    final = finalize(cfg, run_dir, history, status, wall_before + time.perf_counter() - t0, step)
    return RunResult(model, task, final, run_dir)


def finalize(cfg: ExperimentConfig, run_dir: Path, history: list[dict[str, Any]], status: str,
             wall: float, step: int) -> dict[str, Any]:
    last = history[-1] if history else {}
    skip = {"step", "epoch", "lr", "wall_seconds"}
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

"""The training driver shared by every task: one model, one run directory.

:func:`fit` owns what does not depend on the task: init with the init seed,
AdamW groups and the ParamTable, resume from ``checkpoint.pt``, the per-batch
schedule, clipping, periodic evaluation to ``metrics.jsonl``, divergence,
checkpoints and the final weights. A task supplies two callables:

* ``batch_loss(fwd, idx) -> loss``: the mean loss of the training rows ``idx``
  (a LongTensor on the device) under the forward function ``fwd``;
* ``evaluate(model) -> dict``: flat metrics of the current model.

The data order of epoch ``e`` depends only on ``(data_seed, e)`` and
checkpoints are taken at evaluation steps (where the running loss is reset),
so a resumed run reproduces an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..io import atomic_write, write_text
from .checkpoint import load_checkpoint, save_checkpoint, save_weights
from .optim import lr_at, make_optimizer

log = logging.getLogger(__name__)


@dataclass
class FitResult:
    model: torch.nn.Module
    status: str          # finished | diverged | interrupted
    step: int
    history: list[dict[str, Any]]
    wall_seconds: float


def epoch_permutation(n: int, data_seed: int, epoch: int) -> torch.Tensor:
    """Data order of one epoch, a function of (data_seed, epoch) only."""
    g = torch.Generator().manual_seed((data_seed * 1_000_003 + epoch) % (2**63 - 1))
    return torch.randperm(n, generator=g)


def steps_plan(cfg: Any, n_train: int) -> tuple[int, int, int]:
    """(steps_per_epoch, total_steps, eval_every); the last partial batch is dropped."""
    spe = max(n_train // cfg.train.batch_size, 1)
    total = max(int(round(cfg.train.epochs * spe)), 1)
    if cfg.train.max_steps:
        total = min(total, cfg.train.max_steps)
    return spe, total, cfg.train.eval_every or spe


def read_history(run_dir: Path, upto_step: int) -> list[dict[str, Any]]:
    """metrics.jsonl rows up to ``upto_step`` (rows after a checkpoint are dropped on resume)."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["step"] <= upto_step]


def fit(cfg: Any, run_dir: Path, device: torch.device, *, n_train: int,
        batch_loss: Callable[[Callable[..., torch.Tensor], torch.Tensor], torch.Tensor],
        evaluate: Callable[[torch.nn.Module], dict[str, float]],
        callbacks: Sequence[Callable[[int, torch.nn.Module], dict[str, float]]] = (),
        progress: bool = False, stop_after_step: int | None = None,
        postfix: Sequence[str] = ()) -> FitResult:
    """Train ``init_model(cfg)`` in ``run_dir`` (resuming); see the module docstring."""
    from .loop import init_model  # the anchor loop owns model construction

    t0 = time.perf_counter()
    model, table = init_model(cfg)
    model.to(device)
    opt = make_optimizer(model, cfg.optim)
    group_of = {n: g for g in opt.param_groups for n in g["names"]}
    table["lr"] = cfg.optim.lr
    table["lr_peak"] = cfg.optim.lr * cfg.optim.warmup_multiplier
    table["weight_decay"] = [group_of[n]["weight_decay"] for n in table.name]
    atomic_write(run_dir / "param_table.csv", lambda p: table.to_csv(p, index=False))

    spe, total, eval_every = steps_plan(cfg, n_train)
    ckpt_every = cfg.train.checkpoint_every or eval_every
    step, wall_before = 0, 0.0
    ck = load_checkpoint(run_dir, map_location=device)
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        step, wall_before = int(ck["step"]), float(ck.get("wall_seconds", 0.0))
        log.info("resumed %s at step %d", run_dir, step)
    history = read_history(run_dir, step)
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

    def wall() -> float:
        return wall_before + time.perf_counter() - t0

    def record(step_now: int) -> dict[str, Any]:
        metrics = evaluate(model)
        row = {"step": step_now, "epoch": step_now / spe, "lr": lr_at(max(step_now - 1, 0), spe, cfg.optim),
               "train_loss": float(loss_sum) / loss_n if loss_n else math.nan, "wall_seconds": wall()}
        for cb in callbacks:
            row.update(cb(step_now, model))
        row.update(metrics)
        with open(run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        history.append(row)
        return row

    try:
        if not history:
            record(0)
        model.train()
        while step < total:
            epoch = step // spe
            if epoch != perm_epoch:
                perm, perm_epoch = epoch_permutation(n_train, cfg.train.data_seed, epoch).to(device), epoch
            idx = perm[(step % spe) * B:(step % spe + 1) * B]
            lr = lr_at(step, spe, cfg.optim)
            for g in opt.param_groups:
                g["lr"] = lr
            with amp:
                loss = batch_loss(fwd, idx)
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
            if step % eval_every and step != total:
                continue
            if not math.isfinite(float(loss_sum)):
                status = "diverged"
                record(step)
                break
            row = record(step)
            loss_sum.zero_()
            loss_n = 0
            if bar is not None:
                bar.set_postfix({k: f"{row[k]:.3g}" for k in ("train_loss", *postfix) if k in row})
            if step % ckpt_every == 0 or step == total:
                save_checkpoint(run_dir, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                          "step": step, "wall_seconds": wall()})
            if stop_after_step is not None and stop_after_step <= step < total:
                return FitResult(model, "interrupted", step, history, wall())
    finally:
        if bar is not None:
            bar.close()
    save_weights(run_dir / "model.safetensors", model, {"run_id": cfg.run_id()})
    return FitResult(model, status, step, history, wall())

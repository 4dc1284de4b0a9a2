"""The single-model training loop: one model, one run directory (lifecycle in :mod:`.run`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from anchorlab.config import ExperimentConfig
from anchorlab.tasks.base import Task
from anchorlab.train.flat import FlatAdamW, clip_gradients
from anchorlab.train.optim import lr_at
from anchorlab.train.precision import step_context
from anchorlab.train.run import Callback, Progress, RunState, epoch_permutation

log = logging.getLogger(__name__)


def train_step(model: torch.nn.Module, fwd: Any, opt: torch.optim.Optimizer, task: Task, batch: dict[str, torch.Tensor],
               amp: Any, clip_norm: float) -> torch.Tensor:
    """One optimizer step of the single loop (also what ``anchorlab bench`` times): the loss under
    ``amp`` (an autocast context, the native bfloat16 one of :func:`~.precision.step_context`, or a null
    one), backward, clipping (over the flat buffers when ``opt`` is a :class:`~.flat.FlatAdamW`), AdamW;
    the native path's bfloat16 weight copies cast again from the updated masters; returns the loss."""
    with amp:
        loss = task.loss(fwd, batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if clip_norm > 0:
        clip_gradients(model, opt, clip_norm)
    opt.step()
    after = getattr(amp, "after_step", None)     # the native path's weight copies, cast from the new masters
    if after is not None:
        after()
    return loss


def train_single(cfg: ExperimentConfig, run_dir: str | Path, task: Task, device: torch.device, *,
                 callbacks: Sequence[Callback] = (), progress: bool = False,
                 stop_after_step: int | None = None, announce: Callable[[str], None] | None = None
                 ) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Train (or resume) one model; return it and its final.json dict.

    ``stop_after_step`` ends the loop after the checkpoint at that step
    without writing final.json (status ``interrupted``), to test resume.
    ``announce`` receives the run's start line before the first step.
    """
    st = RunState.open(cfg, run_dir, task, device, callbacks)
    if announce:
        announce(st.start_line())
    if cfg.train.flat_params:   # before compile and the bf16 weight cache: the parameters are re-seated
        st.optimizer = FlatAdamW.from_optimizer(st.model, st.optimizer)
    model, opt = st.model, st.optimizer
    data = st.train_data.to(device)
    spe, total, eval_every = st.plan
    fwd = torch.compile(model) if cfg.train.compile else model
    amp = step_context(st.precision, device, model, cfg.train.compile, cfg.train.bf16_wt)
    B = cfg.train.batch_size
    step = st.step
    status, loss_sum, loss_n = "finished", torch.zeros((), device=device), 0
    perm, perm_epoch = None, -1
    bar = Progress(progress, total, step, cfg.name)
    try:
        if not st.history:
            st.record(0, model, float("nan"))
        model.train()
        while step < total:
            epoch = step // spe
            if epoch != perm_epoch:
                perm, perm_epoch = epoch_permutation(len(data), cfg.train.data_seed, epoch).to(device), epoch
            idx = perm[(step % spe) * B:(step % spe + 1) * B]
            lr = lr_at(step, spe, cfg.optim)
            for g in opt.param_groups:
                g["lr"] = lr
            loss = train_step(model, fwd, opt, task, data.batch(idx), amp, cfg.optim.clip_norm)
            step += 1
            loss_sum += loss.detach()
            loss_n += 1
            bar.update()
            if step % eval_every and step != total:
                continue
            row = st.record(step, model, float(loss_sum) / loss_n)
            loss_sum.zero_()
            loss_n = 0
            bar.show(row, task.headline)
            stop = st.stop_status(row)
            if stop == "diverged":
                status = stop
                log.warning("%s diverged at step %d", st.run_dir, step)
                break
            if step % st.checkpoint_every == 0 or step == total or stop is not None:
                st.checkpoint(step, model.state_dict(), opt.state_dict())
            if stop is not None:
                status = stop
                break
            if stop_after_step is not None and stop_after_step <= step < total:
                return model, {"status": "interrupted", "step": step}
    finally:
        bar.close()
    return model, st.finish(model, status, step)

"""Train a stack of G same-shape models at once, as one set of stacked weights.

``train_stack(cfgs, out_dirs)`` trains G models that share the task and model
configs (they may differ in init, seeds, lr, weight decay, schedule, betas,
clip norm) and writes each model's run directory exactly like
:func:`anchorlab.train.train`: every run goes through the same lifecycle
(:class:`~anchorlab.train.run.RunState`: init, param table, resume, metrics
rows, early stopping, checkpoints, final.json). Each model computes what it
would compute alone, up to floating-point rounding:

* init: each run is opened by :class:`RunState` (its own init seed and gammas),
  then copied into the stack;
* data: model g's batch at step s is ``epoch_permutation(n, data_seed_g, e)``
  of its own ``task.train_data(data_seed_g)``, as in a single run;
* loss: ``torch.vmap`` over the task's own :meth:`~anchorlab.tasks.base.Task.loss`
  with ``torch.func.functional_call`` of one base module, so the stack runs
  the very same module and loss code; the summed per-model losses give each
  model the gradient of its own loss;
* clipping and AdamW: per model, on whole ``(G, P)`` tensors
  (:mod:`.stack_ops`); norm and bias parameters get weight decay exactly as
  :func:`~anchorlab.train.optim.param_groups` decides for each model.

Checkpoints are written per model in the single loop's format, so a stack
resumes where it stopped (and a single run can resume a stacked checkpoint);
models whose final.json exists are skipped. See docs/engine.md.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from anchorlab.config import ConfigError, ExperimentConfig
from anchorlab.tasks.base import build_task, stack_batches, task_class
from anchorlab.train.optim import lr_at, make_optimizer, param_groups
from anchorlab.train.precision import autocast, check_native, transposed_copy
from anchorlab.train.run import Callback, Progress, RunState, completed_final, epoch_permutation, numerics, pick_device
from anchorlab.train.stack_ops import StackedAdamW, StackedParams, clip_per_model, native_losses

log = logging.getLogger(__name__)

# train.* fields that must agree across a stack (seeds, checkpoint_every and stop_when may differ).
SHARED_TRAIN_FIELDS = ("epochs", "batch_size", "max_steps", "eval_every", "device", "dtype", "threads",
                       "flush_denormal", "malloc_retain", "compile", "amp", "bf16_path", "tf32")


# ----------------------------------------------------------------------------- validation
def _first_difference(path: str, a: Any, b: Any) -> tuple[str, Any, Any] | None:
    if dataclasses.is_dataclass(a) and type(a) is type(b):
        for f in dataclasses.fields(a):
            d = _first_difference(f"{path}.{f.name}", getattr(a, f.name), getattr(b, f.name))
            if d is not None:
                return d
        return None
    return None if a == b else (path, a, b)


def check_stackable(cfgs: Sequence[ExperimentConfig]) -> None:
    """Raise ConfigError naming the first field that prevents training ``cfgs`` as one stack.

    The task must allow stacking; task.* and model.* must be equal, and
    train.* except data_seed, init_seed, checkpoint_every and stop_when;
    init.* and optim.* may differ, except ``optim.fused`` (the stack's own update is the foreach one).
    """
    if not cfgs:
        raise ConfigError("cfgs: need at least one config to stack")
    ref = cfgs[0]
    if not task_class(ref.task.name).stackable:
        raise ConfigError(f"task.name: task {ref.task.name!r} cannot be trained as a stack (its loss is not "
                          "vmap-able); train its runs one by one")
    fused = [i for i, c in enumerate(cfgs) if c.optim.fused]
    if fused:
        raise ConfigError(f"optim.fused: a stack makes torch AdamW's foreach update on whole (G, P) tensors, not "
                          f"the fused kernel's (config {fused[0]} has true); train fused runs one by one or set false")
    for i, c in enumerate(cfgs[1:], 1):
        diffs = [_first_difference("task", ref.task, c.task), _first_difference("model", ref.model, c.model)]
        diffs += [_first_difference(f"train.{n}", getattr(ref.train, n), getattr(c.train, n))
                  for n in SHARED_TRAIN_FIELDS]
        for d in diffs:
            if d is not None:
                raise ConfigError(f"{d[0]}: must be the same for every model in a stack "
                                  f"(config 0 has {d[1]!r}, config {i} has {d[2]!r}); only init.*, optim.*, "
                                  "train.data_seed/init_seed/checkpoint_every/stop_when may differ")


# --------------------------------------------------------------------------- auto choice
# Stack vs loop on CPU (the speed of one stacked step of G models relative to G single-model
# steps, by work per model-step; measured once: notes/2026-12-code-measurements.md).
# On CPU the stack amortizes per-op overhead, which only matters for small work
# per step; at larger work batched matmuls (bmm) and LayerNorm with a batched
# affine (decomposed by vmap into extra elementwise passes) make it slower.
CPU_STACK_MAX_WORK = 1e8  # multiply-adds per model-step below which a CPU stack is used


def _work_per_model_step(cfg: ExperimentConfig) -> float:
    """Rough multiply-adds per model-step of a transformer: tokens x (d_model x width terms)."""
    m = cfg.model
    per_token = m.n_layers * (4 * m.d_model * m.n_heads * m.d_head + 2 * m.d_model * m.d_ff)
    return float(cfg.train.batch_size * m.max_len * per_token)


def should_stack(cfgs: Sequence[ExperimentConfig], device: torch.device | str | None = None) -> bool:
    """True when training ``cfgs`` with :func:`train_stack` is expected to beat one run each.

    Never for a single model or configs that cannot share a stack; always on
    CUDA; on CPU only for small work per model-step (below
    ``CPU_STACK_MAX_WORK`` multiply-adds), where the measured stack was faster.
    """
    if len(cfgs) < 2:
        return False
    try:
        check_stackable(cfgs)
    except ConfigError:
        return False
    dev = torch.device(device) if device is not None else pick_device(cfgs[0].train.device)
    if dev.type == "cuda":
        return True
    return _work_per_model_step(cfgs[0]) < CPU_STACK_MAX_WORK


def _torch_optimizer_state(st: RunState, m1: torch.Tensor, m2: torch.Tensor, stack: StackedParams,
                           step: int, lr: float, model: torch.nn.Module) -> dict:
    """Model g's moments as a ``torch.optim.AdamW`` state_dict (the single loop's format)."""
    opt = make_optimizer(model, st.cfg.optim)
    for g in opt.param_groups:
        g["lr"] = lr
    params = dict(model.named_parameters())
    for k, name in enumerate(stack.names):
        sl = stack.slices[k]
        opt.state[params[name]] = {
            "step": torch.tensor(float(step), dtype=torch.get_default_dtype()),
            "exp_avg": m1[sl].view(stack.shapes[k]).clone(),
            "exp_avg_sq": m2[sl].view(stack.shapes[k]).clone()}
    return opt.state_dict()


# ---------------------------------------------------------------------------------- API
def train_stack(cfgs: Sequence[ExperimentConfig], out_dirs: Sequence[str | Path],
                device: torch.device | str | None = None, *, callbacks: Iterable[Callback] = (),
                progress: bool = False, stop_after_step: int | None = None) -> list[dict[str, Any]]:
    """Train G same-shape models as one stack; return their final.json dicts (in ``cfgs`` order).

    Models whose final.json already exists (same run) are skipped; the others
    resume from their checkpoints (models at different checkpoint steps train
    as separate stacks). ``device``: None -> ``cfgs[0].train.device``.
    ``callbacks`` get ``(step, model)`` with the model unstacked.
    ``stop_after_step`` stops after the checkpoint at that step without
    final.json (status ``interrupted``). Raises ConfigError naming the field
    when the configs cannot share a stack.
    """
    cfgs = list(cfgs)
    dirs = [Path(d) for d in out_dirs]
    if len(dirs) != len(cfgs):
        raise ConfigError(f"out_dirs: need one directory per config ({len(cfgs)}), got {len(dirs)}")
    if len({d.resolve() for d in dirs}) != len(dirs):
        raise ConfigError("out_dirs: every model of a stack needs its own directory")
    check_stackable(cfgs)
    dev = torch.device(device) if device is not None else pick_device(cfgs[0].train.device)
    finals: list[dict[str, Any] | None] = [None] * len(cfgs)
    pending = []
    for i, (cfg, d) in enumerate(zip(cfgs, dirs)):
        done = completed_final(d, cfg)
        if done is not None:
            log.info("skipping %s: final.json exists", d)
            finals[i] = done
        else:
            pending.append(i)
    if pending:
        task = build_task(cfgs[0].task)
        with numerics(cfgs[0], dev):
            cache: dict[int, tuple[Any, Any]] = {}
            states = {i: RunState.open(cfgs[i], dirs[i], task, dev, list(callbacks), cache) for i in pending}
            by_step: dict[int, list[int]] = {}
            for i, st in states.items():
                by_step.setdefault(st.step, []).append(i)
            for start in sorted(by_step):
                group = by_step[start]
                results = _train_group([states[i] for i in group], start, dev, progress, stop_after_step)
                for i, final in zip(group, results):
                    finals[i] = final
    return finals  # type: ignore[return-value]


def _train_group(members: list[RunState], start: int, device: torch.device, progress: bool,
                 stop_after_step: int | None) -> list[dict[str, Any]]:
    cfg0, task = members[0].cfg, members[0].task
    spe, total, eval_every = members[0].plan
    B = cfg0.train.batch_size
    seeds = sorted({m.cfg.train.data_seed for m in members})
    data = {s: next(m.train_data for m in members if m.cfg.train.data_seed == s).to(device) for s in seeds}

    stack = StackedParams([m.model for m in members], device)
    G, opt = stack.data.shape[0], _stack_optimizer(members, stack, device, start)
    # One module is kept: the base of the functional call and the model that any
    # member is unstacked into for evaluation / saving. The others are freed.
    base = members[0].model
    for m in members:
        m.optimizer = None  # type: ignore[assignment]
    for m in members[1:]:
        m.model = None  # type: ignore[assignment]
    shared_data = len(seeds) == 1
    losses_of = _losses_fn(members[0], base, task, shared_data, device)
    amp = autocast(members[0].precision, device)

    active = list(range(G))                   # member index of each stack row
    finals: dict[int, dict[str, Any]] = {}
    loss_sum = torch.zeros(G, device=device)
    loss_n = 0
    perms: dict[int, torch.Tensor] = {}
    perm_epoch = -1
    bar = Progress(progress, total, start, f"stack of {G}")
    if start == 0:
        for r in range(G):
            if not members[r].history:
                members[r].record(0, stack.load_into(base, r), float("nan"))
    step = start
    try:
        while step < total and active:
            epoch = step // spe
            if epoch != perm_epoch:
                perms = {s: epoch_permutation(len(data[s]), s, epoch).to(device) for s in seeds}
                perm_epoch = epoch
            lo = (step % spe) * B
            if shared_data:
                batch = data[seeds[0]].batch(perms[seeds[0]][lo:lo + B])
            else:
                batch = stack_batches([data[s].batch(perms[s][lo:lo + B])
                                       for s in (members[g].cfg.train.data_seed for g in active)])
            lrs = [lr_at(step, spe, members[g].cfg.optim) for g in active]
            with amp:
                losses = losses_of(stack.params, batch)                                   # (G,)
            stack.zero_grad()
            with warnings.catch_warnings():
                # the grads are strided views of one buffer, by design
                warnings.filterwarnings("ignore", message=".*gradient layout contract.*")
                losses.sum().backward()
            stack.sync_grads()
            clip_per_model(stack, [members[g].cfg.optim.clip_norm for g in active])
            opt.update(stack.data, stack.grad, lrs)
            step += 1
            loss_sum += losses.detach()
            loss_n += 1
            bar.update()
            if step % eval_every and step != total:
                continue
            done = _evaluate(members, active, stack, opt, base, step, total, spe, (loss_sum, loss_n), finals)
            loss_sum.zero_()
            loss_n = 0
            bar.show({"step": step, "models_training": len(active) - len(done)}, ("models_training",))
            if done:
                keep = [r for r in range(len(active)) if r not in done]
                active = [active[r] for r in keep]
                if keep:
                    stack.select(keep)
                    opt.select(keep)
                    loss_sum = loss_sum[keep].clone()
            if stop_after_step is not None and stop_after_step <= step < total:
                return [finals.get(g, {"status": "interrupted", "step": step}) for g in range(G)]
    finally:
        bar.close()
    for r, g in enumerate(active):  # only reached when start >= total (nothing left to train)
        finals[g] = members[g].finish(stack.load_into(base, r), "finished", step)
    return [finals[g] for g in range(G)]


def _stack_optimizer(members: list[RunState], stack: StackedParams, device: torch.device,
                     start: int) -> StackedAdamW:
    """AdamW over the stacked weights: each model's decay mask, betas and eps; a resumed run's moments copied in."""
    G, P = stack.data.shape
    mask = torch.zeros(G, P, dtype=torch.bool, device=device)
    for g, m in enumerate(members):
        for grp in param_groups(m.model, m.cfg.optim):
            if grp["weight_decay"] != 0:
                for name in grp["names"]:
                    mask[g, stack.slices[stack.names.index(name)]] = True
    opt = StackedAdamW([m.cfg.optim.weight_decay for m in members], [m.cfg.optim.betas for m in members],
                       [m.cfg.optim.eps for m in members], mask, torch.zeros_like(stack.data),
                       torch.zeros_like(stack.data), step=start)
    with torch.no_grad():
        for g, m in enumerate(members):
            names = {id(p): n for n, p in m.model.named_parameters()}
            for p, s in m.optimizer.state.items():  # resumed runs: copy their AdamW moments
                k = stack.names.index(names[id(p)])
                opt.exp_avg[g, stack.slices[k]] = s["exp_avg"].reshape(-1)
                opt.exp_avg_sq[g, stack.slices[k]] = s["exp_avg_sq"].reshape(-1)
    return opt


def _losses_fn(first: RunState, base: torch.nn.Module, task, shared_data: bool, device: torch.device):
    """params (G stacked) x batch -> the G models' losses: the native bf16 stack, else a vmap of the functional
    call (compiled when ``train.compile``)."""
    cfg0 = first.cfg

    def one_loss(params: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return task.loss(lambda *a, **k: torch.func.functional_call(base, params, a, k), batch)

    if first.precision is not None and first.precision.path == "native":
        check_native(base, cfg0.train.compile)
        losses_of = native_losses(base, task, shared_data, transposed_copy(cfg0.train.bf16_wt, device))
    else:
        losses_of = torch.vmap(one_loss, in_dims=(0, None if shared_data else 0))
    return torch.compile(losses_of) if cfg0.train.compile else losses_of


def _evaluate(members: list[RunState], active: list[int], stack: StackedParams, opt: StackedAdamW,
              base: torch.nn.Module, step: int, total: int, spe: int, losses: tuple[torch.Tensor, int],
              finals: dict[int, dict[str, Any]]) -> list[int]:
    """Evaluate every active model at ``step``: record, checkpoint, finish the stopped ones (into ``finals``);
    return the stack rows that finished."""
    done = []
    for r, g in enumerate(active):
        m = members[g]
        model = stack.load_into(base, r)
        row = m.record(step, model, float(losses[0][r]) / losses[1])   # the mean training loss since the last
        stop = m.stop_status(row)
        if stop == "diverged":
            log.warning("%s diverged at step %d", m.run_dir, step)
        elif step % m.checkpoint_every == 0 or step == total or stop is not None:
            m.checkpoint(step, {k: v.clone() for k, v in model.state_dict().items()},
                         _torch_optimizer_state(m, opt.exp_avg[r], opt.exp_avg_sq[r], stack, step,
                                                lr_at(step - 1, spe, m.cfg.optim), model))
        if stop is not None or step == total:
            finals[g] = m.finish(model, stop or "finished", step)
            done.append(r)
    return done


__all__ = ["train_stack", "should_stack", "check_stackable", "SHARED_TRAIN_FIELDS", "CPU_STACK_MAX_WORK"]

"""Train a stack of G same-shape models at once, as one set of stacked weights.

``train_stack(cfgs, out_dirs)`` trains G models that share the model and task
configs (they may differ in init, seeds, lr, weight decay, schedule, betas,
clip norm) and writes each model's run directory exactly like
:func:`anchorlab.train.loop.train`. Each model computes what it would compute
alone, up to floating-point rounding:

* init: every model is built with :func:`~anchorlab.train.loop.init_model`
  (its own init seed and gammas), then copied into the stack;
* data: model g's batch at step s is ``epoch_permutation(n, data_seed_g, e)``
  of its own ``task.train_data(data_seed_g)``, as in a single run;
* forward: ``torch.vmap`` over ``torch.func.functional_call`` of one base
  Transformer, so the stack runs the very same module code (hook points
  included) with a leading model dimension on every weight;
* loss: the sum of the G per-model mean losses, so model g's gradient is the
  gradient of its own loss (the other terms do not depend on its weights);
* clipping: each model's gradient norm is computed and clipped on its own;
* AdamW: written out on the stacked tensors with per-model lr, weight decay,
  betas and eps, term by term as ``torch.optim.AdamW`` (single-tensor path);
  norm and bias parameters get no weight decay, taken from
  :func:`~anchorlab.train.optim.param_groups` of each model.

Storage: all parameters live in one ``(G, P)`` buffer (P = parameters per
model); each parameter is a leaf *view* ``(G, *shape)`` into it, and its
``.grad`` is a view into a matching ``(G, P)`` gradient buffer that autograd
accumulates into in place. Clipping and AdamW are then a handful of
elementwise ops on whole ``(G, P)`` tensors with ``(G, 1)`` per-model
coefficients, whatever the number of parameter tensors.

Checkpoints are written per model in the single loop's format, so a stack
resumes where it stopped (and a single run could resume a stacked
checkpoint); models whose final.json exists are skipped. See docs/engine.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ..config import ConfigError, ExperimentConfig, dump_config
from ..eval.metrics import evaluate
from ..io import atomic_write, read_json, write_text
from ..model.transformer import Transformer
from ..tasks.anchor import AnchorData, AnchorTask
from .checkpoint import load_checkpoint, save_checkpoint, save_weights
from .fit import epoch_permutation, read_history
from .loop import check_run_dir, finalize, init_model, numerics, pick_device, steps_plan
from .optim import lr_at, make_optimizer, param_groups

log = logging.getLogger(__name__)
Callback = Callable[[int, torch.nn.Module], dict[str, float]]

# train.* fields that must agree across a stack (seeds and checkpoint_every may differ).
SHARED_TRAIN_FIELDS = ("epochs", "batch_size", "max_steps", "eval_every", "device", "dtype", "threads",
                       "flush_denormal", "compile", "amp", "tf32")


# ----------------------------------------------------------------------------- validation
def _first_difference(path: str, a: Any, b: Any) -> tuple[str, Any, Any] | None:
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            d = _first_difference(f"{path}.{f.name}", getattr(a, f.name), getattr(b, f.name))
            if d is not None:
                return d
        return None
    return None if a == b else (path, a, b)


def check_stackable(cfgs: Sequence[ExperimentConfig]) -> None:
    """Raise ConfigError naming the first field that prevents training ``cfgs`` as one stack.

    task.* and model.* must be equal, and train.* except data_seed, init_seed
    and checkpoint_every; init.* and optim.* may differ.
    """
    if not cfgs:
        raise ConfigError("cfgs: need at least one config to stack")
    ref = cfgs[0]
    for i, c in enumerate(cfgs[1:], 1):
        diffs = [_first_difference("task", ref.task, c.task), _first_difference("model", ref.model, c.model)]
        diffs += [_first_difference(f"train.{n}", getattr(ref.train, n), getattr(c.train, n))
                  for n in SHARED_TRAIN_FIELDS]
        for d in diffs:
            if d is not None:
                raise ConfigError(f"{d[0]}: must be the same for every model in a stack "
                                  f"(config 0 has {d[1]!r}, config {i} has {d[2]!r}); "
                                  "only init.*, optim.*, train.data_seed/init_seed/checkpoint_every may differ")


# --------------------------------------------------------------------------- auto choice
# Stack vs loop on CPU, measured on the shared 2-core development box (torch 2.13
# CPU, 1 thread, process CPU time, min of 3 x 3 steps; docs/engine.md): speed of
# one stacked step of G models relative to G single-model steps.
#   work/model-step  model (d_model, batch, G)       stack/loop
#     3.5e6        d32,   B 32,   G 4             2.12x
#     2.8e7        d32,   B 256,  G 4             1.18x
#     9.4e7        d128,  B 32,   G 4             1.19x
#     2.3e8        d32,   B 2048, G 4             0.66x
#     7.4e8        d400,  B 32,   G 2             0.98x
#     7.6e8        d128,  B 256,  G 2 / 4         0.91x / 0.85x
#     2.9e9        d400,  B 128,  G 2             0.83x
#     3.0e9        d128,  B 1024, G 4             0.70x
# On CPU the stack amortizes per-op overhead, which only matters for small work
# per step; at larger work batched matmuls (bmm) and LayerNorm with a batched
# affine (decomposed by vmap into extra elementwise passes) make it slower.
CPU_STACK_MAX_WORK = 1e8  # multiply-adds per model-step below which a CPU stack is used


def _work_per_model_step(cfg: ExperimentConfig) -> float:
    """Rough multiply-adds per model-step: tokens x (d_model x width terms)."""
    m = cfg.model
    per_token = m.n_layers * (4 * m.d_model * m.n_heads * m.d_head + 2 * m.d_model * m.d_ff)
    return float(cfg.train.batch_size * cfg.task.seq_len * per_token)


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


# ------------------------------------------------------------------------ stacked state
class StackedParams:
    """G models' parameters as leaf views ``(G, *shape)`` into one ``(G, P)`` buffer."""

    def __init__(self, models: Sequence[torch.nn.Module], device: torch.device) -> None:
        ref = models[0]
        self.names = [n for n, _ in ref.named_parameters()]
        self.shapes = [tuple(p.shape) for _, p in ref.named_parameters()]
        self.slices: list[slice] = []
        off = 0
        for s in self.shapes:
            n = math.prod(s)
            self.slices.append(slice(off, off + n))
            off += n
        dtype = next(ref.parameters()).dtype
        self.data = torch.empty(len(models), off, dtype=dtype, device=device)
        with torch.no_grad():
            for g, m in enumerate(models):
                self.data[g] = torch.cat([p.detach().reshape(-1) for p in m.parameters()]).to(device)
        self._make_views()

    def _make_views(self) -> None:
        G = self.data.shape[0]
        self.grad = torch.zeros_like(self.data)
        self.params: dict[str, torch.Tensor] = {}
        self._grad_views: list[torch.Tensor] = []
        for name, sl, shape in zip(self.names, self.slices, self.shapes):
            leaf = self.data[:, sl].view(G, *shape).requires_grad_()
            gv = self.grad[:, sl].view(G, *shape)
            leaf.grad = gv
            self.params[name] = leaf
            self._grad_views.append(gv)

    @property
    def n_models(self) -> int:
        return int(self.data.shape[0])

    def zero_grad(self) -> None:
        self.grad.zero_()

    def sync_grads(self) -> None:
        """Make sure every ``.grad`` is still our view (autograd accumulates in place)."""
        for leaf, gv in zip(self.params.values(), self._grad_views):
            if leaf.grad is not gv and leaf.grad.data_ptr() != gv.data_ptr():  # pragma: no cover
                gv.copy_(leaf.grad)
                leaf.grad = gv

    def load_into(self, model: torch.nn.Module, g: int) -> torch.nn.Module:
        """Copy model g's weights into ``model`` (same shape) and return it."""
        with torch.no_grad():
            for (name, p), sl in zip(model.named_parameters(), self.slices):
                p.copy_(self.data[g, sl].view_as(p))
        return model

    def select(self, keep: list[int]) -> None:
        """Keep only models ``keep`` (in that order)."""
        idx = torch.tensor(keep, device=self.data.device)
        self.data = self.data.index_select(0, idx)
        self._make_views()


@dataclass
class StackedAdamW:
    """AdamW (decoupled weight decay) on ``(G, P)`` tensors with per-model hyper-parameters.

    Term by term ``torch.optim.AdamW``'s single-tensor update; ``decay_mask``
    (G, P) marks the entries that take weight decay.
    """

    weight_decay: list[float]
    betas: list[tuple[float, float]]
    eps: list[float]
    decay_mask: torch.Tensor
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    step: int = 0
    _const: dict[str, torch.Tensor] = field(default_factory=dict)

    def _col(self, values: list[float]) -> torch.Tensor:
        """Per-model numbers as a (G, 1) column in the state's dtype (cast like a Python scalar)."""
        return torch.tensor(values, dtype=self.exp_avg.dtype, device=self.exp_avg.device).unsqueeze(1)

    def _constants(self) -> dict[str, torch.Tensor]:
        if not self._const:
            self._const = {"w1": self._col([1 - b for b, _ in self.betas]), "b2": self._col([b for _, b in self.betas]),
                           "w2": self._col([1 - b for _, b in self.betas]), "eps": self._col(self.eps),
                           "one": torch.ones((), dtype=self.exp_avg.dtype, device=self.exp_avg.device)}
        return self._const

    @torch.no_grad()
    def update(self, param: torch.Tensor, grad: torch.Tensor, lr: list[float]) -> None:
        """One AdamW step of every model; param, grad: (G, P); lr: G floats.

        Temporaries go to two persistent (G, P) scratch buffers: fresh
        allocations of this size each step cost more than the arithmetic on CPU.
        """
        c = self._constants()
        if "tmp" not in c:
            c["tmp"], c["tmp2"] = torch.empty_like(param), torch.empty_like(param)
        tmp, tmp2 = c["tmp"], c["tmp2"]
        self.step += 1
        t = self.step
        if any(w != 0 for w in self.weight_decay):
            factor = self._col([1 - lr_g * wd for lr_g, wd in zip(lr, self.weight_decay)])
            param.mul_(torch.where(self.decay_mask, factor, c["one"], out=tmp))
        self.exp_avg.lerp_(grad, c["w1"])
        self.exp_avg_sq.mul_(c["b2"]).addcmul_(torch.mul(grad, c["w2"], out=tmp), grad)
        # small (G, 1) tensors carry this step's lr and bias corrections
        step_size = self._col([-(lr_g / (1 - b1 ** t)) for lr_g, (b1, _) in zip(lr, self.betas)])
        bc2_sqrt = self._col([(1 - b2 ** t) ** 0.5 for _, b2 in self.betas])
        denom = torch.sqrt(self.exp_avg_sq, out=tmp).div_(bc2_sqrt).add_(c["eps"])
        param.addcdiv_(torch.mul(self.exp_avg, step_size, out=tmp2), denom)

    def select(self, keep: list[int]) -> None:
        idx = torch.tensor(keep, device=self.exp_avg.device)
        self.exp_avg = self.exp_avg.index_select(0, idx)
        self.exp_avg_sq = self.exp_avg_sq.index_select(0, idx)
        self.decay_mask = self.decay_mask.index_select(0, idx)
        self.weight_decay = [self.weight_decay[i] for i in keep]
        self.betas = [self.betas[i] for i in keep]
        self.eps = [self.eps[i] for i in keep]
        self._const = {}


def clip_per_model(stack: StackedParams, clip_norm: list[float]) -> torch.Tensor:
    """Clip each model's gradient to its own max norm (0 = no clipping); return norms (G,).

    Same arithmetic as ``torch.nn.utils.clip_grad_norm_`` applied to each
    model alone: norm of the per-parameter norms, coefficient
    ``max_norm / (norm + 1e-6)`` clamped to 1.
    """
    with torch.no_grad():
        per_param = torch.stack([torch.linalg.vector_norm(stack.grad[:, sl], dim=1) for sl in stack.slices])
        total = torch.linalg.vector_norm(per_param, dim=0)                       # (G,)
        if any(c > 0 for c in clip_norm):
            c = torch.tensor(clip_norm, dtype=total.dtype, device=total.device)
            coef = torch.where(c > 0, torch.clamp(c / (total + 1e-6), max=1.0), torch.ones_like(total))
            stack.grad.mul_(coef.unsqueeze(1))
    return total


# ------------------------------------------------------------------------------- members
@dataclass
class _Member:
    """One model of the stack and its run-directory bookkeeping."""

    index: int                      # position in the caller's list
    cfg: ExperimentConfig
    run_dir: Path
    model: Transformer              # initialized (or resumed) weights, on the device
    exp_avg: dict[str, torch.Tensor] | None
    exp_avg_sq: dict[str, torch.Tensor] | None
    step: int
    wall_before: float
    history: list[dict[str, Any]]


def _prepare(i: int, cfg: ExperimentConfig, run_dir: Path, device: torch.device) -> _Member:
    """Init exactly as a single run, write config.yaml / param_table.csv, load a checkpoint if any."""
    run_dir.mkdir(parents=True, exist_ok=True)
    check_run_dir(run_dir, cfg)
    write_text(run_dir / "config.yaml", dump_config(cfg))
    model, table = init_model(cfg)
    model.to(device)
    opt = make_optimizer(model, cfg.optim)
    wd_of = {n: g["weight_decay"] for g in opt.param_groups for n in g["names"]}
    table["lr"] = cfg.optim.lr
    table["lr_peak"] = cfg.optim.lr * cfg.optim.warmup_multiplier
    table["weight_decay"] = [wd_of[n] for n in table.name]
    atomic_write(run_dir / "param_table.csv", lambda p: table.to_csv(p, index=False))
    step, wall, m1, m2 = 0, 0.0, None, None
    ck = load_checkpoint(run_dir, map_location=device)
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        step, wall = int(ck["step"]), float(ck.get("wall_seconds", 0.0))
        names = dict((id(p), n) for n, p in model.named_parameters())
        m1 = {names[id(p)]: s["exp_avg"] for p, s in opt.state.items()}
        m2 = {names[id(p)]: s["exp_avg_sq"] for p, s in opt.state.items()}
        log.info("resuming %s at step %d", run_dir, step)
    history = read_history(run_dir, step)
    write_text(run_dir / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in history))
    return _Member(i, cfg, run_dir, model, m1, m2, step, wall, history)


def _torch_optimizer_state(model: torch.nn.Module, cfg: ExperimentConfig, m1: torch.Tensor,
                           m2: torch.Tensor, stack: StackedParams, step: int, lr: float) -> dict:
    """Model g's moments as a ``torch.optim.AdamW`` state_dict (the single loop's format)."""
    opt = make_optimizer(model, cfg.optim)
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

    Each ``out_dirs[g]`` is written exactly as :func:`anchorlab.train.loop.train`
    would (config.yaml, param_table.csv, metrics.jsonl, checkpoint.pt,
    model.safetensors, final.json). Models whose final.json already exists
    (same run) are skipped; the others resume from their checkpoints (models
    at different checkpoint steps train as separate stacks). ``device``:
    None -> ``cfgs[0].train.device``. ``callbacks`` get ``(step, model)`` with
    the model unstacked into a Transformer. ``stop_after_step`` stops after
    the checkpoint at that step without final.json (as in ``train``).

    Raises ConfigError naming the field when the configs cannot share a stack.
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
        fj = d / "final.json"
        if fj.exists():
            check_run_dir(d, cfg)
            old = read_json(fj)
            if old.get("run_id") == cfg.run_id():
                log.info("skipping %s: final.json exists", d)
                finals[i] = old
                continue
        pending.append(i)
    if pending:
        with numerics(cfgs[0], dev):
            members = [_prepare(i, cfgs[i], dirs[i], dev) for i in pending]
            by_step: dict[int, list[_Member]] = {}
            for m in members:
                by_step.setdefault(m.step, []).append(m)
            for start in sorted(by_step):
                for m, final in zip(by_step[start], _train_group(by_step[start], start, dev, list(callbacks),
                                                                   progress, stop_after_step)):
                    finals[m.index] = final
    return finals  # type: ignore[return-value]


def _stack_data(members: list[_Member], task: AnchorTask, device: torch.device):
    """Training tensors per distinct data seed, and each member's seed index."""
    seeds = sorted({m.cfg.train.data_seed for m in members})
    data = {s: task.train_data(s) for s in seeds}
    tokens = {s: data[s].tokens.to(device) for s in seeds}
    targets = {s: data[s].targets.to(device) for s in seeds}
    return seeds, tokens, targets, len(data[seeds[0]])


def _train_group(members: list[_Member], start: int, device: torch.device, callbacks: list[Callback],
                 progress: bool, stop_after_step: int | None) -> list[dict[str, Any]]:
    t0 = time.perf_counter()
    cfg0 = members[0].cfg
    task = AnchorTask(cfg0.task)
    seeds, tokens, targets, n_data = _stack_data(members, task, device)
    eval_sets: dict[int, dict[tuple[tuple[int, int], str], AnchorData]] = {
        s: task.eval_sets(s) for s in seeds}
    spe, total, eval_every = steps_plan(cfg0)
    B = cfg0.train.batch_size

    # ---- stacked weights, optimizer, per-model constants
    stack = StackedParams([m.model for m in members], device)
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
    for g, m in enumerate(members):
        if m.exp_avg is not None:
            with torch.no_grad():
                for k, name in enumerate(stack.names):
                    opt.exp_avg[g, stack.slices[k]] = m.exp_avg[name].reshape(-1)
                    opt.exp_avg_sq[g, stack.slices[k]] = m.exp_avg_sq[name].reshape(-1)
        m.exp_avg = m.exp_avg_sq = None
    # One Transformer is kept: the base of the functional call and the model that
    # any member is unstacked into for evaluation / saving. The others are freed.
    eval_model = base = members[0].model
    for m in members[1:]:
        m.model = None  # type: ignore[assignment]

    def one(params: dict[str, torch.Tensor], tok: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(base, params, (tok,), {"last_only": True})

    shared_data = len(seeds) == 1
    fwd = torch.vmap(one, in_dims=(0, None if shared_data else 0))
    if cfg0.train.compile:
        fwd = torch.compile(fwd)
    amp = (torch.autocast(device_type=device.type, dtype=torch.bfloat16)
           if cfg0.train.amp == "bf16" else contextlib.nullcontext())

    active = list(range(G))                   # member index of each stack row
    status = {g: "finished" for g in range(G)}
    finals: dict[int, dict[str, Any]] = {}
    loss_sum = torch.zeros(G, device=device)
    loss_n = 0
    perms: dict[int, torch.Tensor] = {}
    perm_epoch = -1
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=total, initial=start, desc=f"stack of {G}", unit="step", dynamic_ncols=True)

    def record(row_idx: int, step_now: int) -> dict[str, Any]:
        m = members[active[row_idx]]
        model = stack.load_into(eval_model, row_idx)
        metrics, _, _ = evaluate(model, task, eval_sets[m.cfg.train.data_seed])
        ls = float(loss_sum[row_idx])
        row = {"step": step_now, "epoch": step_now / spe, "lr": lr_at(max(step_now - 1, 0), spe, m.cfg.optim),
               "train_loss": ls / max(loss_n, 1) if loss_n else math.nan,
               "wall_seconds": m.wall_before + time.perf_counter() - t0}
        for cb in callbacks:
            row.update(cb(step_now, model))
        row.update(metrics)
        with open(m.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        m.history.append(row)
        return row

    def finish(row_idx: int, step_now: int) -> None:
        g = active[row_idx]
        m = members[g]
        model = stack.load_into(eval_model, row_idx)
        save_weights(m.run_dir / "model.safetensors", model, {"run_id": m.cfg.run_id()})
        finals[g] = finalize(m.cfg, m.run_dir, m.history, status[g], m.wall_before + time.perf_counter() - t0,
                             step_now)

    def checkpoint(row_idx: int, step_now: int) -> None:
        m = members[active[row_idx]]
        model = stack.load_into(eval_model, row_idx)
        state = _torch_optimizer_state(model, m.cfg, opt.exp_avg[row_idx], opt.exp_avg_sq[row_idx], stack,
                                       step_now, lr_at(step_now - 1, spe, m.cfg.optim))
        save_checkpoint(m.run_dir, {"model": {k: v.clone() for k, v in model.state_dict().items()},
                                    "optimizer": state, "step": step_now,
                                    "wall_seconds": m.wall_before + time.perf_counter() - t0})

    if start == 0:
        for r in range(G):
            if not members[r].history:
                record(r, 0)
    step = start
    while step < total and active:
        epoch = step // spe
        if epoch != perm_epoch:
            perms = {s: epoch_permutation(n_data, s, epoch).to(device) for s in seeds}
            perm_epoch = epoch
        lo = (step % spe) * B
        if shared_data:
            idx = perms[seeds[0]][lo:lo + B]
            tok, tgt = tokens[seeds[0]][idx], targets[seeds[0]][idx].expand(len(active), -1)
        else:
            ds = [members[g].cfg.train.data_seed for g in active]
            tok = torch.stack([tokens[s][perms[s][lo:lo + B]] for s in ds])            # (G, B, T)
            tgt = torch.stack([targets[s][perms[s][lo:lo + B]] for s in ds])           # (G, B)
        lrs = [lr_at(step, spe, members[g].cfg.optim) for g in active]
        with amp:
            logits = fwd(stack.params, tok)                                            # (G, B, V)
        # rows (G*B, V) as in the single loop, so the same softmax kernel runs per row
        losses = F.cross_entropy(logits.float().flatten(0, 1), tgt.reshape(-1),
                                 reduction="none").view(len(active), B).mean(1)            # (G,)
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
        if bar is not None:
            bar.update(1)
        if step % eval_every == 0 or step == total:
            finite = torch.isfinite(loss_sum).tolist()
            for r in range(len(active)):
                if not finite[r]:
                    status[active[r]] = "diverged"
                    log.warning("%s diverged at step %d", members[active[r]].run_dir, step)
                record(r, step)
            loss_sum.zero_()
            loss_n = 0
            for r in range(len(active)):
                if status[active[r]] == "diverged":
                    continue
                every = members[active[r]].cfg.train.checkpoint_every or eval_every
                if step % every == 0 or step == total:
                    checkpoint(r, step)
            done = [r for r in range(len(active)) if status[active[r]] == "diverged" or step == total]
            for r in done:
                finish(r, step)
            if done:
                keep = [r for r in range(len(active)) if r not in done]
                active = [active[r] for r in keep]
                if keep:
                    stack.select(keep)
                    opt.select(keep)
                    loss_sum = loss_sum[keep].clone()
            if stop_after_step is not None and step >= stop_after_step and step < total:
                if bar is not None:
                    bar.close()
                return [finals.get(g, {"status": "interrupted", "step": step}) for g in range(G)]
    if bar is not None:
        bar.close()
    for r in range(len(active)):  # only reached when start >= total (nothing left to train)
        finish(r, step)
    return [finals[g] for g in range(G)]

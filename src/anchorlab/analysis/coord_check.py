"""Coordinate check (mup-style): init std and the first steps' activation scales across widths.

For each width the model of a config is rebuilt with ``d_model`` (and
``d_ff``, and ``d_head`` where the architecture has one, in proportion; the
number of heads fixed) set to that width, initialized with the config's init
rate, and trained for a few AdamW steps on one fixed batch. Tables:

* ``init``: one row per (width, weight): role, fan-in, target and measured std
  (the ParamTable of each width);
* ``activations``: one row per (width, step, role): the RMS of the outputs
  of the layers holding that role's weights (``embed``, ``pos``, ``qkv`` /
  ``q``/``k``/``v``, ``o``, ``mlp_in`` (pre-activation), ``mlp_out``) averaged
  over layers, and ``logits`` (the model's output), recorded in the forward
  pass of the loss at step t (t = 0: at init).

Reading it: with fan-in init std = fan_in^-gamma a layer whose input has
unit-scale coordinates outputs coordinates of scale fan_in^(1/2 - gamma) at
init: flat across width for gamma = 1/2, shrinking like width^-(gamma - 1/2)
for larger gamma. Curves that blow up or vanish with width in the first
steps show the parametrization does not transfer across width.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch

from anchorlab.config import ConfigError, InitConfig, OptimConfig

if TYPE_CHECKING:
    from anchorlab.train import RunResult

ACT_ROLES = ("embed", "pos", "qkv", "q", "k", "v", "o", "mlp_in", "mlp_out")


@dataclass(frozen=True)
class CoordCheckOptions:
    """``widths``: d_model values (>= 3 for a check); ``steps``: optimizer steps after init;
    ``batch_size``: rows of the run's training data in the fixed batch; ``lr``: AdamW lr
    (None: the run's peak lr); ``seed``: init seed and batch choice."""

    widths: tuple[int, ...] = (64, 128, 256)
    steps: int = 3
    batch_size: int = 8
    lr: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        from anchorlab.config import check_range

        if len(self.widths) < 2:
            raise ConfigError(f"widths: need at least two widths, got {list(self.widths)}")
        for w in self.widths:
            check_range("widths", w, 1)
        check_range("steps", self.steps, 0)
        check_range("batch_size", self.batch_size, 1)
        if self.lr is not None:
            check_range("lr", self.lr, 0.0, lo_open=True)


def widen(model_cfg: Any, width: int) -> Any:
    """The model config at ``d_model = width``: d_ff (and d_head) scaled in proportion, heads fixed."""
    r = width / model_cfg.d_model
    changes = {"d_model": width, "d_ff": max(1, round(model_cfg.d_ff * r))}
    names = {f.name for f in dataclasses.fields(model_cfg)}
    if "d_head" in names:
        changes["d_head"] = max(1, round(model_cfg.d_head * r))
    elif width % model_cfg.n_heads:
        raise ConfigError(f"widths: {width} is not divisible by model.n_heads={model_cfg.n_heads}")
    return dataclasses.replace(model_cfg, **changes)


def _build(model_cfg: Any) -> torch.nn.Module:
    from anchorlab.registry import MODELS, load

    return load(MODELS[model_cfg.arch].impl)(model_cfg)


def coord_check(model_cfg: Any, init: InitConfig, batch: dict[str, torch.Tensor],
                loss_fn: Callable[[torch.nn.Module, dict[str, torch.Tensor]], torch.Tensor],
                widths: tuple[int, ...] = (64, 128, 256), steps: int = 3, lr: float = 1e-3,
                optim: OptimConfig | None = None, seed: int = 0) -> dict[str, pd.DataFrame]:
    """The ``init`` and ``activations`` tables (module docstring) for ``model_cfg`` at each width.

    ``loss_fn(model, batch)`` is the training loss (a task's ``loss``);
    ``optim`` gives AdamW's betas, eps, weight decay and clipping (default
    :class:`OptimConfig`), with a constant ``lr``.
    """
    from anchorlab.model.init import apply_init_rate
    from anchorlab.model.roles import param_infos
    from anchorlab.train.optim import make_optimizer

    optim = optim or OptimConfig()
    inits, acts = [], []
    for w in widths:
        model = _build(widen(model_cfg, w))
        table = apply_init_rate(model, init, generator=torch.Generator().manual_seed(seed))
        inits.append(table[table.target_std.notna() & (table.target_std > 0)].assign(width=w))
        opt = make_optimizer(model, dataclasses.replace(optim, lr=lr))
        record: dict[str, list[float]] = {}
        hooks = []
        seen = set()
        for info in param_infos(model):
            if info.role in ACT_ROLES and id(info.module) not in seen:
                seen.add(id(info.module))
                hooks.append(info.module.register_forward_hook(
                    lambda mod, inp, out, role=info.role: record.setdefault(role, []).append(_rms(out))))
        out_hook = model.register_forward_hook(lambda mod, inp, out: record.setdefault("logits", []).append(_rms(out)))
        try:
            model.train()
            for t in range(steps + 1):
                record.clear()
                loss = loss_fn(model, batch)
                acts += [{"width": w, "step": t, "role": role, "rms": sum(v) / len(v), "n_modules": len(v),
                          "loss": loss.item()} for role, v in record.items()]
                if t == steps:
                    break
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if optim.clip_norm > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), optim.clip_norm)
                opt.step()
        finally:
            for h in hooks + [out_hook]:
                h.remove()
    init_df = pd.concat(inits, ignore_index=True)[["width", "name", "role", "group", "fan_in", "gamma",
                                                   "target_std", "measured_std", "numel"]]
    return {"activations": pd.DataFrame(acts), "init": init_df}


def _rms(out: Any) -> float:
    x = out[0] if isinstance(out, tuple) else getattr(out, "logits", out)
    return float(x.detach().double().pow(2).mean().sqrt())


def slopes(acts: pd.DataFrame) -> pd.DataFrame:
    """Per (step, role): the log2-log2 slope of activation RMS against width (0 = flat across width)."""
    rows = []
    for (step, role), g in acts.groupby(["step", "role"]):
        if g.width.nunique() < 2 or (g.rms <= 0).any():
            continue
        x, y = g.width.map(math.log2), g.rms.map(math.log2)
        slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
        rows.append({"step": step, "role": role, "slope": slope})
    return pd.DataFrame(rows, columns=["step", "role", "slope"])


def compute_coord_check(run: RunResult, opts: CoordCheckOptions) -> dict[str, pd.DataFrame]:
    """The coordinate check of a run's config: its model, init, optimizer, task loss and training data."""
    cfg = run.cfg
    data = run.task.train_data(cfg.train.data_seed)
    g = torch.Generator().manual_seed(opts.seed)
    idx = torch.randperm(len(data), generator=g)[:opts.batch_size]
    batch = data.batch(idx)
    tables = coord_check(cfg.model, cfg.init, batch, lambda m, b: run.task.loss(m, b), opts.widths, opts.steps,
                         opts.lr if opts.lr is not None else cfg.optim.peak, cfg.optim, opts.seed)
    return {"activations": tables["activations"], "init": tables["init"], "slopes": slopes(tables["activations"])}

"""Init rate: std = scale * fan_in ** -gamma, per parameter role, on any module.

``apply_init_rate(module, gamma=..., generator=...)`` re-initializes every
weight in place and returns the ParamTable (a DataFrame: name, role, group,
shape, fan_in, gamma, target_std, measured_std).

fan-in conventions (``fan_in``):
  ``"true"``    Linear: in_features; ConvNd: in_channels/groups * kernel size;
                Embedding: ``embed_fan_in`` decides -- ``"num_embeddings"``
                (the width of the one-hot input it multiplies, NeurIPS eq. 4;
                the positional table included) or ``"d_model"`` (the embedding
                width, ``weight.size(1)``: the authors' NeurIPS model).
  ``"d_model"`` the model width for every matrix (the journal's code); for a
                module without a d_model, the last dimension of the weight.
Norm layers are set to weight 1, bias 0. Biases are zero (``bias="zero"``),
drawn like their module's weight (``bias="gamma"``), or drawn from PyTorch's
default ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` with the module's true fan-in
(``bias="pytorch"``), always from the init generator.
The ParamTable's ``fan_in_rule`` column says which rule gave each fan-in.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from torch import nn

from ..config import InitConfig
from .roles import ROLE_GROUP, ParamInfo, param_infos


def fan_in_rule(info: ParamInfo, convention: str = "true", embed_convention: str = "num_embeddings") -> str:
    """Which rule gives this parameter's fan-in (the ParamTable's ``fan_in_rule`` column)."""
    if convention == "d_model":
        return "d_model"
    if isinstance(info.module, nn.Embedding):
        return "embedding_dim" if embed_convention == "d_model" else "num_embeddings"
    return "input_dim"


def fan_in_of(info: ParamInfo, convention: str = "true", d_model: int | None = None,
              embed_convention: str = "num_embeddings") -> int:
    w = info.module.weight if hasattr(info.module, "weight") else None
    mod = info.module
    if convention == "d_model":
        if d_model is not None:
            return d_model
        return int(w.shape[-1]) if w is not None else 1
    if isinstance(mod, nn.Embedding):
        return mod.embedding_dim if embed_convention == "d_model" else mod.num_embeddings
    if isinstance(mod, nn.Linear):
        return mod.in_features
    if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        return mod.in_channels // mod.groups * math.prod(mod.kernel_size)
    if w is not None and w.dim() >= 2:
        return int(math.prod(w.shape[1:]))
    return int(w.shape[-1]) if w is not None else 1


def _fill(p: torch.Tensor, std: float, distribution: str, gen: torch.Generator) -> None:
    with torch.no_grad():
        if distribution == "normal":
            vals = torch.randn(p.shape, generator=gen, dtype=torch.float64) * std
        else:  # uniform with the same std: U(-a, a), a = sqrt(3) * std
            a = math.sqrt(3.0) * std
            vals = (torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1) * a
        p.copy_(vals.to(p.dtype))


def apply_init_rate(module: nn.Module, gamma: float | InitConfig = 0.5, *,
                    generator: torch.Generator | None = None, seed: int | None = None,
                    scale: float = 1.0, role_gammas: dict[str, float] | None = None,
                    fan_in: str = "true", distribution: str = "normal", bias: str = "zero",
                    residual_scale: bool = False, n_layers: int | None = None,
                    d_model: int | None = None, embed_fan_in: str = "num_embeddings") -> pd.DataFrame:
    """Re-initialize ``module`` in place with the init rate; return the ParamTable.

    Pass an :class:`InitConfig` as ``gamma`` to take every option from it.
    Parameters are drawn in ``named_parameters`` order from ``generator`` (or a
    fresh one seeded with ``seed``), on the CPU in float64, so the result does
    not depend on the device.
    """
    if isinstance(gamma, InitConfig):
        c = gamma
        gamma, scale, role_gammas = c.gamma, c.scale, dict(c.role_gammas)
        fan_in, distribution, bias, residual_scale = c.fan_in, c.distribution, c.bias, c.residual_scale
        embed_fan_in = c.embed_fan_in
    InitConfig(gamma=gamma, scale=scale, role_gammas=role_gammas or {}, fan_in=fan_in, embed_fan_in=embed_fan_in,
               distribution=distribution, bias=bias, residual_scale=residual_scale)  # validate
    role_gammas = role_gammas or {}
    if generator is None:
        generator = torch.Generator().manual_seed(0 if seed is None else seed)
    cfg = getattr(module, "cfg", None)
    if d_model is None:
        d_model = getattr(cfg, "d_model", None)
    if n_layers is None:
        n_layers = getattr(cfg, "n_layers", 1)

    rows, weight_std = [], {}
    infos = param_infos(module)
    for info in infos:  # weights first, so biases can follow their module's std
        if info.role in ("norm", "bias") or info.kind != "weight":
            continue
        group = ROLE_GROUP.get(info.role) or "other"
        g = float(role_gammas.get(group, gamma))
        fi = fan_in_of(info, fan_in, d_model, embed_fan_in)
        std = scale * fi ** (-g)
        if residual_scale and info.role in ("o", "mlp_out"):
            std /= math.sqrt(2 * n_layers)
        weight_std[id(info.module)] = (std, g, fi, fan_in_of(info, "true"))
        _fill(getattr(info.module, info.kind), std, distribution, generator)
        rows.append((info, group, fi, g, std, fan_in_rule(info, fan_in, embed_fan_in)))
    for info in infos:
        p = getattr(info.module, info.kind)
        if info.role == "norm":
            with torch.no_grad():
                p.fill_(1.0 if info.kind == "weight" else 0.0)
            rows.append((info, "norm", None, None, None, "none"))
        elif info.role == "bias" or info.kind != "weight":
            std, g, fi, true_fi = weight_std.get(id(info.module), (0.0, None, None, None))
            if bias == "pytorch" and true_fi:
                b_std = 1.0 / math.sqrt(true_fi) / math.sqrt(3.0)   # U(-a, a) with a = 1/sqrt(fan_in)
                _fill(p, b_std, "uniform", generator)
                rows.append((info, "bias", true_fi, None, b_std, "pytorch_default"))
            elif bias == "zero" or std == 0.0 or bias == "pytorch":
                with torch.no_grad():
                    p.zero_()
                rows.append((info, "bias", fi, g, 0.0, "zero"))
            else:
                _fill(p, std, distribution, generator)
                rows.append((info, "bias", fi, g, std, "as_weight"))
    order = {i.name: k for k, i in enumerate(infos)}
    rows.sort(key=lambda r: order[r[0].name])
    table = pd.DataFrame([{
        "name": info.name, "role": info.role, "group": group,
        "shape": "x".join(str(s) for s in getattr(info.module, info.kind).shape),
        "numel": getattr(info.module, info.kind).numel(),
        "fan_in": fi, "fan_in_rule": rule, "gamma": g, "target_std": std,
        "measured_std": float(getattr(info.module, info.kind).detach().double().std())
        if getattr(info.module, info.kind).numel() > 1 else float("nan"),
    } for info, group, fi, g, std, rule in rows])
    return table

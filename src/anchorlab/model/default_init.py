"""The ParamTable of a model left at its framework's own init (``init.scheme: framework_default``).

Nothing is re-drawn: the table describes what the constructors drew (PyTorch's
defaults; diffusers' U-Net blocks keep them). For ``nn.Linear`` and
``nn.ConvNd`` weights and biases PyTorch draws ``U(-1/sqrt(fan_in),
1/sqrt(fan_in))`` (``kaiming_uniform_(a=sqrt(5))`` for the weight), so
``target_std`` is ``1/sqrt(3 fan_in)`` there -- the init rate gamma = 0.5 with
``init.distribution: uniform`` and ``init.scale: 1/sqrt(3)``; ``nn.Embedding``
draws N(0, 1); norm layers start at weight 1, bias 0; anything else gets NaN.
"""

from __future__ import annotations

import math

import pandas as pd
from torch import nn

from anchorlab.model.init import fan_in_of
from anchorlab.model.roles import ROLE_GROUP, param_infos

PYTORCH_UNIFORM = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


def framework_default_table(module: nn.Module) -> pd.DataFrame:
    """Same columns as :func:`anchorlab.model.init.apply_init_rate`'s table; ``gamma`` is NaN."""
    rows = []
    for info in param_infos(module):
        p = getattr(info.module, info.kind)
        mod = info.module
        fi, target, rule = math.nan, math.nan, "none"
        if info.role == "norm":
            target = 0.0
        elif isinstance(mod, PYTORCH_UNIFORM) and info.kind in ("weight", "bias"):
            fi = fan_in_of(info, "true")
            target, rule = 1.0 / math.sqrt(3.0 * fi), "input_dim"
        elif isinstance(mod, nn.Embedding) and info.kind == "weight":
            target, rule = 1.0, "pytorch_default"
        group = "norm" if info.role == "norm" else "bias" if info.role == "bias" else (ROLE_GROUP.get(info.role)
                                                                                      or "other")
        rows.append({"name": info.name, "role": info.role, "group": group,
                     "shape": "x".join(str(s) for s in p.shape), "numel": p.numel(), "fan_in": fi,
                     "fan_in_rule": rule, "ref_width": None, "std_fan_in": fi, "gamma": math.nan, "target_std": target,
                     "measured_std": float(p.detach().double().std()) if p.numel() > 1 else math.nan})
    return pd.DataFrame(rows)

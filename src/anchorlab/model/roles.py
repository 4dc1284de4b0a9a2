"""Each parameter's role, from the model's structure (module types), never names.

Roles of an anchorlab Transformer: embed, pos, q, k, v, o, mlp_in, mlp_out,
readout, norm, bias. Any other torch module gets structural fallbacks:
nn.Embedding -> embed, nn.Linear -> linear, nn.ConvNd -> conv, norm layers ->
norm, every bias -> bias; a parameter of any other module -> other.

Roles map to the init-rate groups of ``InitConfig.role_gammas``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

ROLE_GROUP = {
    "embed": "embed", "pos": "pos", "q": "qk", "k": "qk", "v": "vo", "o": "vo",
    "mlp_in": "mlp", "mlp_out": "mlp", "readout": "readout", "linear": "mlp",
    "conv": "mlp", "other": None, "norm": None, "bias": None,
}
NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d,
              nn.InstanceNorm1d, nn.InstanceNorm2d, nn.RMSNorm)


@dataclass(frozen=True)
class ParamInfo:
    name: str
    module: nn.Module
    kind: str  # "weight" | "bias" | other attribute name
    role: str


def _weight_role(model: nn.Module, mname: str, mod: nn.Module) -> str:
    from .transformer import MLP, Attention, Transformer  # local: avoid import cycle

    parent_name, _, attr = mname.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    if isinstance(parent, Attention):
        return {"W_Q": "q", "W_K": "k", "W_V": "v", "W_O": "o"}[attr]
    if isinstance(parent, MLP):
        return {"W_in": "mlp_in", "W_out": "mlp_out"}[attr]
    if isinstance(parent, Transformer):
        if mod is parent.embed:
            return "embed"
        if mod is parent.pos_embed:
            return "pos"
        if mod is parent.readout:
            return "readout"
    if isinstance(mod, nn.Embedding):
        return "embed"
    if isinstance(mod, nn.Linear):
        return "linear"
    if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        return "conv"
    return "other"


def param_infos(model: nn.Module) -> list[ParamInfo]:
    """One ParamInfo per parameter (shared parameters once), in named_parameters order."""
    infos, seen = [], set()
    for mname, mod in model.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            full = f"{mname}.{pname}" if mname else pname
            if isinstance(mod, NORM_TYPES):
                role = "norm"
            elif pname == "bias":
                role = "bias"
            elif pname == "weight":
                role = _weight_role(model, mname, mod)
            else:
                role = "other"
            infos.append(ParamInfo(full, mod, pname, role))
    return infos


def assign_roles(model: nn.Module) -> dict[str, str]:
    """``{parameter name: role}``; every parameter exactly once."""
    return {i.name: i.role for i in param_infos(model)}

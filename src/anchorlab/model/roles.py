"""Each parameter's role, from the model's structure (module types), never parameter names.

Roles of an anchorlab Transformer: embed, pos, q, k, v, o, mlp_in, mlp_out,
readout, norm, bias. A Hugging Face GPT-2 (``transformers``; recognized by its
classes ``GPT2Attention`` / ``GPT2MLP`` / ``GPT2Model`` / ``GPT2LMHeadModel``
and ``Conv1D``, without importing ``transformers``) gets the same roles, with
``qkv`` for ``attn.c_attn``, which packs the query, key and value maps in one
``(d_model, 3 d_model)`` weight (``kv`` for a cross-attention ``c_attn``).
Any other torch module gets structural roles: Embedding/EmbeddingBag -> embed,
Linear and transformers' Conv1D -> linear, ConvNd/ConvTransposeNd -> conv,
norm layers -> norm, MultiheadAttention -> qkv (packed) / q, k, v / o, every
bias -> bias. A parameter of any other module type gets ``other``:
:func:`anchorlab.model.init.apply_init_rate` refuses it rather than guess a
fan-in (:func:`register_module` teaches it a new layer type).

Roles map to the init-rate groups of ``InitConfig.role_gammas`` (``ROLE_GROUP``;
packed roles span several groups, ``PACKED``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

ROLE_GROUP = {
    "embed": "embed", "pos": "pos", "q": "qk", "k": "qk", "v": "vo", "o": "vo",
    "mlp_in": "mlp", "mlp_out": "mlp", "readout": "readout", "linear": "mlp",
    "conv": "mlp", "other": None, "norm": None, "bias": None, "qkv": "qk,vo", "kv": "qk,vo",
}
PACKED = {"qkv": ("q", "k", "v"), "kv": ("k", "v")}   # roles of the equal slices of a packed weight
NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm,
              nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d, nn.RMSNorm, nn.LocalResponseNorm)
CONV_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
CONV_T_TYPES = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
EMBED_TYPES = (nn.Embedding, nn.EmbeddingBag)
MHA_ROLES = {"in_proj_weight": "qkv", "q_proj_weight": "q", "k_proj_weight": "k", "v_proj_weight": "v",
             "in_proj_bias": "bias", "bias_k": "bias", "bias_v": "bias"}

# type -> (role of its "weight", fan-in function) for layer types taught with register_module
CUSTOM: dict[type, tuple[str, Callable[[nn.Module], int]]] = {}


def register_module(cls: type, fan_in: Callable[[nn.Module], int], role: str = "linear") -> None:
    """Teach roles and init a layer type: its ``weight`` gets ``role`` and ``fan_in(module)`` as true fan-in."""
    if role not in ROLE_GROUP or role in ("other", "norm", "bias") or role in PACKED:
        raise ValueError(f"role: must be a weight role ({', '.join(r for r in ROLE_GROUP if ROLE_GROUP[r])}), "
                         f"got {role!r}")
    CUSTOM[cls] = (role, fan_in)


@dataclass(frozen=True)
class ParamInfo:
    name: str
    module: nn.Module
    kind: str  # "weight" | "bias" | other attribute name
    role: str


def class_named(obj: object, *names: str) -> bool:
    """Whether a class of ``obj``'s MRO has one of ``names`` (recognizes transformers' classes without importing it)."""
    return any(c.__name__ in names for c in type(obj).__mro__)


def is_hf_conv1d(mod: nn.Module) -> bool:
    """transformers' ``Conv1D``: a linear layer whose weight is stored (in, out)."""
    return class_named(mod, "Conv1D") and hasattr(mod, "nf") and getattr(mod, "weight", None) is not None


def is_norm(mod: nn.Module) -> bool:
    """A torch norm layer, or a third-party one: class name ending in ``Norm`` with only 1-D parameters."""
    if isinstance(mod, NORM_TYPES):
        return True
    own = list(mod.parameters(recurse=False))
    return type(mod).__name__.endswith("Norm") and bool(own) and all(p.dim() == 1 for p in own)


def _hf_gpt2_role(parent: nn.Module, attr: str, mod: nn.Module) -> str | None:
    if class_named(parent, "GPT2Attention"):
        if attr == "c_attn":
            return "kv" if getattr(parent, "is_cross_attention", False) else "qkv"
        return {"q_attn": "q", "c_proj": "o"}.get(attr)
    if class_named(parent, "GPT2MLP"):
        return {"c_fc": "mlp_in", "c_proj": "mlp_out"}.get(attr)
    if class_named(parent, "GPT2Model"):
        return {"wte": "embed", "wpe": "pos"}.get(attr)
    if class_named(parent, "GPT2LMHeadModel"):
        return {"lm_head": "readout"}.get(attr)
    return None


def _weight_role(model: nn.Module, mname: str, mod: nn.Module) -> str:
    from anchorlab.model.transformer import MLP, Attention, Transformer  # local: avoid import cycle

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
    if mname:
        hf = _hf_gpt2_role(parent, attr, mod)
        if hf is not None:
            return hf
    if type(mod) in CUSTOM:
        return CUSTOM[type(mod)][0]
    if isinstance(mod, EMBED_TYPES):
        return "embed"
    if isinstance(parent, nn.MultiheadAttention) and mod is parent.out_proj:
        return "o"
    if isinstance(mod, nn.Linear) or is_hf_conv1d(mod):
        return "linear"
    if isinstance(mod, CONV_TYPES + CONV_T_TYPES):
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
            if is_norm(mod):
                role = "norm"
            elif isinstance(mod, nn.MultiheadAttention) and pname in MHA_ROLES:
                role = MHA_ROLES[pname]
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

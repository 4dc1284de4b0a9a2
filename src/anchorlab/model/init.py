"""Init rate: std = scale * fan_in ** -gamma, per parameter role, on any module.

``apply_init_rate(module, gamma=..., generator=...)`` re-initializes every
weight in place and returns the ParamTable (a DataFrame: name, role, group,
shape, numel, fan_in, fan_in_rule, ref_width, std_fan_in, gamma, target_std,
measured_std).

fan-in conventions (``fan_in``):
  ``"true"``    the width of the input a weight multiplies (:func:`true_fan_in`):
                Linear: in_features; transformers' Conv1D (GPT-2; weight
                stored (in, out)): ``weight.shape[0]``; ConvNd and
                ConvTransposeNd: in_channels/groups * kernel size;
                MultiheadAttention: its projections' input width;
                Embedding: ``embed_fan_in`` decides -- ``"num_embeddings"``
                (the width of the one-hot input it multiplies, NeurIPS eq. 4;
                the positional table included) or ``"d_model"`` (the embedding
                width, ``weight.size(1)``: the authors' NeurIPS model).
  ``"d_model"`` the model width for every matrix (the journal's code); for a
                module without a d_model, the last dimension of the weight.
A packed weight (GPT-2's ``c_attn``, MultiheadAttention's ``in_proj_weight``)
draws its q, k and v slices with their groups' gammas; its ParamTable row then
gives the whole tensor's expected std (gamma NaN where the slices differ).
``ref_width`` (W) makes gamma width-independent: a fan-in that counts a width
(rules ``input_dim``, ``embedding_dim``, ``d_model``) is read at width W, i.e.
multiplied by ``W / d_model``, so std = scale * (fan_in * W / d_model) ** -gamma,
the std the same gamma gives the same matrix at width W (exact when the model
keeps the reference's ratios d_head/d_model, d_ff/d_model); a one-hot width
(``num_embeddings``) does not depend on d_model and is kept. The ParamTable's
``ref_width`` and ``std_fan_in`` columns give W and the fan-in the std used.
``residual_scale`` divides the std of the residual projections (roles ``o``,
``mlp_out``: GPT-2's ``attn.c_proj`` and ``mlp.c_proj``) by sqrt(2 n_layers).
A trainable parameter of a module type with no known fan-in raises
:class:`UnknownModuleError` naming it (see :func:`anchorlab.model.roles.register_module`);
a frozen one (``requires_grad=False``, e.g. a fixed random Fourier projection) is left as
it is (``fan_in_rule`` ``frozen``).
Norm layers are set to weight 1, bias 0. Biases are zero (``bias="zero"``),
drawn like their module's weight (``bias="gamma"``), or drawn from PyTorch's
default ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` with the module's true fan-in
(``bias="pytorch"``; ``"pytorch_ref"``: the same read at ``ref_width``, i.e. with
the fan-in the layer has at the reference width), always from the init generator.
The ParamTable's ``fan_in_rule`` column says which rule gave each fan-in.
``embed_std`` (when not None) draws the token and position embeddings (roles
``embed``, ``pos``) with that std whatever gamma: their rows then have gamma
NaN, target_std = embed_std and ``fan_in_rule`` ``embed_std``.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from torch import nn

from anchorlab.config import ConfigError, InitConfig
from anchorlab.model.roles import (CONV_T_TYPES, CONV_TYPES, CUSTOM, EMBED_TYPES, PACKED, ROLE_GROUP, ParamInfo, is_hf_conv1d,
                    param_infos)


class UnknownModuleError(ConfigError):
    """A parameter of a module type whose fan-in anchorlab does not know (it refuses to guess)."""


SUPPORTED = ("Linear, Conv1d/2d/3d, ConvTranspose1d/2d/3d, Embedding, EmbeddingBag, MultiheadAttention, norm layers, "
             "transformers' Conv1D and GPT-2 modules, the anchorlab Transformer")


def check_known(infos: list[ParamInfo]) -> None:
    """Raise :class:`UnknownModuleError` (one line, naming the module) for a parameter without a known fan-in."""
    for info in infos:
        if info.role == "other" and getattr(info.module, info.kind).requires_grad:
            mname = info.name.rpartition(".")[0] or "(top level)"
            cls = type(info.module)
            raise UnknownModuleError(
                f"init: no known fan-in for parameter {info.name!r} of module {mname!r} "
                f"({cls.__module__}.{cls.__qualname__}); supported: {SUPPORTED}; initialize it yourself or teach "
                "it with anchorlab.model.roles.register_module")


WIDTH_RULES = ("input_dim", "embedding_dim", "d_model")   # fan-ins that grow with the model width


def fan_in_rule(info: ParamInfo, convention: str = "true", embed_convention: str = "num_embeddings") -> str:
    """Which rule gives this parameter's fan-in (the ParamTable's ``fan_in_rule`` column)."""
    if convention == "d_model":
        return "d_model"
    if isinstance(info.module, EMBED_TYPES) and type(info.module) not in CUSTOM:
        return "embedding_dim" if embed_convention == "d_model" else "num_embeddings"
    return "input_dim"


def true_fan_in(info: ParamInfo, embed_convention: str = "num_embeddings") -> int:
    """Inputs summed into one output unit (the width of the input a weight multiplies).

    Linear: in_features; transformers' Conv1D (weight stored (in, out)):
    ``weight.shape[0]``; ConvNd: in_channels/groups * kernel size;
    ConvTransposeNd: in_channels/groups * kernel size (the weights joining one
    output channel to the input; a stride s spreads them, so each output
    element sums about 1/s^d of them); MultiheadAttention's projections: their
    input width; Embedding/EmbeddingBag: ``embed_convention``.
    """
    mod, w = info.module, getattr(info.module, info.kind)
    if type(mod) in CUSTOM:
        return int(CUSTOM[type(mod)][1](mod))
    if isinstance(mod, EMBED_TYPES):
        return mod.embedding_dim if embed_convention == "d_model" else mod.num_embeddings
    if isinstance(mod, nn.Linear):
        return mod.in_features
    if is_hf_conv1d(mod):
        return int(w.shape[0])
    if isinstance(mod, CONV_TYPES + CONV_T_TYPES):
        return mod.in_channels // mod.groups * math.prod(mod.kernel_size)
    if isinstance(mod, nn.MultiheadAttention):
        return int(w.shape[1])
    raise UnknownModuleError(f"init: no known fan-in for parameter {info.name!r} ({type(mod).__qualname__})")


def fan_in_of(info: ParamInfo, convention: str = "true", d_model: int | None = None,
              embed_convention: str = "num_embeddings") -> int:
    """The fan-in the init rate uses: the true fan-in, or ``d_model`` for every matrix (``convention='d_model'``)."""
    if convention == "d_model":
        if d_model is not None:
            return d_model
        return int(getattr(info.module, info.kind).shape[-1])
    return true_fan_in(info, embed_convention)


def packed_dim(info: ParamInfo) -> int:
    """The axis along which a packed (q|k|v) weight or bias stacks its slices: outputs."""
    p = getattr(info.module, info.kind)
    if p.dim() == 1:
        return 0
    return 1 if is_hf_conv1d(info.module) else 0


def model_dims(module: nn.Module) -> tuple[int | None, int | None]:
    """(d_model, n_layers) of an anchorlab model (``.cfg``) or a Hugging Face one (``.config``); None if unknown."""
    cfg = getattr(module, "cfg", None)
    if cfg is None:
        cfg = getattr(module, "config", None)

    def first(*names: str) -> int | None:
        for n in names:
            v = getattr(cfg, n, None)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return None

    return first("d_model", "n_embd", "hidden_size"), first("n_layers", "n_layer", "num_hidden_layers")


def _fill(p: torch.Tensor, std: float, distribution: str, gen: torch.Generator) -> None:
    with torch.no_grad():
        if distribution == "normal":
            vals = torch.randn(p.shape, generator=gen, dtype=torch.float64) * std
        else:  # uniform with the same std: U(-a, a), a = sqrt(3) * std
            a = math.sqrt(3.0) * std
            vals = (torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1) * a
        p.copy_(vals.to(p.dtype))


def _fill_packed(p: torch.Tensor, stds: list[float], dim: int, distribution: str, gen: torch.Generator) -> None:
    """Draw ``p`` as equal slices along ``dim`` (q | k | v), slice i with std ``stds[i]``, in one draw."""
    with torch.no_grad():
        if distribution == "normal":
            vals = torch.randn(p.shape, generator=gen, dtype=torch.float64)
        else:
            vals = (torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1) * math.sqrt(3.0)
        for part, s in zip(vals.chunk(len(stds), dim=dim), stds):
            part.mul_(s)
        p.copy_(vals.to(p.dtype))


def _rms(stds: list[float]) -> float:
    """The std of a tensor whose equal slices have stds ``stds`` (0 for none)."""
    return math.sqrt(sum(s * s for s in stds) / len(stds)) if stds else 0.0


def _bias_stds(info: ParamInfo, drawn: dict) -> list[float]:
    """The stds a bias follows: its module's weight (slice by slice if packed); MultiheadAttention's by name."""
    if isinstance(info.module, nn.MultiheadAttention):
        parts = {"in_proj_bias": ("q", "k", "v"), "bias_k": ("k",), "bias_v": ("v",)}[info.kind]
        return [drawn["slices"][r] for r in parts if r in drawn.get("slices", {})]
    return list(drawn.get("stds", []))


def apply_init_rate(module: nn.Module, gamma: float | InitConfig = 0.5, *,
                    generator: torch.Generator | None = None, seed: int | None = None,
                    scale: float = 1.0, role_gammas: dict[str, float] | None = None,
                    fan_in: str = "true", distribution: str = "normal", bias: str = "zero",
                    residual_scale: bool = False, n_layers: int | None = None,
                    d_model: int | None = None, embed_fan_in: str = "num_embeddings",
                    ref_width: int | None = None, embed_std: float | None = None) -> pd.DataFrame:
    """Re-initialize ``module`` in place with the init rate; return the ParamTable.

    Pass an :class:`InitConfig` as ``gamma`` to take every option from it.
    Parameters are drawn in ``named_parameters`` order from ``generator`` (or a
    fresh one seeded with ``seed``), on the CPU in float64, so the result does
    not depend on the device: every weight first, then the biases and norms (a bias may follow its
    module's std).
    """
    if isinstance(gamma, InitConfig):
        c = gamma
        gamma, scale, role_gammas = c.gamma, c.scale, dict(c.role_gammas)
        fan_in, distribution, bias, residual_scale = c.fan_in, c.distribution, c.bias, c.residual_scale
        embed_fan_in, ref_width, embed_std = c.embed_fan_in, c.ref_width, c.embed_std
    InitConfig(gamma=gamma, scale=scale, role_gammas=role_gammas or {}, fan_in=fan_in, embed_fan_in=embed_fan_in,
               distribution=distribution, bias=bias, residual_scale=residual_scale, ref_width=ref_width,
               embed_std=embed_std)  # validate
    if generator is None:
        generator = torch.Generator().manual_seed(0 if seed is None else seed)
    dm, nl = model_dims(module)
    d_model = dm if d_model is None else d_model
    n_layers = (nl or 1) if n_layers is None else n_layers
    if ref_width is not None and d_model is None:
        raise ConfigError(f"init.ref_width: {ref_width} needs the model width, but {type(module).__qualname__} "
                          "has no d_model (n_embd, hidden_size); pass d_model= to apply_init_rate")
    width_factor = 1.0 if ref_width is None else ref_width / d_model
    infos = param_infos(module)
    check_known(infos)
    rows, drawn = _draw_weights(infos, gamma, scale, role_gammas or {}, fan_in, embed_fan_in, distribution,
                                residual_scale, n_layers, d_model, width_factor, embed_std, generator)
    rows += _draw_biases_and_norms(infos, drawn, bias, distribution, width_factor, generator)
    return _param_table(infos, rows, ref_width)


def _draw_weights(infos, gamma, scale, role_gammas, fan_in, embed_fan_in, distribution, residual_scale,
                  n_layers, d_model, width_factor, embed_std, generator) -> tuple[list[tuple], dict[int, dict]]:
    """Draw every weight (not biases, not norms) in order; the ParamTable rows and, per module, what its bias
    may follow (stds, gamma, fan-ins)."""
    rows, drawn = [], {}
    for info in infos:
        if info.role in ("norm", "bias"):
            continue
        if info.role == "other":   # a frozen parameter of an unknown module (check_known): left as it is
            rows.append((info, "other", None, None, None, "frozen", None))
            continue
        p = getattr(info.module, info.kind)
        fi = fan_in_of(info, fan_in, d_model, embed_fan_in)
        rule = fan_in_rule(info, fan_in, embed_fan_in)
        std_fi = fi * width_factor if rule in WIDTH_RULES else fi   # the fan-in read at the reference width
        parts = PACKED.get(info.role, (info.role,))
        gs = [float(role_gammas.get(ROLE_GROUP[r] or "other", gamma)) for r in parts]
        stds = [scale * std_fi ** (-g) for g in gs]
        if residual_scale and info.role in ("o", "mlp_out"):
            stds = [s / math.sqrt(2 * n_layers) for s in stds]
        fixed = embed_std is not None and info.role in ("embed", "pos")
        if fixed:   # embeddings at a fixed std, whatever gamma (the authors' GPT-2: N(0, 0.02))
            stds, gs = [float(embed_std)], [None]
        if len(set(stds)) == 1:
            _fill(p, stds[0], distribution, generator)
            std, g = stds[0], gs[0]
        else:  # a packed q|k|v weight whose groups have different gammas: one std per slice
            _fill_packed(p, stds, packed_dim(info), distribution, generator)
            std, g = _rms(stds), None
        d = drawn.setdefault(id(info.module), {"slices": {}})
        d.update(stds=stds, g=g, fi=fi, std_fi=std_fi, true_fi=true_fan_in(info))
        d["slices"].update(zip(parts, stds))
        rows.append((info, ROLE_GROUP.get(info.role) or "other", fi, g, std, "embed_std" if fixed else rule,
                     None if fixed else std_fi))
    return rows, drawn


def _draw_biases_and_norms(infos, drawn: dict[int, dict], bias: str, distribution: str, width_factor: float,
                           generator) -> list[tuple]:
    """Set every norm (weight 1, bias 0) and draw every bias by ``init.bias``, in order; their ParamTable rows."""
    rows = []
    for info in infos:
        p = getattr(info.module, info.kind)
        if info.role == "norm":
            with torch.no_grad():
                p.fill_(1.0 if info.kind == "weight" else 0.0)
            rows.append((info, "norm", None, None, None, "none", None))
        elif info.role == "bias":
            d = drawn.get(id(info.module), {})
            stds = _bias_stds(info, d)
            std, g, fi, true_fi = _rms(stds), d.get("g"), d.get("fi"), d.get("true_fi")
            if bias in ("pytorch", "pytorch_ref") and true_fi:
                b_fi = true_fi * width_factor if bias == "pytorch_ref" else true_fi   # read at ref_width
                b_std = 1.0 / math.sqrt(b_fi) / math.sqrt(3.0)   # U(-a, a) with a = 1/sqrt(fan_in)
                _fill(p, b_std, "uniform", generator)
                rows.append((info, "bias", true_fi, None, b_std, "pytorch_default", b_fi))
            elif bias in ("zero", "pytorch", "pytorch_ref") or std == 0.0:
                with torch.no_grad():
                    p.zero_()
                rows.append((info, "bias", fi, g, 0.0, "zero", d.get("std_fi")))
            else:
                if len(set(stds)) == 1:
                    _fill(p, stds[0], distribution, generator)
                else:
                    _fill_packed(p, stds, packed_dim(info), distribution, generator)
                rows.append((info, "bias", fi, g, std, "as_weight", d.get("std_fi")))
    return rows


def _param_table(infos, rows: list[tuple], ref_width: int | None) -> pd.DataFrame:
    """The ParamTable: one row per parameter in ``named_parameters`` order, its rule, target and measured std."""
    order = {i.name: k for k, i in enumerate(infos)}
    rows = sorted(rows, key=lambda r: order[r[0].name])
    return pd.DataFrame([{
        "name": info.name, "role": info.role, "group": group,
        "shape": "x".join(str(s) for s in getattr(info.module, info.kind).shape),
        "numel": getattr(info.module, info.kind).numel(),
        "fan_in": fi, "fan_in_rule": rule, "ref_width": ref_width, "std_fan_in": std_fi, "gamma": g,
        "target_std": std,
        "measured_std": float(getattr(info.module, info.kind).detach().double().std())
        if getattr(info.module, info.kind).numel() > 1 else float("nan"),
    } for info, group, fi, g, std, rule, std_fi in rows])

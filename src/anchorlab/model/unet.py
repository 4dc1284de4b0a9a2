"""The conditional U-Net of the concept-graph diffusion task (``model.arch: concept_unet``).

Built from diffusers' ``UNet2DModel`` blocks (``DownBlock2D`` / ``UpBlock2D``:
ResNet blocks with GroupNorm, strided-conv down-sampling, nearest + conv
up-sampling; no attention), conditioned through diffusers' ``identity`` class
embedding: our concept embedding is added to the time embedding. Needs the
``diffusion`` extra (``pip install 'anchorlab[diffusion]'``).

Shapes: ``forward(x (B, C, H, W), t (B,) int, cond (B, sum(concept_dims))) -> eps (B, C, H, W)``.
Every parameterized module is a Conv2d, Linear or GroupNorm, so the init rate
(:func:`anchorlab.model.init.apply_init_rate`) gives each weight its true
fan-in (Conv2d: in_channels * kernel area; Linear: in_features).
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import ConfigError
from .unet_config import ConceptUNetConfig

EXTRA_HINT = "the concept-graph diffusion task needs diffusers: pip install 'anchorlab[diffusion]'"


def require_diffusers():
    """The ``diffusers`` module, or a one-line ConfigError naming the extra."""
    try:
        import diffusers
    except ImportError:
        raise ConfigError(f"model.arch: {EXTRA_HINT}") from None
    return diffusers


class ConceptEmbedding(nn.Module):
    """Per concept: Linear(d_i, E) -> activation -> Linear(E, E); the sum over concepts. (B, sum d_i) -> (B, E)."""

    def __init__(self, dims: tuple[int, ...], width: int, activation: str) -> None:
        super().__init__()
        self.dims = tuple(dims)
        act = nn.GELU if activation == "gelu" else nn.SiLU
        self.mlps = nn.ModuleList(nn.Sequential(nn.Linear(d, width), act(), nn.Linear(width, width)) for d in dims)

    def forward(self, cond: torch.Tensor) -> torch.Tensor:
        parts = torch.split(cond, self.dims, dim=-1)
        return sum(mlp(p) for mlp, p in zip(self.mlps, parts))


class ConceptUNet(nn.Module):
    """eps_theta(x_t, t, concepts): a diffusers UNet2DModel with a concept embedding added to the time embedding."""

    def __init__(self, cfg: ConceptUNetConfig) -> None:
        super().__init__()
        diffusers = require_diffusers()
        self.cfg = cfg
        k = len(cfg.channels)
        self.concept_embed = ConceptEmbedding(cfg.concept_dims, cfg.embed_dim, cfg.activation)
        self.unet = diffusers.UNet2DModel(
            in_channels=cfg.in_channels, out_channels=cfg.in_channels,
            down_block_types=("DownBlock2D",) * k, up_block_types=("UpBlock2D",) * k,
            block_out_channels=tuple(cfg.channels), layers_per_block=cfg.layers_per_block,
            mid_block_type="UNetMidBlock2D" if cfg.mid_block else None, add_attention=False,
            act_fn=cfg.activation, norm_num_groups=cfg.norm_groups, time_embedding_dim=cfg.embed_dim,
            resnet_time_scale_shift=cfg.time_scale_shift, class_embed_type="identity")

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        return self.unet(x, t, class_labels=self.concept_embed(cond), return_dict=False)[0]


def build_unet(cfg: ConceptUNetConfig) -> ConceptUNet:
    """The model of ``model.arch: concept_unet``, with PyTorch's (and diffusers') default init."""
    return ConceptUNet(cfg)

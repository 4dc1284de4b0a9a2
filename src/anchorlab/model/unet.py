"""The conditional U-Net of the concept-graph diffusion task (``model.arch: concept_unet``).

Built from diffusers' ``UNet2DModel`` blocks (``DownBlock2D`` / ``UpBlock2D``:
ResNet blocks with GroupNorm, strided-conv down-sampling, nearest + conv
up-sampling; no attention). ``model.cond: additive`` conditions through
diffusers' ``identity`` class embedding: our concept embedding is added to the
time embedding. ``model.cond: multiplicative`` (the authors' U-Net) gates the
input features of every up-sampling block channel-wise with a concept
embedding of that block's width. Needs the ``diffusion`` extra
(``pip install 'anchorlab[diffusion]'``).

Shapes: ``forward(x (B, C, H, W), t (B,) int, cond (B, sum(concept_dims))) -> eps (B, C, H, W)``.
Every parameterized module is a Conv2d, Linear or GroupNorm, so the init rate
(:func:`anchorlab.model.init.apply_init_rate`) gives each weight its true
fan-in (Conv2d: in_channels * kernel area; Linear: in_features).
"""

from __future__ import annotations

import torch
from torch import nn

from anchorlab.config import ConfigError
from anchorlab.model.unet_config import ConceptUNetConfig

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
    """eps_theta(x_t, t, concepts): a diffusers UNet2DModel conditioned additively (a concept embedding added to
    the time embedding) or multiplicatively (concept gates on the up-sampling blocks' inputs)."""

    def __init__(self, cfg: ConceptUNetConfig) -> None:
        super().__init__()
        diffusers = require_diffusers()
        self.cfg = cfg
        k = len(cfg.channels)
        additive = cfg.cond == "additive"
        if additive:
            self.concept_embed = ConceptEmbedding(cfg.concept_dims, cfg.embed_dim, cfg.activation)
        else:   # one gate per up-sampling block, as wide as the block's input
            self.gates = nn.ModuleList(ConceptEmbedding(cfg.concept_dims, c, cfg.activation)
                                       for c in cfg.up_in_channels)
        self.unet = diffusers.UNet2DModel(
            in_channels=cfg.in_channels, out_channels=cfg.in_channels,
            down_block_types=("DownBlock2D",) * k, up_block_types=("UpBlock2D",) * k,
            block_out_channels=tuple(cfg.channels), layers_per_block=cfg.layers_per_block,
            mid_block_type="UNetMidBlock2D" if cfg.mid_block else None, add_attention=False,
            act_fn=cfg.activation, norm_num_groups=cfg.norm_groups, time_embedding_dim=cfg.embed_dim,
            resnet_time_scale_shift=cfg.time_scale_shift, class_embed_type="identity" if additive else None)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        if self.cfg.cond == "additive":
            return self.unet(x, t, class_labels=self.concept_embed(cond), return_dict=False)[0]
        return self._gated(x, t, cond)

    def _gated(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """UNet2DModel's forward (DownBlock2D / UpBlock2D, positional time embedding) with each up-sampling
        block's input multiplied by its concept gate: ``h <- gate(cond)[:, :, None, None] * h``."""
        u = self.unet
        t = t.reshape(-1).expand(x.shape[0]) if t.numel() == 1 else t
        emb = u.time_embedding(u.time_proj(t).to(dtype=x.dtype))            # (B, E)
        h = u.conv_in(x)                                                      # (B, C0, H, W)
        skips: tuple[torch.Tensor, ...] = (h,)
        for block in u.down_blocks:
            h, res = block(hidden_states=h, temb=emb)
            skips += res
        if u.mid_block is not None:
            h = u.mid_block(h, emb)
        for block, gate in zip(u.up_blocks, self.gates):
            n = len(block.resnets)
            skips, res = skips[:-n], skips[-n:]
            h = block(gate(cond)[:, :, None, None] * h, res, emb)             # the authors' cemb * h (+ temb)
        return u.conv_out(u.conv_act(u.conv_norm_out(h)))


def build_unet(cfg: ConceptUNetConfig) -> ConceptUNet:
    """The model of ``model.arch: concept_unet``, with PyTorch's (and diffusers') default init."""
    return ConceptUNet(cfg)

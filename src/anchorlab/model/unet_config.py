"""Config of the conditional U-Net family (``model.arch: concept_unet``), importable without torch or diffusers.

The model itself is :class:`anchorlab.model.unet.ConceptUNet` (needs the
``diffusion`` extra: ``pip install 'anchorlab[diffusion]'``).
"""

from __future__ import annotations

from dataclasses import dataclass

from anchorlab.config.base import check_choice, check_range, fail

CONDS = ("additive", "multiplicative")


@dataclass(frozen=True)
class ConceptUNetConfig:
    """A conditional U-Net predicting the noise of a DDPM (journal §VII / App. A, Fig. 6).

    ``channels``: output channels of the U-Net's resolution levels; ``k``
    levels give ``k - 1`` down- and ``k - 1`` up-sampling conv stages (the
    default four levels: the paper's three of each). ``layers_per_block``
    ResNet blocks per level (GroupNorm with ``norm_groups`` groups,
    ``activation``). The time step goes through diffusers' sinusoidal
    projection and MLP to ``time_embed_dim`` (0: ``4 * channels[0]``).

    The condition is a concatenated concept vector whose concept ``i`` takes
    ``concept_dims[i]`` entries (the task's encoding, checked against it); each
    concept goes through its own MLP (Linear, activation, Linear) to the time
    embedding width and the sum is added to the time embedding.
    ``time_scale_shift``: ``'default'`` adds the embedding to each ResNet
    block's features; ``'scale_shift'`` uses it as a FiLM scale and shift
    (closer to the authors' multiplicative context, ``cemb * h + temb``).
    ``mid_block``: diffusers' middle block (two ResNet blocks, no attention)
    at the lowest resolution.
    ``cond``: how the concepts enter. ``'additive'`` (default): the concept
    embedding is added to the time embedding, as above. ``'multiplicative'``:
    as the authors' U-Net (fig_code/fig6/train.py, ``ContextUnet.forward``:
    ``up(cemb * h + temb, skip)``), each up-sampling block's input features are
    multiplied channel-wise by a gate, the sum over concepts of a per-concept
    MLP (Linear, activation, Linear) of the concept vector, one gate per block
    with the block's input width; the time embedding alone conditions the
    ResNet blocks.
    """

    arch: str = "concept_unet"
    in_channels: int = 3
    channels: tuple[int, ...] = (32, 64, 64, 64)
    layers_per_block: int = 1
    norm_groups: int = 8
    activation: str = "gelu"
    time_embed_dim: int = 0
    concept_dims: tuple[int, ...] = (2, 1, 3)
    time_scale_shift: str = "default"
    mid_block: bool = False
    cond: str = "additive"

    def __post_init__(self) -> None:
        p = "model"
        check_choice(f"{p}.arch", self.arch, ("concept_unet",))
        check_range(f"{p}.in_channels", self.in_channels, 1)
        if len(self.channels) < 2:
            fail(f"{p}.channels", f"needs at least two levels (one down/up-sampling stage), got {list(self.channels)}")
        for i, c in enumerate(self.channels):
            check_range(f"{p}.channels[{i}]", c, 1)
            if c % self.norm_groups:
                fail(f"{p}.channels[{i}]", f"must be a multiple of model.norm_groups={self.norm_groups}, got {c}")
        check_range(f"{p}.layers_per_block", self.layers_per_block, 1)
        check_range(f"{p}.norm_groups", self.norm_groups, 1)
        check_choice(f"{p}.activation", self.activation, ("gelu", "silu"))
        check_range(f"{p}.time_embed_dim", self.time_embed_dim, 0)
        if not self.concept_dims:
            fail(f"{p}.concept_dims", "needs at least one concept")
        for i, d in enumerate(self.concept_dims):
            check_range(f"{p}.concept_dims[{i}]", d, 1)
        check_choice(f"{p}.time_scale_shift", self.time_scale_shift, ("default", "scale_shift"))
        check_choice(f"{p}.cond", self.cond, CONDS)

    @property
    def embed_dim(self) -> int:
        """Width of the time embedding (and of each concept embedding)."""
        return self.time_embed_dim or 4 * self.channels[0]

    @property
    def up_in_channels(self) -> tuple[int, ...]:
        """Input channels of each up-sampling block (lowest resolution first): the width a gate needs."""
        rev = tuple(reversed(self.channels))
        return (rev[0],) + rev[:-1]

    @property
    def downsample_factor(self) -> int:
        """Image sides must be multiples of this (2 per down-sampling stage)."""
        return 2 ** (len(self.channels) - 1)

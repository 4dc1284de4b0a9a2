"""Attention-edge masking (journal §V, Fig. 4A-D).

An *edge* ``(query, source)`` is one entry ``pattern[b, h, query, source]`` of
``blocks.{l}.attn.hook_pattern``, the attention after softmax. Masking sets the
chosen entries to 0 and leaves every other entry as it was (no
renormalization unless asked), so the circuits of unmasked tokens keep their
exact weights (journal: "masking is applied to the attention matrix after the
softmax operation"). Positions are roles resolved per sample from the key
position (see :func:`anchorlab.analysis.attention.role_positions`), an integer
position, or ``"all"``.

Standard experiments:

* key masking: every edge whose source is the key position, in every layer by
  default -> no information of the key token reaches any other position, so
  the last-position output depends on the anchors (and fillers) only
  (journal Fig. 4A, C);
* second-anchor masking: every edge whose source is the second anchor -> the
  output carries the key and the first anchor only (journal Fig. 4B, D).

Masking a source in layer 0 alone does not remove its information: a later
layer can still read it from the source's own residual stream. That is why the
standard masks cover all layers; pass ``layers=(0,)`` for the one-layer variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from anchorlab.config import ConfigError
from anchorlab.model.hooks import HookFn, hooks, run_with_cache
from anchorlab.tasks.anchor import AnchorData, AnchorTask, pair_label
from anchorlab.analysis.attention import role_positions

Position = str | int


@dataclass(frozen=True)
class Edge:
    """Attention from ``query`` to ``source``: a role (key, anchor1, anchor2,
    last), an integer position, or ``"all"``."""

    query: Position
    source: Position


@dataclass(frozen=True)
class EdgeMask:
    """Edges to zero in layer ``layer`` (0-based). ``heads=None`` masks every
    head; ``renormalize`` rescales each changed row to sum to 1 again."""

    layer: int
    edges: tuple[Edge, ...]
    renormalize: bool = False
    heads: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.layer, bool) or not isinstance(self.layer, int) or self.layer < 0:
            raise ConfigError(f"layer: must be a non-negative integer, got {self.layer!r}")
        object.__setattr__(self, "edges", tuple(_as_edge(e) for e in self.edges))


def _as_edge(e: Edge | tuple[Position, Position]) -> Edge:
    if isinstance(e, Edge):
        return e
    if isinstance(e, (tuple, list)) and len(e) == 2:
        return Edge(*e)
    raise ConfigError(f"edges: each edge must be an Edge or a (query, source) pair, got {e!r}")


def _positions(spec: Position, key_pos: torch.Tensor, T: int, arg: str) -> torch.Tensor:
    """(B, T) bool: which positions ``spec`` names for each sample."""
    if spec == "all":
        return torch.ones(len(key_pos), T, dtype=torch.bool)
    pos = role_positions(spec, key_pos, T, arg)
    return torch.nn.functional.one_hot(pos, T).bool()


def edge_mask(edges: Sequence[Edge | tuple[Position, Position]], key_pos: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Boolean (B, T, T) mask, True at ``[b, query, source]`` entries to zero.

    key_pos: (B,) per-sample key positions (used to resolve roles).
    """
    key_pos = torch.as_tensor(key_pos, dtype=torch.long).reshape(-1).cpu()
    m = torch.zeros(len(key_pos), seq_len, seq_len, dtype=torch.bool)
    for e in map(_as_edge, edges):
        q = _positions(e.query, key_pos, seq_len, "edge.query")
        s = _positions(e.source, key_pos, seq_len, "edge.source")
        m |= q[:, :, None] & s[:, None, :]
    return m


def mask_edges(layer: int, edges: Sequence[Edge | tuple[Position, Position]], key_pos: torch.Tensor, *,
               renormalize: bool = False, heads: Sequence[int] | None = None) -> tuple[str, HookFn]:
    """A ``(hook name, fn)`` for :func:`anchorlab.model.hooks.hooks` that zeroes
    the chosen edges of ``blocks.{layer}.attn.hook_pattern``.

    The pattern is (B, H, T, T); ``key_pos`` (B,) must list the batch's key
    positions in order. An empty edge list returns the pattern unchanged.
    """
    key_pos = torch.as_tensor(key_pos, dtype=torch.long).reshape(-1)
    edges = tuple(map(_as_edge, edges))
    head_sel = None if heads is None else list(heads)
    cache: dict[tuple[int, torch.device], torch.Tensor] = {}

    def fn(pattern: torch.Tensor, name: str) -> torch.Tensor | None:
        if not edges:
            return None
        B, H, T, _ = pattern.shape
        if B != len(key_pos):
            raise ConfigError(f"key_pos: {len(key_pos)} positions for a batch of {B}")
        if (T, pattern.device) not in cache:
            cache[(T, pattern.device)] = edge_mask(edges, key_pos, T).to(pattern.device)
        m = cache[(T, pattern.device)][:, None].expand(B, H, T, T)  # (B, H, T, T)
        if head_sel is not None:
            if any(h < 0 or h >= H for h in head_sel):
                raise ConfigError(f"heads: must be in 0..{H - 1}, got {head_sel}")
            keep = torch.zeros(H, dtype=torch.bool, device=pattern.device)
            keep[head_sel] = True
            m = m & keep[None, :, None, None]
        out = pattern.masked_fill(m, 0.0)
        if renormalize:
            s = out.sum(-1, keepdim=True)
            changed = m.any(-1, keepdim=True) & (s > 0)
            out = torch.where(changed, out / s.clamp_min(torch.finfo(out.dtype).tiny), out)
        return out

    return f"blocks.{layer}.attn.hook_pattern", fn


def _check_layers(model: torch.nn.Module, masks: Sequence[EdgeMask]) -> None:
    L = len(model.blocks)
    for m in masks:
        if m.layer >= L:
            raise ConfigError(f"layer: must be in 0..{L - 1} for this {L}-layer model, got {m.layer}")


@torch.no_grad()
def masked_run(model: torch.nn.Module, data: AnchorData | torch.Tensor, masks: Sequence[EdgeMask],
               key_pos: torch.Tensor | None = None, names_filter=None, cache: bool = True
               ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Forward pass with ``masks`` applied; returns (logits (B, T, V), cache).

    ``data`` is an :class:`AnchorData` (its key positions resolve roles) or a
    token tensor (B, T) together with ``key_pos`` (B,). ``names_filter``
    selects cached hook points as in ``run_with_cache``; ``cache=False`` skips
    caching (returns an empty dict).
    """
    if isinstance(data, AnchorData):
        tokens, key_pos = data.tokens, data.key_pos
    else:
        tokens = data
        if key_pos is None:
            if any(m.edges for m in masks):
                raise ConfigError("key_pos: needed with a token tensor when masks name roles")
            key_pos = torch.zeros(tokens.shape[0], dtype=torch.long)
    _check_layers(model, masks)
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    fwd = [mask_edges(m.layer, m.edges, key_pos, renormalize=m.renormalize, heads=m.heads) for m in masks]
    try:
        with hooks(model, fwd):
            if cache:
                return run_with_cache(model, tokens.to(dev), names_filter=names_filter)
            return model(tokens.to(dev)), {}
    finally:
        model.train(was_training)


# ----------------------------------------------------------------- standard masks
MASK_KINDS = ("none", "key", "anchor1", "anchor2")


def token_masks(source: Position, n_layers: int, layers: Sequence[int] | None = None,
                renormalize: bool = False) -> list[EdgeMask]:
    """Mask every edge whose source is ``source`` (all queries) in ``layers``
    (default: every layer), so that position's information reaches no other
    position."""
    layers = list(range(n_layers)) if layers is None else list(layers)
    for l in layers:
        if isinstance(l, bool) or not isinstance(l, int) or not 0 <= l < n_layers:
            raise ConfigError(f"layers: must be in 0..{n_layers - 1}, got {layers}")
    return [EdgeMask(l, (Edge("all", source),), renormalize) for l in layers]


def standard_masks(kind: str, n_layers: int, layers: Sequence[int] | None = None,
                   renormalize: bool = False) -> list[EdgeMask]:
    """``"none"`` -> []; ``"key"``/``"anchor1"``/``"anchor2"`` -> :func:`token_masks`."""
    if kind not in MASK_KINDS:
        raise ConfigError(f"mask: must be one of {', '.join(MASK_KINDS)}, got {kind!r}")
    return [] if kind == "none" else token_masks(kind, n_layers, layers, renormalize)


def default_output_hook(model: torch.nn.Module) -> str:
    """X_do of the last layer, the input of the readout (post-LN) / final LN."""
    return f"blocks.{len(model.blocks) - 1}.hook_do"


@torch.no_grad()
def output_vectors(model: torch.nn.Module, data: AnchorData, masks: Sequence[EdgeMask],
                   hook: str | None = None, batch_size: int = 4096) -> torch.Tensor:
    """Last-position activation at ``hook`` under ``masks``: (N, d).

    ``hook`` defaults to :func:`default_output_hook`.
    """
    hook = hook or default_output_hook(model)
    if hook not in model.hook_names:
        raise ConfigError(f"hook: unknown hook point {hook!r}; e.g. {default_output_hook(model)!r}")
    out = []
    for i in range(0, len(data), batch_size):
        part = AnchorData(*(t[i:i + batch_size] for t in (data.tokens, data.targets, data.pair, data.key,
                                                           data.key_pos)))
        _, c = masked_run(model, part, masks, names_filter=lambda n: n == hook)
        out.append(c[hook][:, -1].float().cpu())
    return torch.cat(out)


@torch.no_grad()
def mask_accuracy(model: torch.nn.Module, task: AnchorTask, data: AnchorData,
                  masks_by_name: dict[str, Sequence[EdgeMask]]) -> pd.DataFrame:
    """Accuracy of each anchor pair under each mask and target hypothesis.

    Returns DataFrame(mask, pair, role, hypothesis, acc, n): hypotheses are
    ``designated`` (the trained target; absent for held-out pairs),
    ``inferential`` and ``symmetric`` (the mirror pair's trained target), as in
    :func:`anchorlab.eval.metrics.evaluate`.
    """
    rows = []
    pair_t = data.pair
    for mname, masks in masks_by_name.items():
        logits, _ = masked_run(model, data, masks, cache=False)
        pred = logits[:, -1].argmax(-1).cpu()
        for pair in task.pairs:
            sel = (pair_t[:, 0] == pair[0]) & (pair_t[:, 1] == pair[1])
            if not bool(sel.any()):
                continue
            role = ("held_out" if pair in task.held_out_pairs else
                    "non_inferential" if pair in task.non_inferential_pairs else "inferential")
            for hyp, shift in task.hypotheses(pair).items():
                if shift is None:
                    continue
                hit = pred[sel] == data.key[sel] + shift
                rows.append(dict(mask=mname, pair=pair_label(pair), role=role, hypothesis=hyp,
                                 acc=float(hit.float().mean()), n=int(sel.sum())))
    return pd.DataFrame(rows, columns=["mask", "pair", "role", "hypothesis", "acc", "n"])


__all__ = ["Edge", "EdgeMask", "edge_mask", "mask_edges", "masked_run", "token_masks", "standard_masks",
           "default_output_hook", "output_vectors", "mask_accuracy", "MASK_KINDS"]

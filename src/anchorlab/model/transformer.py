"""Decoder-only transformer with every tensor passing a named hook point.

Two architectures from one config (``ModelConfig.arch``):

* ``neurips`` — post-LN, as NeurIPS eq. (4)-(7)::

      X(1)  = X_in W_em + X_pos
      X_ao  = LN(X + softmax(Q K^T / sqrt(d_k)) V W_O)
      X_do  = LN(FFN(X_ao) + X_ao)

* ``gpt2`` — pre-LN with a final LayerNorm (journal)::

      X_ao  = X + Attn(LN(X));  X_do = X_ao + FFN(LN(X_ao));  out = LN_f(X_do)

  with ``attn_norm='q'`` (the authors' journal block) only the queries read
  LN(X): ``X_ao = X + Attn(q=LN(X), k=X, v=X)``.

Attention is written out (no fused kernel) so the pattern can be read and
edited through ``blocks.{l}.attn.hook_pattern``.

Linears and LayerNorms go through :mod:`.bf16`'s helpers: the module call
itself, except inside :func:`~anchorlab.model.bf16.native_bf16` (the native
bfloat16 training path), where the hooked activations are bfloat16 (the
embeddings and the logits stay float32).

Incremental decoding: ``forward(tokens, cache=KVCache.empty(L))`` appends the
new positions' keys and values to the cache and returns their logits; later
calls feed only the new tokens. The same modules (and hook points) run as in
a full forward; while decoding, ``hook_k`` / ``hook_v`` see the new positions
only and ``hook_scores`` / ``hook_pattern`` are (B, H, t_new, S_total).

Hook names (l = 0-based layer):
  hook_embed, hook_pos_embed, hook_resid_in,
  blocks.{l}.attn.hook_q / hook_k / hook_v          (B, H, T, d_head)
  blocks.{l}.attn.hook_scores                        (B, H, T, T) scaled, masked, pre-softmax
  blocks.{l}.attn.hook_pattern                       (B, H, T, T) after softmax
  blocks.{l}.attn.hook_qkv                           (B, T, H*d_head)  X_qkv = Attn V
  blocks.{l}.attn.hook_out                           (B, T, d_model)   X_qkv W_O
  blocks.{l}.hook_ao                                 (B, T, d_model)   X_ao
  blocks.{l}.mlp.hook_in / hook_pre / hook_post / hook_out
  blocks.{l}.hook_do                                 (B, T, d_model)   X_do = X(l+1)
  hook_final (B, T, d_model), hook_logits (B, T', V)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from anchorlab.config import ModelConfig
from anchorlab.model import bf16
from anchorlab.model.hooks import HookPoint, name_hook_points, run_with_cache


@dataclass
class KVCache:
    """Keys and values of every position seen so far, per layer, for incremental decoding.

    ``keys[l]`` / ``values[l]``: (B, H, S, d_head) or None before the first
    call; ``pad``: (B, S) True where a position is padding (a padding key is
    never attended to, except by itself, which keeps its own row finite).
    """

    keys: list[torch.Tensor | None]
    values: list[torch.Tensor | None]
    pad: torch.Tensor | None = None

    @classmethod
    def empty(cls, n_layers: int) -> "KVCache":
        return cls([None] * n_layers, [None] * n_layers)

    @property
    def length(self) -> int:
        return 0 if self.pad is None else int(self.pad.shape[1])


class Attention(nn.Module):
    """Causal multi-head self-attention, written out explicitly."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads, self.d_head = cfg.n_heads, cfg.d_head
        inner = cfg.n_heads * cfg.d_head
        self.W_Q = nn.Linear(cfg.d_model, inner)
        self.W_K = nn.Linear(cfg.d_model, inner)
        self.W_V = nn.Linear(cfg.d_model, inner)
        self.W_O = nn.Linear(inner, cfg.d_model)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_scores, self.hook_pattern = HookPoint(), HookPoint()
        self.hook_qkv, self.hook_out = HookPoint(), HookPoint()
        mask = torch.triu(torch.ones(cfg.max_len, cfg.max_len, dtype=torch.bool), diagonal=1)
        self.register_buffer("causal_mask", mask, persistent=False)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, d_head)

    def forward(self, x: torch.Tensor, last_only: bool = False, cache: KVCache | None = None,
                layer: int = 0, blocked: torch.Tensor | None = None, kv: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, d_model) -> (B, T, d_model); ``last_only``: queries of the
        last position only -> (B, 1, d_model) (keys and values from all T).
        ``kv``: the input keys and values are computed from (default ``x``).

        With ``cache``, x holds only the new positions: their keys/values are
        appended to ``cache`` (layer ``layer``) and ``blocked`` (B, T, S) marks
        the keys each new query may not read.
        """
        B, T, _ = x.shape
        kv = x if kv is None else kv
        x_q = x[:, -1:] if last_only else x
        Tq = x_q.shape[1]
        q = self.hook_q(self._split(bf16.linear(self.W_Q, x_q)))
        k = self.hook_k(self._split(bf16.linear(self.W_K, kv)))
        v = self.hook_v(self._split(bf16.linear(self.W_V, kv)))
        if cache is not None:
            if cache.keys[layer] is not None:
                k = torch.cat([cache.keys[layer], k], dim=2)                 # (B, H, S, d_head)
                v = torch.cat([cache.values[layer], v], dim=2)
            cache.keys[layer], cache.values[layer] = k, v
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)          # (B, H, Tq, S)
        if blocked is not None:
            scores = scores.masked_fill(blocked[:, None, T - Tq:], float("-inf"))
        else:
            scores = scores.masked_fill(self.causal_mask[T - Tq:T, :T], float("-inf"))
        scores = self.hook_scores(scores)
        pattern = self.hook_pattern(torch.softmax(scores, dim=-1))          # (B, H, Tq, T)
        z = (pattern @ v).transpose(1, 2).reshape(B, Tq, -1)                # (B, Tq, H*d_head)
        z = self.hook_qkv(z)
        return self.hook_out(bf16.linear(self.W_O, z))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.W_in = nn.Linear(cfg.d_model, cfg.d_ff)
        self.W_out = nn.Linear(cfg.d_ff, cfg.d_model)
        self.act = nn.ReLU() if cfg.activation == "relu" else nn.GELU()
        self.hook_in, self.hook_pre = HookPoint(), HookPoint()
        self.hook_post, self.hook_out = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.hook_in(x)
        h = self.hook_post(self.act(self.hook_pre(bf16.linear(self.W_in, x))))
        return self.hook_out(bf16.linear(self.W_out, h))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.pre_ln = cfg.arch == "gpt2"
        self.norm_q_only = cfg.attn_norm == "q"
        self.attn = Attention(cfg)
        self.ln_attn = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.mlp = MLP(cfg)
        self.ln_mlp = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.hook_ao, self.hook_do = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor, last_only: bool = False, cache: KVCache | None = None,
                layer: int = 0, blocked: torch.Tensor | None = None) -> torch.Tensor:
        """``last_only``: compute the block's output at the last position only
        (B, 1, d_model); the other positions still feed its keys and values.
        ``cache`` / ``layer`` / ``blocked``: incremental decoding (see :class:`Attention`)."""
        resid = x[:, -1:] if last_only else x
        if self.pre_ln:
            kv = x if self.norm_q_only else None
            x_ao = self.hook_ao(resid + self.attn(bf16.layer_norm(self.ln_attn, x), last_only, cache, layer, blocked, kv))
            return self.hook_do(x_ao + self.mlp(bf16.layer_norm(self.ln_mlp, x_ao)))
        x_ao = self.hook_ao(bf16.layer_norm(self.ln_attn, resid + self.attn(x, last_only, cache, layer, blocked)))
        return self.hook_do(bf16.layer_norm(self.ln_mlp, self.mlp(x_ao) + x_ao))


class Transformer(nn.Module):
    """Decoder-only transformer. ``forward(tokens)`` -> logits.

    tokens: (B, T) int64 with T <= max_len. ``last_only=True`` returns logits of
    the last position only, (B, V) — what the anchor task's loss and
    evaluation use — and skips all work that cannot reach them: the last block
    computes its query, attention output, FFN and readout at the last position
    only (keys and values still at every position), which for the 2-layer
    NeurIPS model removes ~40% of the FLOPs with the same result. The hook
    points of the last block then see the last position only (T = 1 on the
    query axis: q, scores, pattern, qkv, out, ao, mlp.*, do, final); analyses
    that read or edit every position call ``forward(tokens)``.
    """

    supports_native_bf16 = True   # its linears and LayerNorms go through model/bf16.py's helpers

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_embed = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_final = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps) if cfg.arch == "gpt2" else None
        self.readout = nn.Linear(cfg.d_model, cfg.vocab_size)
        self.hook_embed, self.hook_pos_embed, self.hook_resid_in = HookPoint(), HookPoint(), HookPoint()
        self.hook_final, self.hook_logits = HookPoint(), HookPoint()
        name_hook_points(self)

    @property
    def hook_names(self) -> list[str]:
        return list(name_hook_points(self))

    def forward(self, tokens: torch.Tensor, last_only: bool = False, *, cache: KVCache | None = None,
                positions: torch.Tensor | None = None, pad: torch.Tensor | None = None) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, V), or (B, V) with ``last_only``.

        Incremental decoding: with ``cache`` (a :class:`KVCache`), ``tokens``
        are the new positions only; ``positions`` (B, T) are their position ids
        (default: continuing after the cache) and ``pad`` (B, T) marks new
        padding tokens (left padding of a batch of prompts).
        """
        T = tokens.shape[1]
        blocked = None
        if cache is None:
            if T > self.cfg.max_len:
                raise ValueError(f"sequence length {T} exceeds model.max_len={self.cfg.max_len}")
            pos = torch.arange(T, device=tokens.device) if positions is None else positions
        else:
            pos, blocked = self._incremental_masks(tokens, cache, positions, pad)
        x = self.hook_resid_in(bf16.activation(self.hook_embed(self.embed(tokens)) + self.hook_pos_embed(self.pos_embed(pos))))
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x = block(x, last_only and i == last, cache, i, blocked)
        if self.ln_final is not None:
            x = bf16.layer_norm(self.ln_final, x)
        x = self.hook_final(x)
        if last_only:
            x = x[:, -1]
        return self.hook_logits(bf16.logits(bf16.linear(self.readout, x)))

    def _incremental_masks(self, tokens: torch.Tensor, cache: KVCache, positions: torch.Tensor | None,
                           pad: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Position ids (B, T) of the new tokens and the blocked mask (B, T, S_old + T); grows ``cache.pad``."""
        B, T = tokens.shape
        S0, dev = cache.length, tokens.device
        if positions is None:
            positions = torch.arange(S0, S0 + T, device=dev).expand(B, T)
        if int(positions.max()) >= self.cfg.max_len:
            raise ValueError(f"position {int(positions.max())} exceeds model.max_len={self.cfg.max_len}")
        new_pad = torch.zeros(B, T, dtype=torch.bool, device=dev) if pad is None else pad
        cache.pad = new_pad if cache.pad is None else torch.cat([cache.pad, new_pad], dim=1)
        col = torch.arange(S0 + T, device=dev)                                  # key index
        row = torch.arange(S0, S0 + T, device=dev)                              # query index
        future = col[None, :] > row[:, None]                                    # (T, S)
        itself = col[None, :] == row[:, None]
        blocked = future[None] | (cache.pad[:, None, :] & ~itself[None])        # (B, T, S)
        return positions, blocked

    def run_with_cache(self, tokens: torch.Tensor, **kwargs):
        """``(logits, cache)``; see :func:`anchorlab.model.hooks.run_with_cache`."""
        return run_with_cache(self, tokens, **kwargs)


def build_model(cfg: ModelConfig) -> Transformer:
    return Transformer(cfg)

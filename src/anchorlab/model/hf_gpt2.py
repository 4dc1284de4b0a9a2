"""``model.arch: hf_gpt2``: Hugging Face's ``GPT2LMHeadModel`` behind anchorlab's model interface.

:class:`HFGPT2LM` wraps the Hugging Face model so the training core treats it
like :class:`anchorlab.model.transformer.Transformer`::

    forward(tokens (B, T) int64, last_only=False) -> logits (B, T, V) | (B, V)

Attention is ``eager`` (the default ``sdpa`` returns no attention weights), so
``hf(..., output_attentions=True)`` and forward hooks on any submodule work
for analyses. With tied embeddings the readout weight is the token embedding:
``state_dict`` stores it once (``hf.transformer.wte.weight``) and loading
restores the tie, so safetensors files hold no shared tensors.
:func:`anchorlab.model.init.apply_init_rate` knows every parameter of it
(Conv1D fan-in = ``weight.shape[0]``; ``c_attn`` packs q, k, v).
"""

from __future__ import annotations

import hashlib

import torch
from torch import nn

from anchorlab.extras import require
from anchorlab.model.hf_gpt2_config import HFGPT2Config

TIED_KEY = "hf.lm_head.weight"


def hf_config(cfg: HFGPT2Config):
    """The ``transformers.GPT2Config`` of an :class:`HFGPT2Config` (eager attention, no KV cache)."""
    tf = require("transformers", "model.arch 'hf_gpt2'")
    return tf.GPT2Config(
        vocab_size=cfg.vocab_size, n_positions=cfg.max_len, n_embd=cfg.d_model, n_layer=cfg.n_layers,
        n_head=cfg.n_heads, n_inner=cfg.d_ff, activation_function=cfg.activation, resid_pdrop=cfg.dropout,
        embd_pdrop=cfg.dropout, attn_pdrop=cfg.dropout, layer_norm_epsilon=cfg.ln_eps,
        tie_word_embeddings=cfg.tie_embeddings, bos_token_id=None, eos_token_id=None, use_cache=False,
        attn_implementation="eager")


class HFGPT2LM(nn.Module):
    """A ``transformers.GPT2LMHeadModel`` (``.hf``) with anchorlab's ``forward(tokens, last_only)``."""

    def __init__(self, cfg: HFGPT2Config) -> None:
        super().__init__()
        tf = require("transformers", "model.arch 'hf_gpt2'")
        self.cfg = cfg
        self.hf = tf.GPT2LMHeadModel(hf_config(cfg))
        # dropout RNG: [base seed (-1: not drawn yet), training forwards so far], saved with the weights
        self.register_buffer("dropout_state", torch.tensor([-1, 0], dtype=torch.int64))
        if cfg.tie_embeddings:
            self.register_state_dict_post_hook(_drop_tied)
            self.register_load_state_dict_post_hook(_tied_not_missing)

    def forward(self, tokens: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, V), or (B, V) of the last position with ``last_only``.

        In training mode with dropout, the masks come from a generator seeded by
        the model's own counter (``dropout_state``, checkpointed with the
        weights; its base is a hash of the weights at the first training
        forward, so it follows the init seed): runs are reproducible and a
        resumed run draws the masks an uninterrupted one would.
        """
        if tokens.shape[1] > self.cfg.max_len:
            raise ValueError(f"sequence length {tokens.shape[1]} exceeds model.max_len={self.cfg.max_len}")
        if self.training and self.cfg.dropout > 0:
            devices = [tokens.device] if tokens.device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(self._next_seed())
                return self._logits(tokens, last_only)
        return self._logits(tokens, last_only)

    def _next_seed(self) -> int:
        st = self.dropout_state
        if int(st[0]) < 0:
            w = self.hf.transformer.wte.weight.detach().flatten()[:256].double().cpu().numpy().tobytes()
            st[0] = int.from_bytes(hashlib.sha256(w).digest()[:6], "big")
        seed = (int(st[0]) * 1_000_003 + int(st[1])) % (2**63 - 1)
        st[1] += 1
        return seed

    def _logits(self, tokens: torch.Tensor, last_only: bool) -> torch.Tensor:
        if last_only:
            h = self.hf.transformer(input_ids=tokens, use_cache=False).last_hidden_state
            return self.hf.lm_head(h[:, -1])
        return self.hf(input_ids=tokens, use_cache=False).logits


def _drop_tied(module: nn.Module, state_dict: dict, prefix: str, local_metadata: dict) -> None:
    state_dict.pop(prefix + TIED_KEY, None)


def _tied_not_missing(module: nn.Module, incompatible) -> None:
    for k in [k for k in incompatible.missing_keys if k == TIED_KEY or k.endswith("." + TIED_KEY)]:
        incompatible.missing_keys.remove(k)


def build_hf_gpt2(cfg: HFGPT2Config) -> HFGPT2LM:
    """The model of ``model.arch: hf_gpt2`` (Hugging Face's default init; the run then applies the init rate)."""
    return HFGPT2LM(cfg)

"""The config section of ``model.arch: hf_gpt2``: Hugging Face's GPT-2 (``transformers.GPT2LMHeadModel``).

Reading it imports neither torch nor transformers; the model is built by
:func:`anchorlab.model.hf_gpt2.build_hf_gpt2` (needs the ``hf`` extra).
"""

from __future__ import annotations

from dataclasses import dataclass

from anchorlab.config.base import check_choice, check_range, fail


@dataclass(frozen=True)
class HFGPT2Config:
    """GPT-2 as Hugging Face builds it, with eager attention (attention weights stay readable).

    ``n_layers`` / ``d_model`` / ``n_heads`` / ``d_ff`` / ``max_len`` are
    GPT-2's ``n_layer`` / ``n_embd`` / ``n_head`` / ``n_inner`` /
    ``n_positions``; ``dropout`` sets ``resid_pdrop``, ``embd_pdrop`` and
    ``attn_pdrop`` together (the authors' Fig. 7 script sets all three to 0;
    GPT-2's own default is 0.1). ``tie_embeddings``: the readout shares the
    token embedding (GPT-2's default). ``vocab_size`` and ``max_len`` are filled
    from the task when a config leaves them out. GPT-2 small: 12 layers, 768
    wide, 12 heads; medium: 24, 1024, 16; both with ``d_ff = 4 d_model``.
    """

    arch: str = "hf_gpt2"
    n_layers: int = 2
    d_model: int = 128
    n_heads: int = 4
    d_ff: int = 512
    max_len: int = 128
    vocab_size: int = 4096
    dropout: float = 0.0
    activation: str = "gelu_new"
    ln_eps: float = 1e-5
    tie_embeddings: bool = True

    def __post_init__(self) -> None:
        p = "model"
        check_choice(f"{p}.arch", self.arch, ("hf_gpt2",))
        for name in ("n_layers", "d_model", "n_heads", "d_ff", "max_len", "vocab_size"):
            check_range(f"{p}.{name}", getattr(self, name), 1)
        if self.d_model % self.n_heads:
            fail(f"{p}.n_heads", f"must divide model.d_model={self.d_model}, got {self.n_heads}")
        check_range(f"{p}.dropout", self.dropout, 0.0, 1.0, hi_open=True)
        check_choice(f"{p}.activation", self.activation, ("gelu_new", "gelu", "relu"))
        check_range(f"{p}.ln_eps", self.ln_eps, 0.0, lo_open=True)

    @property
    def d_head(self) -> int:
        """Width of one head (GPT-2 splits d_model evenly)."""
        return self.d_model // self.n_heads

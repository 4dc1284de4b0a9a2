"""Sequence-to-sequence tasks (SCAN, COGS) as decoder-only language modelling.

A pair (input, output) of whitespace-tokenized strings becomes one row::

    [input tokens] <sep> [output tokens] <eos> <pad> ...

The model is trained on next-token prediction at the positions whose next
token is an output token or ``<eos>`` (the loss mask); inputs and padding
carry no loss. Decoding feeds ``[input tokens] <sep>`` and extends it greedily
until ``<eos>``. Rows are right-padded, so every sequence starts at position 0
exactly as in training; with a causal model the pads after a row's end never
influence its predictions.

Metrics: ``token_accuracy`` is teacher-forced (argmax at every loss-mask
position equals the next token, output tokens and ``<eos>`` included);
``exact_match`` compares greedily decoded output strings with the targets
(decoding: :func:`decode`, on :mod:`anchorlab.model.generate`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from anchorlab.config.base import ConfigError
from anchorlab.tasks.base import no_grad

if TYPE_CHECKING:  # imported where used: the task configs beside this module are read without torch
    import torch

log = logging.getLogger(__name__)

PAD, UNK, SEP, EOS = "<pad>", "<unk>", "<sep>", "<eos>"
SPECIALS = (PAD, UNK, SEP, EOS)  # ids 0, 1, 2, 3

ModelFn = Callable[["torch.Tensor"], "torch.Tensor"]  # tokens (B, T) -> logits (B, T, V)


@dataclass(frozen=True)
class Vocab:
    """Word-level vocabulary; ``itos[i]`` is token ``i``, specials first (<pad>=0)."""

    itos: tuple[str, ...]
    stoi: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if tuple(self.itos[:len(SPECIALS)]) != SPECIALS:
            raise ConfigError(f"vocab.itos: must start with {', '.join(SPECIALS)}")
        if len(set(self.itos)) != len(self.itos):
            raise ConfigError("vocab.itos: tokens must be unique")
        object.__setattr__(self, "stoi", {t: i for i, t in enumerate(self.itos)})

    @classmethod
    def build(cls, texts: Iterable[str], min_count: int = 1) -> "Vocab":
        """Specials, then every whitespace token seen >= ``min_count`` times, sorted."""
        counts = Counter(tok for t in texts for tok in t.split())
        words = sorted(w for w, c in counts.items() if c >= min_count and w not in SPECIALS)
        return cls(SPECIALS + tuple(words))

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]], min_count: int = 1) -> "Vocab":
        """One shared vocabulary over inputs and outputs of (training) pairs."""
        return cls.build((s for pair in pairs for s in pair), min_count=min_count)

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def unk_id(self) -> int:
        return 1

    @property
    def sep_id(self) -> int:
        return 2

    @property
    def eos_id(self) -> int:
        return 3

    def encode(self, text: str) -> list[int]:
        """Whitespace tokens -> ids; unknown words -> ``<unk>``."""
        return [self.stoi.get(tok, 1) for tok in text.split()]

    def decode(self, ids: Iterable[int]) -> str:
        """ids -> space-joined tokens (specials kept as written)."""
        return " ".join(self.itos[int(i)] for i in ids)


@dataclass(frozen=True)
class EncodedPairs:
    """Encoded rows: tokens (N, T) int64, loss_mask (N, T) bool, prompt_len (N,) int64.

    ``prompt_len[i]`` counts the input tokens and ``<sep>``; ``loss_mask[i, t]``
    is True iff ``tokens[i, t + 1]`` is an output token or ``<eos>``.
    """

    tokens: torch.Tensor
    loss_mask: torch.Tensor
    prompt_len: torch.Tensor

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


def encode_pairs(pairs: Sequence[tuple[str, str]], vocab: Vocab,
                 max_len: int | None = None) -> EncodedPairs:
    """Lay out pairs as ``[input, <sep>, output, <eos>, <pad>...]`` rows.

    T is ``max_len`` if given (a row longer than it raises ConfigError), else
    the longest row.
    """
    import torch

    rows, prompt_lens = [], []
    for src, tgt in pairs:
        p = vocab.encode(src) + [vocab.sep_id]
        rows.append(p + vocab.encode(tgt) + [vocab.eos_id])
        prompt_lens.append(len(p))
    longest = max((len(r) for r in rows), default=0)
    T = longest if max_len is None else max_len
    if longest > T:
        raise ConfigError(f"max_len: {max_len} is shorter than the longest encoded pair ({longest} "
                          "tokens); raise it or leave it None")
    tokens = torch.full((len(rows), T), vocab.pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), T), dtype=torch.bool)
    for i, (r, p) in enumerate(zip(rows, prompt_lens)):
        tokens[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, p - 1:len(r) - 1] = True  # predicting r[p], ..., r[-1] (= <eos>)
    return EncodedPairs(tokens, mask, torch.tensor(prompt_lens, dtype=torch.long))


def _shifted(logits: torch.Tensor, tokens: torch.Tensor, loss_mask: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if logits.shape[:2] != tokens.shape or loss_mask.shape != tokens.shape:
        raise ConfigError(f"logits/tokens/loss_mask: shapes must be (N, T, V), (N, T), (N, T); got "
                          f"{tuple(logits.shape)}, {tuple(tokens.shape)}, {tuple(loss_mask.shape)}")
    # position t predicts token t + 1
    return logits[:, :-1], tokens[:, 1:], loss_mask[:, :-1]


def masked_lm_loss(logits: torch.Tensor, tokens: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over loss-mask positions.

    logits (N, T, V), tokens (N, T), loss_mask (N, T) bool -> scalar. Logits at
    masked-out positions (inputs, padding, the last position) do not matter.
    """
    import torch.nn.functional as F

    lg, tgt, m = _shifted(logits, tokens, loss_mask)
    if not bool(m.any()):
        raise ConfigError("loss_mask: selects no positions")
    return F.cross_entropy(lg[m].float(), tgt[m])


@no_grad
def token_accuracy(logits: torch.Tensor, tokens: torch.Tensor, loss_mask: torch.Tensor) -> float:
    """Teacher-forced accuracy: fraction of loss-mask positions whose argmax is the next token."""
    lg, tgt, m = _shifted(logits, tokens, loss_mask)
    if not bool(m.any()):
        return float("nan")
    return float((lg[m].argmax(-1) == tgt[m]).float().mean())


def normalize(text: str) -> str:
    """Collapse whitespace: strings compare as token sequences."""
    return " ".join(text.split())


def exact_match(predictions: Sequence[str], targets: Sequence[str]) -> float:
    """Fraction of predictions equal to their target as token sequences."""
    if len(predictions) != len(targets):
        raise ConfigError(f"predictions: need one per target ({len(targets)}), got {len(predictions)}")
    if not targets:
        return float("nan")
    return sum(normalize(p) == normalize(t) for p, t in zip(predictions, targets)) / len(targets)


@no_grad
def decode(model: torch.nn.Module | ModelFn, prompts: Sequence[str], vocab: Vocab, max_new_tokens: int,
           batch_size: int = 256, device: torch.device | str | None = None, cached: bool = True) -> list[str]:
    """Greedy output strings for ``prompts`` (each encoded as ``[tokens] <sep>``), stopping at ``<eos>``.

    ``cached`` decodes with the model's key/value cache
    (:func:`~anchorlab.model.generate.greedy_generate`, an anchorlab
    Transformer); otherwise ``model`` may be any causal ``tokens -> logits``
    function (:func:`~anchorlab.model.generate.reference_generate`). Ids past
    the vocabulary never win.
    """
    from anchorlab.model.generate import greedy_generate, reference_generate

    if max_new_tokens < 0:
        raise ConfigError(f"max_new_tokens: must be >= 0, got {max_new_tokens}")
    if batch_size < 1:
        raise ConfigError(f"batch_size: must be >= 1, got {batch_size}")
    encoded = [vocab.encode(p) + [vocab.sep_id] for p in prompts]
    V = len(vocab)
    if cached:
        out = greedy_generate(model, encoded, max_new_tokens, vocab.eos_id, vocab.pad_id, batch_size, device,
                              vocab_limit=V)
    else:
        out = reference_generate(lambda t: model(t)[..., :V], encoded, max_new_tokens, vocab.eos_id,
                                 vocab.pad_id, batch_size, device)
    return [vocab.decode(ids) for ids in out]

"""Greedy generation with any anchorlab Transformer, token ids in and out.

:func:`greedy_generate` decodes with the model's own key/value cache
(:class:`~anchorlab.model.transformer.KVCache`): prompts are batched by length
and left-padded; each row's positions start at 0 after its pads (as in
training) and no real token attends to a pad, so a row's result equals
decoding it alone. Hook points fire while decoding.

:func:`reference_generate` re-runs the whole prefix at every step (no cache,
right padding) for any ``model_fn(tokens) -> logits``; it is the check that
the cached path is right.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from anchorlab.model.transformer import KVCache


def length_batches(prompts: Sequence[Sequence[int]], batch_size: int) -> list[list[int]]:
    """Indices of ``prompts`` sorted by length (stable), in chunks of ``batch_size``."""
    if batch_size < 1:
        raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    return [order[s:s + batch_size] for s in range(0, len(order), batch_size)]


@torch.no_grad()
def greedy_generate(model: torch.nn.Module, prompts: Sequence[Sequence[int]], max_new_tokens: int, eos_id: int,
                    pad_id: int = 0, batch_size: int = 256, device: torch.device | str | None = None,
                    vocab_limit: int | None = None) -> list[list[int]]:
    """Greedy continuation of each prompt until ``eos_id`` (not included) or ``max_new_tokens`` tokens.

    ``vocab_limit``: only ids below it can be chosen (logits past a task's
    vocabulary never win). Returns the generated ids per prompt, in order.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens: must be >= 0, got {max_new_tokens}")
    results: list[list[int]] = [[] for _ in prompts]
    for idx in length_batches(prompts, batch_size):
        B, P = len(idx), len(prompts[idx[-1]])
        lens = torch.tensor([len(prompts[i]) for i in idx], device=device)          # (B,)
        tok = torch.full((B, P), pad_id, dtype=torch.long, device=device)
        for r, i in enumerate(idx):
            tok[r, P - len(prompts[i]):] = torch.tensor(list(prompts[i]), dtype=torch.long)
        col = torch.arange(P, device=device)
        pad = col[None, :] < (P - lens)[:, None]                                     # (B, P) left pads
        pos = (col[None, :] - (P - lens)[:, None]).clamp(min=0)                      # (B, P)
        cache = KVCache.empty(len(model.blocks))
        out = torch.zeros(B, max_new_tokens, dtype=torch.long, device=device)
        done = torch.zeros(B, dtype=torch.bool, device=device)
        n = torch.zeros(B, dtype=torch.long, device=device)                          # tokens kept per row
        for step in range(max_new_tokens):
            logits = model(tok, cache=cache, positions=pos, pad=pad)[:, -1]           # (B, V)
            nxt = logits[:, :vocab_limit].argmax(-1)
            done |= nxt == eos_id
            out[:, step] = nxt
            n += (~done).long()
            if bool(done.all()):
                break
            tok, pos, pad = nxt[:, None], (lens + step)[:, None], None
        for r, i in enumerate(idx):
            results[i] = out[r, :int(n[r])].tolist()
    return results


@torch.no_grad()
def reference_generate(model_fn: Callable[[torch.Tensor], torch.Tensor], prompts: Sequence[Sequence[int]],
                       max_new_tokens: int, eos_id: int, pad_id: int = 0, batch_size: int = 256,
                       device: torch.device | str | None = None) -> list[list[int]]:
    """Greedy continuation re-running the whole prefix each step; ``model_fn`` (B, T) -> (B, T, V) causal.

    Rows are right-padded and read the logits at their own last position.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens: must be >= 0, got {max_new_tokens}")
    results: list[list[int]] = [[] for _ in prompts]
    for idx in length_batches(prompts, batch_size):
        B = len(idx)
        start = torch.tensor([len(prompts[i]) for i in idx], dtype=torch.long, device=device)
        buf = torch.full((B, int(start.max()) + max_new_tokens), pad_id, dtype=torch.long, device=device)
        for r, i in enumerate(idx):
            buf[r, :len(prompts[i])] = torch.tensor(list(prompts[i]), dtype=torch.long)
        lens = start.clone()
        active = torch.ones(B, dtype=torch.bool, device=device)
        rows = torch.arange(B, device=device)
        for _ in range(max_new_tokens):
            logits = model_fn(buf[:, :int(lens.max())])
            nxt = logits[rows.to(logits.device), (lens - 1).to(logits.device)].argmax(-1).to(buf.device)
            active &= nxt != eos_id                     # a row that emits eos stops; eos is not stored
            buf[rows[active], lens[active]] = nxt[active]
            lens += active.long()
            if not bool(active.any()):
                break
        for r, i in enumerate(idx):
            results[i] = buf[r, start[r]:lens[r]].tolist()
    return results

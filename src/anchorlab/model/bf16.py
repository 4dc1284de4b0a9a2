"""Native bfloat16 compute (``train.bf16_path: native``): the primitives and the weight cache.

Inside :func:`native_bf16` the model's activations stay bfloat16 between ops;
outside it every helper here is the plain module call, so the float32 and
autocast paths compute exactly what they computed before this module existed.

* weights: float32 master parameters (the optimizer's); each linear multiplies
  a bfloat16 copy held by a :class:`WeightCache`, made again when the master
  changes (its version counter moves: ``opt.step``, ``load_state_dict``), so
  once per optimizer step. The cache keeps ``W`` (for ``g @ W`` in the
  backward), ``W.T`` for the forward (a contiguous copy on CPUs with AMX, so
  ``x @ Wt`` runs as a non-transposed GEMM; the transposed view elsewhere)
  and the bias;
* :class:`_Linear`: bfloat16 GEMMs; the weight and bias gradients are returned
  in float32 (the bias one summed in float32) and autograd accumulates them
  into the master's ``.grad``;
* float32 by choice: LayerNorm statistics (PyTorch's CPU kernel computes the
  mean and variance of a bfloat16 input in float32 and returns bfloat16; the
  affine stays float32), the attention softmax (the same for its max and sum),
  and the logits, so a task's loss and log-softmax run in float32.

Stacked training calls the model inside ``torch.vmap``: the stack passes its
bfloat16 weights in (batched like the masters) with :func:`native_bf16`'s
``weights``; :class:`_Linear` has a generated vmap rule.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn
from torch._functorch.utils import unwrap_dead_wrappers

BF16 = torch.bfloat16
_STATE = threading.local()     # .weights: the active WeightCache or {linear: (W16, Wt16, b16)}; absent outside native_bf16


class WeightCache:
    """bfloat16 copies ``(W, W.T, b)`` of every ``nn.Linear`` of a model, made again when a float32 master's
    version counter (or storage) changes.

    ``W.T`` is a contiguous copy where ``transposed_copy`` (what the training loops ask for on a CPU with
    AMX tiles, where the forward's ``x @ W.T`` is slower than ``x @ Wt`` with ``Wt`` row-major:
    ``train.precision.step_context``), else the transposed view of ``W`` (where both layouts run alike, so
    the copies would only cost time). Measured once: notes/2026-12-code-measurements.md.

    A stale linear refreshes every stale linear at once, with one ``torch._foreach_copy_`` for the weights'
    casts and one for the biases' instead of a cast per linear: a step's update makes every copy stale
    together. The values are the per-linear casts' bit for bit (a cast is elementwise).

    Two ways to keep the copies current:

    * ``managed=True`` (what the training loops use, through ``train.precision.step_context``): the owner
      calls :meth:`refresh` after each optimizer step (``native_bf16.after_step``), and a lookup trusts the
      copies it holds. Nothing depends on how the optimizer writes the masters.
    * ``managed=False`` (a cache used on its own): staleness is read from the masters' version counters and
      storage. A writer that does not move the counters leaves the copies stale; torch's fused AdamW is one
      (torch 2.13), which is why ``train.optim.FusedAdamW`` moves them after each step."""

    def __init__(self, model: nn.Module, transposed_copy: bool = False, managed: bool = False) -> None:
        self.linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
        # linear -> (its masters' key, (W16, Wt16, b16 or None))
        self._copies: dict[nn.Linear, tuple[tuple[int, ...], tuple[torch.Tensor, ...]]] = {}
        self.refreshes = 0         # linears copied so far (what a test of staleness counts)
        self.transposed_copy = transposed_copy
        self.managed = managed

    def refresh(self) -> None:
        """Cast every linear's masters again (after an optimizer step): one foreach cast for all of them."""
        if self.linears:
            self._refresh(self.linears[0], everything=True)

    @staticmethod
    def _key(mod: nn.Linear) -> tuple[int, ...]:
        ps = mod._parameters          # not mod.weight: nn.Module.__getattr__ costs more than the rest of a lookup
        w = ps["weight"] if "weight" in ps else mod.weight    # (a parametrized weight is not in _parameters)
        b = ps["bias"] if "bias" in ps else mod.bias
        return (w._version, w.data_ptr()) if b is None else (w._version, w.data_ptr(), b._version, b.data_ptr())

    def get(self, mod: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
        """``(W, W.T)`` in bfloat16 for the current master of ``mod.weight``."""
        return self.copies(mod)[:2]

    def copies(self, mod: nn.Linear) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(W, W.T, b or None)`` in bfloat16 for the current masters of ``mod``."""
        hit = self._copies.get(mod)
        if hit is None or (not self.managed and hit[0] != self._key(mod)):
            self._refresh(mod)
            hit = self._copies[mod]
        return hit[1]

    @torch.no_grad()
    def _refresh(self, mod: nn.Linear, everything: bool = False) -> None:
        keys = {m: self._key(m) for m in self.linears}
        if mod not in keys:                     # a linear outside the model the cache was made for
            keys[mod] = self._key(mod)
        stale = list(keys) if everything else [m for m, k in keys.items()
                                                if (h := self._copies.get(m)) is None or h[0] != k]
        ws = [m.weight.detach() for m in stale]
        w16 = [torch.empty_like(w, dtype=BF16) for w in ws]
        torch._foreach_copy_(w16, ws)
        wt16 = [w.t().contiguous() if self.transposed_copy else w.t() for w in w16]
        bs = [m.bias.detach() for m in stale if m.bias is not None]
        b16 = [torch.empty_like(b, dtype=BF16) for b in bs]
        if bs:
            torch._foreach_copy_(b16, bs)
        it = iter(b16)
        for m, a, t in zip(stale, w16, wt16):
            self._copies[m] = (keys[m], (a, t, None if m.bias is None else next(it)))
        self.refreshes += len(stale)


class native_bf16:  # noqa: N801 -- used like torch.autocast: `with native_bf16(cache):`
    """Context: the model's forward runs on the native bfloat16 path with these weight copies (a
    :class:`WeightCache`, or ``{linear: (W16, Wt16, b16 or None)}``). Reusable, like an autocast object."""

    def __init__(self, weights: WeightCache | Mapping[nn.Linear, tuple[torch.Tensor, ...]]) -> None:
        self.weights = weights
        self._prev: list[object] = []

    def __enter__(self) -> "native_bf16":
        self._prev.append(getattr(_STATE, "weights", None))
        _STATE.weights = self.weights
        return self

    def __exit__(self, *exc: object) -> None:
        _STATE.weights = self._prev.pop()

    def after_step(self) -> None:
        """What a training loop calls after each optimizer step: a managed cache casts its copies again."""
        if isinstance(self.weights, WeightCache) and self.weights.managed:
            self.weights.refresh()


def active() -> bool:
    return getattr(_STATE, "weights", None) is not None


def _copies(mod: nn.Linear) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(W16, Wt16, b16 or None)`` of the active weights."""
    w = _STATE.weights
    return w.copies(mod) if isinstance(w, WeightCache) else w[mod]


def _apply(fn: type[torch.autograd.Function], *args: object) -> torch.Tensor:
    """``fn.apply(*args)`` for a Function whose forward takes its arguments positionally, without
    ``Function.apply``'s ``inspect.signature`` binding of them on every call (what a Function with
    ``setup_context``, needed for its vmap rule, pays: a large part of a tiny linear's call; measured once:
    notes/2026-12-code-measurements.md). Outside functorch
    transforms that binding is all ``Function.apply`` adds before the C ``_FunctionBase.apply`` this
    calls, so the graph and the values are the same; under vmap (the stacks) it is ``fn.apply``."""
    if torch._C._are_functorch_transforms_active():
        return fn.apply(*args)
    return super(torch.autograd.Function, fn).apply(*unwrap_dead_wrappers(args))


class _Linear(torch.autograd.Function):
    """``x @ W.T + b`` in bfloat16 on the cached copies; float32 gradients for the master ``W`` and ``b``."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, w16: torch.Tensor,
                wt16: torch.Tensor, b16: torch.Tensor | None) -> torch.Tensor:
        # one 2-D GEMM over every row (a 3-D x @ W would broadcast W into a batched matmul when x is
        # a strided slice, e.g. the last position's queries)
        x2 = x.reshape(-1, x.shape[-1])
        out = x2 @ wt16 if bias is None else torch.addmm(b16, x2, wt16)
        return out.view(*x.shape[:-1], wt16.shape[-1])

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, _, bias, w16 = inputs[:4]
        ctx.save_for_backward(x, w16)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        x, w16 = ctx.saved_tensors
        g = g.to(BF16)
        g2, x2 = g.reshape(-1, g.shape[-1]), x.reshape(-1, x.shape[-1])
        gx = (g2 @ w16).view(x.shape) if ctx.needs_input_grad[0] else None
        gw = (g2.t() @ x2).float()
        # bfloat16 sum (float32 accumulation inside, one rounding at the end, as autocast's addmm
        # backward); sum(dtype=float32) would first copy g to float32, which is slower
        # (measured once: notes/2026-12-code-measurements.md)
        gb = g2.sum(0).float() if ctx.has_bias else None
        return gx, gw, gb, None, None, None


def activation(x: torch.Tensor) -> torch.Tensor:
    """The residual stream as it enters the blocks: bfloat16 on the native path, as it is otherwise."""
    return x.to(BF16) if active() else x


def linear(mod: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``mod(x)``; on the native path a bfloat16 GEMM on the cached copy of ``mod.weight``."""
    if not active():
        return mod(x)
    return _apply(_Linear, x.to(BF16), mod.weight, mod.bias, *_copies(mod))


def layer_norm(mod: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    """``mod(x)``; on the native path bfloat16 in and out, float32 statistics and affine parameters."""
    if not active():
        return mod(x)
    return F.layer_norm(x.to(BF16), mod.normalized_shape, mod.weight, mod.bias, mod.eps).to(BF16)


def logits(x: torch.Tensor) -> torch.Tensor:
    """The readout's output: float32 on the native path (the loss and its log-softmax run in float32)."""
    return x.float() if active() else x


__all__ = ["BF16", "WeightCache", "activation", "active", "layer_norm", "linear", "logits", "native_bf16"]

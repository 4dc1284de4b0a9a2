"""Native bfloat16 compute (``train.bf16_path: native``): the primitives and the weight cache.

Inside :func:`native_bf16` the model's activations stay bfloat16 between ops;
outside it every helper here is the plain module call, so the float32 and
autocast paths compute exactly what they computed before this module existed.

* weights: float32 master parameters (the optimizer's); each linear multiplies
  a bfloat16 copy held by a :class:`WeightCache`, made again when the master
  changes (its version counter moves: ``opt.step``, ``load_state_dict``), so
  once per optimizer step. The cache keeps ``W`` (for ``g @ W`` in the
  backward) and ``W.T`` contiguous (for the forward ``x @ W.T`` as a plain
  ``x @ Wt``), the layouts that each run as a non-transposed GEMM;
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
_STATE = threading.local()     # .weights: the active {nn.Linear: (W16, Wt16)}; absent outside native_bf16


class WeightCache:
    """bfloat16 copies ``(W, W.T contiguous)`` of every ``nn.Linear`` weight of a model, made again when the
    float32 master's version counter (or storage) changes."""

    def __init__(self, model: nn.Module) -> None:
        self.linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
        self._copies: dict[nn.Linear, tuple[int, int, tuple[torch.Tensor, torch.Tensor]]] = {}
        self.refreshes = 0         # copies made so far (what a test of staleness counts)

    @torch.no_grad()
    def get(self, mod: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
        w = mod.weight
        key = (w._version, w.data_ptr())
        hit = self._copies.get(mod)
        if hit is None or hit[:2] != key:
            w16 = w.detach().to(BF16)
            hit = (*key, (w16, w16.t().contiguous()))
            self._copies[mod] = hit
            self.refreshes += 1
        return hit[2]


class native_bf16:  # noqa: N801 -- used like torch.autocast: `with native_bf16(cache):`
    """Context: the model's forward runs on the native bfloat16 path with these weight copies (a
    :class:`WeightCache`, or ``{linear: (W16, Wt16)}``). Reusable, like an autocast object."""

    def __init__(self, weights: WeightCache | Mapping[nn.Linear, tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.weights = weights
        self._prev: list[object] = []

    def __enter__(self) -> "native_bf16":
        self._prev.append(getattr(_STATE, "weights", None))
        _STATE.weights = self.weights
        return self

    def __exit__(self, *exc: object) -> None:
        _STATE.weights = self._prev.pop()


def active() -> bool:
    return getattr(_STATE, "weights", None) is not None


def _copies(mod: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    w = _STATE.weights
    return w.get(mod) if isinstance(w, WeightCache) else w[mod]


def _apply(fn: type[torch.autograd.Function], *args: object) -> torch.Tensor:
    """``fn.apply(*args)`` for a Function whose forward takes its arguments positionally, without
    ``Function.apply``'s ``inspect.signature`` binding of them on every call (what a Function with
    ``setup_context``, needed for its vmap rule, pays: a tiny linear's call took 41 us through
    ``Function.apply`` and 17 us here, one thread; the demo step makes 13). Outside functorch
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
                wt16: torch.Tensor) -> torch.Tensor:
        # one 2-D GEMM over every row (a 3-D x @ W would broadcast W into a batched matmul when x is
        # a strided slice, e.g. the last position's queries)
        x2 = x.reshape(-1, x.shape[-1])
        out = x2 @ wt16 if bias is None else torch.addmm(bias.to(BF16), x2, wt16)
        return out.view(*x.shape[:-1], wt16.shape[-1])

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, _, bias, w16, _ = inputs
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
        # backward); sum(dtype=float32) would first copy g to float32, 6x slower
        gb = g2.sum(0).float() if ctx.has_bias else None
        return gx, gw, gb, None, None


def activation(x: torch.Tensor) -> torch.Tensor:
    """The residual stream as it enters the blocks: bfloat16 on the native path, as it is otherwise."""
    return x.to(BF16) if active() else x


def linear(mod: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``mod(x)``; on the native path a bfloat16 GEMM on the cached copy of ``mod.weight``."""
    if not active():
        return mod(x)
    w16, wt16 = _copies(mod)
    return _apply(_Linear, x.to(BF16), mod.weight, mod.bias, w16, wt16)


def layer_norm(mod: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    """``mod(x)``; on the native path bfloat16 in and out, float32 statistics and affine parameters."""
    if not active():
        return mod(x)
    return F.layer_norm(x.to(BF16), mod.normalized_shape, mod.weight, mod.bias, mod.eps).to(BF16)


def logits(x: torch.Tensor) -> torch.Tensor:
    """The readout's output: float32 on the native path (the loss and its log-softmax run in float32)."""
    return x.float() if active() else x


__all__ = ["BF16", "WeightCache", "activation", "active", "layer_norm", "linear", "logits", "native_bf16"]

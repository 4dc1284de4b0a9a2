"""Stacked arithmetic: G same-shape models' parameters, AdamW and gradient clipping as whole tensors.

Storage: all parameters live in one ``(G, P)`` buffer (P = parameters per
model); each parameter is a leaf *view* ``(G, *shape)`` into it, and its
``.grad`` is a view into a matching ``(G, P)`` gradient buffer that autograd
accumulates into in place. Clipping and AdamW are then a handful of
elementwise ops on whole ``(G, P)`` tensors with ``(G, 1)`` per-model
coefficients, whatever the number of parameter tensors. The driver that uses
them is :mod:`anchorlab.train.stacked`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from anchorlab.model.bf16 import BF16, native_bf16

# ------------------------------------------------------------------------ stacked state
class StackedParams:
    """G models' parameters as leaf views ``(G, *shape)`` into one ``(G, P)`` buffer."""

    def __init__(self, models: Sequence[torch.nn.Module], device: torch.device) -> None:
        ref = models[0]
        self.names = [n for n, _ in ref.named_parameters()]
        self.shapes = [tuple(p.shape) for _, p in ref.named_parameters()]
        self.slices: list[slice] = []
        off = 0
        for s in self.shapes:
            n = math.prod(s)
            self.slices.append(slice(off, off + n))
            off += n
        dtype = next(ref.parameters()).dtype
        self.data = torch.empty(len(models), off, dtype=dtype, device=device)
        with torch.no_grad():
            for g, m in enumerate(models):
                self.data[g] = torch.cat([p.detach().reshape(-1) for p in m.parameters()]).to(device)
        self._make_views()

    def _make_views(self) -> None:
        G = self.data.shape[0]
        self.grad = torch.zeros_like(self.data)
        self.params: dict[str, torch.Tensor] = {}
        self._grad_views: list[torch.Tensor] = []
        for name, sl, shape in zip(self.names, self.slices, self.shapes):
            leaf = self.data[:, sl].view(G, *shape).requires_grad_()
            gv = self.grad[:, sl].view(G, *shape)
            leaf.grad = gv
            self.params[name] = leaf
            self._grad_views.append(gv)

    @property
    def n_models(self) -> int:
        return int(self.data.shape[0])

    def zero_grad(self) -> None:
        self.grad.zero_()

    def sync_grads(self) -> None:
        """Make sure every ``.grad`` is still our view (autograd accumulates in place)."""
        for leaf, gv in zip(self.params.values(), self._grad_views):
            if leaf.grad is not gv and leaf.grad.data_ptr() != gv.data_ptr():  # pragma: no cover
                gv.copy_(leaf.grad)
                leaf.grad = gv

    def load_into(self, model: torch.nn.Module, g: int) -> torch.nn.Module:
        """Copy model g's weights into ``model`` (same shape) and return it."""
        with torch.no_grad():
            for (name, p), sl in zip(model.named_parameters(), self.slices):
                p.copy_(self.data[g, sl].view_as(p))
        return model

    def select(self, keep: list[int]) -> None:
        """Keep only models ``keep`` (in that order)."""
        idx = torch.tensor(keep, device=self.data.device)
        self.data = self.data.index_select(0, idx)
        self._make_views()


@dataclass
class StackedAdamW:
    """AdamW (decoupled weight decay) on ``(G, P)`` tensors with per-model hyper-parameters.

    Term by term ``torch.optim.AdamW``'s single-tensor update; ``decay_mask``
    (G, P) marks the entries that take weight decay.
    """

    weight_decay: list[float]
    betas: list[tuple[float, float]]
    eps: list[float]
    decay_mask: torch.Tensor
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    step: int = 0
    _const: dict[str, torch.Tensor] = field(default_factory=dict)

    def _col(self, values: list[float]) -> torch.Tensor:
        """Per-model numbers as a (G, 1) column in the state's dtype (cast like a Python scalar)."""
        return torch.tensor(values, dtype=self.exp_avg.dtype, device=self.exp_avg.device).unsqueeze(1)

    def _constants(self) -> dict[str, torch.Tensor]:
        if not self._const:
            self._const = {"w1": self._col([1 - b for b, _ in self.betas]), "b2": self._col([b for _, b in self.betas]),
                           "w2": self._col([1 - b for _, b in self.betas]), "eps": self._col(self.eps),
                           "one": torch.ones((), dtype=self.exp_avg.dtype, device=self.exp_avg.device)}
        return self._const

    @torch.no_grad()
    def update(self, param: torch.Tensor, grad: torch.Tensor, lr: list[float]) -> None:
        """One AdamW step of every model; param, grad: (G, P); lr: G floats.

        Temporaries go to two persistent (G, P) scratch buffers: fresh
        allocations of this size each step cost more than the arithmetic on CPU.
        """
        c = self._constants()
        if "tmp" not in c:
            c["tmp"], c["tmp2"] = torch.empty_like(param), torch.empty_like(param)
        tmp, tmp2 = c["tmp"], c["tmp2"]
        self.step += 1
        t = self.step
        if any(w != 0 for w in self.weight_decay):
            factor = self._col([1 - lr_g * wd for lr_g, wd in zip(lr, self.weight_decay)])
            param.mul_(torch.where(self.decay_mask, factor, c["one"], out=tmp))
        self.exp_avg.lerp_(grad, c["w1"])
        self.exp_avg_sq.mul_(c["b2"]).addcmul_(torch.mul(grad, c["w2"], out=tmp), grad)
        # small (G, 1) tensors carry this step's lr and bias corrections
        step_size = self._col([-(lr_g / (1 - b1 ** t)) for lr_g, (b1, _) in zip(lr, self.betas)])
        bc2_sqrt = self._col([(1 - b2 ** t) ** 0.5 for _, b2 in self.betas])
        denom = torch.sqrt(self.exp_avg_sq, out=tmp).div_(bc2_sqrt).add_(c["eps"])
        param.addcdiv_(torch.mul(self.exp_avg, step_size, out=tmp2), denom)

    def select(self, keep: list[int]) -> None:
        idx = torch.tensor(keep, device=self.exp_avg.device)
        self.exp_avg = self.exp_avg.index_select(0, idx)
        self.exp_avg_sq = self.exp_avg_sq.index_select(0, idx)
        self.decay_mask = self.decay_mask.index_select(0, idx)
        self.weight_decay = [self.weight_decay[i] for i in keep]
        self.betas = [self.betas[i] for i in keep]
        self.eps = [self.eps[i] for i in keep]
        self._const = {}


def clip_per_model(stack: StackedParams, clip_norm: list[float]) -> torch.Tensor:
    """Clip each model's gradient to its own max norm (0 = no clipping); return norms (G,).

    Same arithmetic as ``torch.nn.utils.clip_grad_norm_`` applied to each
    model alone: norm of the per-parameter norms, coefficient
    ``max_norm / (norm + 1e-6)`` clamped to 1.
    """
    with torch.no_grad():
        per_param = torch.stack([torch.linalg.vector_norm(stack.grad[:, sl], dim=1) for sl in stack.slices])
        total = torch.linalg.vector_norm(per_param, dim=0)                       # (G,)
        if any(c > 0 for c in clip_norm):
            c = torch.tensor(clip_norm, dtype=total.dtype, device=total.device)
            coef = torch.where(c > 0, torch.clamp(c / (total + 1e-6), max=1.0), torch.ones_like(total))
            stack.grad.mul_(coef.unsqueeze(1))
    return total


# ----------------------------------------------------------------------- native bfloat16
def native_losses(base: torch.nn.Module, task, shared_data: bool,
                  transposed_copy: bool = False) -> Callable[..., torch.Tensor]:
    """``losses(params, batch) -> (G,)`` on the native bfloat16 path: each call makes the bfloat16 copies
    ``(W, W.T, b)`` of every stacked linear once (the step's weight cache; the masters change every
    step) and passes them into ``torch.vmap`` beside the float32 masters, so each model's linears
    multiply its own copies. ``W.T`` is a contiguous copy where ``transposed_copy`` (``train.bf16_wt``,
    as :class:`~anchorlab.model.bf16.WeightCache`), else the transposed view of ``W``'s copy."""
    linears = {n: m for n, m in base.named_modules() if isinstance(m, torch.nn.Linear)}

    def one_loss(params: dict[str, torch.Tensor], w16: dict[str, tuple[torch.Tensor, ...]],
                 batch: dict[str, torch.Tensor]) -> torch.Tensor:
        with native_bf16({m: w16[n] for n, m in linears.items()}):
            return task.loss(lambda *a, **k: torch.func.functional_call(base, params, a, k), batch)

    vmapped = torch.vmap(one_loss, in_dims=(0, 0, None if shared_data else 0))

    def losses(params: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            w16 = {}
            for n, m in linears.items():
                w = params[f"{n}.weight"].detach().to(BF16)                      # (G, out, in)
                wt = w.transpose(1, 2)
                b = None if m.bias is None else params[f"{n}.bias"].detach().to(BF16)
                w16[n] = (w, wt.contiguous() if transposed_copy else wt, b)
        return vmapped(params, w16, batch)

    return losses

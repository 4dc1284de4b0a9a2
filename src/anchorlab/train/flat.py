"""Flat parameter storage for the single loop (``train.flat_params``): clipping and AdamW in one pass per group.

:meth:`FlatAdamW.from_optimizer` re-seats the model's trainable parameters as leaf views of one buffer per
AdamW group (their values copied bit for bit; the new ``nn.Parameter`` objects replace the old ones in every
module that holds them, so tied weights stay tied). Each step the gradients autograd produced are gathered
into a matching buffer with one ``torch.cat``, clipped with one multiply, and AdamW updates the whole buffer.
Every op of clipping and of the AdamW update is elementwise (the norm is taken per parameter, as
``clip_grad_norm_`` takes it), and an elementwise op gives each element the same bits whatever tensor it sits
in, so the weights, moments and losses are the per-tensor update's to the bit (tests/test_flat_params.py).
What changes is the cost: torch's CPU ``foreach`` AdamW loops over the parameters in C++ (about a dozen ops
per tensor, 36 tensors at the demo's shape); here it is a dozen ops per group.

The per-tensor semantics are kept where they differ:

* a parameter without a gradient at a step is skipped by torch's AdamW; the first time one is seen, the
  optimizer hands over, for good, to the per-tensor AdamW it was made from (its state copied back), so a
  model with unused parameters trains exactly as without this module;
* ``state_dict`` / ``load_state_dict`` use the per-tensor format (one entry per parameter), so checkpoints
  resume across ``train.flat_params`` settings and between a stack and a single run.

The parameters' version counter is the buffer's, so the native bf16 path's weight cache
(``model/bf16.py``) sees every update. Code that replaces a parameter's ``.data`` during training would
leave the weight outside the buffer that AdamW updates; the next step refuses it in one line.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from anchorlab.train.optim import mark_updated

log = logging.getLogger(__name__)


def _reseat(model: nn.Module, params: list[nn.Parameter]) -> tuple[nn.Parameter, list[nn.Parameter]]:
    """One buffer holding ``params``' values; each module attribute that held one of them now holds a
    Parameter viewing its slot. Returns the buffer (a Parameter) and the new Parameters, in order."""
    p0 = params[0]
    flat = nn.Parameter(torch.empty(sum(p.numel() for p in params), dtype=p0.dtype, device=p0.device))
    base, off, new = flat.detach(), 0, []
    for p in params:
        view = base[off:off + p.numel()].view_as(p)
        view.copy_(p.detach())
        new.append(nn.Parameter(view))
        off += p.numel()
    swap = {id(old): n for old, n in zip(params, new)}
    for mod in model.modules():
        for name, p in mod._parameters.items():
            if p is not None and id(p) in swap:
                mod._parameters[name] = swap[id(p)]
    return flat, new


class FlatAdamW(torch.optim.AdamW):
    """``torch.optim.AdamW`` over one flat buffer per group of the per-tensor optimizer it is made from."""

    @classmethod
    def from_optimizer(cls, model: nn.Module, opt: torch.optim.AdamW) -> "FlatAdamW":
        """Re-seat ``model``'s parameters (those of ``opt``'s groups) and return the flat optimizer, with
        ``opt``'s hyperparameters and state. ``opt`` is kept as the per-tensor twin (state format, hand-over)."""
        groups, views = [], []
        for g in opt.param_groups:
            flat, new = _reseat(model, g["params"])
            groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": [flat]})
            views.append(new)
        state = opt.state_dict()
        for g, new in zip(opt.param_groups, views):
            g["params"] = new          # the twin now holds the re-seated parameters
        self = cls(groups, **{k: opt.defaults[k] for k in ("lr", "betas", "eps", "weight_decay", "amsgrad",
                                                          "maximize", "foreach", "capturable", "differentiable",
                                                          "fused")})
        self.twin, self.views = opt, views
        self.grads = [torch.zeros_like(g["params"][0]) for g in groups]
        for g, gbuf in zip(self.param_groups, self.grads):
            g["params"][0].grad = gbuf   # for good: zero_grad clears the parameters' grads, not the buffers'
        self.slots = [[gb[o:o + p.numel()].view_as(p) for o, p in zip(_offsets(new), new)]
                      for gb, new in zip(self.grads, views)]
        slot_of = {id(p): s for new, slots in zip(views, self.slots) for p, s in zip(new, slots)}
        # clip_grad_norm_ stacks the per-parameter norms in the model's order (the groups' order differs when
        # norms and biases are not decayed), and the order of that sum decides the total's last bits
        self.in_order = [p for p in model.parameters() if id(p) in slot_of]
        self.norm_order = [slot_of[id(p)] for p in self.in_order]
        self.ptrs = [[p.data_ptr() for p in new] for new in views]
        self.handed_over, self._gathered = False, False
        self.load_state_dict(state)
        return self

    # ---- gradients
    def _gather(self) -> bool:
        """Gradients -> the flat buffers (and each ``.grad`` re-pointed at its slot); False if a parameter has
        none, after which the per-tensor twin takes over."""
        if self._gathered:
            return True
        for new, gbuf, slots, ptrs, t in zip(self.views, self.grads, self.slots, self.ptrs, self.twin.param_groups):
            for k, (p, ptr) in enumerate(zip(new, ptrs)):
                if p.data_ptr() != ptr:   # its .data was replaced: AdamW would update the buffer, not the weight
                    raise RuntimeError(f"parameter {t.get('names', [])[k:k + 1] or k} no longer views the flat buffer "
                                       "(its .data was replaced during training); train with train.flat_params=false")
            if any(p.grad is None for p in new):
                self._hand_over()
                return False
            torch.cat([p.grad.reshape(-1) for p in new], out=gbuf)
            for p, s in zip(new, slots):
                p.grad = s
        self._gathered = True
        return True

    def _hand_over(self) -> None:
        log.info("a parameter has no gradient at this step: the per-tensor AdamW takes over (same update)")
        state = self.state_dict()
        self.handed_over = True
        self.twin.load_state_dict(state)

    def clip_grad_norm_(self, max_norm: float) -> None:
        """``torch.nn.utils.clip_grad_norm_`` of the parameters' gradients, its total norm computed as it computes
        it and the coefficient applied to each flat buffer at once."""
        if self.handed_over or not self._gather():
            torch.nn.utils.clip_grad_norm_(self.in_order, max_norm)
            return
        total = torch.nn.utils.get_total_norm(self.norm_order, 2.0)
        coef = torch.clamp(float(max_norm) / (total + 1e-6), max=1.0)
        for gbuf in self.grads:
            gbuf.mul_(coef.to(gbuf.device))

    # ---- the Optimizer API the loop uses
    def zero_grad(self, set_to_none: bool = True) -> None:
        self._gathered = False
        if self.handed_over:
            self.twin.zero_grad(set_to_none)
            return
        for new in self.views:
            for p in new:
                p.grad = None

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        assert closure is None, "FlatAdamW.step takes no closure"
        if not self.handed_over and self._gather():
            super().step()
            mark_updated(self)    # a fused step leaves the buffer's version counter (the views' too) where it was
        else:
            for g, t in zip(self.param_groups, self.twin.param_groups):
                t["lr"] = g["lr"]
            self.twin.step()
        self._gathered = False

    def state_dict(self) -> dict[str, Any]:
        """The per-tensor AdamW's state dict (one entry per parameter, slices of the flat moments)."""
        if self.handed_over:
            return self.twin.state_dict()
        self.twin.state.clear()
        for g, t, new in zip(self.param_groups, self.twin.param_groups, self.views):
            t.update({k: v for k, v in g.items() if k != "params"})
            st = self.state.get(g["params"][0])
            if not st:
                continue
            for o, p in zip(_offsets(new), new):
                n = p.numel()
                self.twin.state[p] = {"step": st["step"].clone(),
                                      **{k: st[k][o:o + n].view_as(p).clone() for k in ("exp_avg", "exp_avg_sq")}}
        return self.twin.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """A per-tensor AdamW state dict -> the flat moments; a state that is not one per parameter with one
        step count per group (a parameter never updated) hands over to the per-tensor twin."""
        self.twin.load_state_dict(state_dict)
        if self.handed_over:
            return
        self.state.clear()
        for g, t, new in zip(self.param_groups, self.twin.param_groups, self.views):
            g.update({k: v for k, v in t.items() if k != "params"})
            per = [self.twin.state.get(p) for p in new]
            if not any(per):
                continue
            steps = {float(s["step"]) for s in per if s}
            if not all(per) or len(steps) > 1:
                self.handed_over = True
                return
            self.state[g["params"][0]] = {
                "step": per[0]["step"].clone(),
                **{k: torch.cat([s[k].reshape(-1) for s in per]) for k in ("exp_avg", "exp_avg_sq")}}
        self.twin.state.clear()


def _offsets(params: list[nn.Parameter]) -> list[int]:
    out, off = [], 0
    for p in params:
        out.append(off)
        off += p.numel()
    return out


def clip_gradients(model: nn.Module, opt: torch.optim.Optimizer, max_norm: float) -> None:
    """``clip_grad_norm_`` of ``model``'s gradients; on a :class:`FlatAdamW`, over its flat buffers."""
    if isinstance(opt, FlatAdamW):
        opt.clip_grad_norm_(max_norm)
    else:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


__all__ = ["FlatAdamW", "clip_gradients"]

"""Named hook points: every intermediate tensor of the model passes one.

A :class:`HookPoint` is an identity module. Hooks are attached only inside the
:func:`hooks` context manager (or :func:`run_with_cache`) and removed on exit,
so a model outside such a block carries no hooks and computes exactly what it
would without hook points.

A hook is ``fn(tensor, name) -> tensor | None``; returning a tensor replaces the
activation (an intervention), returning ``None`` leaves it unchanged.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterable, Iterator

import torch
from torch import nn

HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]


class HookPoint(nn.Module):
    """Identity module at a named place; ``name`` is its dotted path in the model."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def name_hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """Set each HookPoint's ``name`` to its module path; return them by name."""
    points = {}
    for name, mod in model.named_modules():
        if isinstance(mod, HookPoint):
            mod.name = name
            points[name] = mod
    return points


def _match(names: Iterable[str], selector: str | Callable[[str], bool]) -> list[str]:
    if callable(selector):
        return [n for n in names if selector(n)]
    return [n for n in names if n == selector]


@contextlib.contextmanager
def hooks(model: nn.Module, fwd_hooks: Iterable[tuple[str | Callable[[str], bool], HookFn]]) -> Iterator[nn.Module]:
    """Attach ``(name or predicate, fn)`` hooks for the duration of the block.

    Unknown names raise KeyError listing the valid ones, so a typo never
    silently does nothing.
    """
    points = name_hook_points(model)
    handles = []
    try:
        for selector, fn in fwd_hooks:
            names = _match(points, selector)
            if not names:
                raise KeyError(f"no hook point matches {selector!r}; valid names: {', '.join(points)}")
            for n in names:
                def _wrap(mod: nn.Module, inp: tuple, out: torch.Tensor, _fn: HookFn = fn, _n: str = n):
                    return _fn(out, _n)
                handles.append(points[n].register_forward_hook(_wrap))
        yield model
    finally:
        for h in handles:
            h.remove()


def run_with_cache(model: nn.Module, *args, names_filter: str | Callable[[str], bool] | None = None,
                   detach: bool = True, **kwargs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Run ``model(*args, **kwargs)`` and return ``(output, cache)``.

    ``cache`` maps hook-point names to the activations that passed them.
    """
    points = name_hook_points(model)
    selected = list(points) if names_filter is None else _match(points, names_filter)
    cache: dict[str, torch.Tensor] = {}

    def save(t: torch.Tensor, name: str) -> None:
        cache[name] = t.detach() if detach else t

    with hooks(model, [(n, save) for n in selected]):
        out = model(*args, **kwargs)
    return out, cache

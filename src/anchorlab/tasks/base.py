"""The Task protocol: what the one training core asks of every task family.

A task is built from its config (``task.name`` picks the family, see
:mod:`anchorlab.registry`) and answers five questions::

    task.dims()                     {"vocab_size", "max_len"} the model needs
    task.train_data(seed)           TrainData: len() rows, .batch(idx) -> dict of tensors
    task.eval_data(seed)            whatever evaluate() needs (fixed eval groups), built once per run
    task.loss(fwd, batch)           mean loss of a batch under fwd (the model, or a stacked functional call)
    task.evaluate(model, eval_data, device) -> EvalResult(metrics, tables)

plus ``headline`` (the metrics a CLI line, a progress bar and a report show
first) and ``stackable`` (whether :func:`loss` is written so that ``torch.vmap``
can train several models of the task as one stack). Two more methods have
defaults, inherited by a task class that subclasses :class:`Task`::

    task.write_run_files(run_dir, seed)   files the task keeps with each run (default: none)
    task.summary_lines(result)            extra lines ``anchorlab eval`` prints (default: none)

``loss`` must not depend on which model runs it except through ``fwd``, so the
single-model loop and the stacked trainer share it: the single loop passes the
module itself; the stacked trainer passes ``functional_call(base, params_g)``
under ``vmap``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Protocol, runtime_checkable

if TYPE_CHECKING:  # imported where used, so a task's config module can be read without torch
    import pandas as pd
    import torch

Batch = dict[str, "torch.Tensor"]
Forward = Callable[..., "torch.Tensor"]


def no_grad(fn: Callable) -> Callable:
    """``@torch.no_grad()`` for a function of a module that must import without torch (a task module whose
    config is read by ``anchorlab reproduce --list``): torch is imported on the first call."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import torch

        with torch.no_grad():
            return fn(*args, **kwargs)
    return wrapper


@dataclass
class EvalResult:
    """Flat metrics (names stable across a project) and tidy tables (written as CSV by ``anchorlab eval``)."""

    metrics: dict[str, float]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


@runtime_checkable
class TrainData(Protocol):
    def __len__(self) -> int: ...

    def batch(self, idx: torch.Tensor) -> Batch: ...

    def to(self, device: torch.device | str) -> "TrainData": ...


@runtime_checkable
class Task(Protocol):
    name: ClassVar[str]
    headline: ClassVar[tuple[str, ...]]
    stackable: ClassVar[bool]
    cfg: Any

    def dims(self) -> dict[str, int]: ...

    def train_data(self, seed: int) -> TrainData: ...

    def eval_data(self, seed: int) -> Any: ...

    def loss(self, fwd: Forward, batch: Batch) -> torch.Tensor: ...

    def evaluate(self, model: torch.nn.Module, eval_data: Any, device: torch.device | str = "cpu") -> EvalResult: ...

    # ---- with defaults (a task class that subclasses Task inherits them)
    def write_run_files(self, run_dir: str | Path, seed: int) -> None:
        """Files the task keeps with each run (the ``lm`` task's tokenizer and data manifest); called by
        ``RunState.open`` once the data are built. Default: none."""

    def summary_lines(self, result: EvalResult) -> list[str]:
        """Lines ``anchorlab eval`` prints after the headline metrics. Default: none."""
        return []


@dataclass
class TensorData:
    """Rows held as equal-length tensors; ``batch(idx)`` indexes every field.

    ``lengths`` (optional key): a (N,) field of row lengths; a batch is then
    trimmed to its longest row along dim 1 of every field of rank >= 2 (the
    padding beyond it carries no loss).
    """

    fields: dict[str, torch.Tensor]
    lengths: str | None = None

    def __post_init__(self) -> None:
        ns = {int(t.shape[0]) for t in self.fields.values()}
        if len(ns) != 1:
            raise ValueError(f"every field needs the same number of rows, got {ns}")

    def __len__(self) -> int:
        return int(next(iter(self.fields.values())).shape[0])

    def to(self, device: torch.device | str) -> "TensorData":
        return TensorData({k: v.to(device) for k, v in self.fields.items()}, self.lengths)

    def batch(self, idx: torch.Tensor) -> Batch:
        if self.lengths is None:
            return {k: v[idx] for k, v in self.fields.items() if k != self.lengths}
        T = int(self.fields[self.lengths][idx].max())
        return {k: (v[idx, :T] if v.dim() >= 2 else v[idx]) for k, v in self.fields.items() if k != self.lengths}


def stack_batches(batches: list[Batch]) -> Batch:
    """Per-model batches -> one batch with a leading model dim; dim 1 padded with zeros to the longest.

    Zero must be neutral for the task's loss (pad token 0 with loss mask 0),
    which holds for every task whose data is right-padded.
    """
    import torch

    out: Batch = {}
    for k in batches[0]:
        ts = [b[k] for b in batches]
        if ts[0].dim() >= 2:
            T = max(t.shape[1] for t in ts)
            ts = [torch.nn.functional.pad(t, (0, 0) * (t.dim() - 2) + (0, T - t.shape[1])) for t in ts]
        out[k] = torch.stack(ts)
    return out


def task_class(name: str) -> type:
    from anchorlab.config import ConfigError
    from anchorlab.registry import TASKS, load

    if name not in TASKS:
        raise ConfigError(f"task.name: must be one of {', '.join(repr(k) for k in TASKS)}, got {name!r}")
    return load(TASKS[name].impl)


def build_task(task_cfg: Any) -> Task:
    """The task object of a task config (``task_cfg.name`` picks the class)."""
    return task_class(task_cfg.name)(task_cfg)


def headline_lines(metrics: Mapping[str, float], names: tuple[str, ...]) -> list[str]:
    """``  name     value`` lines for the metrics a task calls its headline (missing ones skipped)."""
    return [f"  {k:22s} {metrics[k]:.4f}" for k in names if k in metrics]

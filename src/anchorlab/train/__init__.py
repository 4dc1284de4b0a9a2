"""Training: one lifecycle (:mod:`.run`), a single-model loop (:mod:`.single`), a stacked trainer (:mod:`.stacked`).

``train(cfg, out_dir)`` trains one model of any task (``cfg.task.name``) and
returns a :class:`RunResult`; ``load_run(run_dir)`` rebuilds a trained one;
``run(cfg, run_dir)`` is the sweep runner's entry point (returns final.json).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from anchorlab.config import ConfigError, ExperimentConfig
from anchorlab.io import read_json
from anchorlab.tasks.base import Task, build_task
from anchorlab.train.run import (Callback, build_model, check_run_dir, completed_final, config_of, init_model, numerics,
                  pick_device, steps_plan)

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """A trained (or loaded) run: its model, task object, config, final.json dict and directory.

    ``step``: the step of the weights (a loaded unfinished run's latest checkpoint); ``total_steps``: the
    run's planned steps (None where a loaded run's checkpoint predates recording it).
    """

    model: torch.nn.Module
    task: Task
    cfg: ExperimentConfig
    final: dict[str, Any]
    run_dir: Path
    step: int | None = None
    total_steps: int | None = None

    @property
    def finished(self) -> bool:
        """Whether the run completed (final.json written: finished, stopped early or diverged)."""
        return bool(self.final.get("status"))


def train(cfg: ExperimentConfig, out_dir: str | Path, *, task: Task | None = None,
          callbacks: Iterable[Callback] = (), progress: bool = False,
          stop_after_step: int | None = None, announce: Callable[[str], None] | None = None) -> RunResult:
    """Train one model into ``out_dir`` (resuming from its checkpoint); see :mod:`anchorlab.train.run`.

    A run that already finished in ``out_dir`` is loaded, not trained again:
    no file of it is rewritten.

    ``task``: a task object to use instead of building one from ``cfg.task``
    (e.g. :meth:`~anchorlab.tasks.seq2seq.PairsTask.from_pairs` on in-memory
    data; the run id then does not describe the data: use a fresh directory).
    ``stop_after_step`` stops after the checkpoint at that step without
    final.json (status ``interrupted``), to test resume. ``announce`` receives
    one line before training starts (:meth:`~.run.RunState.start_line`), or
    the line saying the run had already finished.
    """
    from anchorlab.train.single import train_single

    out_dir = Path(out_dir)
    check_run_dir(out_dir, cfg)
    done = completed_final(out_dir, cfg)
    if done is not None:
        if announce:
            announce(f"{out_dir}: already finished ({done['status']} at step {done['steps']:,}); nothing "
                     "trained or rewritten")
        loaded = load_run(out_dir)
        return RunResult(loaded.model, task if task is not None else loaded.task, cfg, done, out_dir)
    task = task if task is not None else build_task(cfg.task)
    device = pick_device(cfg.train.device)
    with numerics(cfg, device):
        model, final = train_single(cfg, out_dir, task, device, callbacks=list(callbacks), progress=progress,
                                    stop_after_step=stop_after_step, announce=announce)
    return RunResult(model, task, cfg, final, out_dir)


def run(cfg: ExperimentConfig, run_dir: str | Path) -> dict[str, Any]:
    """Train one run and return its final.json dict (the sweep runner's default run function)."""
    return train(cfg, run_dir).final


def load_run(run_dir: str | Path, device: str = "cpu") -> RunResult:
    """Rebuild a trained model (final weights, else the latest checkpoint) from a run directory."""
    from anchorlab.train.checkpoint import load_checkpoint, load_weights

    run_dir = Path(run_dir)
    cfg = config_of(run_dir)
    model = build_model(cfg)
    if cfg.train.dtype == "float64":
        model = model.double()
    final = read_json(run_dir / "final.json") if (run_dir / "final.json").exists() else {}
    weights = run_dir / "model.safetensors"
    ck = None if final and weights.exists() else load_checkpoint(run_dir)
    if weights.exists() and ck is None:    # a finished run, or weights saved without training (no checkpoint)
        load_weights(weights, model)
        step, total = final.get("steps"), final.get("total_steps")
    else:
        if ck is None:
            raise ConfigError(f"run {run_dir}: no model.safetensors or checkpoint.pt (training saves the first "
                              "checkpoint at its first evaluation)")
        model.load_state_dict(ck["model"])
        step, total = int(ck["step"]), ck.get("total_steps")
    return RunResult(model.to(device).eval(), build_task(cfg.task), cfg, final, run_dir, step, total)


__all__ = ["RunResult", "train", "run", "load_run", "config_of", "init_model", "build_model", "steps_plan",
           "pick_device", "numerics"]

"""anchorlab: reasoning versus memorizing in transformers.

The public API (stable for notebooks and scripts)::

    from anchorlab import load_config, train, load_run, evaluate, apply_init_rate, run_sweep

    cfg = load_config("demo/small", ["init.gamma=0.6"])      # preset or YAML + dotted overrides
    run = train(cfg, "runs/small")                            # RunResult(model, task, cfg, final, run_dir)
    result = evaluate(run)                                    # EvalResult(metrics, tables)
    tokens = run.task.eval_data(cfg.train.data_seed)[((4, 3), "test")].tokens   # (N, 9): the held-out pair
    logits, cache = run.model.run_with_cache(tokens)          # every tensor by hook name
    table = apply_init_rate(torch.nn.Linear(16, 4), gamma=0.7, seed=0)   # any torch module
    df = run_sweep("fig2_cpu", "runs/fig2")
    rows = run_table(["runs/fig2", "docs/figures/fig2_cell_cpu.csv"])   # one row per run: dirs and committed CSVs

The papers' layer on top of it (figures, studies, claims, the papers' judgement) is :mod:`anchorlab.papers`::

    from anchorlab.papers import cell_table, reproduce, run_table
    rows = run_table(["runs/fig2", "docs/figures/fig2_cell_cpu.csv"])   # + op_set, paper_gamma, clock
    cells = cell_table(rows)                                  # the papers' cell beside the per-run rate

(README.md has a version of this that runs as pasted in under a minute.)

Names are imported on first use, so ``import anchorlab`` stays light and never
touches a plotting backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anchorlab.registry import lazy_attribute

from anchorlab._version import __version__

_API = {
    "load_config": "anchorlab.config:load_config",
    "experiment_from_dict": "anchorlab.config:experiment_from_dict",
    "ExperimentConfig": "anchorlab.config:ExperimentConfig",
    "ConfigError": "anchorlab.config:ConfigError",
    "train": "anchorlab.train:train",
    "load_run": "anchorlab.train:load_run",
    "RunResult": "anchorlab.train:RunResult",
    "train_stack": "anchorlab.train.stacked:train_stack",
    "apply_init_rate": "anchorlab.model.init:apply_init_rate",
    "build_model": "anchorlab.model.transformer:build_model",
    "run_sweep": "anchorlab.sweep.runner:run_sweep",
    "Task": "anchorlab.tasks.base:Task",
    "EvalResult": "anchorlab.tasks.base:EvalResult",
    "build_task": "anchorlab.tasks.base:build_task",
    "run_analysis": "anchorlab.analysis.registry:run_analysis",
    "run_table": "anchorlab.sweep.runtable:run_table",
    "outcome": "anchorlab.eval.solution:outcome",
}

__all__ = ["__version__", "evaluate", *_API]


def evaluate(run: Any, eval_data: Any = None, device: str = "cpu") -> Any:
    """Evaluate a :class:`~anchorlab.train.RunResult` (or a run directory) with its task's metrics.

    ``eval_data`` defaults to the task's fixed evaluation groups for the run's data seed.
    """
    from pathlib import Path

    from anchorlab.train import load_run

    if isinstance(run, (str, Path)):
        run = load_run(run, device)
    data = eval_data if eval_data is not None else run.task.eval_data(run.cfg.train.data_seed)
    return run.task.evaluate(run.model, data, device)


def __getattr__(name: str) -> Any:
    return lazy_attribute(_API, globals(), __name__, name)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover
    from anchorlab.analysis.registry import run_analysis
    from anchorlab.config import ConfigError, ExperimentConfig, experiment_from_dict, load_config
    from anchorlab.eval.solution import outcome
    from anchorlab.model.init import apply_init_rate
    from anchorlab.model.transformer import build_model
    from anchorlab.sweep.runner import run_sweep
    from anchorlab.sweep.runtable import run_table
    from anchorlab.tasks.base import EvalResult, Task, build_task
    from anchorlab.train import RunResult, load_run, train
    from anchorlab.train.stacked import train_stack

"""One run's lifecycle, shared by the single-model loop and the stacked trainer.

A run directory is the record of a run::

    config.yaml        the full config
    param_table.csv    every parameter: role, shape, fan_in, gamma, target/measured init std, lr, weight decay
    metrics.jsonl      one line per evaluation (step, epoch, lr, train_loss, wall/eval seconds, metrics)
    precision.json     the precision and device it trains in, from its start (final.json repeats it)
    plan.json          total steps, steps per epoch, evaluation cadence, and the step and wall time it (re)started at
    checkpoint.pt      latest state (model, optimizer, step), written atomically
    checkpoint.prev.pt the one before (resume falls back to it if checkpoint.pt is unusable)
    model.safetensors  final weights
    final.json         run_id, status, final and best metrics, history, versions, timings, config

:class:`RunState` walks a run through it: ``open`` (check the directory, write
config.yaml, init with the init seed, optimizer groups, param table, resume
from ``checkpoint.pt``, history), ``record`` (evaluate at a step),
``stop_status`` (diverged / early stop), ``checkpoint`` and ``finish``
(weights, final.json). Statuses: ``finished``, ``stopped_early``,
``diverged``, ``interrupted`` (``stop_after_step``; no final.json).

The data order of epoch ``e`` depends only on ``(data_seed, e)`` and
checkpoints are taken at evaluation steps (where the running loss is reset),
so a resumed run reproduces an uninterrupted one without saving RNG state.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from anchorlab.config import ConfigError, ExperimentConfig, dump_config, experiment_from_dict, load_yaml
from anchorlab.config.precision_rules import as_recorded
from anchorlab.io import atomic_write, read_json, write_json, write_text
from anchorlab.progress import Progress  # noqa: F401 - re-exported for the trainers
from anchorlab.registry import CALLBACKS, MODELS, load
from anchorlab.run_status import COMPLETED
from anchorlab.tasks.base import Task
from anchorlab.metric_order import lower_is_better
from anchorlab.train.checkpoint import load_checkpoint, remove_stale_temps, save_checkpoint, save_weights, versions
from anchorlab.train.environment import flush_denormal, numerics, pick_device  # noqa: F401 - re-exported
from anchorlab.train.optim import lr_at, make_optimizer
from anchorlab.train.precision import Precision, resolve_precision

log = logging.getLogger(__name__)
Callback = Callable[[int, torch.nn.Module], dict[str, float]]
NOT_METRICS = ("step", "epoch", "lr", "wall_seconds", "eval_seconds")


def build_model(cfg: ExperimentConfig) -> torch.nn.Module:
    """The model of ``cfg.model`` (``model.arch`` picks the family), with PyTorch's default init."""
    return load(MODELS[cfg.model.arch].impl)(cfg.model)


def init_model(cfg: ExperimentConfig) -> tuple[torch.nn.Module, pd.DataFrame]:
    """Build the model and apply the init rate with the init seed (CPU, float32/64); return it and its ParamTable.

    ``init.scheme: framework_default`` keeps the constructors' own init, drawn
    under ``torch.manual_seed(init_seed)`` (the global RNG is restored after).
    """
    from anchorlab.model.init import apply_init_rate

    if cfg.init.scheme == "framework_default":
        from anchorlab.model.default_init import framework_default_table

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.train.init_seed)
            model = build_model(cfg)
        table = framework_default_table(model)
    else:
        model = build_model(cfg)
        gen = torch.Generator().manual_seed(cfg.train.init_seed)
        table = apply_init_rate(model, cfg.init, generator=gen)
    table["init_scheme"] = cfg.init.scheme
    if cfg.train.dtype == "float64":
        model = model.double()
    return model, table


def epoch_permutation(n: int, data_seed: int, epoch: int) -> torch.Tensor:
    """Data order of one epoch, a function of (data_seed, epoch) only."""
    g = torch.Generator().manual_seed((data_seed * 1_000_003 + epoch) % (2**63 - 1))
    return torch.randperm(n, generator=g)


def steps_plan(cfg: ExperimentConfig, n_train: int) -> tuple[int, int, int]:
    """(steps_per_epoch, total_steps, eval_every); the last partial batch is dropped (see ``TrainConfig.plan``)."""
    return cfg.train.plan(n_train)


def read_history(run_dir: Path, upto_step: int | None = None) -> list[dict[str, Any]]:
    """metrics.jsonl rows up to ``upto_step`` (rows after a checkpoint are dropped on resume; None: all)."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:  # a line cut short by a kill mid-append; rows past the checkpoint are redone
            log.warning("%s:%d: unreadable line dropped (%r...)", path, i, line[:40])
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            rows.append(row)
    return rows if upto_step is None else [r for r in rows if r["step"] <= upto_step]


def config_of(run_dir: str | Path) -> ExperimentConfig:
    """The config a run directory was trained with (a corrupt config.yaml: one line naming the file); one
    from before ``train.bf16_path`` trained on autocast (:func:`~anchorlab.config.precision_rules.as_recorded`)."""
    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        raise ConfigError(f"run {run_dir}: no config.yaml; not a run directory")
    return experiment_from_dict(as_recorded(load_yaml(path)))


def check_run_dir(run_dir: Path, cfg: ExperimentConfig) -> None:
    """Refuse a directory that holds a different run (its config.yaml has another run id)."""
    if (run_dir / "config.yaml").exists():
        old = config_of(run_dir)
        if old.run_id() != cfg.run_id():
            raise ConfigError(f"out_dir {run_dir}: holds a different run ({old.run_id()} != {cfg.run_id()}); "
                              "use another directory")


def completed_final(run_dir: Path, cfg: ExperimentConfig) -> dict[str, Any] | None:
    """The final.json of this run if it completed in ``run_dir``, else None."""
    p = run_dir / "final.json"
    if not p.exists():
        return None
    old = read_json(p)
    return old if old.get("run_id") == cfg.run_id() and old.get("status") in COMPLETED else None


def summarize(history: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """Evaluation rows -> (the last value of every metric, its best over the rows after step 0;
    best = min for losses): final.json's ``final`` and ``best``."""
    last = history[-1] if history else {}
    metrics = [k for k in last if k not in NOT_METRICS and isinstance(last[k], (int, float))]
    best = {}
    for k in metrics:
        vals = [h[k] for h in history[1:] if isinstance(h.get(k), (int, float)) and math.isfinite(h[k])]
        if vals:
            best[k] = min(vals) if lower_is_better(k) else max(vals)
    return {k: last[k] for k in metrics}, best


def finalize(cfg: ExperimentConfig, run_dir: Path, history: list[dict[str, Any]], status: str, wall: float,
             step: int, precision: Precision | None = None, total: int | None = None) -> dict[str, Any]:
    """Write final.json: the last and best value of every metric (best = min for losses), history, versions,
    the precision and device the run trained in, and the steps it planned (``total_steps``)."""
    last, best = summarize(history)
    final = {"run_id": cfg.run_id(), "name": cfg.name, "status": status, "steps": step, "total_steps": total,
             "final": last, "best": best, "history": history,
             "wall_seconds": wall, "versions": versions(), "config": cfg.to_dict()}
    if precision is not None:
        final["precision"] = precision.to_dict()
        final["device"] = precision.device
    write_json(run_dir / "final.json", final)
    return final


def rules_hold(rules: Sequence[tuple[str, str, float]], row: dict[str, Any]) -> bool:
    """Every ``(metric, op, value)`` rule holds for an evaluation row (NaN never holds)."""
    for i, (metric, op, value) in enumerate(rules):
        if metric not in row:
            raise ConfigError(f"train.stop_when[{i}]: no metric {metric!r} in this task's evaluation; "
                              f"metrics: {', '.join(k for k in row if k not in NOT_METRICS)}")
        v = row[metric]
        if not (isinstance(v, (int, float)) and math.isfinite(v)):
            return False
        if (op == ">=" and v < value) or (op == "<=" and v > value):
            return False
    return True


# ------------------------------------------------------------------ one run
@dataclass
class RunState:
    """Bookkeeping of one run in its directory; see the module docstring."""

    cfg: ExperimentConfig
    task: Task
    run_dir: Path
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    train_data: Any
    step: int = 0
    wall_before: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)
    callbacks: list[Callback] = field(default_factory=list)
    eval_data: Any = None
    device: torch.device = torch.device("cpu")
    t0: float = field(default_factory=time.perf_counter)
    tracker: Any = None   # anchorlab.tracking.Tracker when train.tracking is not 'none'
    precision: Precision | None = None   # train.amp resolved on this device (final.json "precision")

    @classmethod
    def open(cls, cfg: ExperimentConfig, run_dir: str | Path, task: Task, device: torch.device,
             callbacks: Sequence[Callback] = (), data_cache: dict[int, tuple[Any, Any]] | None = None) -> "RunState":
        """Check and write the directory, init (or resume) the model and optimizer, load the history.

        ``data_cache`` (data seed -> (train data, eval data)) lets runs of a
        stack share the data of a seed.
        """
        t0 = time.perf_counter()
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        check_run_dir(run_dir, cfg)
        write_text(run_dir / "config.yaml", dump_config(cfg))
        check_dims(cfg, task)
        tracker = None
        if getattr(cfg.train, "tracking", "none") != "none":  # a missing backend fails here, before any work
            from anchorlab.tracking import make_tracker
            tracker = make_tracker(cfg, run_dir)
        model, table = init_model(cfg)
        model.to(device)
        opt = make_optimizer(model, cfg.optim)
        group_of = {n: g for g in opt.param_groups for n in g["names"]}
        table["lr"] = cfg.optim.lr
        table["lr_peak"] = cfg.optim.peak
        table["weight_decay"] = [group_of[n]["weight_decay"] for n in table.name]
        atomic_write(run_dir / "param_table.csv", lambda p: table.to_csv(p, index=False))
        step, wall = 0, 0.0
        remove_stale_temps(run_dir)

        def apply(state: dict[str, Any]) -> None:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])

        ck = load_checkpoint(run_dir, map_location=device, apply=apply)
        if ck is not None:
            step, wall = int(ck["step"]), float(ck.get("wall_seconds", 0.0))
            log.info("resuming %s at step %d", run_dir, step)
        history = read_history(run_dir, step)
        write_text(run_dir / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in history))
        callbacks = list(callbacks)
        if cfg.train.log_complexity:  # analysis/spectra's ComplexityCallback, by name (train imports no analysis)
            callbacks.append(load(CALLBACKS["complexity"])())
        cache = {} if data_cache is None else data_cache
        seed = cfg.train.data_seed
        if seed not in cache:
            cache[seed] = (task.train_data(seed), task.eval_data(seed))
        train_data, eval_data = cache[seed]
        if getattr(cfg.train, "log_predictors", False):  # analysis/predictors, by name; it reads the run's data
            _, total, every = steps_plan(cfg, len(train_data))
            # up to the fraction, the evaluation nearest to it included, and at the last step
            callbacks.append(load(CALLBACKS["predictors"])(task, train_data, eval_data,
                                                           until_step=cfg.train.predictors_until * total + every / 2,
                                                           last_step=total, eval_every=every,
                                                           cfg=cfg))
        if hasattr(task, "write_run_files"):  # on Task with a default; a duck-typed task may leave it out
            task.write_run_files(run_dir, seed)
        if tracker is not None:
            tracker.start(cfg, step)
        precision = resolve_precision(cfg.train.amp, device, bf16_path=cfg.train.bf16_path, dtype=cfg.train.dtype)
        write_json(run_dir / "precision.json", {**precision.to_dict(), "from_step": step})
        spe, total, every = steps_plan(cfg, len(train_data))      # what a watcher needs (anchorlab status)
        write_json(run_dir / "plan.json", {"total_steps": total, "steps_per_epoch": spe, "eval_every": every,
                                           "from_step": step, "wall_before": wall})
        return cls(cfg, task, run_dir, model, opt, train_data, step, wall, history, callbacks, eval_data, device, t0,
                   tracker, precision)

    # ---- plan
    @property
    def plan(self) -> tuple[int, int, int]:
        """(steps_per_epoch, total_steps, eval_every)."""
        return steps_plan(self.cfg, len(self.train_data))

    @property
    def checkpoint_every(self) -> int:
        return self.cfg.train.checkpoint_every or self.plan[2]

    def wall(self) -> float:
        return self.wall_before + time.perf_counter() - self.t0

    def start_line(self) -> str:
        """What is about to happen: new run or resume, steps, evaluation and checkpoint cadence, peak lr."""
        spe, total, every = self.plan
        state = f"resuming from step {self.step:,} of {total:,}" if self.step else f"new run, {total:,} steps"
        return (f"{self.run_dir}: {state} ({spe:,} per epoch at batch {self.cfg.train.batch_size:,}); evaluation "
                f"every {every:,} steps and at the end, checkpoint every {self.checkpoint_every:,}; peak lr "
                f"{self.cfg.optim.peak:.3g}; task {self.cfg.task.name} on {self.device}" + self._precision_note())

    def _precision_note(self) -> str:
        p = self.precision
        return f", {p.matmul_dtype} matmuls ({p.path} path)" if p is not None and p.amp != "none" else ""

    # ---- events
    def record(self, step: int, model: torch.nn.Module, loss_mean: float) -> dict[str, Any]:
        """Evaluate ``model`` at ``step``; append the row to metrics.jsonl and the history."""
        spe = self.plan[0]
        te = time.perf_counter()
        result = self.task.evaluate(model, self.eval_data, self.device)
        row: dict[str, Any] = {"step": step, "epoch": step / spe, "lr": lr_at(max(step - 1, 0), spe, self.cfg.optim),
                               "train_loss": loss_mean, "wall_seconds": self.wall()}
        for cb in self.callbacks:
            row.update(cb(step, model))
        row.update(result.metrics)
        row["eval_seconds"] = time.perf_counter() - te
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        self.history.append(row)
        if self.tracker is not None:
            self.tracker.log(row)
        return row

    def stop_status(self, row: dict[str, Any]) -> str | None:
        """``diverged`` (non-finite training loss), ``stopped_early`` (every stop rule holds), else None."""
        loss = row.get("train_loss", math.nan)
        if row["step"] > 0 and not math.isfinite(loss):
            return "diverged"
        rules = self.cfg.train.stop_rules
        if rules and row["step"] > 0 and rules_hold(rules, row):
            return "stopped_early"
        return None

    def checkpoint(self, step: int, model_state: dict[str, torch.Tensor], optimizer_state: dict) -> None:
        save_checkpoint(self.run_dir, {"model": model_state, "optimizer": optimizer_state, "step": step,
                                       "total_steps": self.plan[1], "wall_seconds": self.wall()})

    def finish(self, model: torch.nn.Module, status: str, step: int) -> dict[str, Any]:
        """Save the final weights and write final.json. Its final metrics are always the last step's: a resumed
        run whose last evaluation was lost (a cut metrics line) is evaluated again from its weights first."""
        if not self.history or int(self.history[-1].get("step", -1)) != step:
            last = self.history[-1].get("step") if self.history else None
            log.warning("%s: the last evaluation on record is at step %s, not the last step %d; evaluating the "
                        "weights at step %d for the final metrics", self.run_dir, last, step, step)
            self.record(step, model, math.nan)
        save_weights(self.run_dir / "model.safetensors", model, {"run_id": self.cfg.run_id()})
        final = finalize(self.cfg, self.run_dir, self.history, status, self.wall(), step, self.precision,
                         self.plan[1])
        if self.tracker is not None:
            self.tracker.finish(final, self.task.headline)
        return final


def check_dims(cfg: ExperimentConfig, task: Task) -> None:
    """The model's vocabulary and length fit what the task's data need (ConfigError naming the field)."""
    need = task.dims()
    m = cfg.model
    if hasattr(m, "vocab_size") and "vocab_size" in need and m.vocab_size < need["vocab_size"]:
        raise ConfigError(f"model.vocab_size: the data need {need['vocab_size']} tokens, got {m.vocab_size}; "
                          "leave it out to derive it")
    if hasattr(m, "max_len") and "max_len" in need and m.max_len < need["max_len"]:
        raise ConfigError(f"model.max_len: the data need {need['max_len']} positions (longest row, or longest "
                          f"prompt + task.max_new_tokens - 1), got {m.max_len}; leave it out to derive it")

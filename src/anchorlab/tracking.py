"""Opt-in experiment tracking: a run's config, metrics and figures in MLflow or TensorBoard.

Enabled per run by ``train.tracking`` (``none`` by default; not part of the run
id, so switching it on never changes which run a directory holds)::

    train.tracking: mlflow        # MLflow's local file store: ./mlruns (or $MLFLOW_TRACKING_URI); no server
    train.tracking: tensorboard   # event files in <run_dir>/tensorboard (tensorboard --logdir <sweep or runs dir>)

:class:`Tracker` is the one callback the run lifecycle
(:class:`anchorlab.train.run.RunState`) calls: ``start`` when the run opens
(the config as flat dotted parameters, and as YAML text), ``log`` at every
evaluation (each numeric metric of the row at its step) and ``finish`` at the
end (the training-curve figure, final metrics, ``final.json`` and
``config.yaml``). Nothing is imported unless a backend is chosen; a missing
package is a one-line error naming the ``tracking`` extra. A resumed run logs
into the same MLflow run (its id is kept in ``<run_dir>/tracking.json``);
evaluations between the last checkpoint and an interruption are logged again
with the same values.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from anchorlab.config import ExperimentConfig, dump_config, to_dict
from anchorlab.extras import require
from anchorlab.io import write_json

log = logging.getLogger(__name__)

BACKENDS = ("none", "mlflow", "tensorboard")
STATE_FILE = "tracking.json"
NOT_LOGGED = ("step",)


def flat_params(cfg: ExperimentConfig) -> dict[str, str]:
    """The config as ``{"init.gamma": "0.5", ...}`` (lists and mappings as JSON text)."""
    out: dict[str, str] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and node and all(isinstance(k, str) and not k[:1].isdigit() for k in node):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            out[prefix] = node if isinstance(node, str) else json.dumps(node, default=str)

    walk("", to_dict(cfg))
    return out


def numeric_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries of an evaluation row (NaN kept; ``step`` and non-numbers left out)."""
    return {k: float(v) for k, v in row.items()
            if k not in NOT_LOGGED and isinstance(v, (int, float)) and not isinstance(v, bool)}


def curves_figure(history: Sequence[Mapping[str, Any]], headline: Sequence[str]):
    """The run's training curves (loss, and the task's headline accuracies) as a matplotlib Figure."""
    import pandas as pd

    from anchorlab.plots.phase import plot_run_history

    h = pd.DataFrame(list(history))
    return plot_run_history(h, metrics=curve_metrics(headline, h.columns))


def curve_metrics(headline: Sequence[str], columns: Any) -> list[str]:
    """The headline metrics drawn beside the loss in a training-curve figure (those in ``columns``, losses apart)."""
    return [m for m in headline if m in columns and not m.endswith("loss")]


def figure_pixels(fig: Any) -> Any:
    """A Figure rendered to an (H, W, 3) uint8 array with the Agg canvas (no pyplot)."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


class Tracker:
    """Base: the hooks the run lifecycle calls. Subclasses write to one backend."""

    def start(self, cfg: ExperimentConfig, resumed_step: int) -> None: ...

    def log(self, row: Mapping[str, Any]) -> None: ...

    def finish(self, final: Mapping[str, Any], headline: Sequence[str]) -> None: ...


def make_tracker(cfg: ExperimentConfig, run_dir: str | Path) -> Tracker | None:
    """The tracker ``cfg.train.tracking`` asks for (None for ``none``); call its ``start`` next."""
    backend = getattr(cfg.train, "tracking", "none")
    if backend == "none":
        return None
    return MlflowTracker(run_dir) if backend == "mlflow" else TensorBoardTracker(run_dir)


# ------------------------------------------------------------------ MLflow
_KEY = re.compile(r"[^A-Za-z0-9_\-. /]")


def _key(name: str) -> str:
    return _KEY.sub("_", name)


def mlflow_uri() -> str:
    """``$MLFLOW_TRACKING_URI``, else the local file store ``./mlruns`` (allowed explicitly: MLflow 3
    keeps the file store in maintenance mode and refuses it unless ``MLFLOW_ALLOW_FILE_STORE`` is set)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return Path("mlruns").resolve().as_uri()


class MlflowTracker(Tracker):
    """MLflow through ``MlflowClient`` (explicit run ids, no global active run: stacks log G runs at once)."""

    def __init__(self, run_dir: str | Path) -> None:
        require("mlflow", "train.tracking=mlflow")
        from mlflow.tracking import MlflowClient

        self.run_dir = Path(run_dir)
        self.uri = mlflow_uri()
        self.client = MlflowClient(tracking_uri=self.uri)
        self.run_id: str | None = None

    def _experiment(self, name: str) -> str:
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        try:
            return self.client.create_experiment(name)
        except Exception:  # noqa: BLE001 - another worker created it first
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    def start(self, cfg: ExperimentConfig, resumed_step: int) -> None:
        from mlflow.entities import Param

        state = self.run_dir / STATE_FILE
        old = json.loads(state.read_text()) if state.exists() else {}
        if old.get("mlflow_run_id") and old.get("tracking_uri") == self.uri:
            self.run_id = old["mlflow_run_id"]
            self.client.update_run(self.run_id, status="RUNNING")
            log.info("tracking: resuming MLflow run %s at step %d", self.run_id, resumed_step)
            return
        run = self.client.create_run(self._experiment(cfg.name), run_name=f"{cfg.name}-{cfg.run_id()}",
                                     tags={"anchorlab.run_id": cfg.run_id(), "anchorlab.task": cfg.task.name,
                                           "anchorlab.run_dir": str(self.run_dir.resolve())})
        self.run_id = run.info.run_id
        params = [Param(_key(k), v[:6000]) for k, v in flat_params(cfg).items()]
        for i in range(0, len(params), 100):
            self.client.log_batch(self.run_id, params=params[i:i + 100])
        self.client.log_text(self.run_id, dump_config(cfg), "config.yaml")
        write_json(state, {"backend": "mlflow", "tracking_uri": self.uri, "mlflow_run_id": self.run_id})

    def log(self, row: Mapping[str, Any]) -> None:
        import time

        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        metrics = [Metric(_key(k), v, ts, int(row["step"])) for k, v in numeric_metrics(row).items()]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def finish(self, final: Mapping[str, Any], headline: Sequence[str]) -> None:
        for k, v in (final.get("best") or {}).items():
            self.client.log_metric(self.run_id, _key(f"best/{k}"), float(v), step=int(final.get("steps", 0)))
        if final.get("history"):
            self.client.log_figure(self.run_id, curves_figure(final["history"], headline), "curves.png")
        for name in ("final.json", "config.yaml", "param_table.csv"):
            if (self.run_dir / name).exists():
                self.client.log_artifact(self.run_id, str(self.run_dir / name))
        self.client.set_tag(self.run_id, "anchorlab.status", str(final.get("status")))
        self.client.set_terminated(self.run_id, "FINISHED" if final.get("status") != "diverged" else "FAILED")


# ------------------------------------------------------------------ TensorBoard
class TensorBoardTracker(Tracker):
    """TensorBoard event files in ``<run_dir>/tensorboard`` (``torch.utils.tensorboard``)."""

    def __init__(self, run_dir: str | Path) -> None:
        require("tensorboard", "train.tracking=tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))

    def start(self, cfg: ExperimentConfig, resumed_step: int) -> None:
        if resumed_step == 0:
            text = "\n".join(f"    {line}" for line in dump_config(cfg).splitlines())  # markdown code block
            self.writer.add_text("config", text, 0)
            self.writer.flush()

    def log(self, row: Mapping[str, Any]) -> None:
        step = int(row["step"])
        for k, v in numeric_metrics(row).items():
            if math.isfinite(v):  # the step-0 row has no running loss (NaN); a diverged loss shows in final.json
                self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def finish(self, final: Mapping[str, Any], headline: Sequence[str]) -> None:
        if final.get("history"):
            self.writer.add_image("curves", figure_pixels(curves_figure(final["history"], headline)),
                                  int(final.get("steps", 0)), dataformats="HWC")
        for k, v in (final.get("best") or {}).items():
            self.writer.add_scalar(f"best/{k}", float(v), int(final.get("steps", 0)))
        self.writer.close()

"""The CPU demo: a large-init and a small-init model on the ``neurips`` task.

Both models share the config ``demo/small`` except the init rate; they train
in two worker processes (one torch thread each) and the demo writes::

    DIR/large_init/, DIR/small_init/   run directories
    DIR/summary.json                   one object per model
    DIR/summary.csv                    the printed table
    DIR/ood_over_training.png          (4,3) accuracy under both hypotheses vs step
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from .config import ExperimentConfig, load_config
from .eval.metrics import top_deviations
from .io import atomic_write, write_json

log = logging.getLogger(__name__)

DEMO_PRESET = "demo/small"
# The two init rates of the demo (std = fan_in ** -gamma); see docs/demo.md.
DEMO_GAMMAS = {"large_init": 0.3, "small_init": 0.6}


def demo_configs(overrides: list[str] | tuple[str, ...] = ()) -> dict[str, ExperimentConfig]:
    return {label: load_config(DEMO_PRESET, [f"init.gamma={g}", f"name={label}", *overrides])
            for label, g in DEMO_GAMMAS.items()}


def _train_one(cfg: ExperimentConfig, out: str) -> tuple[dict[str, Any], float]:
    import torch

    from .train.loop import train

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    res = train(cfg, out)
    dev = _deviations(res)
    return {**res.final, "top_deviations": dev}, time.perf_counter() - t0


def _deviations(res) -> list[tuple[int, float]]:
    from .eval.metrics import evaluate

    _, _, devs = evaluate(res.model, res.task, res.task.eval_sets(res.final["config"]["train"]["data_seed"]))
    held = [f"{a}{b}" for a, b in res.task.held_out_pairs]
    return top_deviations(devs, held[0]) if held else []


def run_demo(out_dir: str | Path, overrides: list[str] | tuple[str, ...] = (),
             workers: int = 2) -> pd.DataFrame:
    """Train both demo models (in parallel), write the summary files, return the table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfgs = demo_configs(overrides)
    results: dict[str, tuple[dict[str, Any], float]] = {}
    if workers > 1:
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
            futs = {k: ex.submit(_train_one, c, str(out / k)) for k, c in cfgs.items()}
            results = {k: f.result() for k, f in futs.items()}
    else:
        results = {k: _train_one(c, str(out / k)) for k, c in cfgs.items()}

    rows = []
    for label, (final, wall) in results.items():
        f = final["final"]
        rows.append({
            "model": label, "gamma": cfgs[label].init.gamma, "id_acc": f["id_acc"],
            "train_acc": f["train_acc"],
            "ood_inferential_acc": f["ood_inferential_acc"], "ood_symmetric_acc": f["ood_symmetric_acc"],
            "ood_other_frac": f["ood_other_frac"],
            "top_deviations": ", ".join(f"{d:+d}: {p:.0%}" for d, p in final["top_deviations"]),
            "steps": final["steps"], "wall_seconds": round(wall, 1),
        })
    table = pd.DataFrame(rows)
    write_json(out / "summary.json", rows)
    atomic_write(out / "summary.csv", lambda p: table.to_csv(p, index=False))
    from .plots.training import plot_ood_over_training, save_figure

    hist = {k: pd.DataFrame(v[0]["history"]) for k, v in results.items()}
    save_figure(plot_ood_over_training(hist, {k: c.init.gamma for k, c in cfgs.items()}),
                out / "ood_over_training", formats=("png",))
    return table

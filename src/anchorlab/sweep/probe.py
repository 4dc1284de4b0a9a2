"""How long runs take on this machine: a short timed probe per model shape, cached.

:func:`run_seconds` times a few training steps of a config on this CPU (one torch thread, as a sweep worker
trains) and one evaluation of its task, then scales them by the run's planned steps and evaluations. The probe
is cached per CPU and shape (``$ANCHORLAB_CACHE/step_seconds.json``, else ``~/.cache/anchorlab``), so a dry run
pays it once per shape; :func:`sweep_seconds` sums the runs of a sweep over its workers. A run of a shape the
probe cannot build (a task whose data is not at hand) is left out and counted apart.

The probe times a run alone on an idle core; runs side by side on every core share the memory bandwidth and
each takes somewhat longer (docs/usage.md gives measured against estimated times).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PROBE_STEPS, PROBE_WARMUP = 8, 4
CACHE_FILE = "step_seconds.json"


def _cache_path() -> Path:
    from anchorlab.datasets import default_cache_dir

    return default_cache_dir() / CACHE_FILE


def shape_key(cfg: Any) -> str:
    """What decides a step's and an evaluation's time: the CPU, the model, the batch, the task's shape and the
    precision path (not the init, seeds or lr)."""
    from anchorlab.config import to_dict
    from anchorlab.train.precision import cpu_model_name

    d = to_dict(cfg)
    keep = {"cpu": cpu_model_name(), "model": d.get("model"), "task": {k: v for k, v in (d.get("task") or {}).items()
                                                                      if k not in ("n_train",)},
            "train": {k: d["train"].get(k) for k in ("batch_size", "amp", "bf16_path", "dtype", "compile",
                                                      "flat_params", "bf16_wt")}}
    return hashlib.sha1(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _load() -> dict[str, Any]:
    try:
        return json.loads(_cache_path().read_text())
    except (OSError, ValueError):
        return {}


def _save(cache: dict[str, Any]) -> None:
    from anchorlab.io import write_json

    try:
        _cache_path().parent.mkdir(parents=True, exist_ok=True)
        write_json(_cache_path(), cache)
    except OSError:
        log.debug("could not write the probe cache %s", _cache_path())


def _step_seconds(cfg: Any, steps: int = PROBE_STEPS, warmup: int = PROBE_WARMUP) -> float:
    """Seconds a training step of ``cfg`` takes here: the single loop's own step (:func:`train_step`) under the
    run's precision, timed over ``steps`` after ``warmup`` untimed ones."""
    import torch

    from anchorlab.tasks.base import build_task
    from anchorlab.train.flat import FlatAdamW
    from anchorlab.train.optim import make_optimizer
    from anchorlab.train.precision import resolve_precision, step_context
    from anchorlab.train.run import init_model
    from anchorlab.train.single import train_step

    task = build_task(cfg.task)
    model, _ = init_model(cfg)
    opt = make_optimizer(model, cfg.optim)
    if cfg.train.flat_params:
        opt = FlatAdamW.from_optimizer(model, opt)
    cpu = torch.device("cpu")
    precision = resolve_precision(cfg.train.amp, cpu, bf16_path=cfg.train.bf16_path, dtype=cfg.train.dtype)
    amp = step_context(precision, cpu, model, wt=cfg.train.bf16_wt)
    data = task.train_data(cfg.train.data_seed)
    B = cfg.train.batch_size
    batches = [data.batch(torch.arange(i * B, (i + 1) * B) % len(data)) for i in range(2)]
    for i in range(warmup + steps):
        if i == warmup:
            t = time.perf_counter()
        train_step(model, model, opt, task, batches[i % 2], amp, cfg.optim.clip_norm)
    return (time.perf_counter() - t) / steps


def _small(cfg: Any) -> Any:
    """``cfg`` with a training set of a few batches (a step's time does not depend on the set's size)."""
    from anchorlab.config import experiment_from_dict

    return experiment_from_dict(cfg.to_dict(), [f"task.n_train={4 * cfg.train.batch_size}"]) \
        if hasattr(cfg.task, "n_train") else cfg


def enabled() -> bool:
    """Whether estimates may time a probe here (``ANCHORLAB_PROBE=off`` turns it off, e.g. in a test suite)."""
    return os.environ.get("ANCHORLAB_PROBE", "on").strip().lower() not in ("off", "0", "no", "false")


def probe(cfg: Any) -> dict[str, float]:
    """``{"step": seconds a step, "eval": seconds an evaluation}`` of ``cfg`` on this CPU, from the cache or timed
    now (a few steps after a warm-up and an evaluation after one untimed, one torch thread, the run's numeric
    switches)."""
    import torch

    from anchorlab.tasks.base import build_task
    from anchorlab.train.run import init_model

    key = shape_key(cfg)
    cache = _load()
    if key in cache:
        return cache[key]
    if not enabled():
        raise RuntimeError("probe: off (ANCHORLAB_PROBE=off)")
    from anchorlab.train.environment import numerics

    small = _small(cfg)
    with numerics(small, torch.device("cpu")):     # threads, flush-denormal, malloc thresholds: as a run trains
        torch.set_num_threads(1)
        step = _step_seconds(small)
        task = build_task(small.task)
        model, _ = init_model(small)
        data = task.eval_data(small.train.data_seed)
        task.evaluate(model, data, torch.device("cpu"))           # once to warm up, then timed
        t = time.perf_counter()
        task.evaluate(model, data, torch.device("cpu"))
        ev = time.perf_counter() - t
    got = {"step": float(step), "eval": float(ev)}
    cache = _load()
    cache[key] = got
    _save(cache)
    return got


def run_seconds(cfg: Any) -> float:
    """Estimated wall seconds of one run of ``cfg`` on one core here: planned steps x the probed step, plus its
    evaluations (every ``eval_every`` and at the start and end) x the probed evaluation; NaN when the probe
    cannot build the run (its data is not at hand)."""
    try:
        from anchorlab.tasks.base import build_task

        n_train = len(build_task(cfg.task).train_data(cfg.train.data_seed)) if not hasattr(cfg.task, "n_train") \
            else int(cfg.task.n_train)
        _, total, every = cfg.train.plan(n_train)
        p = probe(cfg)
    except Exception as e:  # noqa: BLE001 - a task that cannot be built here (no data) is counted apart
        log.info("probe: %s", e)
        return math.nan
    return total * p["step"] + (total // max(every, 1) + 2) * p["eval"]


def sweep_seconds(cfgs: Sequence[Any], workers: int) -> tuple[float, int]:
    """(estimated wall seconds of ``cfgs`` on ``workers`` cores here, the runs it could not estimate): the runs'
    probed seconds packed longest first onto the workers."""
    times = sorted((run_seconds(c) for c in cfgs), reverse=True)
    unknown = sum(1 for t in times if t != t)
    lanes = [0.0] * max(min(workers, os.cpu_count() or 1, max(len(times), 1)), 1)
    for t in times:
        if t == t:
            i = lanes.index(min(lanes))
            lanes[i] += t
    return max(lanes), unknown


def describe_probe(cfgs: Sequence[Any], workers: int) -> str:
    """One line: the estimate measured on this CPU for ``cfgs`` on ``workers`` cores."""
    from anchorlab.progress import hms

    if not cfgs:
        return "measured here: nothing to train"
    if not enabled():
        return "measured here: not probed (ANCHORLAB_PROBE=off)"
    secs, unknown = sweep_seconds(cfgs, workers)
    return (f"measured here: ~{hms(secs)} with {workers} worker(s) on this CPU (a timed probe of each model shape, "
            f"one run a core, cached in {_cache_path()}" + (f"; {unknown} run(s) it could not time" if unknown else "")
            + ")")

"""Run a sweep, resumably: expand the grid, skip what is done, execute the rest, record as results arrive.

Layout of ``out_dir``::

    sweep.yaml          the spec as run (inline base), rewritten at each call
    results.sqlite      the store (see sweep.store)
    runs/<run_id>/      one directory per run, handed to the run function

Resume semantics, per run (the store's status at start):

    finished, stopped_early, diverged
                        skipped (training is deterministic: a re-run would diverge again)
    failed              re-run if ``retry_failed`` (default), else skipped
    running             the previous driver died mid-run: reset to pending and re-run
    pending / new       run

Before a run is submitted, a ``runs/<run_id>/final.json`` of the same run id
with a completed status (a run that completed after its driver died) is
recorded without running it again. A run function resumes from its own
checkpoint in ``runs/<run_id>/``, so an interrupted run loses little work.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Future, wait
from pathlib import Path
from typing import Any, Callable, Collection, Mapping

import pandas as pd
import yaml

from anchorlab.config import ConfigError, ExperimentConfig, to_dict
from anchorlab.io import write_text
from anchorlab.run_status import COMPLETED, TRAINED
from anchorlab.sweep.executors import check_executor, make_executor
from anchorlab.sweep.grid import RunSpec, SweepSpec, expand, load_sweep
from anchorlab.sweep.lock import driver_lock
from anchorlab.sweep.plan import dry_run, left_elsewhere, plan_sweep  # noqa: F401  (re-exported: the runner's API)
from anchorlab.sweep.store import ResultStore, stored_statuses

log = logging.getLogger(__name__)

DEFAULT_RUN_FN = "anchorlab.train:run"
RunFn = Callable[[ExperimentConfig, "str | Path"], Mapping[str, Any]]
MAX_ERROR_CHARS = 8000


def resolve_run_fn(run_fn: "str | RunFn | None") -> RunFn:
    """``'package.module:function'`` (imported now) or a callable -> callable."""
    if run_fn is None:
        run_fn = DEFAULT_RUN_FN
    if callable(run_fn):
        return run_fn
    if not isinstance(run_fn, str) or ":" not in run_fn:
        raise ConfigError(f"run_fn: expected a callable or 'module:function', got {run_fn!r}")
    mod, _, attr = run_fn.partition(":")
    try:
        fn = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"run_fn: cannot import {run_fn!r}: {e}") from None
    return fn


def execute_run(run_fn: "str | RunFn", cfg: ExperimentConfig, run_dir: str) -> dict[str, Any]:
    """Worker side: call the run function; never raises for a run's own failure.

    Returns the run's result dict, or ``{"status": "failed", "error": traceback}``.
    """
    t0 = time.perf_counter()
    try:
        fn = resolve_run_fn(run_fn)
        result = fn(cfg, run_dir)
        if not isinstance(result, Mapping):
            raise TypeError(f"run function returned {type(result).__name__}, expected a dict")
        result = dict(result)
    except Exception:  # noqa: BLE001 - recorded as the run's failure
        return {"status": "failed", "error": traceback.format_exc()[-MAX_ERROR_CHARS:],
                "wall_seconds": time.perf_counter() - t0}
    result.setdefault("wall_seconds", time.perf_counter() - t0)
    return result


def execute_stack(cfgs: list[ExperimentConfig], run_dirs: list[str]) -> list[dict[str, Any]]:
    """Worker side: train ``cfgs`` as one stack (:func:`anchorlab.train.stacked.train_stack`).

    A failure of the stack is recorded as every member's failure.
    """
    t0 = time.perf_counter()
    try:
        from anchorlab.train.stacked import train_stack

        results = [dict(r) for r in train_stack(cfgs, [Path(d) for d in run_dirs])]
        for r in results:
            r.setdefault("wall_seconds", time.perf_counter() - t0)
            r["stacked"] = len(cfgs)
        return results
    except Exception:  # noqa: BLE001 - recorded as each run's failure
        err = traceback.format_exc()[-MAX_ERROR_CHARS:]
        return [{"status": "failed", "error": err, "wall_seconds": time.perf_counter() - t0} for _ in cfgs]


def plan_jobs(todo: list[RunSpec], stack: "str | int", workers: int, run_fn: Any) -> list[list[RunSpec]]:
    """Group runs into jobs: one run each, or stacks of same-shape runs.

    ``stack``: ``"never"``; ``"auto"`` (stack where
    :func:`anchorlab.train.stacked.should_stack` expects a speed-up, split
    into at most ``workers`` stacks per shape on CPU so process parallelism is
    kept, at most 32 models per stack on CUDA); or an int, the largest stack.
    Only the default run function can be stacked.
    """
    if stack == "never" or run_fn not in (None, DEFAULT_RUN_FN) or len(todo) < 2:
        return [[r] for r in todo]
    from anchorlab.train.stacked import SHARED_TRAIN_FIELDS, should_stack

    groups: dict[str, list[RunSpec]] = {}
    for r in todo:
        c = r.config
        key = json.dumps([to_dict(c.task), to_dict(c.model),
                          [getattr(c.train, n) for n in SHARED_TRAIN_FIELDS]], sort_keys=True, default=str)
        groups.setdefault(key, []).append(r)
    jobs: list[list[RunSpec]] = []
    for runs in groups.values():
        cfgs = [r.config for r in runs]
        if isinstance(stack, int) and not isinstance(stack, bool):
            size = max(int(stack), 1)
        elif should_stack(cfgs):
            on_gpu = cfgs[0].train.device != "cpu" and torch_cuda_available()
            size = 32 if on_gpu else -(-len(runs) // max(workers, 1))
        else:
            size = 1
        jobs += [runs[i:i + size] for i in range(0, len(runs), size)]
    return jobs


def resume_ranks(todo: list[RunSpec], design: list[RunSpec], dir_of: Callable[[str], Path]) -> dict[str, int]:
    """Per run of ``todo``, the class a resumed sweep runs it in, to finish what was started:

    0. a run that left a checkpoint in its directory (an interrupted run resumes from it);
    1. a run of a task (task and model config) of which another run of ``design`` (the sweep's runs, those done on
       another machine included) is no longer to do: a started group, such as an op set with one seed done;
    2. the rest.

    The driver runs the classes in this order, keeping the planned order within each (:func:`plan_jobs` keeps a
    task's runs together), so a sweep stopped at any point holds as many complete groups as it can, and no
    checkpoint waits behind runs that start from scratch. A fresh sweep is all class 2: its order is unchanged."""
    def key(r: RunSpec) -> str:
        return json.dumps([to_dict(r.config.task), to_dict(r.config.model)], sort_keys=True, default=str)

    pending = {r.run_id for r in todo}
    started = {key(r) for r in design if r.run_id not in pending}
    return {r.run_id: 0 if (dir_of(r.run_id) / "checkpoint.pt").exists() else 1 if key(r) in started else 2
            for r in todo}


def order_jobs(jobs: list[list[RunSpec]], ranks: Mapping[str, int]) -> list[list[RunSpec]]:
    """``jobs`` stably sorted by the smallest :func:`resume_ranks` class of their runs."""
    return sorted(jobs, key=lambda job: min(ranks.get(r.run_id, 2) for r in job))


def torch_cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def outcome(result: Mapping[str, Any]) -> tuple[str, str | None]:
    """Result dict -> (store status, error text).

    ``diverged``: the run says so, or a final loss is not finite, or every final
    metric is NaN. A NaN accuracy alone is not divergence (``ood_symmetric_acc``
    is undefined when no held-out pair has a trained mirror, e.g. the journal task).
    """
    status = result.get("status", "finished")
    if status == "failed":
        return "failed", str(result.get("error") or "failed")
    if status not in COMPLETED:
        return "failed", (f"run function returned status {status!r}, expected one of "
                          f"{', '.join(repr(s) for s in COMPLETED)}")
    final = {k: v for k, v in (result.get("final") or {}).items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if status in TRAINED and final:
        bad_loss = [k for k, v in final.items() if k.endswith("loss") and not math.isfinite(v)]
        if bad_loss:
            return "diverged", f"non-finite final {', '.join(sorted(bad_loss))}"
        if all(math.isnan(v) for v in final.values()):
            return "diverged", "every final metric is NaN"
    return status, None


def _checkpoint_of(run_dir: Path, root: Path) -> str | None:
    for name in ("model.safetensors", "checkpoint.pt"):
        if (run_dir / name).exists():
            return str((run_dir / name).relative_to(root))
    return None


def _adoptable(run_dir: Path, run_id: str) -> dict[str, Any] | None:
    """A complete final.json of this run left in its directory, else None."""
    path = run_dir / "final.json"
    if not path.exists():
        return None
    try:
        res = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if isinstance(res, dict) and res.get("run_id") == run_id and res.get("status") in COMPLETED:
        return res
    return None


def _record(store: ResultStore, r: RunSpec, result: Mapping[str, Any], run_dir: Path,
            store_history: bool) -> str:
    status, error = outcome(result)
    if status == "failed":
        store.record_failure(r.run_id, error or "failed", result.get("wall_seconds"))
        last = (error or "failed").strip().splitlines() or ["failed"]
        log.warning("run %s failed: %s", r.run_id, last[-1])
    else:
        res = dict(result) if store_history else {k: v for k, v in result.items() if k != "history"}
        store.record_result(r.run_id, res, status, checkpoint=_checkpoint_of(run_dir, store.root), error=error)
        log.info("run %s %s %s", r.run_id, status, r.values)
    return status


TICK_SECONDS = 2.0   # how often the driver's live display reads the runs in flight


def run_sweep(spec: "SweepSpec | Mapping[str, Any] | str | Path", out_dir: str | Path,
              executor: "str | Any" = "process", max_workers: int | None = None,
              run_fn: "str | RunFn | None" = None, retry_failed: bool = True, *,
              store_history: bool = True,
              on_result: Callable[[RunSpec, str], None] | None = None,
              stack: "str | int" = "auto", done_elsewhere: Collection[str] = (),
              on_tick: Callable[[list[tuple[str, Path]]], None] | None = None) -> pd.DataFrame:
    """Run every pending run of ``spec`` into ``out_dir``; return the tidy table of its runs.

    ``executor``: ``'process'`` (local pool, one torch thread per worker),
    ``'inprocess'``, ``'ray'``, or an executor object (not shut down here).
    ``run_fn(cfg, run_dir) -> result dict`` defaults to
    ``anchorlab.train:run``; it must be picklable (module level)
    for process and Ray executors. ``on_result(run, status)`` is called after
    each run is recorded (progress bars); ``on_tick([(run_id, run_dir), ...])`` every
    :data:`TICK_SECONDS` with the runs in flight (a live display reads their directories). ``stack`` ("auto", "never" or a
    maximum stack size) trains same-shape runs as stacks (see :func:`plan_jobs`). ``done_elsewhere``: run
    ids completed on another machine (:func:`anchorlab.sweep.results.done_ids` of committed run tables);
    those this store has not completed are left out of this sweep's runs, neither trained nor registered.
    Returns
    :meth:`ResultStore.to_dataframe` (final and best metrics) of this sweep's runs.
    """
    if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int)
                                    or max_workers < 1):   # refused before anything is written into out_dir
        raise ConfigError(f"max_workers: must be a positive integer, got {max_workers!r}")
    check_executor(executor, max_workers)
    spec = load_sweep(spec)
    out = Path(out_dir).resolve()  # absolute: workers (Ray) may run elsewhere
    elsewhere = left_elsewhere(done_elsewhere, stored_statuses(out / "results.sqlite") if done_elsewhere else {})
    design = expand(spec)
    runs = [r for r in design if r.run_id not in elsewhere]
    out.mkdir(parents=True, exist_ok=True)
    with driver_lock(out):
        return _run_locked(spec, out, design, runs, executor, max_workers, run_fn, retry_failed,
                           store_history, on_result, stack, on_tick)


def _run_locked(spec, out: Path, design, runs, executor, max_workers, run_fn, retry_failed,
                store_history, on_result, stack, on_tick) -> pd.DataFrame:
    """:func:`run_sweep` with ``out``'s driver lock held."""
    plain = json.loads(json.dumps(spec.to_dict(), default=list))
    write_text(out / "sweep.yaml", yaml.safe_dump(plain, sort_keys=False))
    run_fn = run_fn if run_fn is not None else DEFAULT_RUN_FN
    dir_of = lambda rid: out / "runs" / rid  # noqa: E731
    ids = [r.run_id for r in runs]

    with ResultStore(out / "results.sqlite", axes=spec.axis_keys) as store:
        store.register(spec.name, runs, lambda rid: dir_of(rid).relative_to(out))
        interrupted = store.reset_interrupted(ids)
        if interrupted:
            log.warning("sweep %s: %d run(s) were interrupted; running them again", spec.name, len(interrupted))
        todo: list[RunSpec] = []
        for r in runs:
            st = store.status(r.run_id)
            if st in COMPLETED or (st == "failed" and not retry_failed):
                continue
            adopted = _adoptable(dir_of(r.run_id), r.run_id)
            if adopted is not None:
                log.info("run %s: recording the final.json found in its directory", r.run_id)
                status = _record(store, r, adopted, dir_of(r.run_id), store_history)
                if on_result:
                    on_result(r, status)
                continue
            todo.append(r)
        log.info("sweep %s: %d runs, %d to do", spec.name, len(runs), len(todo))
        if todo:
            _execute(store, todo, dir_of, executor, max_workers, run_fn, store_history, on_result, stack,
                     resume_ranks(todo, design, dir_of), on_tick)
        df = store.to_dataframe(run_ids=ids)
    # axes of other sweeps sharing this store are not axes of this one
    df = df.drop(columns=[a for a in df.attrs.get("axes", []) if a not in spec.axis_keys])
    df.attrs["axes"] = list(spec.axis_keys)
    return df


def _execute(store: ResultStore, todo: list[RunSpec], dir_of: Callable[[str], Path], executor: Any,
             max_workers: int | None, run_fn: Any, store_history: bool,
             on_result: Callable[[RunSpec, str], None] | None, stack: "str | int" = "never",
             ranks: Mapping[str, int] | None = None,
             on_tick: Callable[[list[tuple[str, Path]]], None] | None = None) -> None:
    owned = isinstance(executor, str)

    def build() -> Any:
        return make_executor(executor, max_workers=max_workers) if owned else executor

    ex = build()
    cap = max(int(getattr(ex, "max_workers", 1) or 1), 1)
    inflight: dict[Future, list[RunSpec]] = {}
    queue = order_jobs(plan_jobs(list(todo), stack, cap, run_fn), ranks or {})
    clean = False
    try:
        while queue or inflight:
            while queue and len(inflight) < cap:
                job = queue.pop(0)
                for r in job:
                    store.mark_running(r.run_id)
                    dir_of(r.run_id).mkdir(parents=True, exist_ok=True)
                try:
                    if len(job) == 1:
                        fut = ex.submit(execute_run, run_fn, job[0].config, str(dir_of(job[0].run_id)))
                    else:
                        fut = ex.submit(execute_stack, [r.config for r in job],
                                        [str(dir_of(r.run_id)) for r in job])
                    inflight[fut] = job
                except BrokenExecutor as e:
                    for r in job:
                        store.record_failure(r.run_id, f"executor broken at submit: {e!r}")
            if not inflight:
                continue
            done, _ = wait(list(inflight), timeout=TICK_SECONDS if on_tick else None, return_when=FIRST_COMPLETED)
            if on_tick:
                try:
                    on_tick([(r.run_id, dir_of(r.run_id)) for job in inflight.values() for r in job])
                except Exception:  # noqa: BLE001 - a display never stops a sweep
                    log.debug("progress display failed", exc_info=True)
            broken = False
            for fut in done:
                job = inflight.pop(fut)
                try:
                    results = fut.result()
                    results = [results] if len(job) == 1 else list(results)
                except BrokenExecutor as e:
                    broken = True
                    results = [{"status": "failed", "error": f"worker process died: {e!r}"}] * len(job)
                except Exception as e:  # noqa: BLE001 - e.g. a Ray task error; the sweep goes on
                    err = "".join(traceback.format_exception(e))[-MAX_ERROR_CHARS:]
                    results = [{"status": "failed", "error": err}] * len(job)
                for r, result in zip(job, results):
                    status = _record(store, r, result, dir_of(r.run_id), store_history)
                    if on_result:
                        on_result(r, status)
            if broken and owned:
                log.warning("a worker process died; starting a fresh pool")
                ex.shutdown(wait=False, cancel_futures=True)
                ex = build()
        clean = True
    finally:
        if owned:
            ex.shutdown(wait=clean, cancel_futures=not clean)

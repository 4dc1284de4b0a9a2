"""Reading a finished (or running) sweep back: the one place that knows a sweep directory's layout.

A sweep directory holds ``sweep.yaml`` (the spec), ``results.sqlite`` (the
store, read through :mod:`.store`) and ``runs/<run_id>/`` (each run's files,
``final.json`` among them). The report and the sweep runner read sweeps through these functions; the
paper figures, the demo and the studies read runs through the run table (:mod:`.runtable`), which reads
committed run tables (CSV) beside sweep directories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from anchorlab.config import ConfigError
from anchorlab.eval.definitions import metric_definition
from anchorlab.io import read_json
from anchorlab.run_status import COMPLETED
from anchorlab.sweep.aggregate import AggregateOptions, aggregate, phase_diagram
from anchorlab.sweep.store import ResultStore, stored_task

if TYPE_CHECKING:
    import pandas as pd


def finals(sweep_dir: str | Path) -> list[dict[str, Any]]:
    """final.json of every completed run of a sweep directory (sorted by run id), with ``run_dir`` added."""
    out = []
    for p in sorted((Path(sweep_dir) / "runs").glob("*/final.json")):
        f = read_json(p)
        if f.get("status") in COMPLETED:
            f["run_dir"] = str(p.parent)
            out.append(f)
    return out


def unique_finals(sweep_dirs: Sequence[str | Path], statuses: Sequence[str] = COMPLETED) -> list[dict[str, Any]]:
    """:func:`finals` of several sweep directories with a status in ``statuses``, a run present in several
    counted once (the first directory's copy), in directory then run-id order."""
    seen: dict[str, dict[str, Any]] = {}
    for d in sweep_dirs:
        for f in finals(d):
            if f.get("status") in statuses:
                seen.setdefault(f["run_id"], f)
    return list(seen.values())


IN_PROGRESS = "in_progress"
AT_STEP = "at_step"


def _run_dirs(sweep_dirs: Sequence[str | Path]) -> list[Path]:
    """Every run directory of ``sweep_dirs`` with a config and evaluations, a run present in several counted once
    (the first directory's copy)."""
    seen: dict[str, Path] = {}
    for d in sweep_dirs:
        for m in sorted((Path(d) / "runs").glob("*/metrics.jsonl")):
            if (m.parent / "config.yaml").exists():
                seen.setdefault(m.parent.name, m.parent)
    return list(seen.values())


def _read_run(run_dir: Path, status: str) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    """Reads a run's config and final.json once; returns a function that makes a final.json-shaped dict of
    the run from some of its evaluations (:func:`anchorlab.train.run.summarize`). ``precision`` and ``device``:
    as final.json records them, before the run's end as its ``precision.json`` (written when it starts or
    resumes); without either, the matmul dtype is ``float32`` for ``train.amp: none``, else ``unrecorded``,
    and the device None."""
    from anchorlab.train.run import config_of, summarize

    cfg, final, started = config_of(run_dir), run_dir / "final.json", run_dir / "precision.json"
    written = read_json(final) if final.exists() else {}
    if "precision" not in written and started.exists():
        start = read_json(started)
        written = {**written, "precision": start, "device": start.get("device") or None}
    precision = dict(written.get("precision") or {})
    precision["matmul_dtype"] = precision.get("matmul_dtype") or ("float32" if cfg.train.amp == "none" else "unrecorded")
    config, total = cfg.to_dict(), cfg.planned_steps()

    def as_final(history: list[dict[str, Any]]) -> dict[str, Any]:
        last, best = summarize(history)
        return {"run_id": run_dir.name, "status": status, "steps": history[-1]["step"],
                "total_steps": total, "final": last, "best": best, "history": history,
                "wall_seconds": history[-1].get("wall_seconds"), "config": config,
                "precision": precision, "device": written.get("device"), "run_dir": str(run_dir)}
    return as_final


def in_progress(sweep_dirs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Runs that stopped before their end (a GPU lease or a machine booking ran out) or are still training: each run
    directory with ``config.yaml`` and evaluations in ``metrics.jsonl`` but no completed final.json in any of
    ``sweep_dirs``, read the way final.json is written (:func:`anchorlab.train.run.summarize`): ``final`` is
    its last evaluation, ``best`` the best so far, ``steps`` the last evaluated step, ``total_steps`` the
    steps its config plans, status ``in_progress``."""
    from anchorlab.train.run import read_history

    done = {f["run_id"] for f in unique_finals(sweep_dirs)}
    out = []
    for run_dir in _run_dirs(sweep_dirs):
        history = read_history(run_dir)
        if run_dir.name not in done and len(history) >= 2:
            out.append(_read_run(run_dir, IN_PROGRESS)(history))
    return out


def at_step(sweep_dirs: Sequence[str | Path], steps: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """For each of ``steps``, every run of ``sweep_dirs`` that trained to it or past it, finished or not, read
    as if it had stopped there: ``final`` is its last evaluation at or before the step, ``best`` the best up
    to it, status ``at_step``. Twins that differ in device or precision, or runs cut short by
    ``train.max_steps``, compare step by step this way. Each run's files are read once."""
    from anchorlab.train.run import read_history

    out: dict[int, list[dict[str, Any]]] = {s: [] for s in steps}
    for run_dir in _run_dirs(sweep_dirs):
        history = read_history(run_dir)
        reached = [s for s in steps if history and history[-1]["step"] >= s
                   and sum(r["step"] <= s for r in history) >= 2]
        if reached:
            as_final = _read_run(run_dir, AT_STEP)
            for s in reached:
                out[s].append(as_final([r for r in history if r["step"] <= s]))
    return out


def done_ids(paths: Sequence[str | Path]) -> set[str]:
    """The run ids that earlier run tables (CSV files with a ``run_id`` column, e.g. a committed
    ``docs/figures/*.csv``) hold as completed (``status`` in :data:`COMPLETED` where the table has one):
    runs done on another machine, whose directories are gone, that a sweep need not train again. A table
    that is missing or lacks ``run_id`` is refused (ConfigError) naming it and its columns."""
    import pandas as pd

    out: set[str] = set()
    for p in paths:
        if not Path(p).is_file():
            raise ConfigError(f"--done-in {p}: no such file (a run table CSV with a run_id column)")
        df = pd.read_csv(p)
        if "run_id" not in df.columns:
            raise ConfigError(f"--done-in {p}: no run_id column; its columns: {', '.join(map(str, df.columns))}")
        if "status" in df.columns:
            df = df[df.status.isin(COMPLETED)]
        out |= set(df.run_id.astype(str))
    return out


def spec_axes(spec: dict) -> list[str]:
    """Every axis key of a sweep spec mapping (``axes`` then ``zip`` groups)."""
    axes = list(spec.get("axes") or {})
    for z in spec.get("zip") or []:
        axes += list(z)
    return axes


def sweep_spec(sweep_dir: str | Path) -> dict:
    """The spec a sweep directory was run with (``sweep.yaml``); ``{}`` when it has none."""
    p = Path(sweep_dir) / "sweep.yaml"
    return yaml.safe_load(p.read_text()) if p.exists() else {}


def sweep_task(sweep_dir: str | Path) -> str:
    """The task name of a sweep's runs (from the stored configs)."""
    return stored_task(Path(sweep_dir) / "results.sqlite")


def load_sweep_results(sweep_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(long metric table incl. history, cell table, spec dict); anchor sweeps' cells carry phases."""
    d = Path(sweep_dir)
    if not (d / "results.sqlite").exists():
        raise ConfigError(f"sweep dir {d}: no results.sqlite; run `anchorlab sweep SPEC --out {d}` first")
    spec = sweep_spec(d)
    axes = spec_axes(spec)
    with ResultStore(d / "results.sqlite", axes=axes) as store:
        df = store.to_dataframe(kinds=("final", "best", "history"))
    opts = AggregateOptions.from_dict(spec.get("aggregate"))
    fb = df[df.kind.isin(["final", "best"])]
    present = [a for a in axes if a in df.columns]
    m = metric_definition(opts.metrics)
    if sweep_task(d) == "anchor" and {m.id, m.ood} <= set(fb.metric.dropna()):
        cells = phase_diagram(fb, opts, axes=present)
    else:  # another task, or no run has metrics yet (all failed or pending)
        cells = aggregate(fb, opts, axes=present)
    return df, cells, spec

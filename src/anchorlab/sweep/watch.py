"""How far a sweep is: per run, the step it reached, its rate and its ETA; for the sweep, runs done / running /
left and the ETA. Read from the sweep folder alone (``results.sqlite``, each run's ``plan.json`` and
``metrics.jsonl``), so it works on a running sweep from another shell
(``anchorlab status DIR``) and in the driver itself (:class:`SweepMonitor`, the live display of
``anchorlab sweep`` / ``reproduce`` / ``demo``).

A run's step and wall time come from the last line of its ``metrics.jsonl`` (a finished run's is its last step's;
finished runs' metrics are read through :mod:`anchorlab.sweep.runtable`, not here), its total steps from its
``plan.json`` (written when it starts); a run not started yet takes its
config's plan where the config names its training-set size (``task.n_train``), else the median of the others.
The sweep's ETA: the steps left (running runs' remainders and the pending runs' totals) over the summed rate of
the runs training now (their steps per second over their own wall time), or, between runs, over the median rate
times the workers.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from anchorlab.progress import hms
from anchorlab.run_status import COMPLETED

PLAN_FILE = "plan.json"


def last_row(path: Path) -> dict[str, Any] | None:
    """The last complete JSON line of ``path`` (a metrics.jsonl being appended to), or None."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(size - 65536, 0))
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "step" in row:
            return row
    return None


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def config_total(config: Mapping[str, Any] | None) -> int | None:
    """A run's planned steps from its config dict, where it names ``task.n_train`` (else None)."""
    try:
        t, n = config["train"], int(config["task"]["n_train"])
        spe = max(n // int(t["batch_size"]), 1)
        total = max(int(round(float(t["epochs"]) * spe)), 1)
        return min(total, int(t["max_steps"])) if t.get("max_steps") else total
    except (KeyError, TypeError, ValueError):
        return None


def run_progress(run_dir: Path, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``step``, ``total``, ``wall`` (training seconds so far), ``rate`` (steps a second), the last evaluation
    row (``row``), for one run directory (all NaN / None where it has not started)."""
    run_dir = Path(run_dir)
    plan = _json(run_dir / PLAN_FILE)
    total = plan.get("total_steps") or config_total(config)
    row = last_row(run_dir / "metrics.jsonl")      # a finished run's last row is its last step's
    step = int(row["step"]) if row else 0
    wall = float(row.get("wall_seconds", math.nan)) if row else math.nan
    start = int(plan.get("from_step") or 0)
    wall_from = float(plan.get("wall_before") or 0.0)
    rate = (step - start) / (wall - wall_from) if wall == wall and wall > wall_from and step > start else math.nan
    return {"step": step, "total": int(total) if total else None, "wall": wall, "rate": rate, "row": row}


def sweep_table(out: str | Path) -> "Any":
    """One row per run of the sweep folder ``out``: run_id, status, step, total, rate, eta_seconds (the run's)."""
    import pandas as pd

    from anchorlab.sweep.store import ResultStore

    out = Path(out)
    with ResultStore(out / "results.sqlite") as store:
        runs = store.runs_frame(config=True)
    rows = []
    for r in runs.itertuples(index=False):
        cfg = r.config if isinstance(r.config, dict) else (json.loads(r.config) if r.config else None)
        p = run_progress(out / (r.run_dir or f"runs/{r.run_id}"), cfg)
        left = (p["total"] - p["step"]) if p["total"] else math.nan
        done = r.status in COMPLETED or r.status in ("failed", "diverged")
        rows.append({"run_id": r.run_id, "status": r.status, "step": p["step"], "total": p["total"],
                     "rate": p["rate"], "eta_seconds": 0.0 if done else (left / p["rate"] if p["rate"] > 0 else math.nan)})
    return pd.DataFrame(rows, columns=["run_id", "status", "step", "total", "rate", "eta_seconds"])


def sweep_eta(table: "Any", workers: int) -> float:
    """Seconds until the sweep is done (NaN when no run has a rate yet)."""
    import numpy as np

    live = table[(table.status == "running") & (table.rate > 0)]
    todo = table[table.status.isin(["pending", "running"])]
    if todo.empty:
        return 0.0
    known = table.total.dropna()
    fill = float(np.median(known)) if len(known) else math.nan
    left = float((todo.total.fillna(fill) - todo.step.where(todo.status == "running", 0)).clip(lower=0).sum())
    rates = table.rate[table.rate > 0]
    if rates.empty:
        return math.nan
    speed = float(live.rate.sum()) if len(live) >= min(workers, len(todo)) else float(rates.median()) * min(
        workers, len(todo))
    return left / speed if speed > 0 else math.nan


def counts(table: "Any") -> dict[str, int]:
    done = int(table.status.isin(list(COMPLETED)).sum())
    failed = int(table.status.isin(["failed", "diverged"]).sum())
    running = int((table.status == "running").sum())
    return {"done": done, "running": running, "left": len(table) - done - failed - running, "failed": failed,
            "total": len(table)}


def status_lines(out: str | Path, workers: int | None = None) -> list[str]:
    """``anchorlab status``'s report of the sweep folder ``out``: the counts and ETA, then one line per run
    training now."""
    from anchorlab.sweep.lock import read_lock

    t = sweep_table(out)
    c = counts(t)
    lock = read_lock(Path(out))
    n_workers = workers or max(c["running"], 1)
    head = (f"{out}: {c['done']} of {c['total']} runs done, {c['running']} running, {c['left']} left"
            + (f", {c['failed']} failed" if c["failed"] else "")
            + (f"; ETA {hms(sweep_eta(t, n_workers))}" if c["running"] + c["left"] else "")
            + (f"; driver pid {lock.get('pid')} ({lock.get('command', '?')})" if lock else
               ("; no driver running" if c["running"] else "")))
    lines = [head]
    for r in t[t.status == "running"].itertuples(index=False):
        of = f"/{r.total:,}" if r.total else ""
        pct = f" ({r.step / r.total:.0%})" if r.total else ""
        lines.append(f"  run {r.run_id}: step {r.step:,}{of}{pct}, {r.rate:.1f} steps/s, ETA {hms(r.eta_seconds)}"
                     if r.rate == r.rate else f"  run {r.run_id}: starting")
    return lines


class SweepMonitor:
    """The driver's live display: on a terminal a bar over the sweep's runs with the running runs' steps and the
    ETA; elsewhere one line per new evaluation of a running run (its step, its ETA, the sweep's ETA) and one per
    finished run. ``tick(dirs)`` reads the in-flight run directories; ``finished(run, status)`` counts a run."""

    def __init__(self, out: str | Path, total_runs: int, workers: int, desc: str, stream: IO[str] | None = None,
                 keys: Sequence[str] = ("id_acc", "ood_acc")) -> None:
        import sys

        from anchorlab.progress import Progress

        self.out, self.workers, self.desc, self.keys = Path(out), max(workers, 1), desc, tuple(keys)
        self.stream = stream if stream is not None else sys.stderr
        self.bar = Progress(True, total_runs, 0, desc, unit="run", stream=self.stream)
        self.seen: dict[str, int] = {}
        self.t0 = time.perf_counter()
        self.last_line = 0.0

    def _eta(self) -> float:
        try:
            return sweep_eta(sweep_table(self.out), self.workers)
        except Exception:  # noqa: BLE001 - the display never stops a sweep
            return math.nan

    def tick(self, dirs: Sequence[tuple[str, Path]]) -> None:
        news = []
        for rid, d in dirs:
            p = run_progress(d)
            if p["row"] is not None and p["step"] != self.seen.get(rid):
                self.seen[rid] = p["step"]
                news.append((rid, p))
        if not news:
            return
        eta = hms(self._eta())
        if self.bar.bar is not None:
            parts = [f"{rid[:6]} {p['step'] / p['total']:.0%}" for rid, p in news if p["total"]]
            self.bar.bar.set_postfix_str(f"{', '.join(parts)}; sweep ETA {eta}")
            return
        for rid, p in news:
            of = f"/{p['total']:,}" if p["total"] else ""
            run_eta = hms((p["total"] - p["step"]) / p["rate"]) if p["total"] and p["rate"] > 0 else "?"
            vals = " ".join(f"{k}={p['row'][k]:.3g}" for k in self.keys
                            if isinstance(p["row"].get(k), (int, float)))
            self.bar.note(f"run {rid} step {p['step']:,}{of} {vals}; run ETA {run_eta}, sweep ETA {eta}".replace("  ", " "))

    def finished(self, run: Any, status: str) -> None:
        self.bar.update(1)
        values = ", ".join(f"{k}={v}" for k, v in getattr(run, "values", {}).items())
        self.bar.note(f"run {run.run_id} {status}" + (f" ({values})" if values else "")
                      + f"; sweep ETA {hms(self._eta())}")

    def close(self) -> None:
        self.bar.close()


def live_display(out: str | Path, total_runs: int, workers: int | None, desc: str, enabled: bool = True,
                 keys: Sequence[str] = ("id_acc", "ood_acc")) -> "SweepMonitor | None":
    """A :class:`SweepMonitor` for a sweep into ``out`` with ``total_runs`` to train (None when ``enabled`` is off
    or there is nothing to train); pass its ``finished`` as ``on_result`` and its ``tick`` as ``on_tick``."""
    import os

    if not enabled or total_runs <= 0:
        return None
    return SweepMonitor(out, total_runs, workers or os.cpu_count() or 1, desc, keys=keys)


def run_watched(spec: Any, out: str | Path, desc: str, progress: bool, workers: int | None = None,
                keys: Sequence[str] = ("id_acc", "ood_acc"), **kwargs: Any) -> "Any":
    """:func:`anchorlab.sweep.runner.run_sweep` of ``spec`` into ``out`` with the live display when ``progress``
    (its runs to train counted first); ``kwargs`` go to ``run_sweep``. Returns its table."""
    from anchorlab.sweep.plan import plan_sweep
    from anchorlab.sweep.runner import run_sweep

    todo = int((plan_sweep(spec, out, done_elsewhere=kwargs.get("done_elsewhere", ())).action != "skip").sum())
    mon = live_display(out, todo, workers, desc, progress, keys=keys)
    try:
        return run_sweep(spec, out, max_workers=workers, on_result=mon.finished if mon else None,
                         on_tick=mon.tick if mon else None, **kwargs)
    finally:
        if mon:
            mon.close()

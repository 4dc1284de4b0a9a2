"""What a sweep would do, without doing it: one row per run with its status in the store and its action.

``plan_sweep`` (alias ``dry_run``) is what ``anchorlab sweep --dry-run`` prints and what the live display and
the demo count their runs to train with; ``left_elsewhere`` names the runs a committed table holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Collection, Mapping

import pandas as pd

from anchorlab.run_status import COMPLETED
from anchorlab.sweep.grid import SweepSpec, expand, load_sweep, runs_frame
from anchorlab.sweep.store import stored_statuses


def left_elsewhere(done_elsewhere: Collection[str], statuses: Mapping[str, str]) -> set[str]:
    """The runs of ``done_elsewhere`` a sweep leaves out: all but those its own store (``statuses``) completed."""
    return {i for i in done_elsewhere if statuses.get(i) not in COMPLETED}


def plan_sweep(spec: "SweepSpec | Mapping[str, Any] | str | Path", out_dir: str | Path | None = None,
               retry_failed: bool = True, done_elsewhere: Collection[str] = ()) -> pd.DataFrame:
    """Dry run: one row per run (run_id, axes, status in the store or 'new', action); writes nothing.

    ``action`` is ``run`` (new or pending), ``resume`` (was running), ``retry``
    (failed, with ``retry_failed``) or ``skip``; a run of ``done_elsewhere`` that this store has not
    completed has status ``elsewhere`` and is skipped (as :func:`run_sweep` leaves it out).
    """
    spec = load_sweep(spec)
    df = runs_frame(expand(spec))
    if df.empty:
        return df
    statuses = stored_statuses(Path(out_dir) / "results.sqlite") if out_dir is not None else {}
    elsewhere = left_elsewhere(done_elsewhere, statuses)
    df["status"] = ["elsewhere" if i in elsewhere else statuses.get(i, "new") for i in df.run_id]
    act = {"new": "run", "pending": "run", "running": "resume", **dict.fromkeys(COMPLETED, "skip"),
           "failed": "retry" if retry_failed else "skip", "elsewhere": "skip"}
    df["action"] = df.status.map(act)
    df.attrs["axes"] = list(spec.axis_keys)
    return df


dry_run = plan_sweep

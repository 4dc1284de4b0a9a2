"""How much one run is a draw: the Fig. 2 cell's small-init runs re-trained on another precision path, each beside its
committed twin (notes/2026-12-path-draw.md).

The reruns are the sweep ``mechanism_cpu`` (the cell's range on the papers' op set, 1/2x) at paper gamma 0.8 with
``train.bf16_path`` set to the other path; each one's twin is the same config on the bf16 autocast path, on which the
committed rows of docs/figures/fig2_cell_cpu.csv trained. Both are judged by the per-run bars
(:func:`anchorlab.eval.solution.outcome`); the measurement is the count of runs whose solution changes. No threshold
makes a verdict of it.
"""
from __future__ import annotations

import dataclasses

import pandas as pd

from anchorlab.config import ConfigError
from anchorlab.eval.solution import outcome

SWEEP, SMALL_INIT = "mechanism_cpu", 0.8


def twins(path: str, sweep: str = SWEEP, gamma: float = SMALL_INIT) -> pd.DataFrame:
    """One row per run of ``sweep`` at ``gamma`` re-trained on ``path``: its ``run_id``, the ``twin_run_id`` of the same
    config on the sweep's own path (autocast), ``optim.peak_lr`` and ``train.init_seed``, in the sweep's order."""
    from anchorlab.sweep.grid import expand, load_sweep

    spec = load_sweep(sweep)
    own = dict(spec.set).get("train.bf16_path")
    if path == own:
        raise ConfigError(f"train.bf16_path: the reruns need a path other than the sweep's own {own!r}, got {path!r}")
    base = [r for r in expand(spec) if r.config.init.gamma == gamma]
    other = [r for r in expand(dataclasses.replace(spec, set=spec.set + (("train.bf16_path", path),)))
             if r.config.init.gamma == gamma]
    return pd.DataFrame([{"run_id": o.run_id, "twin_run_id": b.run_id, "optim.peak_lr": b.config.optim.peak_lr,
                          "train.init_seed": b.config.train.init_seed} for b, o in zip(base, other)])


def _solution(row: pd.Series) -> str:
    return outcome(row["final.id_acc"], row["final.ood_inferential_acc"], row["final.ood_symmetric_acc"])


def path_pairs(committed: pd.DataFrame, reruns: pd.DataFrame, path: str) -> pd.DataFrame:
    """:func:`twins` with each side's final ID / inferential / symmetric accuracy and solution: ``committed`` holds the
    twins (run table rows by ``run_id``; a missing twin is an error naming it), ``reruns`` the finished reruns (a rerun
    not yet there reads ``queued``). ``changed``: both sides known and their solutions differ."""
    t = twins(path)
    c, r = committed.set_index("run_id"), reruns.set_index("run_id") if len(reruns) else pd.DataFrame()
    missing = sorted(set(t.twin_run_id) - set(c.index))
    if missing:
        raise ConfigError(f"committed table: twin run(s) {', '.join(missing)} missing")
    rows = []
    for _, x in t.iterrows():
        row = {**x.to_dict(), "twin_solution": _solution(c.loc[x.twin_run_id])}
        for m in ("final.id_acc", "final.ood_inferential_acc", "final.ood_symmetric_acc"):
            row[f"twin_{m}"] = c.loc[x.twin_run_id, m]
            row[m] = r.loc[x.run_id, m] if x.run_id in r.index else float("nan")
        row["solution"] = _solution(r.loc[x.run_id]) if x.run_id in r.index else "queued"
        row["changed"] = row["solution"] != "queued" and row["solution"] != row["twin_solution"]
        rows.append(row)
    return pd.DataFrame(rows)

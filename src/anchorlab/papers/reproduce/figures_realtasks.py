"""Real compositional tasks vs training-set size: journal Fig. 7A (SCAN) and 7B (COGS)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.papers.runs import run_table
from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register

if TYPE_CHECKING:
    import pandas as pd

SETTING_NAMES = {True: "small init + large wd", False: "large init + small wd"}
SIZE, OOD = "task.train_size", "final.ood_exact"   # the run table's names the claims read


def setting_names(gammas: pd.Series, wds: pd.Series) -> list[str]:
    """Each run's setting: the larger init rate of the sweep is "small init", the larger weight decay
    "large wd". A sweep that varies both knobs names all four cells ("small init + small wd", ...); one
    that varies only one keeps the two diagonal names (:data:`SETTING_NAMES`), by init rate."""
    if gammas.nunique() < 2 or wds.nunique() < 2:
        return [SETTING_NAMES[g == gammas.max()] for g in gammas]
    return [f"{'small' if g == gammas.max() else 'large'} init + {'large' if w == wds.max() else 'small'} wd"
            for g, w in zip(gammas, wds)]


def knob_effect(t: pd.DataFrame, col: str, knob: str) -> float:
    """The effect of one knob on ``col`` in a 2x2 sweep (settings named by :func:`setting_names`): for
    ``knob`` "init", mean ``col`` at small init minus at large init; for "wd", at large wd minus at small
    wd; each difference taken at a fixed value of the other knob, then averaged over its two values. NaN
    unless all four cells have runs."""
    if t is None or t.empty or col not in t:
        return math.nan
    m = t.groupby("setting")[col].mean()
    cell = {(i, w): f"{i} init + {w} wd" for i in ("small", "large") for w in ("large", "small")}
    if not set(cell.values()) <= set(m.index):
        return math.nan
    if knob == "init":
        return float(sum(m[cell["small", w]] - m[cell["large", w]] for w in ("large", "small")) / 2)
    if knob == "wd":
        return float(sum(m[cell[i, "large"]] - m[cell[i, "small"]] for i in ("small", "large")) / 2)
    raise ValueError(f"knob: must be 'init' or 'wd', got {knob!r}")


def finals_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run of a run table (:func:`anchorlab.sweep.runtable.run_table`) under the run table's names:
    ``run_id``, ``task.name``, ``setting``, ``task.train_size``, ``init.gamma``, ``optim.weight_decay``,
    ``status``, ``steps``, the ``final.*`` metrics, ``wall_seconds``.

    ``setting`` (:func:`setting_names`) is "small init + large wd" for the runs with the larger init
    rate of the sweep, "large init + small wd" for the others; a sweep that also varies weight decay
    on its own adds the two off-diagonal cells.
    """
    import pandas as pd

    if not len(rows):
        return pd.DataFrame()
    finals = [c for c in rows.columns if c.startswith("final.")]
    df = pd.DataFrame({"run_id": rows.run_id, "task.name": rows["task.name"],
                       "task.train_size": rows["task.train_size"] if "task.train_size" in rows else None,
                       "init.gamma": rows["init.gamma"], "optim.weight_decay": rows["optim.weight_decay"],
                       "status": rows.status, "steps": rows.steps, **{c: rows[c] for c in finals},
                       "wall_seconds": rows.wall_seconds}).reset_index(drop=True)
    df.insert(2, "setting", setting_names(df["init.gamma"], df["optim.weight_decay"]))
    return df


def make_datasize(sweep_dir: Path, out: Path, scale: str) -> Made:
    from anchorlab.plots.save import save_figure
    from anchorlab.papers.plots.realtasks import plot_exact_vs_train_size

    df = finals_table(run_table([sweep_dir]))
    return {"runs": df}, {"fig7.png": save_figure(plot_exact_vs_train_size(df), out / "fig7")[0]}


def _wins(t: pd.DataFrame) -> float:
    """Fraction of training-set sizes where small init + large wd has the higher OOD exact match."""
    if t.empty:
        return math.nan
    g = t.groupby([SIZE, "setting"])[OOD].mean().unstack()
    if g.shape[1] < 2:
        return math.nan
    return float((g[SETTING_NAMES[True]] > g[SETTING_NAMES[False]]).mean())


def _largest(t: pd.DataFrame, setting: bool, col: str) -> float:
    if t.empty:
        return math.nan
    sub = t[(t.setting == SETTING_NAMES[setting]) & (t[SIZE] == t[SIZE].max())]
    return float(sub[col].mean()) if len(sub) else math.nan


NOTE = ("CPU scale: 2-layer width-128 GPT-2-style decoder, 400 steps per run, one seed; the paper: GPT-2, "
        "the datasets' full setup. At 400 steps the large-init setting may not have fitted ID, so the CPU "
        "contrast mixes fitting speed with generalization (docs/real_tasks.md); journal-fig7a-matched / "
        "journal-fig7b-matched compare at matched ID. Data: task.data_dir or $ANCHORLAB_DATA_DIR, else "
        "downloaded into the cache.")

register(Figure(
    id="journal-fig7a", cids=("C9",), paper="journal", number="Fig. 7A",
    shows="SCAN addprim_turn_left: ID/OOD exact match vs training-set size, the two complexity-control settings",
    sweeps={"cpu": "scan_datasize_cpu", "paper": "scan_datasize_paper"}, make=make_datasize,
    readings=(
        Reading("small init + large wd beats large init + small wd on OOD at every data size (fraction of sizes)",
              "1.0 (every size)", lambda t: _wins(t["runs"])),
        Reading("OOD exact match at the largest size, small init + large wd", "higher",
              lambda t: _largest(t["runs"], True, OOD)),
        Reading("OOD exact match at the largest size, large init + small wd", "lower",
              lambda t: _largest(t["runs"], False, OOD)),
    ),
    notes=NOTE))

register(Figure(
    id="journal-fig7b", cids=("C9",), paper="journal", number="Fig. 7B",
    shows="COGS: ID/OOD exact match vs training-set size, the two complexity-control settings",
    sweeps={"cpu": "cogs_datasize_cpu", "paper": "cogs_datasize_paper"}, make=make_datasize,
    readings=(
        Reading("small init + large wd beats large init + small wd on OOD at every data size (fraction of sizes)",
              "1.0 (every size)", lambda t: _wins(t["runs"])),
        Reading("ID exact match at the largest size (20k in the paper), large init + small wd", "> 99%",
              lambda t: _largest(t["runs"], False, "final.id_exact")),
        Reading("ID exact match at the largest size, small init + large wd", "> 99%",
              lambda t: _largest(t["runs"], True, "final.id_exact")),
    ),
    notes=NOTE))


# --------------------------------------------------------------------------- matched ID (stopping rule)
def make_matched(sweep_dir: Path, out: Path, scale: str) -> Made:
    """Runs table (:func:`finals_table` with the run table's ``seed`` and ``reached_id``: the run stopped on its
    ID rule before the cap) and the figure."""
    from anchorlab.plots.save import save_figure
    from anchorlab.papers.plots.realtasks import plot_matched

    rows = run_table([sweep_dir])
    df = finals_table(rows)
    if df.empty:
        return {"runs": df}, {}
    df.insert(3, "reached_id", df.status == "stopped_early")
    df.insert(3, "seed", rows["seed"].to_numpy())
    return {"runs": df}, {"fig7.png": save_figure(plot_matched(df), out / "fig7")[0]}


def _reached(t: pd.DataFrame, setting: bool) -> float:
    sub = t[t.setting == SETTING_NAMES[setting]] if not t.empty else t
    return float(sub.reached_id.mean()) if len(sub) else math.nan


def _matched_gap(t: pd.DataFrame) -> float:
    """Mean OOD exact match of small init + large wd minus that of large init + small wd, over the runs of
    both that reached the ID rule (NaN unless each setting has one)."""
    if t.empty:
        return math.nan
    r = t[t.reached_id]
    m = r.groupby("setting")[OOD].mean()
    if len(m) < 2:
        return math.nan
    return float(m[SETTING_NAMES[True]] - m[SETTING_NAMES[False]])


MATCHED_NOTE = ("CPU scale: 2-layer width-128 GPT-2-style decoder, each run trains until ID exact match >= 0.99 "
                "(train.stop_when) or a cap (SCAN 2,400 steps, COGS 7,200), the 2x2 of init rate x weight decay, "
                "two seeds; a run that hit the cap did not reach matched ID (reached_id false). "
                "docs/reasoning_tasks.md.")

for _fig, _task, _preset in (("journal-fig7a-matched", "SCAN addprim_turn_left", "scan_matched"),
                             ("journal-fig7b-matched", "COGS", "cogs_matched")):
    register(Figure(
        id=_fig, cids=("C9",), paper="journal", number="Fig. 7" + ("A" if "7a" in _fig else "B"),
        shows=f"{_task}: OOD exact match of the two settings at matched ID (train until ID >= 0.99, with a cap)",
        sweeps={"cpu": f"{_preset}_cpu", "paper": f"{_preset}_paper"}, make=make_matched,
        readings=(
            Reading("runs of small init + large wd that reached ID >= 0.99 by the cap (fraction)", "1.0 (> 99% ID)",
                  lambda t: _reached(t["runs"], True)),
            Reading("runs of large init + small wd that reached ID >= 0.99 by the cap (fraction)", "1.0 (> 99% ID)",
                  lambda t: _reached(t["runs"], False)),
            Reading("OOD exact match gap, small minus large init, among runs at matched ID", "> 0 (significant)",
                  lambda t: _matched_gap(t["runs"])),
            Reading("OOD exact match, effect of init alone (small minus large init at fixed wd; all runs)",
                  "(not separated in the paper)", lambda t: knob_effect(t["runs"], OOD, "init")),
            Reading("OOD exact match, effect of wd alone (large minus small wd at fixed init; all runs)",
                  "(not separated in the paper)", lambda t: knob_effect(t["runs"], OOD, "wd")),
        ),
        notes=MATCHED_NOTE))

"""The Fig. 2 cell at CPU scale: sweep directories -> one row per run, and the cells the papers' way.

The sweeps ``fig2_cell_cpu``, ``fig2_cell_clock_cpu`` and ``fig2_depth_cpu`` (docs/headline.md)
write run directories; :func:`cell_rows` reads their final.json files into the table committed as
``docs/figures/fig2_cell_cpu.csv`` (one row per run: op set, paper gamma, peak lr, seed, final ID,
best and final inferential / symmetric accuracy on the held-out pair, plus the clock and depth), and
:func:`cell_table` reduces it with :func:`anchorlab.eval.judgement.paper_cells`::

    python -m anchorlab.headline runs/fig2_cell_cpu --out docs/figures/fig2_cell_cpu.csv

A study that outlasts its machine keeps its committed rows: ``--with-rows docs/figures/fig2_cell_cpu.csv``
joins them to the runs found in the directories.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from .eval.judgement import curve_rows
from .eval.lr_readings import ALL_LRS, CELL_KEYS, PAPER_LR_RANGE, TABLE_KEYS, device_kind, lr_readings, parse_lr_range
from .run_status import COMPLETED

PAPER_WIDTH = 400
PAPER_STEPS = 92_190   # NeurIPS App. A: 210 epochs of 900k sequences at batch 2048 (439 full batches each)
COLUMNS = ["op_set", "paper_gamma", "peak_lr", "seed", "id_acc", "inferential_best", "symmetric_best",
           "inferential_final", "symmetric_final"]
EXTRA = ["clock", "n_layers", "id_best", "steps", "gamma", "ref_width", "d_model", "precision", "device",
         "status", "wall_seconds", "run_id"]


ROW_ORDER = ["clock", "n_layers", "op_set", "paper_gamma", "peak_lr", "seed"]   # a run table's order


# a run table's columns -> the names anchorlab.eval.judgement reads
TO_JUDGEMENT = {"inferential_final": "ood_inferential_acc", "symmetric_final": "ood_symmetric_acc",
                "inferential_best": "best_ood_inferential_acc", "symmetric_best": "best_ood_symmetric_acc",
                "id_best": "best_id_acc"}


def paper_gamma(gamma: float, ref_width: Any, d_model: int) -> float:
    """The paper's gamma a run stands for: its gamma when it is read at the paper's width 400
    (``init.ref_width: 400``, or a width-400 model without a reference); NaN otherwise."""
    ref = None if ref_width is None or (isinstance(ref_width, float) and math.isnan(ref_width)) else int(ref_width)
    return float(gamma) if (ref or d_model) == PAPER_WIDTH else math.nan


def device_of(final: Mapping[str, Any]) -> str:
    """The device a run trained on: final.json's ``device``; for runs written before it was recorded, the
    device its precision reason names ("on cuda" -> ``cuda``, "CPU" -> ``cpu``); else ``unrecorded``."""
    if final.get("device"):
        return str(final["device"])
    reason = str((final.get("precision") or {}).get("reason", ""))
    return "cuda" if "on cuda" in reason else "cpu" if "CPU" in reason else "unrecorded"


def cell_rows(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """final.json dicts -> one row per run with :data:`COLUMNS` then :data:`EXTRA`; ``clock`` is the
    run's planned steps (``total_steps``, else ``steps``) over the paper's 92,190 (1.0: the paper's
    optimizer clock); ``steps`` the steps it trained."""
    from .robustness import case_table

    keys = ["init.gamma", "init.ref_width", "model.d_model", "model.n_layers"]
    if not runs:
        return pd.DataFrame(columns=COLUMNS + EXTRA)
    c = case_table(runs, vary_keys=keys)
    precision = {f.get("run_id"): (f.get("precision") or {}).get("matmul_dtype", "float32") for f in runs}
    planned = {f.get("run_id"): f.get("total_steps") or f.get("steps") for f in runs}
    device = {f.get("run_id"): device_of(f) for f in runs}
    out = pd.DataFrame({
        "op_set": c.op_set,
        "paper_gamma": [paper_gamma(g, r, d) for g, r, d in zip(c["init.gamma"], c["init.ref_width"],
                                                                 c["model.d_model"])],
        "peak_lr": c.peak_lr, "seed": c.seed, "id_acc": c.id_acc,
        "inferential_best": c.best_ood_inferential_acc, "symmetric_best": c.best_ood_symmetric_acc,
        "inferential_final": c.ood_inferential_acc, "symmetric_final": c.ood_symmetric_acc,
        "clock": (c.run_id.map(planned).astype(float) / PAPER_STEPS).round(2), "n_layers": c["model.n_layers"],
        "id_best": c.best_id_acc, "steps": c.steps, "gamma": c["init.gamma"], "ref_width": c["init.ref_width"],
        "d_model": c["model.d_model"], "precision": c.run_id.map(precision), "device": c.run_id.map(device), "status": c.status,
        "wall_seconds": c.wall_seconds, "run_id": c.run_id})
    return out.sort_values(ROW_ORDER).reset_index(drop=True)


def cell_table(rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9,
               lr_range: tuple[float, float] | None = PAPER_LR_RANGE) -> pd.DataFrame:
    """:func:`cell_rows` -> one row per (clock, depth, op set, paper gamma, lrs): the papers' cell (mean over
    seeds of the best over lrs and training, each mapping on its own) beside the per-run rates, over every
    peak and over the peaks in ``lr_range`` (:func:`lr_readings`); a cell per kind of device (``devices``)."""
    from .eval.judgement import paper_cells

    return _all_first(paper_cells(_judged(lr_readings(rows, lr_range)), TABLE_KEYS, threshold, id_min))


def pair_table(rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9, large: float = 0.3,
               small: float = 0.8) -> pd.DataFrame:
    """The contrast case by case: per (clock, depth, device, op set), the (seed, peak lr) cases run at both
    paper gammas ``large`` and ``small``, each pair on its own (:func:`anchorlab.robustness.case_counts`)."""
    from .robustness import case_counts

    r = _judged(rows).assign(devices=lambda d: device_kind(d.device))
    r = r[r.paper_gamma.isin([large, small])].assign(setting=lambda d: d.paper_gamma.map({large: "L", small: "S"}))
    return case_counts(r, "L", "S", id_min, threshold, ["clock", "n_layers", "devices"])


def _judged(rows: pd.DataFrame) -> pd.DataFrame:
    """The completed runs of a run table, under the column names :mod:`anchorlab.eval.judgement` reads."""
    return rows[rows.status.isin(COMPLETED)].rename(columns=TO_JUDGEMENT)


def earlier_rows(paths: Sequence[str | Path]) -> pd.DataFrame:
    """Rows of earlier run tables (e.g. the committed ``docs/figures/fig2_cell_cpu.csv``), for runs whose
    directories are not at hand; a table lacking a column of :data:`COLUMNS` + :data:`EXTRA` is refused."""
    from .sweep.results import earlier_tables

    return earlier_tables(paths, COLUMNS + EXTRA)[COLUMNS + EXTRA].drop_duplicates("run_id", keep="last")


def with_earlier(new: pd.DataFrame, old: pd.DataFrame) -> pd.DataFrame:
    """``new`` plus the rows of ``old`` whose run is not in ``new`` (a run read from its directory wins)."""
    keep = old[~old.run_id.isin(new.run_id)]
    return pd.concat([f for f in (new, keep) if len(f)], ignore_index=True) if len(new) or len(keep) else new


def join_rows(new: pd.DataFrame, old: pd.DataFrame) -> pd.DataFrame:
    """:func:`with_earlier` for run tables, sorted as :func:`cell_rows` sorts."""
    return with_earlier(new, old).sort_values(ROW_ORDER).reset_index(drop=True)


def seed_table(rows: pd.DataFrame, lr_range: tuple[float, float] | None = PAPER_LR_RANGE) -> pd.DataFrame:
    """:func:`cell_rows` -> one row per (clock, depth, op set, paper gamma, lrs, seed): each mapping's best
    over the lrs and training (``*_best``) and ``n_lrs``, the numbers the papers' cell averages."""
    from .eval.judgement import seed_bests

    return _all_first(seed_bests(_judged(lr_readings(rows, lr_range)), TABLE_KEYS))


def _all_first(t: pd.DataFrame) -> pd.DataFrame:
    """A table keyed by :data:`TABLE_KEYS` with each cell's "all" reading before its range reading."""
    rest = [c for c in ("seed",) if c in t]
    return (t.assign(_r=t.lrs != ALL_LRS).sort_values([*CELL_KEYS, "_r", *rest], kind="stable")
            .drop(columns="_r").reset_index(drop=True))


def write_tables(sweep_dirs: Sequence[str | Path], out: str | Path, threshold: float = 0.5,
                 id_min: float = 0.9, with_rows: Sequence[str | Path] = (),
                 lr_range: tuple[float, float] | None = PAPER_LR_RANGE
                 ) -> tuple[pd.DataFrame, pd.DataFrame, list[Path]]:
    """Read every completed run of ``sweep_dirs`` (a run in several counts once) and the rows of the
    earlier tables ``with_rows`` whose runs are not among them, write ``out`` (the run rows),
    ``<out stem>_cells.csv``, ``<out stem>_map.md`` (:func:`anchorlab.headline_map.cells_markdown`),
    ``<out stem>_seeds.csv`` (:func:`seed_table`), ``<out stem>_curves.csv``
    (:func:`curve_rows`; an earlier table's ``<stem>_curves.csv`` beside it joins as its rows do), the
    trajectories figure ``<out stem>_curves.png``, the depth-2 figure ``<out stem>.png`` (:func:`plot_cell`) and, once
    two depths have cells, NeurIPS Fig. 2 as ``<out stem>_fig2.png`` (:func:`plot_depth`) beside it;
    return both tables and the paths."""
    from .reproduce.figures_fig2_map import cells_markdown, pairs_markdown
    from .io import atomic_write
    from .sweep.results import unique_finals

    finals = unique_finals(sweep_dirs) if sweep_dirs else []
    rows = cell_rows(finals) if finals else pd.DataFrame(columns=COLUMNS + EXTRA)
    curves = curve_rows(finals)
    if with_rows:
        rows = join_rows(rows, earlier_rows(with_rows))
        for q in (Path(p).with_name(Path(p).stem + "_curves.csv") for p in with_rows):
            if q.exists():
                curves = with_earlier(curves, pd.read_csv(q))
    cells = cell_table(rows, threshold, id_min, lr_range) if len(rows) else pd.DataFrame()
    seeds = seed_table(rows, lr_range) if len(rows) else pd.DataFrame()
    out = Path(out)
    paths = [atomic_write(out, lambda p: rows.to_csv(p, index=False)),
             atomic_write(out.with_name(out.stem + "_cells.csv"), lambda p: cells.to_csv(p, index=False)),
             atomic_write(out.with_name(out.stem + "_seeds.csv"), lambda p: seeds.to_csv(p, index=False)),
             atomic_write(out.with_name(out.stem + "_curves.csv"),
                          lambda p: curves.sort_values(["run_id", "step"]).to_csv(p, index=False))]
    if len(cells) and cells.paper_gamma.notna().any():
        md = cells_markdown(cells[cells.paper_gamma.notna()]) + pairs_markdown(
            pair_table(rows, threshold, id_min), threshold, id_min)
        paths.append(atomic_write(out.with_name(out.stem + "_map.md"), lambda p: p.write_text(md)))
    from .plots.headline import depth_groups, drawn_runs, plot_cell, plot_curves, plot_depth
    from .plots.save import save_figure

    if len(cells) and ((cells.n_layers == 2) & cells.paper_gamma.notna()).any():
        paths += save_figure(plot_cell(cells, id_min=id_min), out.with_suffix(""), formats=("png",), dpi=130)
    if len(cells) and depth_groups(cells):   # NeurIPS Fig. 2 (gamma x depth) once two depths have cells
        paths += save_figure(plot_depth(cells, id_min), out.with_name(out.stem + "_fig2"), formats=("png",), dpi=120)
    if len(curves) and len(drawn_runs(rows, curves)):   # a depth-only sweep's tables have no depth-2 trajectory
        kinds = rows.assign(devices=device_kind(rows.device))   # as lr_readings keys the cells
        paths += save_figure(plot_curves(kinds, curves), out.with_name(out.stem + "_curves"), formats=("png",), dpi=110)
    return rows, cells, paths


def fitted_rows(rows: pd.DataFrame, curves: pd.DataFrame, id_min: float = 0.9) -> pd.DataFrame:
    """A run table whose ``inferential_best`` / ``symmetric_best`` are read only at the evaluations with
    ID >= ``id_min`` (:func:`anchorlab.eval.judgement.with_fitted_bests` over :func:`curve_rows`); a completed
    run without a trajectory is refused, so that no cell mixes the two readings."""
    from .eval.judgement import with_fitted_bests

    done = rows.index.isin(_judged(rows).index)
    out = rows.copy()
    cols = {"inferential": "inferential_best", "symmetric": "symmetric_best"}
    out.loc[done, list(cols.values())] = with_fitted_bests(rows[done], curves, id_min, cols)[list(cols.values())]
    return out


def write_fitted(out: str | Path, threshold: float = 0.5, id_min: float = 0.9,
                 lr_range: tuple[float, float] | None = PAPER_LR_RANGE) -> tuple[pd.DataFrame, list[Path]]:
    """From a written run table ``out`` and its ``<stem>_curves.csv`` (:func:`write_tables`), the cells read
    with each run's best taken only where ID >= ``id_min`` (:func:`fitted_rows`): ``<stem>_cells_fitted.csv``
    and ``<stem>_map_fitted.md``, its depth-2 figure ``<stem>_fitted.png`` (:func:`plot_cell`) and, where two
    depths have cells, Fig. 2 as ``<stem>_fig2_fitted.png`` (:func:`plot_depth`), beside the papers' reading
    (every evaluation counts)."""
    from .reproduce.figures_fig2_map import cells_markdown
    from .io import atomic_write

    out = Path(out)
    rows, curves = pd.read_csv(out), pd.read_csv(out.with_name(out.stem + "_curves.csv"))
    cells = cell_table(fitted_rows(rows, curves, id_min), threshold, id_min, lr_range)
    paths = [atomic_write(out.with_name(out.stem + "_cells_fitted.csv"), lambda p: cells.to_csv(p, index=False))]
    named = cells[cells.paper_gamma.notna()]
    if len(named):
        md = (f"Each run's best over training read only at evaluations with ID >= {id_min:g} (the papers' "
              f"reading, `{out.stem}_map.md`, counts every evaluation).\n\n" + cells_markdown(named))
        paths.append(atomic_write(out.with_name(out.stem + "_map_fitted.md"), lambda p: p.write_text(md)))
    from .plots.headline import depth_groups, plot_cell, plot_depth
    from .plots.save import save_figure

    reading = f"best only where ID >= {id_min:g}"
    if (named.n_layers == 2).any():
        fig = plot_cell(named, id_min=id_min, reading=reading)
        paths += save_figure(fig, out.with_name(out.stem + "_fitted"), formats=("png",), dpi=130)
    if depth_groups(named):   # Fig. 2 under the same reading
        fig = plot_depth(named, id_min, reading=reading)
        paths += save_figure(fig, out.with_name(out.stem + "_fig2_fitted"), formats=("png",), dpi=120)
    return cells, paths


def write_in_progress(sweep_dirs: Sequence[str | Path], out: str | Path) -> pd.DataFrame:
    """The runs of ``sweep_dirs`` that stopped before their end (:func:`anchorlab.sweep.results.in_progress`)
    as :func:`cell_rows` rows, status ``in_progress``: ``*_best`` is the best so far (a lower bound on the
    best over training), ``*_final`` and ``steps`` the last evaluation. They never enter the cells."""
    from .io import atomic_write
    from .sweep.results import in_progress

    rows = cell_rows(in_progress(sweep_dirs))
    atomic_write(Path(out), lambda p: rows.to_csv(p, index=False))
    return rows


def write_at_step(sweep_dirs: Sequence[str | Path], steps: Sequence[int], out: str | Path) -> pd.DataFrame:
    """Every run of ``sweep_dirs`` read at each of ``steps`` it reached, finished or not, as if it stopped there
    (:func:`anchorlab.sweep.results.at_step`), as :func:`cell_rows` rows, status ``at_step``, ``steps`` the
    evaluation read: the table that compares twins across devices and precisions, or with a run cut short by
    ``train.max_steps``, step by step."""
    from .io import atomic_write
    from .sweep.results import at_step

    runs = at_step(sweep_dirs, steps)
    rows = pd.concat([cell_rows(runs[s]) for s in steps], ignore_index=True)
    atomic_write(Path(out), lambda p: rows.to_csv(p, index=False))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m anchorlab.headline", description=__doc__.splitlines()[0])
    p.add_argument("sweep_dirs", nargs="*", help="sweep directories (e.g. runs/fig2_cell_cpu)")
    p.add_argument("--out", default="docs/figures/fig2_cell_cpu.csv", help="the run table (CSV)")
    p.add_argument("--threshold", type=float, default=0.5, help="OOD threshold of the per-run rate (default 0.5)")
    p.add_argument("--id-min", type=float, default=0.9)
    p.add_argument("--with-rows", action="append", default=[], metavar="CSV",
                   help="an earlier run table whose runs join (a run found in a directory wins); repeatable, "
                        "e.g. the committed docs/figures/fig2_cell_cpu.csv when its run directories are gone")
    p.add_argument("--lr-range", default=",".join(map(str, PAPER_LR_RANGE)), metavar="LO,HI",
                   help="the cells and seeds tables read the papers' rule over every peak and over the peaks "
                        "in [LO, HI] (default: the paper's [1e-4, 3e-4] corrected x 1.1); 'none': every peak only")
    p.add_argument("--in-progress", metavar="CSV",
                   help="also write the runs that stopped before their end (no final.json) to CSV: the best so far "
                        "and the last evaluation, status in_progress; they never enter the cells")
    p.add_argument("--at-step", nargs=2, metavar=("STEPS", "CSV"),
                   help="also write every run read at each of STEPS (comma-separated) it reached, finished or not, "
                        "as if it stopped there (best up to the step, last evaluation at or before it) to CSV: twins "
                        "across devices or precisions compare step by step")
    p.add_argument("--fitted", action="store_true",
                   help="also write the cells read with each run's best over training taken only at evaluations "
                        "with ID >= --id-min (<stem>_cells_fitted.csv, <stem>_map_fitted.md, <stem>_fitted.png)")
    a = p.parse_args(argv)
    if a.at_step and not all(v.isdigit() for v in a.at_step[0].split(",")):
        p.error(f"--at-step: STEPS must be whole numbers of steps, comma-separated, got {a.at_step[0]!r}")
    if not a.sweep_dirs and not a.with_rows:
        p.error("give sweep directories, --with-rows tables, or both")
    try:
        lr_range = parse_lr_range(a.lr_range)
    except ValueError:
        p.error(f"--lr-range: must be LO,HI (two numbers, 0 < LO <= HI) or none, got {a.lr_range!r}")
    rows, cells, paths = write_tables(a.sweep_dirs, a.out, a.threshold, a.id_min, a.with_rows, lr_range)
    if len(cells):
        cols = ["clock", "n_layers", "op_set", "paper_gamma", "devices", "lrs", "n_seeds", "lrs_min", "lrs_max", "n_runs",
                "id_best", "inferential_best", "symmetric_best", "inferential_per_run", "symmetric_per_run", "solution"]
        with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 50):
            print(cells[cols].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"{len(rows)} runs; wrote {', '.join(map(str, paths))}")
    if a.fitted and len(cells):
        print(f"fitted reading (best only where ID >= {a.id_min:g}); wrote "
              f"{', '.join(map(str, write_fitted(a.out, a.threshold, a.id_min, lr_range)[1]))}")
    if a.in_progress:
        print(f"{len(write_in_progress(a.sweep_dirs, a.in_progress))} runs in progress; wrote {a.in_progress}")
    if a.at_step:
        steps, csv = [int(v) for v in a.at_step[0].split(",")], a.at_step[1]
        print(f"{len(write_at_step(a.sweep_dirs, steps, csv))} rows (runs x steps {a.at_step[0]}); wrote {csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The scale ladder: does the mirror task's headline sharpen toward the paper's width and data size?

Sweep preset ``scale_ladder_cpu``: paper gamma 0.3 / 0.8 (``init.ref_width: 400``) at 1/2x the paper's clock, one
peak per width (1.77e-4 x 128 / width), seeds 0-2, on three op sets (the papers', ``{1:+6,2:-4,3:-2,4:-6}`` (3,2)
held out, ``{1:-3,2:+7,3:+4,4:+5}`` (2,3) held out), at four rungs: width 64, 128 and 256 at 100k training
sequences, and width 128 at 900k (the paper's data size).

The rule, fixed before the first ladder run finished (:data:`RULE`):

* **per run** (final metrics): a small-init run *composes* when final inferential >= 0.5 with ID >= 0.9; a
  large-init run *memorizes* when final symmetric >= 0.5 with ID >= 0.9; a run with ID < 0.9 is *unfit* and
  counted as such (it is neither).
* **per rung**, over the three op sets: the small init's compose rate and the large init's memorize rate, each
  k of n runs with its Wilson 95% interval; beside them the papers' cell per op set (mean over seeds of the
  best over training of each mapping; one peak, so no best over lrs).
* **verdict** for width (64 -> 256 at 100k) and for data (100k -> 900k at width 128): a rate *moves* when its
  change exceeds the larger of the two rungs' interval half-widths. "sharpens" when both rates rise by more than
  that, "flat" when neither moves, otherwise "mixed". A rung is *ready* when seeds 0 and 1 of every op set and
  both inits are done (seed 2 counts where present); before both rungs of a comparison are ready the verdict is
  "pending".

The maker writes::

    runs.csv        one row per run (:data:`RUN_COLUMNS`, the committed docs/figures/scale_ladder_cpu.csv)
    rungs.csv       per rung and op set (and ``all``): the two rates with intervals, unfit counts, the papers' cell
    verdict.csv     width and data: the rates compared, the change, the half-width, the verdict
    rates_by_rung.png   the two rates against the rung, one panel per op set and one pooled
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register

if TYPE_CHECKING:
    import pandas as pd

SWEEP = "scale_ladder_cpu"
SMALL, LARGE = 0.8, 0.3            # paper gammas
ID_MIN, THRESHOLD = 0.9, 0.5
READY_SEEDS = (0, 1)
RUNGS = (("w64", 64, 100_000), ("w128", 128, 100_000), ("w256", 256, 100_000), ("w128 x 900k", 128, 900_000))
COMPARISONS = (("width", "w64", "w256"), ("data", "w128", "w128 x 900k"))
RULE = ("per run: small init composes = final inferential >= 0.5 with ID >= 0.9, large init memorizes = final "
        "symmetric >= 0.5 with ID >= 0.9, ID < 0.9 unfit; per rung over the three op sets: each rate k/n with its "
        "Wilson 95% interval, the papers' cell beside it; width (64 -> 256) and data (100k -> 900k at width 128): a "
        "rate moves when its change exceeds the larger half-width of the two rungs; sharpens = both rates rise by "
        "more, flat = neither moves, else mixed; pending until both rungs have seeds 0-1 of every op set")
RUN_COLUMNS = ["op_set", "width", "n_train", "rung", "paper_gamma", "peak_lr", "seed", "final.id_acc",
               "final.ood_inferential_acc", "final.ood_symmetric_acc", "best.ood_inferential_acc",
               "best.ood_symmetric_acc", "steps_to_id_fit", "outcome", "wall_seconds", "precision", "device", "run_id"]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials (NaN, NaN for n = 0)."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    d = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, min(p, mid - half)), min(1.0, max(p, mid + half))   # lo <= p <= hi, rounding included


def rung_of(width: int, n_train: int) -> str:
    return next((name for name, w, n in RUNGS if (w, n) == (int(width), int(n_train))), f"w{int(width)} x {n_train}")


def ladder_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """The run table -> :data:`RUN_COLUMNS`, one row per run, in rung, op set, gamma, seed order."""
    from anchorlab.papers.eval.crossing import crossing_rows
    from anchorlab.sweep.grid import expand, load_sweep
    from anchorlab.papers.runs import rows_curves

    rows = rows[rows.op_set.astype(str) != ""]
    runs = crossing_rows(rows, rows_curves(rows), ID_MIN, THRESHOLD)
    design = {r.run_id: (r.config.model.d_model, r.config.task.n_train) for r in expand(load_sweep(SWEEP))}
    runs = runs[runs.run_id.isin(design)].copy()     # a committed table keeps no config: the design names the rung
    runs["width"] = [design[r][0] for r in runs.run_id]
    runs["n_train"] = [design[r][1] for r in runs.run_id]
    runs["width"] = runs.width.astype(int)
    runs["n_train"] = runs.n_train.astype(int)
    runs["rung"] = [rung_of(w, n) for w, n in zip(runs.width, runs.n_train)]
    order = {name: i for i, (name, _, _) in enumerate(RUNGS)}
    runs = runs.assign(_r=runs.rung.map(order)).sort_values(["_r", "op_set", "paper_gamma", "seed"])
    return runs[RUN_COLUMNS].reset_index(drop=True)


def _rates(t: pd.DataFrame) -> dict[str, float]:
    small = t[t.paper_gamma.round(6) == SMALL]
    large = t[t.paper_gamma.round(6) == LARGE]
    ks, kl = int((small.outcome == "composes").sum()), int((large.outcome == "memorizes").sum())
    s_lo, s_hi = wilson(ks, len(small))
    l_lo, l_hi = wilson(kl, len(large))
    return {"n_small": len(small), "small_composes": ks, "compose_rate": ks / len(small) if len(small) else math.nan,
            "compose_lo": s_lo, "compose_hi": s_hi, "small_unfit": int((small["final.id_acc"] < ID_MIN).sum()),
            "n_large": len(large), "large_memorizes": kl,
            "memorize_rate": kl / len(large) if len(large) else math.nan, "memorize_lo": l_lo, "memorize_hi": l_hi,
            "large_unfit": int((large["final.id_acc"] < ID_MIN).sum()),
            "papers_cell_small_inferential": _mean(small, "best.ood_inferential_acc"),
            "papers_cell_large_symmetric": _mean(large, "best.ood_symmetric_acc")}


def _mean(t: pd.DataFrame, col: str) -> float:
    return float(t[col].mean()) if len(t) else math.nan


def _ready(t: pd.DataFrame, op_sets: list[str]) -> bool:
    have = {(o, round(float(g), 6), int(s)) for o, g, s in zip(t.op_set, t.paper_gamma, t.seed)}
    return all((o, g, s) in have for o in op_sets for g in (SMALL, LARGE) for s in READY_SEEDS)


def rung_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per rung and op set, and per rung over all op sets (``op_set`` = ``all``): :func:`_rates` and ``ready``.
    The papers' cell of ``all`` is the mean of the op sets' cells."""
    import pandas as pd

    op_sets = sorted(runs.op_set.unique())
    out = []
    for name, _, _ in RUNGS:
        t = runs[runs.rung == name]
        if t.empty:
            continue
        for op, g in t.groupby("op_set", sort=True):
            out.append({"rung": name, "op_set": op, **_rates(g), "ready": _ready(g, [op])})
        out.append({"rung": name, "op_set": "all", **_rates(t), "ready": _ready(t, op_sets)})
    return pd.DataFrame(out)


def _half(r) -> tuple[float, float]:
    return ((r.compose_hi - r.compose_lo) / 2, (r.memorize_hi - r.memorize_lo) / 2)


def verdict_table(rungs: pd.DataFrame) -> pd.DataFrame:
    """Width and data: each rate at both rungs (over all op sets), the change, the larger half-width, whether it
    moved, and the verdict of :data:`RULE`."""
    import pandas as pd

    pooled = rungs[rungs.op_set == "all"].set_index("rung")
    rows = []
    for what, a, b in COMPARISONS:
        row: dict = {"comparison": what, "from_rung": a, "to_rung": b}
        if a not in pooled.index or b not in pooled.index or not (pooled.loc[a].ready and pooled.loc[b].ready):
            done = {r: f"{int(pooled.loc[r].n_small + pooled.loc[r].n_large)} runs" if r in pooled.index else "0 runs"
                    for r in (a, b)}
            rows.append({**row, "verdict": f"pending ({a}: {done[a]}, {b}: {done[b]})"})
            continue
        ra, rb = pooled.loc[a], pooled.loc[b]
        moves = []
        for rate, i in (("compose_rate", 0), ("memorize_rate", 1)):
            change = float(rb[rate] - ra[rate])
            half = max(_half(ra)[i], _half(rb)[i])
            row.update({f"{rate}_from": float(ra[rate]), f"{rate}_to": float(rb[rate]), f"{rate}_change": change,
                        f"{rate}_half_width": half})
            moves.append("up" if change > half else "down" if change < -half else "flat")
        row["verdict"] = ("sharpens" if moves == ["up", "up"] else "flat" if moves == ["flat", "flat"] else "mixed")
        row["moves"] = "/".join(moves)
        rows.append(row)
    return pd.DataFrame(rows)


def make_scale(rows: pd.DataFrame, out: Path, scale: str) -> Made:
    """The run table -> the tables and files of the module docstring."""
    from anchorlab.plots.save import save_figure
    from anchorlab.papers.plots.scale import plot_rates_by_rung

    runs = ladder_runs(rows)
    rungs = rung_table(runs)
    tables = {"runs": runs, "rungs": rungs, "verdict": verdict_table(rungs)}
    files: dict[str, Path] = {}
    if len(rungs):
        fig = plot_rates_by_rung(rungs, [name for name, _, _ in RUNGS])
        files["rates_by_rung.png"] = save_figure(fig, out / "rates_by_rung", formats=("png",), dpi=120)[0]
    return tables, files


def _verdict(what: str):
    def read(t: dict) -> str:
        v = t["verdict"]
        r = v[v.comparison == what]
        return str(r.verdict.iloc[0]) if len(r) else "n/a"
    return read


def _rate(rung: str, col: str, k: str, n: str):
    def read(t: dict) -> str:
        r = t["rungs"]
        r = r[(r.rung == rung) & (r.op_set == "all")]
        if r.empty:
            return "n/a (no runs)"
        x = r.iloc[0]
        return f"{int(x[k])} of {int(x[n])} runs" + ("" if x.ready else " (rung not complete)")
    return read


register(Figure(
    id="study-scale", cids=("C1",), paper="study", number="scale ladder",
    shows="the mirror task's per-run rates (small init composes, large init memorizes) at width 64 / 128 / 256 and "
          "at 900k sequences, on three op sets, with the verdict of a rule fixed before the runs",
    sweeps={"cpu": SWEEP},
    tables=make_scale,
    design_only=True,   # the committed width-128 rows come from opset_many_cpu.csv and fig2_cell_cpu.csv
    rules={"cpu": RULE},
    readings=(
        Reading("the contrast sharpens with width (64 -> 256, 100k sequences)", "the paper runs width 400 only",
              _verdict("width")),
        Reading("the contrast sharpens with data (100k -> 900k, width 128)", "the paper runs 900k only", _verdict("data")),
        *(Reading(f"{rung}: small-init runs that compose", "near all at width 400, 900k",
                _rate(rung, "compose_rate", "small_composes", "n_small")) for rung, _, _ in RUNGS),
        *(Reading(f"{rung}: large-init runs that memorize", "near all at width 400, 900k",
                _rate(rung, "memorize_rate", "large_memorizes", "n_large")) for rung, _, _ in RUNGS),
    ),
    notes="CPU scale: 72 runs, 14 of them committed (opset_many_cpu.csv, fig2_cell_cpu.csv: pass both with "
          "--from-table); ~20 min a width-128 run on one core in bf16, ~4x that at width 256 (measured times in "
          "docs/figures/scale_ladder_cpu.csv). Order: width 64, width 128 seed 2, 900k, width 256."))

"""The init-rate x weight-decay grid (journal Fig. 3B, Fig. 10) at CPU scale: runs -> tables -> figure.

The sweep ``gamma_wd_cpu`` (docs/weight_decay.md) trains the NeurIPS task at the demo's clock over
paper gammas (``init.ref_width: 400``) x weight-decay rows matched to the journal's by the decay
exponent ``wd x sum of lr`` (AdamW shrinks a weight by about ``exp(-exponent)``). This module reads
its run directories into one row per run (:data:`COLUMNS`: paper gamma, weight decay, decay exponent,
seed, final ID, best inferential / symmetric accuracy on the held-out pair, the journal's phase, plus
the condensation of the first layer's query and FFN input weights at the end), reduces them the
papers' way (:func:`grid_cells`: mean over seeds of each seed's best), asks whether the largest decay
turns a memorizing (gamma, seed) into a composing one (:func:`rescue_table`), and draws both::

    python -m anchorlab.gamma_wd runs/gamma-wd-cpu --out docs/figures/gamma_wd_cpu.csv
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .run_status import TRAINED

COLUMNS = ["paper_gamma", "weight_decay", "decay_exponent", "seed", "id_acc", "inferential_best",
           "symmetric_best", "phase"]
EXTRA = ["data_seed", "id_best", "inferential_final", "symmetric_final", "solution", "lr_sum", "peak_lr",
         "gamma", "ref_width", "precision", "steps", "run_id"]
COND = {"wq0": ("blocks", 0, "attn", "W_Q"), "win0": ("blocks", 0, "mlp", "W_in")}
COND_SCORES = ("largest_group_frac", "mean_abs_cos", "effective_directions_frac")


def decay_exponent(cfg: Any) -> tuple[float, float]:
    """(sum of lr over the run's optimizer steps, weight decay x that sum) of an ExperimentConfig."""
    from .train.optim import lr_sum
    from .train.run import steps_plan

    spe, total, _ = steps_plan(cfg, cfg.task.n_train)
    s = lr_sum(spe, total, cfg.optim)
    return s, cfg.optim.weight_decay * s


def _weight(model: Any, path: tuple) -> Any:
    obj = model
    for p in path:
        obj = obj[p] if isinstance(p, int) else getattr(obj, p)
    return obj.weight.detach().float()


def condensation_row(run_dir: str | Path) -> dict[str, float]:
    """Condensation scores of the first layer's W_Q and FFN W_in rows at the end of a run
    (journal Fig. 10), as ``cond/<matrix>_<score>``; NaN where the run has no such weights (or the
    directory holds only its final.json)."""
    from .analysis.condensation import condensation_scores
    from .train import load_run

    model = load_run(run_dir).model if (Path(run_dir) / "config.yaml").exists() else None
    out: dict[str, float] = {}
    for name, path in COND.items():
        try:
            s = condensation_scores(_weight(model, path)) if model is not None else {}
        except (AttributeError, IndexError, TypeError):
            s = {}
        out.update({f"cond/{name}_{k}": float(s.get(k, math.nan)) for k in COND_SCORES})
    return out


def condensation_matrices(rows: pd.DataFrame, run_dirs: Mapping[str, str | Path],
                          seed: int | None = None) -> dict[tuple, np.ndarray]:
    """{(paper gamma, weight decay): cosine matrix of the first layer's W_Q rows in clustered order} for
    the runs of one (init) seed (default: the smallest), as journal Fig. 10 draws them."""
    from .analysis.condensation import condensation_order, cosine_matrix
    from .train import load_run

    seed = int(rows.seed.min()) if seed is None else seed
    mats: dict[tuple, np.ndarray] = {}
    for r in rows[rows.seed == seed].itertuples():
        if r.run_id in run_dirs and (Path(run_dirs[r.run_id]) / "config.yaml").exists():
            C = cosine_matrix(_weight(load_run(run_dirs[r.run_id]).model, COND["wq0"]))
            o = condensation_order(C)
            mats.setdefault((r.paper_gamma, r.weight_decay), C[o][:, o].numpy())
    return mats


def grid_rows(runs: Sequence[Mapping[str, Any]], threshold: float = 0.5, id_min: float = 0.9,
              condensation: bool = True) -> pd.DataFrame:
    """final.json dicts -> one row per run with :data:`COLUMNS`, :data:`EXTRA` and (``condensation``)
    the ``cond/*`` scores. ``phase``: the journal's, from the run's best ID and best inferential
    accuracy over training (1: ID < ``id_min``; 2: ID fitted, OOD < ``threshold``; 3: both)."""
    from .analysis.verdict import outcome
    from .config import experiment_from_dict
    from .eval.phases import PhaseThresholds, classify_phase
    from .headline import paper_gamma

    rows = []
    th = PhaseThresholds(id_threshold=id_min, ood_threshold=threshold)
    for f in runs:
        cfg = experiment_from_dict(f["config"])
        s, e = decay_exponent(cfg)
        fin, best = f.get("final", {}), f.get("best", {})
        nan = math.nan
        r = {"paper_gamma": paper_gamma(cfg.init.gamma, cfg.init.ref_width, cfg.model.d_model),
             "weight_decay": cfg.optim.weight_decay, "decay_exponent": e, "seed": cfg.train.init_seed,
             "id_acc": fin.get("id_acc", nan), "inferential_best": best.get("ood_inferential_acc", nan),
             "symmetric_best": best.get("ood_symmetric_acc", nan), "data_seed": cfg.train.data_seed,
             "id_best": best.get("id_acc", nan), "inferential_final": fin.get("ood_inferential_acc", nan),
             "symmetric_final": fin.get("ood_symmetric_acc", nan), "lr_sum": s, "peak_lr": cfg.optim.peak,
             "gamma": cfg.init.gamma, "ref_width": cfg.init.ref_width,
             "precision": (f.get("precision") or {}).get("matmul_dtype", "float32"), "steps": f.get("steps"),
             "run_id": f.get("run_id")}
        r["phase"] = classify_phase(r["id_best"], r["inferential_best"], thresholds=th)[0]
        r["solution"] = outcome(r["id_acc"], r["inferential_final"], r["symmetric_final"], threshold, id_min)
        if condensation and f.get("run_dir"):
            r.update(condensation_row(f["run_dir"]))
        rows.append(r)
    out = pd.DataFrame(rows, columns=None if rows else COLUMNS + EXTRA)
    if out.empty:
        return out
    out["phase"] = out["phase"].astype("Int64")
    out = out[COLUMNS + EXTRA + [c for c in out.columns if c.startswith("cond/")]]
    return out.sort_values(["paper_gamma", "gamma", "weight_decay", "seed", "data_seed"]).reset_index(drop=True)


def grid_cells(rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9) -> pd.DataFrame:
    """One row per (paper gamma, weight decay): the papers' cell (mean over seeds of each seed's best over
    lrs and training) beside the per-run rates, the cell's journal phase (from its mean best ID and mean
    best inferential accuracy) and the mean condensation scores."""
    from .eval.judgement import paper_cells
    from .eval.phases import PhaseThresholds, classify_phase
    from .headline import TO_JUDGEMENT

    runs = rows.rename(columns=TO_JUDGEMENT)
    runs = runs.assign(draw=runs.seed.astype(str) + "/" + runs.data_seed.astype(str))   # a seed = (init, data)
    keys = ["paper_gamma", "gamma", "weight_decay"]
    cells = paper_cells(runs, keys, threshold, id_min, seed="draw")
    th = PhaseThresholds(id_threshold=id_min, ood_threshold=threshold)
    cells["phase"] = pd.array([classify_phase(i, o, thresholds=th)[0]
                               for i, o in zip(cells.id_best, cells.inferential_best)], dtype="Int64")
    extra = [c for c in rows.columns if c.startswith("cond/")] + ["decay_exponent"]
    means = rows.groupby(keys, dropna=False)[extra].mean().reset_index()
    solved = rows.assign(composes=rows.solution.eq("composes"), memorizes=rows.solution.eq("memorizes"))
    rates = solved.groupby(keys, dropna=False)[["composes", "memorizes"]].mean().add_suffix("_rate").reset_index()
    return cells.merge(means, on=keys).merge(rates, on=keys)


def rescue_table(rows: pd.DataFrame, threshold: float = 0.5, id_min: float = 0.9) -> pd.DataFrame:
    """Per (gamma, seed): the run's solution at each weight decay (``wd=<value>``, final metrics) and the
    same by the best over training (``best wd=<value>``: best ID >= ``id_min`` and best inferential /
    symmetric accuracy, :func:`~anchorlab.analysis.verdict.outcome` of the bests); ``rescued``: it
    memorizes at the smallest decay and composes at some larger one (final metrics); ``rescued_best``:
    the same by the bests (a run that composed during training and lost its fit to the decay counts)."""
    from .analysis.verdict import outcome

    r = rows.assign(paper_gamma=rows.paper_gamma.fillna(-1.0),
                    best=[outcome(i, a, b, threshold, id_min)
                          for i, a, b in zip(rows.id_best, rows.inferential_best, rows.symmetric_best)])
    keys = ["paper_gamma", "gamma", "seed", "data_seed"]
    out = None
    for col, prefix in (("solution", "wd="), ("best", "best wd=")):
        t = r.pivot_table(index=keys, columns="weight_decay", values=col, aggfunc="first")
        lo = t.columns.min()
        later = t[[c for c in t.columns if c > lo]].eq("composes").any(axis=1)
        flag = (t[lo].eq("memorizes") & later).rename("rescued" if col == "solution" else "rescued_best")
        t = t.rename(columns=lambda w, p=prefix: f"{p}{w:g}")
        t = pd.concat([t, flag], axis=1)
        out = t if out is None else out.join(t)
    out = out.reset_index()
    out["paper_gamma"] = out.paper_gamma.where(out.paper_gamma >= 0)
    return out


def write_grid(sweep_dirs: Sequence[str | Path], out: str | Path, threshold: float = 0.5,
               id_min: float = 0.9) -> tuple[pd.DataFrame, pd.DataFrame, list[Path]]:
    """Read every finished run of ``sweep_dirs`` (a run in several counts once); write ``out`` (the run
    rows), ``<stem>_cells.csv``, ``<stem>_rescue.csv`` (:func:`rescue_table`), ``<stem>.png`` (the phase
    diagram) and ``<stem>_condensation.png``
    (journal Fig. 10: the W_Q(1) cosine matrices of one seed over the grid)."""
    from .io import atomic_write
    from .sweep.results import unique_finals

    runs = unique_finals(sweep_dirs, statuses=TRAINED)
    rows = grid_rows(runs, threshold, id_min)
    cells = grid_cells(rows, threshold, id_min) if len(rows) else pd.DataFrame()
    out = Path(out)
    paths = [atomic_write(out, lambda p: rows.to_csv(p, index=False)),
             atomic_write(out.with_name(out.stem + "_cells.csv"), lambda p: cells.to_csv(p, index=False))]
    if len(cells):
        rescue = rescue_table(rows, threshold, id_min)
        paths.append(atomic_write(out.with_name(out.stem + "_rescue.csv"), lambda p: rescue.to_csv(p, index=False)))
        from .plots.gamma_wd import plot_gamma_wd
        from .plots.save import save_figure
        from .plots.sweep import plot_matrix_grid

        paths += save_figure(plot_gamma_wd(cells, rows, threshold, id_min), out.with_suffix(""),
                             formats=("png",), dpi=130)
        seed = int(rows.seed.min())
        mats = condensation_matrices(rows, {f["run_id"]: f["run_dir"] for f in runs}, seed)
        if mats:
            fig = plot_matrix_grid(mats, row_label="paper gamma", col_label="weight decay",
                                   title=f"cosine of W_Q(1) rows (clustered), init seed {seed}")
            paths += save_figure(fig, out.with_name(out.stem + "_condensation"), formats=("png",), dpi=110)
    return rows, cells, paths


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m anchorlab.gamma_wd", description=__doc__.splitlines()[0])
    p.add_argument("sweep_dirs", nargs="+", help="sweep directories (e.g. runs/gamma-wd-cpu)")
    p.add_argument("--out", default="docs/figures/gamma_wd_cpu.csv", help="the run table (CSV)")
    p.add_argument("--threshold", type=float, default=0.5, help="OOD accuracy of phase 3 / a solution (default 0.5)")
    p.add_argument("--id-min", type=float, default=0.9)
    a = p.parse_args(argv)
    rows, cells, paths = write_grid(a.sweep_dirs, a.out, a.threshold, a.id_min)
    fmt = {"float_format": lambda v: f"{v:.2f}", "index": False}
    if len(cells):
        cols = ["paper_gamma", "weight_decay", "decay_exponent", "n_seeds", "id_best", "inferential_best",
                "symmetric_best", "phase", "composes_rate", "memorizes_rate", "cond/wq0_mean_abs_cos"]
        print(cells[[c for c in cols if c in cells]].to_string(**fmt))
        print(rescue_table(rows, a.threshold, a.id_min).to_string(index=False))
    print(f"{len(rows)} runs; wrote {', '.join(map(str, paths))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

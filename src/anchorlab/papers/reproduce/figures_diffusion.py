"""Concept-graph diffusion: journal Fig. 6B (the failure mode at default init, removed by a larger init rate).

The sweep trains the conditional U-Net of the ``concepts`` task on the nodes
000, 100, 001, 111 at the framework's default init and at several init rates
(uniform distribution, bound = fan_in^-gamma), over seeds. The maker reads
each run's final metrics (shape accuracy of the classifier-judged samples per
node), draws a few fresh samples of every node from the first seed of each
setting for the grid (cached in ``samples/<run_id>.npz``), and writes:

``runs.csv`` (one row per run, under the run table's names: ``init.scheme``,
``train.init_seed``, ``train.data_seed``, the ``final.*`` metrics; ``rate_gamma``
is ``init.gamma`` where the init rate is applied, NaN at the framework's
default init, whose config still holds an unused gamma), ``summary.csv`` (per
setting: the headline ``all_acc_010_011`` -- all three concepts right on the
unseen nodes 010 and 011 -- with the shape, size and colour accuracies on them
beside it, training-node quality, wall time; mean, min and max over seeds),
``per_node.csv`` (per setting and node: each concept's accuracy, mean over
seeds; ``object_rate``: the fraction judged to hold an object),
``fig6b.png`` (sample grid, nodes x settings, default framed),
``fig6b_all.png`` (the headline and the three concept accuracies on 010/011
vs init rate) and ``fig6b_shape.png`` (shape accuracy per unseen node).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from anchorlab.papers.runs import run_table
from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)
UNSEEN = ("010", "011")
HEADLINE = "final.all_acc_010_011"
BESIDE = ("final.shape_acc_010_011", "final.size_acc_010_011", "final.color_acc_010_011")
SCHEME, GAMMA = "init.scheme", "rate_gamma"   # rate_gamma: init.gamma where the rate is applied, else NaN
GRID_SAMPLES = 4


def setting_of(scheme: str, gamma: float) -> str:
    return "default" if scheme == "framework_default" else f"gamma={gamma:g}"


def runs_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run of a run table (:func:`anchorlab.sweep.runtable.run_table`): setting, ``init.scheme``,
    ``rate_gamma`` (``init.gamma``; NaN at the framework's default init, which applies no rate), the seeds,
    status, steps, wall time, run directory and every ``final.*`` metric."""
    import pandas as pd

    if not len(rows):
        return pd.DataFrame()
    scheme = rows["init.scheme"] if "init.scheme" in rows else pd.Series("rate", index=rows.index)
    df = pd.DataFrame({"run_id": rows.run_id,
                       "setting": [setting_of(s, g) for s, g in zip(scheme, rows["init.gamma"])], SCHEME: scheme,
                       GAMMA: rows["init.gamma"].where(scheme != "framework_default", math.nan),
                       "train.init_seed": rows["train.init_seed"], "train.data_seed": rows["train.data_seed"],
                       "status": rows.status, "steps": rows.steps, "wall_seconds": rows.wall_seconds,
                       "run_dir": rows.run_dir, **{c: rows[c] for c in rows.columns if c.startswith("final.")}})
    df["_rate"] = df[SCHEME] != "framework_default"     # the default first, then increasing gamma
    return df.sort_values(["_rate", GAMMA, "train.init_seed"], ignore_index=True).drop(columns="_rate")


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per setting (default first, then increasing gamma): mean / min / max over seeds of the headline numbers,
    each named by its metric (``all_acc_010_011``, ``all_acc_010_011_min``, ...)."""
    import pandas as pd

    metrics = [f"{k}_acc_{n}" for n in UNSEEN for k in ("all", "shape", "size", "color")]
    metrics += ["ood_shape_acc", "id_all_acc", "ood_all_acc", "id_denoise_loss", "ood_denoise_loss"]
    cols = [HEADLINE, *BESIDE] + [f"final.{m}" for m in metrics + [f"object_rate_{n}" for n in UNSEEN]]
    cols = [c for c in cols + ["wall_seconds"] if c in df]
    out = []
    for setting, g in df.groupby("setting", sort=False):
        row = {"setting": setting, SCHEME: g[SCHEME].iloc[0], GAMMA: g[GAMMA].iloc[0], "seeds": len(g)}
        for c in cols:
            name = c.removeprefix("final.")
            row[name] = g[c].mean()
            row[f"{name}_min"], row[f"{name}_max"] = g[c].min(), g[c].max()
        out.append(row)
    return pd.DataFrame(out)


def per_node_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per setting and node: the fraction of samples with each concept right (mean over seeds)."""
    import pandas as pd

    from anchorlab.tasks.concepts.render import NODES, describe

    rows = []
    for setting, g in df.groupby("setting", sort=False):
        for node in NODES:
            if f"final.shape_acc_{node}" not in g:
                continue
            row = {"setting": setting, "node": node, "description": describe(node),
                   **{f"{k}_acc": g[f"final.{k}_acc_{node}"].mean() for k in ("shape", "size", "color", "all")}}
            if f"final.object_rate_{node}" in g:  # runs evaluated before the classifier's object output have none
                row["object_rate"] = g[f"final.object_rate_{node}"].mean()
            rows.append(row)
    return pd.DataFrame(rows)


def grid_samples(df: pd.DataFrame, out: Path) -> dict[str, np.ndarray]:
    """Setting -> (8, GRID_SAMPLES, 3, H, W): fresh samples of every node from the setting's first seed."""
    from anchorlab.io import atomic_write
    from anchorlab.tasks.concepts.render import NODES
    from anchorlab.train import load_run

    samples = {}
    for setting, g in df.groupby("setting", sort=False):
        r = g.sort_values("train.init_seed").iloc[0]
        path = out / "samples" / f"{r.run_id}.npz"
        if not path.exists():
            run = load_run(r.run_dir)
            x = run.task.generate(run.model, NODES, GRID_SAMPLES).numpy()
            atomic_write(path, lambda p, x=x: np.savez_compressed(open(p, "wb"), x=x))
        samples[setting] = np.load(path)["x"]
    return samples


def make_fig6(sweep_dir: Path, out: Path, scale: str) -> Made:
    from anchorlab.papers.plots.concepts import plot_sample_grid, plot_shape_accuracy, plot_unseen_accuracy
    from anchorlab.plots.save import save_figure
    from anchorlab.tasks.concepts.render import NODES, describe

    df = runs_table(run_table([sweep_dir]))
    tables = {"runs": df.drop(columns=["run_dir"]) if not df.empty else df, "summary": summary_table(df),
              "per_node": per_node_table(df)}
    files = {}
    if df.empty:
        return tables, files
    order = ["000", "100", "001", "111", "010", "011", "101", "110"]
    samples = grid_samples(df, out)
    idx = [NODES.index(n) for n in order]
    grid = plot_sample_grid({s: a[idx] for s, a in samples.items()}, order,
                            [f"{n} {describe(n)}" for n in order], default="default", unseen=UNSEEN)
    files["fig6b.png"] = save_figure(grid, out / "fig6b")[0]
    if HEADLINE in df:   # runs evaluated before the headline existed have only the per-node columns
        files["fig6b_all.png"] = save_figure(plot_unseen_accuracy(df, (HEADLINE, *BESIDE)), out / "fig6b_all")[0]
    files["fig6b_shape.png"] = save_figure(plot_shape_accuracy(df), out / "fig6b_shape")[0]
    return tables, files


def _at(t: pd.DataFrame, which: str, col: str = HEADLINE) -> float:
    if t.empty or col not in t:
        return math.nan
    if which == "default":
        sub = t[t[SCHEME] == "framework_default"]
    else:
        rate = t[t[SCHEME] == "rate"]
        sub = rate[rate[GAMMA] == rate[GAMMA].max()] if len(rate) else rate
    return float(sub[col].mean()) if len(sub) else math.nan


def _trend(t: pd.DataFrame) -> str:
    rate = t[t[SCHEME] == "rate"] if SCHEME in t else t
    if rate.empty or HEADLINE not in rate:
        return "n/a"
    m = rate.groupby(GAMMA)[HEADLINE].mean()
    return " -> ".join(f"{v:.2f}" for v in m.values) + f" (gamma {', '.join(f'{g:g}' for g in m.index)})"


NOTE = ("CPU scale: 32x32 procedural renders (the paper: 5,000 Blender renders, 64x64), a small diffusers U-Net "
        "(channels 16-32-32-32), ~2k Adam steps, DDIM-50 sampling; shape judged by a CNN trained on renders of all "
        "8 nodes. 'default' = the constructors' own init (PyTorch's kaiming_uniform, diffusers keeps it); the init "
        "rates use U(-fan_in^-gamma, fan_in^-gamma), so gamma 0.5 is the same distribution. Needs the diffusion "
        "extra (docs/concepts.md).")

FIG6_CLAIMS = (
    Reading("default init: the unseen nodes 010 (small red circle) and 011 (small blue circle) are drawn wrong "
          "(triangles) -- fraction of their samples with all three concepts right", "low (triangles)",
          lambda t: _at(t["runs"], "default")),
    Reading("largest init rate: 010 and 011 are drawn as small circles of their colour -- fraction with all "
          "three concepts right", "high (circles)", lambda t: _at(t["runs"], "largest")),
    Reading("all-three accuracy on 010 and 011 rises with the init rate", "increasing",
          lambda t: _trend(t["runs"])),
    Reading("the training nodes are drawn right (all three concepts), default init", "(implied)",
          lambda t: _at(t["runs"], "default", "final.id_all_acc")),
    Reading("the training nodes are drawn right (all three concepts), largest init rate", "(implied)",
          lambda t: _at(t["runs"], "largest", "final.id_all_acc")),
)

register(Figure(
    id="journal-fig6", cids=("C12",), paper="journal", number="Fig. 6B",
    shows="concept-graph diffusion: samples of the unseen nodes 010/011 turn from triangles into circles as the "
          "init rate grows (default init marked)",
    sweeps={"cpu": "concepts_fig6_cpu", "paper": "concepts_fig6_paper"}, make=make_fig6, readings=FIG6_CLAIMS,
    notes=NOTE, extra="diffusion"))


def _rate_mean(t: pd.DataFrame, gamma: float | None) -> float:
    """Mean headline of the rate runs at ``gamma`` (None: the largest gamma)."""
    rate = t[t[SCHEME] == "rate"] if not t.empty and HEADLINE in t else t.iloc[0:0]
    if rate.empty:
        return math.nan
    sub = rate[rate[GAMMA] == (rate[GAMMA].max() if gamma is None else gamma)]
    return float(sub[HEADLINE].mean()) if len(sub) else math.nan


def noise_floor(t: pd.DataFrame) -> float:
    """|mean headline at the default init - at gamma 0.5 (uniform)|: two inits of the same distribution, so
    any difference is seed noise (NaN without both)."""
    return abs(_at(t, "default") - _rate_mean(t, 0.5))


def seed_spread(t: pd.DataFrame) -> float:
    """The headline's standard deviation over seeds, averaged over settings."""
    if t.empty or HEADLINE not in t:
        return math.nan
    return float(t.groupby("setting")[HEADLINE].std().mean())


def diff_se(t: pd.DataFrame) -> float:
    """Standard error of the difference of two settings' mean headlines from the seed spread:
    :func:`seed_spread` x sqrt(2 / seeds per setting). The noise floor is one draw of such a difference (of
    two settings with the same distribution), so it is itself noisy; this is its expected scale."""
    if t.empty or HEADLINE not in t:
        return math.nan
    n = float(t.groupby("setting")[HEADLINE].count().mean())
    return seed_spread(t) * math.sqrt(2.0 / n) if n > 1 else math.nan


register(Figure(
    id="journal-fig6-seeds", cids=("C12",), paper="journal", number="Fig. 6B",
    shows="concept-graph diffusion with the authors' multiplicative conditioning and size code, four seeds per "
          "init: all-three accuracy on 010/011 vs init rate, against the noise floor (default vs gamma 0.5, "
          "the same distribution)",
    sweeps={"cpu": "concepts_seeds_cpu", "paper": "concepts_fig6_paper"}, make=make_fig6,
    readings=FIG6_CLAIMS + (
        Reading("noise floor: |default - gamma 0.5| in all-three accuracy on 010/011 (the same distribution)",
              "(not measured)", lambda t: noise_floor(t["runs"])),
        Reading("seed spread: std over seeds of all-three accuracy on 010/011 (mean over settings)",
              "(not measured)", lambda t: seed_spread(t["runs"])),
        Reading("standard error of a difference of two settings' means (seed spread x sqrt(2 / seeds))",
              "(not measured)", lambda t: diff_se(t["runs"])),
        Reading("all-three accuracy on 010/011, largest init rate minus gamma 0.5 (compare with the noise floor)",
              "> 0 (circles at small init)", lambda t: _rate_mean(t["runs"], None) - _rate_mean(t["runs"], 0.5)),
    ),
    notes=NOTE + " This figure: model.cond=multiplicative, task.size_code=authors, four seeds per init.",
    extra="diffusion"))

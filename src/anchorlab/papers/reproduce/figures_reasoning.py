"""The journal's reasoning checks: addition with a held-out square (Fig. 7C) and PrOntoQA (Fig. 7E)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.papers.reproduce.figures_realtasks import SETTING_NAMES, knob_effect, setting_names
from anchorlab.sweep.runtable import history_table
from anchorlab.papers.runs import run_table
from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register

if TYPE_CHECKING:
    import pandas as pd

PRONTOQA_THRESHOLD = 0.99   # train label accuracy that counts as converged (the sweeps' stop rule)
N_TRAIN = "task.n_train"    # the training-set size the PrOntoQA figures are drawn against


# --------------------------------------------------------------------------- Fig. 7C
def addition_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per addition run of a run table (:func:`anchorlab.sweep.runtable.run_table`) under the run
    table's names: ``model.arch``, ``setting``, ``init.gamma``, ``optim.weight_decay``, ``seed``,
    ``task.digit_order``, ``status``, ``steps``, the ``final.*`` metrics."""
    import pandas as pd

    if not len(rows):
        return pd.DataFrame()
    df = pd.DataFrame({"run_id": rows.run_id, "run_dir": rows.run_dir, "model.arch": rows["model.arch"],
                       "init.gamma": rows["init.gamma"], "optim.weight_decay": rows["optim.weight_decay"],
                       "seed": rows.seed, "task.digit_order": rows["task.digit_order"],
                       "status": rows.status, "steps": rows.steps,
                       **{c: rows[c] for c in rows.columns if c.startswith("final.")},
                       "wall_seconds": rows.wall_seconds}).reset_index(drop=True)
    df.insert(2, "setting", setting_names(df["init.gamma"], df["optim.weight_decay"]))
    return df


def make_addition(sweep_dir: Path, out: Path, scale: str) -> Made:
    """Runs table, every run's (a, b) grid decoded from its final weights, accuracy per split, and the
    heatmaps (one panel per arch x setting, mean over seeds)."""
    import pandas as pd

    from anchorlab.analysis.reasoning import grid_mean, split_summary
    from anchorlab.plots.save import save_figure
    from anchorlab.plots.reasoning import plot_addition_heatmaps
    from anchorlab.tasks.seq2seq.addition import grid_predictions
    from anchorlab.train import load_run

    runs = addition_runs(run_table([sweep_dir]))
    grids, summaries = [], []
    for _, r in runs.iterrows():
        run = load_run(r.run_dir)
        g = grid_predictions(run.model, run.cfg.task)
        g.insert(0, "run_id", r.run_id)
        grids.append(g)
        s = split_summary(g)
        summaries.append(s.assign(run_id=r.run_id, **{"model.arch": r["model.arch"]}, setting=r.setting,
                                  seed=r.seed))
    tables = {"runs": runs.drop(columns="run_dir") if len(runs) else runs}
    files: dict[str, Path] = {}
    if grids:
        tables["split_accuracy"] = pd.concat(summaries, ignore_index=True)
        meta = runs.set_index("run_id")[["model.arch", "setting"]]
        all_grids = pd.concat(grids, ignore_index=True).join(meta, on="run_id")
        tables["grid"] = all_grids.drop(columns=["target"])
        panels = {f"{arch}, {setting} ({g.run_id.nunique()} seeds)": grid_mean([g])
                  for (arch, setting), g in all_grids.groupby(["model.arch", "setting"], sort=True)}
        ood = all_grids[all_grids.split == "ood"]
        square = (int(ood.a.min()), int(ood.a.max()))
        files["fig7c.png"] = save_figure(plot_addition_heatmaps(panels, square, ncols=2), out / "fig7c")[0]
    return tables, files


def _split_acc(t: pd.DataFrame, small: bool, split: str) -> float:
    if t is None or t.empty:
        return math.nan
    sub = t[(t.setting == SETTING_NAMES[small]) & (t.split == split)]
    return float(sub.accuracy.mean()) if len(sub) else math.nan


def _addition_wins(t: pd.DataFrame) -> float:
    """Fraction of architectures where small init + large wd has the higher mean accuracy in the square."""
    if t is None or t.empty:
        return math.nan
    g = t[t.split == "ood"].groupby(["model.arch", "setting"]).accuracy.mean().unstack()
    if g.shape[1] < 2:
        return math.nan
    return float((g[SETTING_NAMES[True]] > g[SETTING_NAMES[False]]).mean())


def _square_effect(t: pd.DataFrame, knob: str) -> float:
    """One knob's effect on accuracy in the held-out square, from the 2x2 cells (NaN without them)."""
    if t is None or t.empty:
        return math.nan
    return knob_effect(t[t.split == "ood"], "accuracy", knob)


ADDITION_CLAIMS = (
    Reading("small init + large wd generalizes into the held-out square (fraction of models where it beats "
          "large init + small wd there)", "1.0 (both models)", lambda t: _addition_wins(t.get("split_accuracy"))),
    Reading("accuracy in the square, small init + large wd (mean over models and seeds)", "good rule generalization",
          lambda t: _split_acc(t.get("split_accuracy"), True, "ood")),
    Reading("accuracy in the square, large init + small wd", "fails to generalize perfectly (< 1)",
          lambda t: _split_acc(t.get("split_accuracy"), False, "ood")),
    Reading("ID accuracy (held-out problems outside the square), large init + small wd", "(fits)",
          lambda t: _split_acc(t.get("split_accuracy"), False, "id")),
)
KNOB_NOTE = ("the 2x2 of init rate x weight decay: the paper's two settings are its diagonal, the off-diagonal "
             "cells (small init + small wd, large init + large wd) change one knob at a time")

register(Figure(
    id="journal-fig7c", cids=("C10",), paper="journal", number="Fig. 7C",
    shows="addition a + b (0..99) with the square 40..60 held out: accuracy per (a, b), two settings, two models",
    sweeps={"cpu": "addition_cpu", "paper": "addition_paper"}, make=make_addition, readings=ADDITION_CLAIMS,
    notes="CPU scale: width-128 models, 60 epochs of the 8,603 training problems, two seeds; the paper's sizes and "
          "schedule are not given (docs/reasoning_tasks.md)."))

register(Figure(
    id="journal-fig7c-knobs", cids=("C10",), paper="journal", number="Fig. 7C",
    shows="addition with the held-out square over the 2x2 of init rate x weight decay: which knob carries the "
          "effect",
    sweeps={"cpu": "addition_knobs_cpu", "paper": "addition_knobs_paper"}, make=make_addition,
    readings=ADDITION_CLAIMS + (
        Reading("accuracy in the square, effect of init alone (small minus large init at fixed wd)",
              "(not separated in the paper)", lambda t: _square_effect(t.get("split_accuracy"), "init")),
        Reading("accuracy in the square, effect of wd alone (large minus small wd at fixed init)",
              "(not separated in the paper)", lambda t: _square_effect(t.get("split_accuracy"), "wd")),
    ),
    notes=f"As journal-fig7c, over {KNOB_NOTE}; three seeds (docs/reasoning_tasks.md)."))


# --------------------------------------------------------------------------- Fig. 7E
def make_prontoqa(sweep_dir: Path, out: Path, scale: str) -> Made:
    """Convergence (epochs to train accuracy >= the threshold), generalization error and test accuracy per
    hop count, per run, beside the run table's ``task.n_train``, ``init.gamma``, ``optim.weight_decay`` and
    ``train.init_seed``; the figure draws them against the training-set size."""
    from anchorlab.analysis.reasoning import convergence_table
    from anchorlab.plots.save import save_figure
    from anchorlab.plots.reasoning import plot_prontoqa

    rows = run_table([sweep_dir])
    conv = convergence_table(rows, history_table([sweep_dir]), "train_acc", PRONTOQA_THRESHOLD)
    if conv.empty:
        return {"runs": conv}, {}
    conv.insert(0, "setting", setting_names(conv["init.gamma"], conv["optim.weight_decay"]))
    conv["cap_epoch"] = rows["train.epochs"].to_numpy()
    hop_cols = sorted(c for c in conv.columns if c.startswith("test_acc/hop"))
    hops = conv.melt(id_vars=["setting", N_TRAIN, "train.init_seed"], value_vars=hop_cols, var_name="hop",
                     value_name="accuracy")
    hops["hop"] = hops.hop.str.extract(r"hop(\d+)_at", expand=False).astype(int)
    fig = plot_prontoqa(conv, hops, size_col=N_TRAIN)
    return {"runs": conv, "hops": hops}, {"fig7e.png": save_figure(fig, out / "fig7e")[0]}


def _per_size(t: pd.DataFrame, col: str, fill_cap: bool = False) -> pd.DataFrame:
    v = t[col].fillna(t.cap_epoch) if fill_cap else t[col]
    return t.assign(v=v).groupby([N_TRAIN, "setting"]).v.mean().unstack()


def _frac_sizes(t: pd.DataFrame, col: str, fill_cap: bool = False) -> float:
    """Fraction of training-set sizes where small init + large wd has the lower ``col`` (mean over seeds)."""
    if t is None or t.empty:
        return math.nan
    g = _per_size(t, col, fill_cap)
    if g.shape[1] < 2:
        return math.nan
    return float((g[SETTING_NAMES[True]] < g[SETTING_NAMES[False]]).mean())


def _large_init_rise_then_fall(t: pd.DataFrame) -> float | str:
    """For large init + small wd: 1.0 if the epochs to converge peak strictly inside the size range."""
    if t is None or t.empty:
        return math.nan
    g = _per_size(t, "converged_epoch", True)
    if SETTING_NAMES[False] not in g or len(g) < 3:
        return "needs >= 3 sizes"
    s = g[SETTING_NAMES[False]].to_numpy()
    k = int(s.argmax())
    return float(0 < k < len(s) - 1)


PRONTOQA_CLAIMS = (
    Reading("small init + large wd converges faster (fraction of data sizes; never-converged runs count at the "
          "cap)", "1.0 (every size)", lambda t: _frac_sizes(t.get("runs"), "converged_epoch", True)),
    Reading("small init + large wd has the smaller generalization error (fraction of data sizes)",
          "1.0 (every size)", lambda t: _frac_sizes(t.get("runs"), "gen_error")),
    Reading("large init + small wd: epochs to converge first rise, then fall with data size", "qualitative",
          lambda t: _large_init_rise_then_fall(t.get("runs"))),
)

PRONTOQA_WITHDRAWN = ("At CPU scale the comparison is withdrawn: no setting of the probe (both settings x label or "
                      "proof target, i.i.d. split, 8,000 questions) answers one-hop test questions above chance "
                      "(0.44-0.54; the comparison needs >= 0.7), so these figures compare models that fail "
                      "(docs/reasoning_tasks.md, docs/figures/prontoqa_probe_cpu.csv).")

register(Figure(
    id="journal-fig7e", cids=("C13",), paper="journal", number="Fig. 7E",
    shows="PrOntoQA true/false: convergence epochs and generalization error vs training-set size, two settings",
    sweeps={"cpu": "prontoqa_cpu", "paper": "prontoqa_paper"}, make=make_prontoqa, readings=PRONTOQA_CLAIMS,
    notes="CPU scale: a 4-layer width-64 GPT-2-style model, hops 1..3 on depth-3 ontologies, two seeds; the "
          "paper: GPT-2 on the original PrOntoQA setup. " + PRONTOQA_WITHDRAWN))


def _best_hop1(t: pd.DataFrame) -> float:
    """The best setting's mean one-hop test accuracy (at convergence, else at the end)."""
    if t is None or t.empty or "test_acc/hop1_at" not in t:
        return math.nan
    return float(t.groupby("setting")["test_acc/hop1_at"].mean().max())


register(Figure(
    id="journal-fig7e-knobs", cids=("C13",), paper="journal", number="Fig. 7E",
    shows="PrOntoQA on the i.i.d. split over the 2x2 of init rate x weight decay: does any setting learn, and "
          "which knob carries the difference",
    sweeps={"cpu": "prontoqa_knobs_cpu", "paper": "prontoqa_knobs_paper"}, make=make_prontoqa,
    readings=PRONTOQA_CLAIMS + (
        Reading("one-hop i.i.d. test accuracy of the best setting (the comparison needs >= 0.7)",
              "(GPT-2 learns the task)", lambda t: _best_hop1(t.get("runs"))),
        Reading("test accuracy, effect of init alone (small minus large init at fixed wd)",
              "(not separated in the paper)", lambda t: knob_effect(t.get("runs"), "test_at", "init")),
        Reading("test accuracy, effect of wd alone (large minus small wd at fixed init)",
              "(not separated in the paper)", lambda t: knob_effect(t.get("runs"), "test_at", "wd")),
    ),
    notes=f"CPU scale: the journal-fig7e model on the i.i.d. split (task.test_split: iid), 8,000 questions, "
          f"{KNOB_NOTE}; three seeds. " + PRONTOQA_WITHDRAWN))

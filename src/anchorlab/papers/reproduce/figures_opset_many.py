"""The headline over many op sets, and which op-set property predicts the small init composing.

Sweep preset ``opset_many_cpu``: ``random_op_sets(12, seed=0)`` (the Fig. 2 cell's three op sets first) x paper
gamma 0.3 / 0.8 x one peak (1.77e-4) x seeds 0-1 at 1/2x the paper's clock. The committed Fig. 2 cell table holds
11 of its runs (``--from-table docs/figures/fig2_cell_cpu.csv``). The maker writes::

    runs.csv          one row per run (:func:`anchorlab.papers.eval.crossing.crossing_rows`)
    op_sets.csv       one row per op set: properties, outcomes per init, the papers' cell at the one peak, by at
                      least half of the runs whether the small init composes, the large init memorizes, the contrast
                      holds, and whether its runs are all done (``small_done``, ``done``: RUNS_PER_INIT each)
    properties.csv    per property: AUC for the small init composing over the op sets whose small-init runs are all
                      done, bootstrap interval over op sets, n_op_sets
    answers.csv       per run: what it answers on the held-out pair (as in ``study-opset-cross``)
    outcome_vs_property.png   each small-init run's outcome against the property with the AUC farthest from 0.5
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register

if TYPE_CHECKING:
    import pandas as pd

RUNS_PER_INIT = 2   # the preset's seeds: an op set's reading counts once both seeds of an init are in
N_OP_SETS = 12      # the preset's op sets: random_op_sets(N_OP_SETS, seed=0)


def make_many(rows: pd.DataFrame, out: Path, scale: str, id_min: float = 0.9, threshold: float = 0.5) -> Made:
    """The run table -> the tables and files of the module docstring."""
    from anchorlab.papers.eval.crossing import crossing_rows, op_set_outcomes
    from anchorlab.papers.plots.opset import plot_outcome_vs_property
    from anchorlab.plots.save import save_figure
    from anchorlab.papers.runs import rows_answers, rows_curves

    rows = rows[rows.op_set.astype(str) != ""]
    curves = rows_curves(rows)
    runs = crossing_rows(rows, curves, id_min, threshold)
    ops = op_set_outcomes(runs, per_init=RUNS_PER_INIT)
    aucs = property_aucs(ops[ops.small_done])
    files: dict[str, Path] = {}
    first = aucs[(aucs.label == "small_composes") & aucs.auc.notna()]
    if len(first):
        best = first.iloc[0]
        prop = str(best.property)
        fig = plot_outcome_vs_property(with_property(runs, ops, prop), prop, float(best.auc))
        files["outcome_vs_property.png"] = save_figure(fig, out / "outcome_vs_property", formats=("png",), dpi=120)[0]
    return {"runs": runs, "op_sets": ops, "properties": aucs, "curves": curves, "answers": rows_answers(rows)}, files


def with_property(runs: pd.DataFrame, op_sets: pd.DataFrame, prop: str) -> pd.DataFrame:
    """``runs`` with column ``prop``: a run column already, or an op-set property (``small_fit_steps``,
    ``abs_offset``) taken from ``op_sets`` by op set."""
    return runs if prop in runs else runs.merge(op_sets[["op_set", prop]], on="op_set", how="left")


def property_aucs(op_sets: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per property of :data:`PROPERTIES` and per label (``small_composes``, ``small_composes_on_way``): the AUC of the
    property for the label over op sets, with a bootstrap interval that resamples op sets within each class
    (:func:`anchorlab.papers.analysis.auc.bootstrap_auc`); ``n_op_sets`` and ``n_positive`` say what it rests on. AUC > 0.5:
    larger values go with composing. Rows sorted by label, then by distance from 0.5."""
    import pandas as pd

    from anchorlab.papers.analysis.auc import bootstrap_auc
    from anchorlab.papers.eval.crossing import PROPERTIES

    rows = []
    for label in ("small_composes", "small_composes_on_way"):
        for p in PROPERTIES:
            ok = op_sets[p].notna()
            y = op_sets.loc[ok, label].astype(bool)
            auc, lo, hi = bootstrap_auc(op_sets.loc[ok, p].to_numpy(float), y.to_numpy(), n_boot=n_boot, seed=seed)
            rows.append({"property": p, "label": label, "auc": auc, "auc_lo": lo, "auc_hi": hi,
                         "n_op_sets": int(ok.sum()), "n_positive": int(y.sum())})
    t = pd.DataFrame(rows)
    return (t.assign(_d=-(t.auc - 0.5).abs()).sort_values(["label", "_d"], kind="stable")
            .drop(columns="_d").reset_index(drop=True))


def run_fit_auc(runs: pd.DataFrame, small: float = 0.8, n_boot: int = 1000,
                seed: int = 0) -> tuple[float, float, float, int, int]:
    """Per run instead of per op set: (auc, lo, hi, n_runs, n_composing) of a small-init run's steps to ID 0.9
    for its composing (final, fitted), over its runs that fit, with the bootstrap over runs. Seeds of one op set
    can differ here, which an op-set property cannot see."""
    from anchorlab.papers.analysis.auc import bootstrap_auc

    r = runs[(runs.paper_gamma.round(6) == round(small, 6)) & runs.steps_to_id_fit.notna()]
    y = (r.outcome == "composes").to_numpy()
    auc, lo, hi = bootstrap_auc(r.steps_to_id_fit.to_numpy(float), y, n_boot=n_boot, seed=seed)
    return auc, lo, hi, len(r), int(y.sum())


def _run_fit(t: pd.DataFrame) -> str:
    auc, lo, hi, n, k = run_fit_auc(t["runs"])
    return (f"AUC {auc:.2f} [{lo:.2f}, {hi:.2f}] over {n} fitted small-init runs ({k} compose)" if auc == auc
            else f"n/a (one class among {n} fitted runs)")


def _of(t: pd.DataFrame, col: str) -> str:
    """``col`` counted over the op sets whose runs are all done; the rest named as pending."""
    o = t["op_sets"]
    done = o[o.done]
    pending = len(o) - len(done)
    if not len(done):
        return f"n/a ({pending} op sets pending)"
    return f"{int(done[col].sum())} of {len(done)}" + (f" ({pending} more op sets pending)" if pending else "")


def per_run_rate(runs: pd.DataFrame, gamma: float, outcome: str) -> str:
    """The per-run rate: runs at ``gamma`` whose outcome is ``outcome``, over every op set with runs."""
    r = runs[runs.paper_gamma.round(6) == round(gamma, 6)]
    return f"{int((r.outcome == outcome).sum())} of {len(r)} runs" if len(r) else "n/a"


def _per_run(t: pd.DataFrame, gamma: float, outcome: str) -> str:
    return per_run_rate(t["runs"], gamma, outcome)


def _scored(properties: pd.DataFrame, label: str = "small_composes") -> pd.DataFrame:
    """The property AUCs of ``label`` that exist (an AUC needs both outcomes among the op sets)."""
    return properties[(properties.label == label) & properties.auc.notna()]


def _best(t: pd.DataFrame) -> str:
    a = _scored(t["properties"])
    if not len(a):
        return "n/a (one class only)"
    r = a.iloc[0]
    return f"{r.property}: AUC {r.auc:.2f} [{r.auc_lo:.2f}, {r.auc_hi:.2f}] over {r.n_op_sets} op sets"


def kind(properties: pd.DataFrame, label: str = "small_composes", with_auc: bool = True,
         with_fit: bool = True) -> str:
    """Which kind of op set the small init composes on, from the property AUCs: the properties known before training
    whose bootstrap interval excludes one half, with their direction, else that none does; then (``with_fit``) the
    fit time's reading (``small_fit_steps``), which is known only from training. ``with_auc=False``: the phrases
    alone."""
    from anchorlab.papers.eval.crossing import BEFORE_TRAINING, PROPERTY_WORDS

    a = _scored(properties, label).set_index("property")

    def clear(p: str) -> bool:
        return not a.loc[p].auc_lo <= 0.5 <= a.loc[p].auc_hi

    def said(p: str) -> str:
        r = a.loc[p]
        words = PROPERTY_WORDS[p][0 if r.auc > 0.5 else 1]
        return f"{words} (AUC {r.auc:.2f} [{r.auc_lo:.2f}, {r.auc_hi:.2f}])" if with_auc else words

    if not len(a):
        return "n/a (one class only)"
    before = [p for p in BEFORE_TRAINING if p in a.index and clear(p)]
    n = int(a.n_op_sets.max())
    text = (f"before training, {' and '.join(said(p) for p in before)}" if before
            else "no property known before training clear of chance")
    if with_fit and "small_fit_steps" in a.index:
        fit = said("small_fit_steps")
        text += f"; from training, {fit}" + ("" if clear("small_fit_steps") else ", not clear of chance")
    return f"{text}; over {n} op sets" if with_auc else text


register(Figure(
    id="study-opset-many", cids=("C1",), paper="study", number="many op sets",
    shows="the contrast (large init memorizes, small init composes) over 12 random op sets at paper gamma 0.3 / 0.8, "
          "and which op-set property predicts the small init composing (AUC over op sets)",
    sweeps={"cpu": "opset_many_cpu"},
    tables=make_many,
    design_only=True,   # the Fig. 2 cell's table also holds runs at other peaks, clocks and gammas
    readings=(
        Reading("op sets where the contrast holds (in at least half of the runs: large init memorizes, small init composes)",
              "the papers' one op set: holds", lambda t: _of(t, "contrast")),
        Reading("op sets where the contrast holds in every run (each small-init run composes, each large-init run "
              "memorizes)", "the papers' one op set: holds", lambda t: _of(t, "contrast_every_run")),
        Reading("op sets where the small init composes (at least half of its runs, final, fitted)", "the papers' one: yes",
              lambda t: _of(t, "small_composes")),
        Reading("op sets where the large init memorizes (at least half of its runs)", "the papers' one: yes",
              lambda t: _of(t, "large_memorizes")),
        Reading("per run: small-init runs that compose (final, fitted)", "near all (the papers' op set)",
              lambda t: _per_run(t, 0.8, "composes")),
        Reading("per run: large-init runs that memorize", "near all (the papers' op set)",
              lambda t: _per_run(t, 0.3, "memorizes")),
        Reading("the op-set property that best predicts the small init composing", "not in the papers", _best),
        Reading("the kind of op set the small init composes on (properties whose bootstrap interval excludes one half)",
              "not in the papers", lambda t: kind(t["properties"])),
        Reading("per run: how well a small-init run's steps to fit the seen pairs predict its composing (AUC above "
              "one half: the slower fits compose)",
              "not in the papers", _run_fit),
    ),
    notes="CPU scale: the Fig. 2 cell's setting at 1/2x the paper's clock, one peak (1.77e-4), 2 seeds: 48 runs "
          "(~8 h on two cores in bf16; 11 are in the committed Fig. 2 cell table)."))

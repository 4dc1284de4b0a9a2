"""Why the op set decides: the op-set crossing, judged by the rule written before its runs.

The papers' op set composed under the small init at CPU scale where two other op sets memorized. Each of those
differs from the papers' in its steps and in its held-out pair; the crossing (sweep preset ``opset_cross_cpu``)
swaps them: O1 keeps the papers' steps with (3,2) held out, O2 the (3,2) op set's steps with (4,2) held out.
:mod:`anchorlab.papers.eval.crossing` holds the hypotheses, the rule and the per-run readings. The maker reads one run
table (``out/sweep`` and any ``--from-table`` CSVs, their ``X_curves.csv`` and ``X_answers.csv`` beside them) and
writes::

    runs.csv        one row per run: op set, paper gamma, peak lr, seed, ID, each mapping's final and best accuracy,
                    the step ID first reaches 0.9, the held-out pair's answers there, the mirror's takeover, the
                    run's outcome, the op set's properties (step gap, offset over the steps' spread, ...)
    counts.csv      per op set and paper gamma: runs, unfit, memorize, compose (final / on the way), median fit step
    verdict.csv     each op set's reading and the hypothesis the rule supports (``pending`` until 9 runs each)
    answers.csv     per run: what it answers on the held-out pair, each answer named (composition, mirror, another
                    trained pair's target, other; :mod:`anchorlab.analysis.answers`, from the final weights)
    curves.csv, curves.png   the trajectories
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.tasks.anchor.opsets import OpSet
from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register, value

if TYPE_CHECKING:
    import pandas as pd

O1 = OpSet({1: 5, 2: 1, 3: -2, 4: -8}, (3, 2), -5)
O2 = OpSet({1: -2, 2: 3, 3: 1, 4: -5}, (4, 2), 3)
def make_cross(rows: pd.DataFrame, out: Path, scale: str, id_min: float = 0.9, threshold: float = 0.5) -> Made:
    """The run table -> the tables and files of the module docstring."""
    import pandas as pd

    from anchorlab.papers.eval.crossing import crossing_rows, crossing_verdict, op_set_counts
    from anchorlab.papers.plots.headline import drawn_runs, plot_curves
    from anchorlab.plots.save import save_figure
    from anchorlab.papers.runs import rows_answers, rows_curves

    curves = rows_curves(rows)
    runs = crossing_rows(rows, curves, id_min, threshold)
    answers = rows_answers(rows)
    counts = op_set_counts(runs, id_min, threshold)
    timing = runs.groupby(["op_set", "paper_gamma"]).agg(
        median_steps_to_id_fit=("steps_to_id_fit", "median"), mean_inferential_at_fit=("inferential_at_fit", "mean"),
        n_fitted_ever=("steps_to_id_fit", "count")).reset_index()
    counts = counts.merge(timing, on=["op_set", "paper_gamma"])
    names = {O1.label: "O1", O2.label: "O2"}
    counts.insert(0, "name", counts.op_set.map(names).fillna(""))
    v = crossing_verdict(runs, O1.label, O2.label, id_min=id_min, threshold=threshold)
    verdict = pd.DataFrame([{"O1": O1.label, "O1_reading": v["O1"], "O2": O2.label, "O2_reading": v["O2"],
                             "verdict": v["verdict"], "still_possible": v["still_possible"]}])
    files: dict[str, Path] = {}
    drawn = runs.assign(n_layers=2, devices=runs.device.fillna("cpu").astype(str).str.split(":").str[0])
    if len(curves) and len(drawn_runs(drawn, curves)):
        files["curves.png"] = save_figure(plot_curves(drawn, curves), out / "curves", formats=("png",), dpi=110)[0]
    return {"runs": runs, "counts": counts, "verdict": verdict, "curves": curves, "answers": answers}, files


def _borrowed(t: pd.DataFrame, op: OpSet) -> str:
    a, r = t["answers"], t["runs"]
    if not len(a):
        return "n/a (no answers table)"
    small = set(r.run_id[(r.op_set == op.label) & (r.paper_gamma.round(6) == 0.8)])
    a = a[a.run_id.isin(small)]
    return f"{int((a.top_kind == 'trained target').sum())} of {len(a)}" if len(a) else "n/a"


def _count(t: pd.DataFrame, op: OpSet, col: str) -> str:
    c = t["counts"]
    c = c[(c.op_set == op.label) & (c.paper_gamma.round(6) == 0.8)]
    return f"{int(c[col].iloc[0])} of {int(c.n_runs.iloc[0])}" if len(c) else "n/a"


register(Figure(
    id="study-opset-cross", cids=("C1",), paper="study", number="op-set crossing",
    shows="small init (paper gamma 0.8) on two crossed op sets (the papers' steps with (3,2) held out; the (3,2) "
          "op set's steps with (4,2) held out): which op-set property makes it memorize",
    sweeps={"cpu": "opset_cross_cpu"},
    tables=make_cross,
    readings=(
        Reading("O1 (papers' steps, (3,2) held out, gap 3): small-init runs that end on the mirror", "not in the papers",
              lambda t: _count(t, O1, "n_memorize")),
        Reading("O2 ((3,2) op set's steps, (4,2) held out, gap 8): small-init runs that end on the mirror",
              "not in the papers", lambda t: _count(t, O2, "n_memorize")),
        Reading("O1: small-init runs reaching inferential >= 0.5 at some evaluation", "not in the papers",
              lambda t: _count(t, O1, "n_compose_on_way")),
        Reading("O2: small-init runs reaching inferential >= 0.5 at some evaluation", "not in the papers",
              lambda t: _count(t, O2, "n_compose_on_way")),
        Reading("O2: small-init runs whose most frequent answer is another trained pair's target", "not in the papers",
              lambda t: _borrowed(t, O2)),
        Reading("the hypothesis the rule supports (eval.crossing)", "H1 gap / H2-H4 offset, clock / H3 mirror farther",
              lambda t: str(t["verdict"].verdict.iloc[0])),
        Reading("large init (paper gamma 0.3) control: mean final symmetric accuracy", "memorizes (the papers' op set)",
              lambda t: value(t["runs"], "final.ood_symmetric_acc", {"paper_gamma": 0.3})),
    ),
    notes="CPU scale: the Fig. 2 cell's setting (width 128 at the paper's std, init.ref_width 400) at 1/2x the paper's "
          "clock; paper gamma 0.8 at the three range peaks, 0.3 at 1.77e-4; seeds 0-2 (24 runs, ~20 min each on one "
          "core in bf16)."))

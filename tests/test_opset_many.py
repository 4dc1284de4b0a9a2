"""The many-op-set study: its preset is the generator's first 12 op sets; op-set outcomes and property AUCs."""

import math

import pandas as pd
import yaml

from anchorlab.papers.eval.crossing import op_set_outcomes
from anchorlab.papers.reproduce.figures_opset_many import (N_OP_SETS, RUNS_PER_INIT, _of, _per_run, property_aucs, run_fit_auc,
                                                    with_property)
from anchorlab.sweep.grid import resolve_sweep
from anchorlab.tasks.anchor.opsets import OpSet, random_op_sets


def test_the_preset_holds_the_generators_first_twelve_op_sets():
    spec = yaml.safe_load(resolve_sweep("opset_many_cpu").read_text())
    group = next(g for g in spec["zip"] if "task.anchors" in g)
    ops = random_op_sets(N_OP_SETS, seed=0)
    assert len(group["task.anchors"]) == N_OP_SETS
    assert [dict(a) for a in group["task.anchors"]] == [o.anchors for o in ops]
    assert group["task.pair_rules"] == [o.task_overrides()["task.pair_rules"] for o in ops]
    seeds = next(g for g in spec["zip"] if "train.init_seed" in g)
    assert len(seeds["train.init_seed"]) == RUNS_PER_INIT     # an op set is done once this many runs per init are in


def _runs(spec):
    """spec: op set -> (gap, small outcomes, large outcomes); one row per run as crossing_rows writes them."""
    rows = []
    for i, (gap, small, large) in enumerate(spec):
        label = OpSet({1: 5, 2: 1, 3: -2, 4: -8 - i}, (4, 3), -6).label
        for g, outs in ((0.8, small), (0.3, large)):
            for o in outs:
                rows.append({"op_set": label, "paper_gamma": g, "outcome": o, "step_gap": gap, "offset_over_sd": 1.0,
                             "mirror_farther": 0.0, "offset": 4.0, "steps_to_id_fit": 1000.0 * gap,
                             "best.ood_inferential_acc": 0.7 if o in ("composes", "composed on the way") else 0.1,
                             "best.ood_symmetric_acc": 0.9 if o == "memorizes" else 0.1})
    return pd.DataFrame(rows)


def test_op_set_outcomes_and_a_property_that_separates_them():
    runs = _runs([(6, ["composes", "composes"], ["memorizes", "memorizes"]),
                  (8, ["composes", "memorizes"], ["memorizes", "neither"]),
                  (2, ["memorizes", "memorizes"], ["memorizes", "memorizes"]),
                  (3, ["unfit", "composed on the way"], ["memorizes", "memorizes"])])
    ops = op_set_outcomes(runs)
    assert list(ops.contrast) == [True, True, False, False]
    assert list(ops.contrast_every_run) == [True, False, False, False]   # 1 of 2 counts as "at least half"
    assert list(ops.small_composes_on_way) == [True, True, False, True]
    assert ops.small_unfit.tolist() == [0, 0, 0, 1]
    a = property_aucs(ops, n_boot=200).set_index(["label", "property"])
    assert a.loc[("small_composes", "step_gap"), "auc"] == 1.0          # gaps 6, 8 compose; 2, 3 do not
    assert a.loc[("small_composes", "small_fit_steps"), "auc"] == 1.0
    assert a.loc[("small_composes", "step_gap"), "n_op_sets"] == 4
    assert math.isnan(a.loc[("small_composes", "offset_over_sd"), "auc"]) is False
    assert a.loc[("small_composes", "offset_over_sd"), "auc"] == 0.5      # the same value everywhere: ties


def test_the_fig2_table_lends_only_its_runs_of_this_design(tmp_path):
    """fig2_cell_cpu.csv holds 262 runs over peaks, clocks and gammas; the study takes the 11 of its own design."""
    from pathlib import Path

    from anchorlab.cli import main

    committed = Path(__file__).resolve().parents[1] / "docs" / "figures" / "fig2_cell_cpu.csv"
    out = tmp_path / "many"
    assert main(["reproduce", "study-opset-many", "--scale", "cpu", "--from-table", str(committed), "--no-train",
                 "--out", str(out)]) == 0
    runs = pd.read_csv(out / "study-opset-many" / "runs.csv")
    assert len(runs) == 11 and set(runs.peak_lr.round(6)) == {1.77e-4} and set(runs.seed) <= {0, 1}
    assert set(runs.paper_gamma) == {0.3, 0.8} and runs.op_set.nunique() == 3
    assert "11 of them are runs of this figure's design (48 runs; 251 others left out)" in (out / "study-opset-many" / "README.md").read_text()
    assert len(pd.read_csv(out / "study-opset-many" / "op_sets.csv")) == 3


def test_an_op_set_property_is_drawn_per_run():
    """The best property may be an op set's (small_fit_steps, abs_offset), not a run column: each run gets its op
    set's value, and the figure draws."""
    from anchorlab.papers.plots.opset import plot_outcome_vs_property

    runs = _runs([(6, ["composes", "composes"], ["memorizes", "memorizes"]),
                  (2, ["memorizes", "unfit"], ["memorizes", "memorizes"])])
    ops = op_set_outcomes(runs)
    for prop in ("small_fit_steps", "abs_offset"):
        assert prop not in runs
        t = with_property(runs, ops, prop)
        assert len(t) == len(runs) and t[prop].notna().all()
        assert t.groupby("op_set")[prop].nunique().max() == 1
        assert plot_outcome_vs_property(t, prop, 1.0).axes
    assert with_property(runs, ops, "step_gap") is runs


def test_an_op_set_still_running_is_pending_not_counted():
    """While the study runs, an op set with one of its two runs per init done is named pending: the claims count
    the finished op sets only, and the property AUCs keep to the op sets whose small-init runs are all done."""
    runs = _runs([(6, ["composes", "composes"], ["memorizes", "memorizes"]),
                  (2, ["memorizes", "memorizes"], ["memorizes", "memorizes"]),
                  (3, ["composes"], ["memorizes"]),                     # half done: would read "holds"
                  (4, ["memorizes", "memorizes"], ["memorizes"])])      # small init done, large pending
    ops = op_set_outcomes(runs, per_init=2)
    assert ops.done.tolist() == [True, True, False, False]
    assert ops.small_done.tolist() == [True, True, False, True]
    assert ops.contrast.tolist() == [True, False, True, False]
    assert _of({"op_sets": ops}, "contrast") == "1 of 2 (2 more op sets pending)"
    assert _of({"op_sets": ops[ops.done]}, "large_memorizes") == "2 of 2"
    assert _of({"op_sets": ops[~ops.done]}, "contrast") == "n/a (2 op sets pending)"
    t = {"op_sets": ops, "runs": runs}
    assert _per_run(t, 0.8, "composes") == "3 of 7 runs"                  # every run counts, done or not
    assert _per_run(t, 0.3, "memorizes") == "6 of 6 runs"
    assert op_set_outcomes(runs).done.all()                             # no design given: every op set counts
    a = property_aucs(ops[ops.small_done], n_boot=50).set_index(["label", "property"])
    assert a.loc[("small_composes", "step_gap"), "n_op_sets"] == 3


def test_a_runs_own_fit_time_is_read_per_run():
    """run_fit_auc: over the small init's fitted runs, steps to ID 0.9 against composing (seeds of one op set differ)."""
    runs = _runs([(6, ["composes", "memorizes"], []), (2, ["memorizes", "composes"], [])])
    runs["steps_to_id_fit"] = [20000.0, 4000.0, 5000.0, 30000.0]
    auc, lo, hi, n, k = run_fit_auc(runs, n_boot=100)
    assert (auc, n, k) == (1.0, 4, 2) and lo <= auc <= hi
    runs.loc[3, "steps_to_id_fit"] = float("nan")                  # unfit: left out
    runs.loc[0, "steps_to_id_fit"] = 3000.0                        # a fast composer
    auc, _, _, n, k = run_fit_auc(runs, n_boot=0)
    assert (n, k) == (3, 1) and auc == 0.0


def _aucs(rows):
    """rows: property -> (auc, lo, hi) for label small_composes over 9 op sets."""
    return pd.DataFrame([{"property": p, "label": "small_composes", "auc": a, "auc_lo": lo, "auc_hi": hi,
                          "n_op_sets": 9, "n_positive": 5} for p, (a, lo, hi) in rows.items()])


def test_the_kind_names_only_the_properties_clear_of_chance_with_their_direction():
    from anchorlab.papers.reproduce.figures_opset_many import kind

    a = _aucs({"offset_over_sd": (0.1, 0.0, 0.3), "step_gap": (0.6, 0.2, 0.9), "mirror_farther": (0.8, 0.55, 1.0),
               "small_fit_steps": (0.9, 0.7, 1.0)})
    said = kind(a)
    assert said.startswith("before training, a smaller mirror offset over the steps' spread (AUC 0.10 [0.00, 0.30]) "
                           "and the mirror farther from the key")
    assert "step gap" not in said                                 # its interval holds one half
    assert "from training, a slower fit of the seen pairs (AUC 0.90" in said and said.endswith("over 9 op sets")
    assert kind(a, with_auc=False) == ("before training, a smaller mirror offset over the steps' spread and the mirror "
                                       "farther from the key; from training, a slower fit of the seen pairs")
    none = kind(_aucs({"step_gap": (0.6, 0.2, 0.9), "small_fit_steps": (0.7, 0.4, 0.9)}), with_auc=False)
    assert none == ("no property known before training clear of chance; from training, a slower fit of the seen "
                    "pairs, not clear of chance")
    assert kind(_aucs({}).reindex(columns=["property", "label", "auc", "auc_lo", "auc_hi", "n_op_sets"])) \
        == "n/a (one class only)"

"""The crossing study's readings on hand-made tables: fit timing, per-run outcomes, the rule's verdict."""

import math

import pandas as pd
import pytest

from anchorlab.config import ConfigError
from anchorlab.papers.eval.crossing import crossing_verdict, fit_timing, op_set_counts, outcome, reachable_readings


def test_fit_timing_reads_the_fit_and_the_takeover():
    curves = pd.DataFrame({
        "run_id": ["a"] * 5 + ["b"] * 3 + ["c"] * 2,
        "step": [0, 500, 1000, 1500, 2000, 0, 500, 1000, 0, 500],
        "id_acc": [0.1, 0.5, 0.92, 0.97, 0.99, 0.1, 0.95, 0.99, 0.1, 0.4],
        "inferential": [0.0, 0.3, 0.7, 0.4, 0.1, 0.0, 0.1, 0.0, 0.0, 0.6],
        "symmetric": [0.0, 0.1, 0.2, 0.45, 0.8, 0.0, 0.9, 1.0, 0.0, 0.0]})
    t = fit_timing(curves).set_index("run_id")
    assert t.loc["a", "steps_to_id_fit"] == 1000 and t.loc["a", "inferential_at_fit"] == 0.7
    assert t.loc["a", "mirror_takeover_step"] == 2000 and t.loc["a", "takeover_after_fit"] == 1000
    assert t.loc["b", "steps_to_id_fit"] == 500 and t.loc["b", "takeover_after_fit"] == 0
    assert math.isnan(t.loc["c", "steps_to_id_fit"]) and math.isnan(t.loc["c", "mirror_takeover_step"])
    with pytest.raises(ConfigError, match="curves: needs columns"):
        fit_timing(curves.drop(columns="symmetric"))


def test_outcome_never_calls_unfit_not_composing():
    assert outcome(0.81, 0.86, 0.0, 0.9) == "unfit"
    assert outcome(0.95, 0.1, 0.9, 0.7) == "memorizes"
    assert outcome(0.95, 0.7, 0.1, 0.7) == "composes"
    assert outcome(0.95, 0.2, 0.1, 0.7) == "composed on the way"
    assert outcome(0.95, 0.2, 0.1, 0.3) == "neither"


def _runs(o1_mem: int, o1_way: int, o2_mem: int, o2_way: int, n: int = 9) -> pd.DataFrame:
    rows = []
    for label, mem, way in (("O1", o1_mem, o1_way), ("O2", o2_mem, o2_way)):
        for i in range(n):
            m = i < mem
            rows.append({"run_id": f"{label}{i}", "op_set": label, "paper_gamma": 0.8, "final.id_acc": 0.99,
                         "final.ood_symmetric_acc": 0.9 if m else 0.1, "final.ood_inferential_acc": 0.0 if m else 0.3,
                         "best.ood_inferential_acc": 0.6 if i >= n - way else 0.2})
        rows.append({"run_id": f"{label}L", "op_set": label, "paper_gamma": 0.3, "final.id_acc": 1.0,
                     "final.ood_symmetric_acc": 1.0, "final.ood_inferential_acc": 0.0, "best.ood_inferential_acc": 0.0})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("o1_mem,o1_way,o2_mem,o2_way,verdict", [
    (6, 2, 1, 5, "H1 (step gap)"),
    (0, 6, 7, 0, "H2/H4 (offset over spread, clock)"),
    (5, 0, 9, 0, "H3 (mirror farther)"),
    (1, 5, 0, 9, "idiosyncratic (both compose)"),
    (3, 4, 1, 5, "none of the hypotheses"),      # O1 mixed
    (6, 0, 1, 4, "none of the hypotheses"),      # O2 composes on the way in only 4 of 9
])
def test_verdict_follows_the_rule(o1_mem, o1_way, o2_mem, o2_way, verdict):
    assert crossing_verdict(_runs(o1_mem, o1_way, o2_mem, o2_way), "O1", "O2")["verdict"] == verdict


def test_verdict_waits_for_every_run_and_ignores_the_control():
    runs = _runs(6, 0, 0, 9)
    partial = runs[~runs.run_id.isin(["O2_3", "O28"])]
    v = crossing_verdict(partial, "O1", "O2")
    assert v == {"O1": "memorizes", "O2": "pending (8 of 9)", "verdict": "pending",
                 "still_possible": "H1 (step gap)"}      # one O2 run to come cannot make 5 memorize
    c = op_set_counts(runs).set_index(["op_set", "paper_gamma"])
    assert c.loc[("O1", 0.3), "n_memorize"] == 1 and c.loc[("O1", 0.8), "n_memorize"] == 6


def test_reachable_readings_bound_what_the_remaining_runs_can_do():
    assert reachable_readings(0, 6, 3) == {"composes", "mixed"}        # 3 more can reach at most 3 memorizing
    assert reachable_readings(1, 2, 4) == {"memorizes", "composes", "mixed"}
    assert reachable_readings(5, 0, 0) == {"memorizes"}
    assert reachable_readings(2, 9, 0) == {"mixed"}                    # 2 memorize: more than the 1 allowed


def test_a_pending_crossing_says_which_hypotheses_it_already_excludes():
    runs = _runs(0, 9, 1, 1)
    # O1: 6 of 9, none memorizes, all on the way; O2: 5 of 9 (O20 memorizes, O28 on the way)
    partial = runs[~runs.run_id.isin(["O16", "O17", "O18", "O24", "O25", "O26", "O27"])]
    v = crossing_verdict(partial, "O1", "O2")
    assert v["verdict"] == "pending"
    # O1 can no longer memorize (at most 3 of 9), so H1 and H3 are out whatever the rest gives
    assert v["still_possible"] == ("H2/H4 (offset over spread, clock); idiosyncratic (both compose); "
                                   "none of the hypotheses")
    assert crossing_verdict(runs, "O1", "O2")["still_possible"] == crossing_verdict(runs, "O1", "O2")["verdict"]


def test_the_committed_crossing_redraws_with_its_answers(tmp_path):
    """The committed per-run table redraws the study without training: 24 runs, the verdict, and each run's
    answers read from opset_cross_cpu_answers.csv beside it (one row per run, shares summing to one)."""
    from pathlib import Path

    import pandas as pd

    from anchorlab.cli import main

    committed = Path(__file__).resolve().parents[1] / "docs" / "figures" / "opset_cross_cpu.csv"
    out = tmp_path / "cross"
    assert main(["reproduce", "study-opset-cross", "--scale", "cpu", "--from-table", str(committed), "--no-train",
                 "--out", str(out)]) == 0
    runs, answers = pd.read_csv(out / "study-opset-cross" / "runs.csv"), pd.read_csv(out / "study-opset-cross" / "answers.csv")
    assert len(runs) == 24 and set(answers.run_id) == set(runs.run_id) and len(answers) == 24
    kinds = answers[["composition_share", "mirror_share", "trained_target_share", "other_share"]].sum(axis=1)
    assert (kinds - 1).abs().max() < 1e-6
    # the answers agree with each run's own final metrics
    both = runs.merge(answers, on="run_id")
    assert (both.composition_share - both["final.ood_inferential_acc"]).abs().max() < 1e-6
    assert (both.mirror_share - both["final.ood_symmetric_acc"]).abs().max() < 1e-6
    claims = pd.read_csv(out / "study-opset-cross" / "paper_vs_ours.csv").set_index("claim").ours
    assert claims["the hypothesis the rule supports (eval.crossing)"] == "none of the hypotheses"

"""The path draw: each rerun on another bf16 path is paired with its committed autocast twin and judged by the
per-run bars; the count of changed solutions is what it measures."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from anchorlab.config import ConfigError
from anchorlab.papers.eval.path_draw import path_pairs, twins

FIG2 = Path(__file__).resolve().parents[1] / "docs" / "figures" / "fig2_cell_cpu.csv"


def test_twins_are_the_committed_cell_runs_on_the_other_path():
    t = twins("native")
    committed = pd.read_csv(FIG2).set_index("run_id")
    assert len(t) == 9 and t.run_id.is_unique and not set(t.run_id) & set(t.twin_run_id)
    assert set(t.twin_run_id) <= set(committed.index)
    assert (committed.loc[t.twin_run_id, "paper_gamma"] == 0.8).all()
    assert sorted(set(t["optim.peak_lr"])) == [1.25e-4, 1.77e-4, 2.5e-4] and set(t["train.init_seed"]) == {0, 1, 2}
    with pytest.raises(ConfigError, match="train.bf16_path"):
        twins("autocast")


def test_path_pairs_count_a_changed_solution():
    committed = pd.read_csv(FIG2)
    t = twins("native")
    twin = committed.set_index("run_id").loc[t.twin_run_id[:2]]
    cols = ["final.id_acc", "final.ood_inferential_acc", "final.ood_symmetric_acc"]
    reruns = pd.DataFrame({"run_id": t.run_id[:2].tolist(), **{c: twin[c].tolist() for c in cols}})
    reruns.loc[1, cols] = [1.0, 0.0, 0.9]          # the second rerun memorizes
    p = path_pairs(committed, reruns, "native").set_index("run_id")
    first, second = t.run_id[0], t.run_id[1]
    assert p.loc[first, "solution"] == p.loc[first, "twin_solution"] and not p.loc[first, "changed"]
    assert p.loc[second, "solution"] == "memorizes" and p.loc[second, "changed"] == (p.loc[second, "twin_solution"] != "memorizes")
    assert (p.drop(index=[first, second]).solution == "queued").all() and not p.drop(index=[first, second]).changed.any()
    with pytest.raises(ConfigError, match="missing"):
        path_pairs(committed[~committed.run_id.isin(t.twin_run_id[:1])], reruns, "native")


def test_results_caveat_counts_the_changed_runs_of_those_done(monkeypatch):
    """The results page's one-line caveat gives the changed count over the runs done, and how many of nine ran."""
    from anchorlab.papers.docs import c1_scale

    committed = pd.read_csv(FIG2)
    t = twins("native")
    twin = committed.set_index("run_id").loc[t.twin_run_id[:3]]
    cols = ["final.id_acc", "final.ood_inferential_acc", "final.ood_symmetric_acc"]
    reruns = pd.DataFrame({"run_id": t.run_id[:3].tolist(), **{c: twin[c].tolist() for c in cols}})
    changed = [1.0, 0.0, 0.9] if twin.iloc[0]["final.ood_symmetric_acc"] < 0.5 else [1.0, 0.9, 0.0]
    reruns.loc[0, cols] = changed
    monkeypatch.setattr(c1_scale, "table", lambda name: committed if name == "fig2_cell_cpu.csv" else reruns)
    line = c1_scale.c1_path_draw_line()
    assert "1 of 3 of the cell's small-init runs changed solution (3 of 9 re-run); composing: " in line


def test_op_set_label_names_the_journal_task_by_what_it_holds_out():
    """The journal's task holds out (3,4) and (4,3) with no mirror: its label must not read as the papers' op set."""
    from anchorlab.papers.runs import op_set_label

    steps = {"1": 5, "2": 1, "3": -2, "4": -8}
    assert op_set_label({"anchors": steps, "pair_rules": {}, "preset": "journal"}) == \
        "{1:+5,2:+1,3:-2,4:-8} (3,4) and (4,3) held out"
    assert op_set_label({"anchors": steps, "pair_rules": {}, "preset": "neurips"}) == \
        "{1:+5,2:+1,3:-2,4:-8} (4,3) held out, (3,4)->x-6"

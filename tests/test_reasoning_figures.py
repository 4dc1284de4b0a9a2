"""Journal Fig. 7C / 7E / 7A-B matched: the figure makers end to end on tiny runs, and their tables."""

import math

import pandas as pd
import pytest

from anchorlab.analysis.reasoning import convergence_table, first_reach, grid_mean
from anchorlab.cli import main
from anchorlab.papers.reproduce import FIGURES
from anchorlab.sweep.runtable import histories_of
from anchorlab.papers.runs import rows_of

TINY_MODEL = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "model.n_layers=1"]


def _reproduce(fig, out, extra):
    args = ["reproduce", fig, "--scale", "cpu", "--out", str(out), "--executor", "inprocess", "--no-progress"]
    for s in TINY_MODEL + extra:
        args += ["--set", s]
    assert main(args) == 0


def test_the_new_figures_expand_at_both_scales():
    from anchorlab.papers.reproduce import figure_spec
    from anchorlab.sweep.grid import expand

    n = {"journal-fig7c": (8, 12), "journal-fig7e": (None, None)}
    for fid, (cpu, paper) in n.items():
        for scale, want in (("cpu", cpu), ("paper", paper)):
            runs = expand(figure_spec(FIGURES[fid], scale))
            assert want is None or len(runs) == want, (fid, scale, len(runs))
    stops = {r.config.train.stop_when for r in expand(figure_spec(FIGURES["journal-fig7e"], "cpu"))}
    assert stops == {("train_acc>=0.99",)}


def test_fig7c_end_to_end_on_tiny_runs(tmp_path):
    out = tmp_path / "fig7c"
    _reproduce("journal-fig7c", out, ["task.train_size=256", "train.epochs=1", "train.batch_size=64",
                                      "train.eval_every=4"])
    runs = pd.read_csv(out / "journal-fig7c" / "runs.csv")
    assert len(runs) == 8 and set(runs["model.arch"]) == {"neurips", "gpt2"} and runs.seed.nunique() == 2
    acc = pd.read_csv(out / "journal-fig7c" / "split_accuracy.csv")
    assert set(acc.split) == {"train", "id", "ood"} and len(acc) == 24
    assert (acc[acc.split == "ood"].n == 441).all()
    assert (out / "journal-fig7c" / "fig7c.png").stat().st_size > 5000
    claims = pd.read_csv(out / "journal-fig7c" / "paper_vs_ours.csv")
    assert len(claims) == 4 and pd.to_numeric(claims.ours, errors="coerce").between(0, 1).all()


def test_fig7e_end_to_end_on_tiny_runs(tmp_path):
    out = tmp_path / "fig7e"
    _reproduce("journal-fig7e", out, ["task.eval_max=40", "task.n_test=40", "train.max_steps=8",
                                      "train.eval_every=8"])
    runs = pd.read_csv(out / "journal-fig7e" / "runs.csv")
    assert len(runs) == 8 and runs["task.n_train"].nunique() == 2 and set(runs["train.init_seed"]) == {0, 1}
    assert {"converged_epoch", "gen_error", "cap_epoch", "test_at"} <= set(runs.columns)
    hops = pd.read_csv(out / "journal-fig7e" / "hops.csv")
    assert set(hops.hop) == {1, 2, 3} and hops.accuracy.between(0, 1).all()
    assert (out / "journal-fig7e" / "fig7e.png").stat().st_size > 5000
    assert len(pd.read_csv(out / "journal-fig7e" / "paper_vs_ours.csv")) == 3


def _final(n, gamma, hist, epochs=10):
    return {"run_id": f"r{n}{gamma}", "status": "finished", "steps": hist[-1]["step"], "wall_seconds": 1.0,
            "history": hist, "config": {"task": {"n_train": n}, "init": {"gamma": gamma},
                                        "optim": {"weight_decay": 0.1}, "train": {"init_seed": 0, "epochs": epochs}}}


def test_convergence_table_on_hand_built_histories():
    h_fast = [{"step": 0, "epoch": 0, "train_acc": 0.0, "test_acc": 0.0},
              {"step": 10, "epoch": 1.0, "train_acc": 0.995, "test_acc": 0.9, "test_acc/hop1": 1.0},
              {"step": 20, "epoch": 2.0, "train_acc": 1.0, "test_acc": 0.95, "test_acc/hop1": 1.0}]
    h_never = [{"step": 0, "epoch": 0, "train_acc": 0.0, "test_acc": 0.0},
               {"step": 10, "epoch": 1.0, "train_acc": 0.7, "test_acc": 0.5, "test_acc/hop1": 0.5}]
    assert first_reach(h_fast, "train_acc", 0.99)["epoch"] == 1.0
    assert first_reach(h_never, "train_acc", 0.99) is None
    assert first_reach(h_fast[:1], "train_acc", 0.0) is None      # step 0 never counts
    runs = [_final(100, 0.8, h_fast), _final(100, 0.3, h_never)]
    t = convergence_table(rows_of(runs), histories_of(runs), "train_acc", 0.99, "train_acc", "test_acc")
    assert t.converged_epoch.iloc[0] == 1.0 and math.isnan(t.converged_epoch.iloc[1])
    assert t.gen_error.iloc[0] == pytest.approx(0.095) and t.gen_error.iloc[1] == pytest.approx(0.2)
    assert t.train_final.iloc[0] == 1.0 and t["test_acc/hop1_at"].tolist() == [1.0, 0.5]
    assert t["task.n_train"].tolist() == [100, 100] and t["init.gamma"].tolist() == [0.8, 0.3]


def test_grid_mean_averages_seeds_per_problem():
    g1 = pd.DataFrame({"a": [0, 0], "b": [0, 1], "split": ["train", "ood"], "correct": [True, False]})
    g2 = pd.DataFrame({"a": [0, 0], "b": [0, 1], "split": ["train", "ood"], "correct": [True, True]})
    m = grid_mean([g1, g2])
    assert m.accuracy.tolist() == [1.0, 0.5] and m.n_runs.tolist() == [2, 2]

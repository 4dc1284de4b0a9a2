import json

from anchorlab.cli import main

TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=256", "train.epochs=1", "train.eval_every=2"]


def test_demo_writes_summary_and_plot(tmp_path, capsys):
    args = ["demo", "--out", str(tmp_path), "--workers", "1"]
    for s in TINY:
        args += ["--set", s]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ood_inferential_acc" in out and "large_init" in out and "small_init" in out
    written = json.loads((tmp_path / "summary.json").read_text())
    summary = written["models"]
    assert [s["model"] for s in summary] == ["large_init", "small_init"]
    assert "papers' rule" in written["rule"] and [r["threshold"] for r in written["rates"]] == [0.5, 0.8]
    assert written["setting_measured"]["cases"] == 45 and "default setting, measured over 5 op sets" in out and "this run changes it" in out
    for s in summary:
        assert {"gamma", "id_acc", "ood_inferential_acc", "ood_symmetric_acc", "wall_seconds"} <= set(s)
        assert 0.0 <= s["id_acc"] <= 1.0
    assert summary[0]["gamma"] < summary[1]["gamma"]
    assert (tmp_path / "ood_over_training.png").stat().st_size > 1000
    for sub in ("large_init", "small_init"):
        for f in ("config.yaml", "metrics.jsonl", "param_table.csv", "final.json"):
            assert (tmp_path / sub / f).exists()


def test_train_and_eval_commands(tmp_path, capsys):
    args = ["train", "demo/small", "--out", str(tmp_path / "r"), "--no-progress"]
    for s in TINY:
        args += ["--set", s]
    assert main(args) == 0
    assert main(["eval", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "(4,3) prediction - inferential target" in out
    assert (tmp_path / "r" / "eval_groups.csv").exists() and (tmp_path / "r" / "eval_deviations.csv").exists()


def test_eval_of_missing_run_is_a_clear_error(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "nope")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_demo_over_seeds_and_peak_lrs_gives_both_numbers(tmp_path, capsys):
    import pandas as pd

    args = ["demo", "--out", str(tmp_path), "--workers", "1", "--seeds", "2", "--peak-lrs", "1e-3,3e-3"]
    for s in TINY:
        args += ["--set", s]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "papers' rule (best of 2 lr(s) and of training, mean over 2 seed(s))" in out and "per run" in out
    summary = json.loads((tmp_path / "summary.json").read_text())["models"]
    assert len(summary) == 8 and {s["peak_lr"] for s in summary} == {1e-3, 3e-3}
    r = pd.read_csv(tmp_path / "rates.csv")
    assert list(r.threshold) == [0.5, 0.8] and (r.cases == 4).all()
    assert (tmp_path / "cells.csv").exists() and (tmp_path / "small_init_seed1_lr0.003").is_symlink()
    # the same rule read only where ID had fitted: its own line per threshold and table, beside the papers'
    assert out.count("read only at evaluations with ID >= 0.9 (ours)") == 2
    fitted = pd.read_csv(tmp_path / "rates_fitted.csv")
    assert list(fitted.threshold) == [0.5, 0.8] and (fitted.cells == r.cells).all()
    # a best read only where fitted can never exceed the best over every evaluation
    c, cf = pd.read_csv(tmp_path / "cells.csv"), pd.read_csv(tmp_path / "cells_fitted.csv")
    for col in ("small_init.inferential_best", "large_init.symmetric_best"):
        assert (cf[col] <= c[col] + 1e-12).all()


def test_the_demos_measured_rate_is_the_committed_studys():
    from pathlib import Path

    import pandas as pd

    from anchorlab.demo import MEASURED, measured_line

    t = pd.read_csv(Path(__file__).parents[1] / "docs" / "figures" / "demo_rule_cpu_rates.csv")
    assert list(t.threshold) == [r["threshold"] for r in MEASURED["rates"]]
    for r, row in zip(MEASURED["rates"], t.itertuples()):
        assert round(row.paper_contrast_rate * row.cells) == r["papers_rule_op_sets"] and row.cells == MEASURED["op_sets"]
        assert abs(row.contrast_rate - r["per_run_contrast_rate"]) < 1e-3 and row.cases == MEASURED["cases"]
    assert "1/5 op sets at OOD >= 0.5" in measured_line() and "18% / 4% of 45 cases" in measured_line()

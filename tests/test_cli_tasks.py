"""Every command works on every task: train / eval / sweep / report on SCAN and COGS runs."""

import json

import pandas as pd
import pytest
import yaml

from anchorlab.cli import main

TINY_SEQ = ["task.train_size=200", "task.eval_max=12", "train.max_steps=4", "train.eval_every=2",
            "model.d_model=32", "model.n_heads=2", "model.d_head=16", "model.d_ff=64"]


def _sets(items):
    return [x for s in items for x in ("--set", s)]


@pytest.mark.parametrize("preset,extra", [("scan/cpu", []), ("cogs/cpu", ["ood_exact/structural"])])
def test_train_then_eval_a_real_task_run(tmp_path, shared_datasets, capsys, preset, extra):
    run = tmp_path / "r"
    assert main(["train", preset, "--out", str(run), "--no-progress",
                 *_sets([f"task.data_dir={shared_datasets}", *TINY_SEQ])]) == 0
    out = capsys.readouterr().out
    assert "status=finished" in out and "ood_exact" in out
    assert main(["eval", str(run), "--set", "task.eval_max=6"]) == 0
    out = capsys.readouterr().out
    metrics = json.loads((run / "eval.json").read_text())
    for k in ["id_exact", "ood_exact", "id_token_acc", "ood_token_acc", *extra]:
        assert 0.0 <= metrics[k] <= 1.0, k
    preds = pd.read_csv(run / "eval_predictions.csv")
    assert set(preds["set"]) == {"id", "ood"} and (preds.groupby("set").size() == 6).all()
    assert preds.correct.mean() == pytest.approx((metrics["id_exact"] + metrics["ood_exact"]) / 2)
    # a non-task override is refused in one line
    assert main(["eval", str(run), "--set", "init.gamma=0.1"]) == 2
    assert "eval takes task.* overrides" in capsys.readouterr().err
    # complexity analyses run on any transformer run; mechanism analyses say which tasks they need
    for name in ("stable-rank", "condensation", "embedding"):
        assert main(["analyze", str(run), name, "--out", str(tmp_path / "a")]) == 0, name
        assert (tmp_path / "a" / f"{name}.png").stat().st_size > 1000
    assert main(["analyze", str(run), "flow-scores"]) == 2
    assert "needs a run of task anchor" in capsys.readouterr().err


def test_scan_data_size_sweep_through_the_sweep_command(tmp_path, shared_datasets, capsys):
    spec = {"name": "scan-tiny", "base": "scan/cpu",
            "set": [f"task.data_dir={shared_datasets}", *TINY_SEQ],
            "zip": [{"init.gamma": [0.75, 0.3], "optim.weight_decay": [0.5, 0.01]}],
            "axes": {"task.train_size": [100, 200]}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(spec))
    out = tmp_path / "sw"
    assert main(["sweep", str(p), "--out", str(out), "--dry-run"]) == 0
    assert "4 runs; 4 to do" in capsys.readouterr().out
    assert main(["sweep", str(p), "--out", str(out), "--executor", "inprocess", "--no-progress"]) == 0
    assert "'finished': 4" in capsys.readouterr().out
    assert main(["sweep", str(p), "--out", str(out), "--executor", "inprocess", "--no-progress"]) == 0
    assert "4 runs, 0 to do" in capsys.readouterr().out
    assert main(["report", str(out)]) == 0
    html = (out / "report" / "index.html").read_text()
    assert "task <b>scan</b>" in html and "metrics_vs_task_train_size.png" in html
    assert ">id_exact (best)</th>" in html and html.count(">finished<") == 4     # the run table
    cells = pd.read_csv(out / "report" / "cells.csv")
    assert len(cells) == 4 and {"id_exact", "ood_exact"} <= set(cells.columns)


def test_stacking_is_refused_for_a_task_whose_loss_is_not_vmapable(shared_datasets):
    from anchorlab.config import ConfigError, load_config
    from anchorlab.train.stacked import check_stackable, should_stack

    cfgs = [load_config("scan/cpu", [f"task.data_dir={shared_datasets}", f"init.gamma={g}"]) for g in (0.3, 0.7)]
    with pytest.raises(ConfigError, match="task.name: task 'scan' cannot be trained as a stack"):
        check_stackable(cfgs)
    assert not should_stack(cfgs, "cpu")

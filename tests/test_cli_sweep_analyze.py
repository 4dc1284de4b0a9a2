import sqlite3

import yaml

from anchorlab.cli import main

TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=256", "train.epochs=1", "train.eval_every=2"]


def test_sweep_dry_run_sweep_resume_and_report(tmp_path, capsys):
    spec = {"name": "tiny", "base": "demo/small", "set": TINY,
            "axes": {"init.gamma": [0.3, 0.8], "model.n_layers": [1, 2]}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(spec))
    out = tmp_path / "sw"
    assert main(["sweep", str(p), "--out", str(out), "--dry-run"]) == 0
    assert "4 runs; 4 to do" in capsys.readouterr().out
    assert main(["sweep", str(p), "--out", str(out), "--executor", "inprocess", "--no-progress"]) == 0
    assert "'finished': 4" in capsys.readouterr().out
    # a second invocation does nothing new and duplicates nothing
    assert main(["sweep", str(p), "--out", str(out), "--executor", "inprocess", "--no-progress"]) == 0
    assert "4 runs, 0 to do" in capsys.readouterr().out
    con = sqlite3.connect(out / "results.sqlite")
    n = con.execute("select count(*) from runs").fetchone()[0]
    dup = con.execute("select count(*) from (select run_id, step, metric, kind, count(*) c from metrics "
                      "group by 1,2,3,4 having c > 1)").fetchone()[0]
    assert n == 4 and dup == 0
    assert main(["report", str(out)]) == 0
    html = (out / "report" / "index.html").read_text()
    assert "fig2.png" in html and "<table" in html
    assert (out / "report" / "fig2.png").stat().st_size > 1000
    assert (out / "report" / "cells.csv").exists()


def test_sweep_presets_resolve(capsys):
    assert main(["sweep", "fig3_cpu", "--dry-run", "--out", "/nonexistent/never-written"]) == 0
    assert "12 runs" in capsys.readouterr().out
    assert main(["sweep", "fig2_paper", "--dry-run", "--out", "/nonexistent/never-written"]) == 0
    out = capsys.readouterr().out
    assert f"{7 * 6 * 9 * 3} runs" in out
    assert main(["sweep", "no_such_sweep"]) == 2


def test_sweep_only_lists_a_slice_and_refuses_a_value_off_the_axis(capsys):
    args = ["sweep", "fig2_cell_clock_cpu", "--dry-run", "--out", "/nonexistent/never-written"]
    assert main(args + ["--only", "init.gamma=0.8", "--only", "train.init_seed=0", "--only", "train.epochs=118.2"]) == 0
    out = capsys.readouterr().out
    assert "9 runs; 9 to do" in out and "953fc174ac24" in out      # the run id the full sweep gives it
    assert main(args + ["--only", "init.gamma=0.7"]) == 2
    assert "its values: 0.3, 0.5, 0.8" in capsys.readouterr().err


def test_analyze_complexity_commands(tmp_path, capsys):
    args = ["train", "demo/small", "--out", str(tmp_path / "r"), "--no-progress"]
    for s in TINY:
        args += ["--set", s]
    assert main(args) == 0
    for name in ("condensation", "embedding", "cov-spectrum", "stable-rank"):
        assert main(["analyze", str(tmp_path / "r"), name, "--out", str(tmp_path / "a")]) == 0, name
        assert (tmp_path / "a" / f"{name}.png").stat().st_size > 1000
        assert (tmp_path / "a" / f"{name}.csv").exists()
    assert main(["analyze", str(tmp_path / "r"), str(tmp_path / "r"), "complexity-summary",
                 "--out", str(tmp_path / "a")]) == 0
    assert "stable_rank" in capsys.readouterr().out
    assert main(["analyze", str(tmp_path / "r"), "no-such-analysis"]) == 2
    assert main(["analyze", str(tmp_path / "r"), "flow-scores", "--out", str(tmp_path / "m")]) == 0
    assert (tmp_path / "m" / "flow-scores.csv").exists() and (tmp_path / "m" / "flow-scores.png").exists()
    assert main(["analyze", str(tmp_path / "r"), "flow-scores", "--option", "bogus=1"]) == 2


def test_report_of_a_gamma_by_weight_decay_sweep_draws_fig3b_and_fig5c(tmp_path):
    import pandas as pd

    spec = {"name": "tiny-wd", "base": "demo/small", "set": TINY,
            "axes": {"init.gamma": [0.3, 0.8], "optim.weight_decay": [0.0, 0.1]}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(spec))
    out = tmp_path / "sw"
    assert main(["sweep", str(p), "--out", str(out), "--executor", "inprocess", "--no-progress"]) == 0
    assert main(["report", str(out)]) == 0
    for f in ("fig3b.png", "fig5c.png", "fig5c.csv"):
        assert (out / "report" / f).stat().st_size > 0, f
    t = pd.read_csv(out / "report" / "fig5c.csv")
    assert len(t) == 4 and t.stable_rank.between(1, 16).all() and t.phase.isin([1, 2, 3]).all()

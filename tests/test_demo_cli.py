import json

from anchorlab.cli import main

TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=256", "train.epochs=1", "train.eval_every=2"]


def test_demo_writes_summary_and_plot(tmp_path, capsys):
    import pandas as pd

    args = ["demo", "--task", "neurips", "--out", str(tmp_path), "--workers", "1"]
    for s in TINY:
        args += ["--set", s]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "final.ood_inferential_acc" in out and "large_init" in out and "small_init" in out
    written = json.loads((tmp_path / "summary.json").read_text())
    summary = written["models"]
    assert [s["model"] for s in summary] == ["large_init", "small_init"]
    assert "papers' rule" in written["rule"] and [r["threshold"] for r in written["rates"]] == [0.5, 0.8]
    assert written["setting_measured"]["cases"] == 45 and "default setting, measured over 5 op sets" in out and "this run changes it" in out
    # the verdict ends with one plain sentence, after the rule lines and the measured rate
    verdict = out.split("\nwrote ")[0].rstrip().splitlines()[-1]
    assert verdict.startswith("In plain words: the large-init model ") and verdict.count(". ") == 0
    assert ("so this run shows" in verdict) == (written["rates"][1]["contrast_rate"] == 1)
    for s in summary:
        # a run's values under the run table's names (anchorlab.sweep.runtable.run_row)
        assert {"init.gamma", "train.init_seed", "final.id_acc", "final.train_acc", "final.ood_inferential_acc",
                "final.ood_symmetric_acc", "final.ood_other_frac", "wall_seconds"} <= set(s)
        assert not {"gamma", "seed", "id_acc", "train_acc", "ood_inferential_acc"} & set(s)
        assert 0.0 <= s["final.id_acc"] <= 1.0
    assert summary[0]["init.gamma"] < summary[1]["init.gamma"]
    assert list(pd.read_csv(tmp_path / "summary.csv").columns) == list(summary[0])
    # the path that ran, in words: the default (train.amp auto, bf16_path auto) is native where bf16 is
    from anchorlab.train.precision import cpu_matrix_units
    assert {s["precision"] for s in summary} == {"bf16 native" if cpu_matrix_units().bf16 else "float32"}
    assert "precision" in out
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

    args = ["demo", "--task", "neurips", "--out", str(tmp_path), "--workers", "1", "--seeds", "2", "--peak-lrs", "1e-3,3e-3"]
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


def test_the_demos_measured_rate_is_read_from_the_committed_study(tmp_path, monkeypatch):
    """The measured rate is read from docs/figures (no number in the code); another folder's tables change
    the line; without them the line names the missing file and the variable, and nothing raises."""
    import shutil
    from pathlib import Path

    import pandas as pd

    from anchorlab.papers import demo

    figs = Path(__file__).parents[1] / "docs" / "figures"
    t = pd.read_csv(figs / "demo_rule_native_cpu_rates.csv")
    m = demo.measured()
    assert [r["threshold"] for r in m["rates"]] == list(t.threshold) and m["cases"] == int(t.cases.iloc[0])
    assert [r["papers_rule_op_sets"] for r in m["rates"]] == [round(x.paper_contrast_rate * x.cells)
                                                              for x in t.itertuples()]
    assert (m["op_sets"], m["seeds"], len(m["peak_lrs"])) == (5, 3, 3)
    assert "2/5 op sets at OOD >= 0.5" in demo.measured_line() and "27% / 11% of 45 cases" in demo.measured_line()
    assert not hasattr(demo, "MEASURED")

    other = tmp_path / "figs"
    other.mkdir()
    shutil.copy(figs / "demo_rule_native_cpu_cases.csv", other)
    t.assign(paper_contrast_rate=[0.8, 0.8], contrast_rate=[0.5, 0.25]).to_csv(other / "demo_rule_native_cpu_rates.csv")
    monkeypatch.setenv("ANCHORLAB_FIGURES", str(other))
    line = demo.measured_line()
    assert "4/5 op sets at OOD >= 0.5" in line and "50% / 25% of 45 cases" in line and "at or above the 80%" in line

    monkeypatch.setenv("ANCHORLAB_FIGURES", str(tmp_path / "nowhere"))
    line = demo.measured_line(["train.epochs=1"])
    assert "\n" not in line and "demo_rule_native_cpu_rates.csv" in line and "ANCHORLAB_FIGURES" in line
    assert "this run changes it" not in line      # nothing measured at hand, so nothing changed from it


def test_research_outputs_are_not_package_data():
    import tomllib
    from pathlib import Path

    import anchorlab

    root = Path(__file__).parents[1]
    src = Path(anchorlab.__file__).parent
    assert not list(src.rglob("*.json")) and not list(src.rglob("*.csv"))
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["anchorlab"]
    assert all(not d.endswith((".json", ".csv")) for d in data)


def test_the_plain_sentence_names_the_bar_and_the_accuracy_it_missed():
    import pandas as pd

    from anchorlab.papers.demo import plain_verdict

    t = pd.DataFrame({"model": ["large_init", "small_init"], "final.ood_inferential_acc": [0.0, 0.705],
                      "final.ood_symmetric_acc": [1.0, 0.12]})
    t.attrs["rates"] = {"cases": 1, "large_memorizes_rate": 1.0, "small_composes_rate": 0.0, "contrast_rate": 0.0}
    v = plain_verdict(t)
    assert "memorized (answered the mirror)" in v
    assert "did not compose at the 0.8 the contrast asks (inferential 0.70)" in v and "does not show" in v
    t.attrs["rates"] = {**t.attrs["rates"], "large_memorizes_rate": 0.0, "small_composes_rate": 1.0}
    assert "did not memorize at the 0.8 the contrast asks (symmetric 1.00)" in plain_verdict(t)


def test_the_measured_study_command_trains_the_committed_runs():
    """demo.MEASURED_STUDY, parsed by the CLI and expanded as its --dry-run does, gives exactly the run ids of
    the committed tables the demo reads (so the command still reproduces them: same op sets, same path)."""
    import shlex
    from pathlib import Path

    import pandas as pd

    from anchorlab.papers import demo
    from anchorlab.cli.args import parse_setting
    from anchorlab.cli import build_parser
    from anchorlab.papers.robustness import DEFAULT_SETTINGS, random_op_sets, study_spec
    from anchorlab.sweep.grid import expand

    a = build_parser().parse_args(shlex.split(demo.MEASURED_STUDY)[1:])
    settings = [parse_setting(s) for s in a.setting] or list(DEFAULT_SETTINGS)
    ops = random_op_sets(a.op_sets, a.op_seed, include_papers=not a.no_papers_op_set)
    spec = study_spec(a.config, ops, list(range(a.seeds)), settings, a.set, vary={"optim.peak_lr": list(a.peak_lrs)})
    runs = expand(spec)
    cases = pd.read_csv(Path(__file__).parents[1] / "docs" / "figures" / f"{demo.MEASURED_TABLES}_cases.csv")
    assert sorted(r.run_id for r in runs) == sorted(cases.run_id)
    assert {r.config.train.bf16_path for r in runs} == {"native"}

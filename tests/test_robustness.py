"""The robustness study: op sets are valid tasks, cases are judged right, the command runs end to end."""

import pandas as pd
import pytest

from anchorlab.cli import main
from anchorlab.cli.args import parse_setting, parse_vary
from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.papers.robustness import Setting, judge, rate_map, rates, study_spec
from anchorlab.sweep.grid import expand
from anchorlab.tasks.anchor import AnchorTask
from anchorlab.tasks.anchor.opsets import PAPERS, random_op_sets


def test_op_sets_never_collide_and_keep_the_held_out_pair_unseen():
    ops = random_op_sets(40, seed=3)
    assert ops[0].anchors == PAPERS["anchors"] and ops[0].held_out == (4, 3)
    assert len({o.label for o in ops}) == 40
    for o in ops:
        assert len(set(o.anchors.values())) == 4 and 0 not in o.anchors.values()
        cfg = experiment_from_dict({}, [f"{k}={v}" for k, v in o.task_overrides().items()])
        t = AnchorTask(cfg.task)
        assert t.held_out_pairs == [o.held_out]
        mirror = (o.held_out[1], o.held_out[0])
        assert t.non_inferential_pairs == [mirror]
        assert cfg.task.target_collisions() == []
        data = t.train_data(0, n=2000)
        assert not ((data.pair[:, 0] == o.held_out[0]) & (data.pair[:, 1] == o.held_out[1])).any()
        h = t.hypotheses(o.held_out)
        assert h["symmetric"] == o.mirror_shift != h["inferential"]
    assert random_op_sets(5, seed=3) == ops[:5]                     # deterministic per seed
    assert random_op_sets(5, seed=4) != random_op_sets(5, seed=3)
    with pytest.raises(ConfigError, match="step_range"):
        random_op_sets(3, step_range=(1, 2))


def test_study_spec_crosses_op_sets_settings_and_seeds():
    ops = random_op_sets(3, seed=0)
    spec = study_spec("demo/small", ops, [0, 1], [Setting("large_init", {"init.gamma": 0.3}),
                                                Setting("small_init", {"init.gamma": 0.7})])
    runs = expand(spec)
    assert len(runs) == 3 * 2 * 2
    assert {(r.config.init.gamma, r.config.train.init_seed, r.config.train.data_seed) for r in runs} == \
        {(g, s, s) for g in (0.3, 0.7) for s in (0, 1)}
    with pytest.raises(ConfigError, match="settings.a: must set optim.lr like the others"):
        study_spec("demo/small", ops, [0], [Setting("a", {"init.gamma": 0.3}), Setting("b", {"optim.lr": 1e-3})])
    assert parse_setting("small_init:init.gamma=0.6,optim.peak_lr=1e-3") == \
        Setting("small_init", {"init.gamma": 0.6, "optim.peak_lr": 1e-3})
    with pytest.raises(ConfigError, match="NAME:KEY=VALUE"):
        parse_setting("init.gamma=0.6")


def test_judge_and_rates_by_hand():
    rows = []
    for op, seed, large, small in (("A", 0, (0.95, 0.0, 0.9), (0.99, 0.85, 0.0)),   # contrast
                                   ("A", 1, (0.80, 0.0, 0.9), (0.99, 0.85, 0.0)),   # large init did not fit
                                   ("B", 0, (0.95, 0.1, 0.85), (0.95, 0.2, 0.7))):  # small init memorized
        for name, (i, inf, sym) in (("large_init", large), ("small_init", small)):
            rows.append({"op_set": op, "seed": seed, "setting": name, "final.id_acc": i,
                         "final.ood_inferential_acc": inf, "final.ood_symmetric_acc": sym})
    j = judge(pd.DataFrame(rows))
    assert list(j.contrast) == [True, False, False]
    assert list(j.large_memorizes) == [True, False, True] and list(j.small_composes) == [True, True, False]
    assert rates(j) == {"cases": 3, "contrast_rate": 1 / 3, "large_memorizes_rate": 2 / 3,
                        "small_composes_rate": 2 / 3}


def test_robustness_command_end_to_end(tmp_path, capsys):
    tiny = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
            "train.batch_size=256", "train.epochs=1", "train.eval_every=4"]
    args = ["robustness", "demo/small", "--out", str(tmp_path / "r"), "--op-sets", "2", "--seeds", "2",
            "--executor", "inprocess", "--no-progress"]
    for s in tiny:
        args += ["--set", s]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "contrast in" in out and "of 4 cases" in out
    cases = pd.read_csv(tmp_path / "r" / "cases.csv")
    assert len(cases) == 8 and set(cases.setting) == {"large_init", "small_init"}
    judged = pd.read_csv(tmp_path / "r" / "judged.csv")
    assert len(judged) == 4 and judged.op_set.nunique() == 2
    assert (tmp_path / "r" / "results.sqlite").exists() and (tmp_path / "r" / "rates.csv").exists()


def test_the_default_settings_are_the_demos():
    from anchorlab.papers.demo import DEMO_GAMMAS
    from anchorlab.papers.robustness import DEFAULT_SETTINGS

    assert {s.name: s.overrides for s in DEFAULT_SETTINGS} == {k: {"init.gamma": g} for k, g in DEMO_GAMMAS.items()}


def test_a_regime_map_crosses_the_varied_keys_with_every_case():
    ops = random_op_sets(2, seed=0)
    spec = study_spec("demo/small", ops, [0, 1], vary={"train.epochs": [2, 4], "optim.peak_lr": [5e-4, 2e-3]})
    runs = expand(spec)
    assert len(runs) == 2 * 2 * 2 * 4
    assert {(r.config.train.epochs, r.config.optim.peak) for r in runs} == {(e, p) for e in (2, 4) for p in (5e-4, 2e-3)}
    assert len({r.run_id for r in runs}) == len(runs)
    for bad in ({"init.gamma": [0.3]}, {"train.init_seed": [0, 1]}, {"task.pair_rules": [{}]}):
        with pytest.raises(ConfigError, match="is set by the study itself"):
            study_spec("demo/small", ops, [0], vary=bad)
    with pytest.raises(ConfigError, match="vary.train.epochs: needs a non-empty list"):
        study_spec("demo/small", ops, [0], vary={"train.epochs": []})
    assert parse_vary("optim.peak_lr=5e-4,2e-3") == ("optim.peak_lr", [5e-4, 2e-3])
    assert parse_vary("train.epochs=3,12") == ("train.epochs", [3, 12])
    with pytest.raises(ConfigError, match="KEY=V1"):
        parse_vary("train.epochs")


def test_rate_map_by_hand():
    rows = []
    # epochs 2: one case, contrast; epochs 4: two cases, small init composes in one
    for ep, op, seed, small_inf in ((2, "A", 0, 0.9), (4, "A", 0, 0.9), (4, "B", 0, 0.1)):
        for name, (i, inf, sym) in (("large_init", (0.95, 0.0, 0.9)), ("small_init", (0.99, small_inf, 0.0))):
            rows.append({"train.epochs": ep, "op_set": op, "seed": seed, "setting": name, "final.id_acc": i,
                         "final.ood_inferential_acc": inf, "final.ood_symmetric_acc": sym, "steps": 10 * ep,
                         "wall_seconds": 3.0 * ep})
    cases = pd.DataFrame(rows)
    m = rate_map(judge(cases, by=["train.epochs"]), cases, ["train.epochs"])
    assert list(m["train.epochs"]) == [2, 4] and list(m.cases) == [1, 2]
    assert list(m.contrast_rate) == [1.0, 0.5] and list(m.large_memorizes_rate) == [1.0, 1.0]
    assert list(m.steps) == [20, 40] and list(m.model_wall_s) == [6.0, 12.0]


def test_robustness_regime_map_end_to_end(tmp_path, capsys):
    tiny = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
            "train.batch_size=256", "train.eval_every=4"]
    args = ["robustness", "demo/small", "--out", str(tmp_path / "m"), "--op-sets", "1", "--seeds", "2",
            "--vary", "train.epochs=1,2", "--executor", "inprocess", "--no-progress"]
    for s in tiny:
        args += ["--set", s]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "regime map" in printed and "train.epochs: the same solution (OOD >= 0.5) at every value in" in printed
    m = pd.read_csv(tmp_path / "m" / "map.csv")
    assert list(m["train.epochs"]) == [1, 2] and (m.cases == 2).all()
    assert list(m.steps) == [4, 8] and m.contrast_rate.between(0, 1).all()
    cases = pd.read_csv(tmp_path / "m" / "cases.csv")
    assert len(cases) == 8 and sorted(cases["train.epochs"].unique()) == [1, 2]
    assert (tmp_path / "m" / "regime_map.png").exists()
    paired = pd.read_csv(tmp_path / "m" / "paired.csv")   # one varied key: each case at both values
    assert len(paired) == 4 and {"solution@1", "solution@2", "id_acc@1", "ood_symmetric_acc@2"} <= set(paired.columns)


def test_paired_cases_by_hand():
    from anchorlab.papers.robustness import paired_cases

    rows = []
    for amp, small in (("none", (0.99, 0.8, 0.1)), ("bf16", (0.99, 0.1, 0.8))):   # small init flips
        for name, (i, inf, sym) in (("large_init", (0.95, 0.0, 0.9)), ("small_init", small)):
            rows.append({"train.amp": amp, "op_set": "A", "seed": 0, "setting": name, "peak_lr": 2e-3,
                         "status": "finished", "final.id_acc": i, "final.ood_inferential_acc": inf,
                         "final.ood_symmetric_acc": sym})
    p = paired_cases(pd.DataFrame(rows), "train.amp").set_index("setting")
    assert list(p.same_solution) == [True, False]
    assert p.loc["small_init", "solution@none"] == "composes" and p.loc["small_init", "solution@bf16"] == "memorizes"
    assert p.loc["large_init", "ood_symmetric_acc@bf16"] == 0.9


def test_robustness_with_peak_lrs_reports_the_papers_rule_beside_the_per_run_rate(tmp_path, capsys):
    tiny = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
            "train.batch_size=256", "train.epochs=1", "train.eval_every=2"]
    args = ["robustness", "demo/small", "--out", str(tmp_path / "r"), "--op-sets", "1", "--seeds", "2",
            "--peak-lrs", "1e-3,4e-3", "--thresholds", "0.5,0.8", "--executor", "inprocess", "--no-progress"]
    for s in tiny:
        args += ["--set", s]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "papers' rule (best of 2 lr(s) and of training, mean over 2 seed(s))" in out
    assert out.count("per run (each lr and seed, final)") == 2 and "of 4 cases" in out
    d = tmp_path / "r"
    cases = pd.read_csv(d / "cases.csv")
    assert len(cases) == 8 and sorted(cases.peak_lr.unique()) == [1e-3, 4e-3]
    assert (cases["best.ood_inferential_acc"] >= cases["final.ood_inferential_acc"] - 1e-9).all()
    assert len(pd.read_csv(d / "judged.csv")) == 4                      # (op set, seed, lr) cases
    seeds = pd.read_csv(d / "seeds.csv")
    assert len(seeds) == 4 and (seeds.n_lrs == 2).all()
    best = cases.groupby(["setting", "seed"])["best.ood_inferential_acc"].max()
    assert seeds.set_index(["setting", "seed"]).inferential_best.sort_index().tolist() == \
        pytest.approx(best.sort_index().tolist())
    cells = pd.read_csv(d / "cells.csv")
    assert list(cells.threshold) == [0.5, 0.8]
    assert cells["small_init.inferential_best"][0] == pytest.approx(best["small_init"].mean())
    r = pd.read_csv(d / "rates.csv")
    assert list(r.threshold) == [0.5, 0.8] and (r.cases == 4).all() and (r.cells == 1).all()
    assert {"paper_contrast_rate", "contrast_rate", "small_composes_per_run", "small_composes_rate"} <= set(r)
    lines = out.splitlines()   # each papers'-rule line followed by the same rule read only where fitted
    papers_lines = [i for i, line in enumerate(lines) if "papers' rule (best of" in line]
    assert len(papers_lines) == 2 and all("read only at evaluations with ID >= 0.9 (ours)" in lines[i + 1]
                                          for i in papers_lines)
    cf = pd.read_csv(d / "cells_fitted.csv")
    assert (cf["small_init.inferential_best"] <= cells["small_init.inferential_best"] + 1e-12).all()
    with pytest.raises(ConfigError, match="peak_lrs"):
        from anchorlab.papers.robustness import run_study
        run_study(str(tmp_path / "x"), "demo/small", 1, [0], peak_lrs=[1e-3], vary={"optim.peak_lr": [1e-3]})


def test_a_study_reads_only_its_own_runs_from_a_shared_directory(tmp_path):
    from anchorlab.papers.robustness import run_study

    tiny = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
            "train.batch_size=256", "train.eval_every=4"]
    a = run_study(str(tmp_path), "demo/small", 1, [0], overrides=[*tiny, "train.epochs=1"], executor="inprocess")
    b = run_study(str(tmp_path), "demo/small", 1, [0], overrides=[*tiny, "train.epochs=2"], executor="inprocess")
    assert len(list((tmp_path / "runs").iterdir())) == 4
    assert len(a["cases"]) == len(b["cases"]) == 2 and set(a["cases"].run_id).isdisjoint(b["cases"].run_id)


def test_the_fitted_reading_by_hand_and_none_where_a_run_lacks_its_history():
    from anchorlab.papers.eval.judgement import with_fitted_bests
    from anchorlab.papers.robustness import fitted_tables, judged_files, judgement_tables
    from anchorlab.papers.runs import curves_of

    # one op set, one seed: the small init composes only while ID is 0.6, then takes the mirror
    hist = {"L": [(1, 1.0, 0.0, 0.95)], "S": [(1, 0.6, 0.9, 0.0), (2, 1.0, 0.1, 0.7)]}
    runs = [{"run_id": k, "history": [{"step": s, "id_acc": i, "ood_inferential_acc": a, "ood_symmetric_acc": b}
                                      for s, i, a, b in h]} for k, h in hist.items()]
    cases = pd.DataFrame([
        {"run_id": k, "op_set": "A", "seed": 0, "setting": name, "peak_lr": 1e-3, "status": "finished",
         "final.id_acc": h[-1][1], "final.ood_inferential_acc": h[-1][2], "final.ood_symmetric_acc": h[-1][3],
         "best.id_acc": max(e[1] for e in h), "best.ood_inferential_acc": max(e[2] for e in h),
         "best.ood_symmetric_acc": max(e[3] for e in h)}
        for (k, h), name in zip(hist.items(), ("large_init", "small_init"))])
    papers = judgement_tables(cases, "large_init", "small_init", (0.5,))["cells"].iloc[0]
    fit = fitted_tables(cases, curves_of(runs), "large_init", "small_init", (0.5,))
    fitted = fit["cells"].iloc[0]
    assert papers.contrast and papers["small_init.inferential_best"] == 0.9
    assert not fitted.contrast and fitted["small_init.inferential_best"] == 0.1
    assert fitted["small_init.solution"] == "memorizes" and fitted.large_memorizes
    assert fit["rates"].paper_contrast_rate.tolist() == [0.0]
    assert fitted_tables(cases, curves_of(runs[:1]), "large_init", "small_init", (0.5,)) is None   # S has no history
    jt, fit2, named = judged_files(cases, curves_of(runs), "large_init", "small_init", (0.5,))
    assert [k for k, _ in named] == ["seeds", "cells", "rates", "seeds_fitted", "cells_fitted", "rates_fitted"]
    assert dict(named)["cells_fitted"]["small_init.inferential_best"].tolist() == [0.1] and fit2 is not None
    assert dict(named)["cells"]["small_init.inferential_best"].tolist() == [0.9]
    jt, fit2, named = judged_files(cases, curves_of(runs[:1]), "large_init", "small_init", (0.5,))
    assert fit2 is None and [k for k, _ in named] == ["seeds", "cells", "rates"]   # never a half-fitted set
    with pytest.raises(ConfigError, match="no trajectory .* S"):
        with_fitted_bests(cases, pd.DataFrame({"run_id": ["L"], "id_acc": [1.0], "inferential": [0.0],
                                               "symmetric": [1.0]}))

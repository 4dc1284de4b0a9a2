"""The early-predictor study (reproduce.figures_predictors, predictors_fit): outcome labels, held-out
logistic verdicts on hand-made tables, the study rows from a run table (a tiny sweep, a committed table) and
the figure, and train.predictors_until."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from anchorlab.config import ConfigError, load_config
from anchorlab.eval.solution import SOLUTIONS, outcome
from anchorlab.papers.reproduce import figures_predictors as F
from anchorlab.papers.reproduce import predictors_fit as S
from anchorlab.papers.runs import run_table

pytest.importorskip("scipy")
pytest.importorskip("sklearn")


def test_outcome_rule():
    assert outcome(1.0, 0.72, 0.19) == "composes"
    assert outcome(1.0, 0.0, 1.0) == "memorizes"
    assert outcome(1.0, 0.3, 0.4) == "neither"
    assert outcome(0.85, 0.9, 0.0) == "unfit"          # below the ID bar, whatever the OOD answer
    assert outcome(0.95, 0.6, 0.1, threshold=0.8) == "neither"
    assert outcome(float("nan"), 0.9, 0.0) == "unfit"
    nan = float("nan")                                   # a mapping the task does not define
    assert outcome(1.0, 0.7, nan) == "composes"
    assert outcome(1.0, nan, 0.7) == "memorizes"
    assert outcome(1.0, 0.3, nan) == "neither"
    assert outcome(1.0, 0.6, 0.6) == "neither"         # a tie passes neither mapping


def _table(n=40, signal=True, n_noise=12, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2 == 0
    rows = {"run_id": [f"r{i}" for i in range(n)],
            "train.data_seed": [0] * (n // 2) + list(range(1, n - n // 2 + 1)),
            "train.init_seed": list(range(n // 2)) + [0] * (n - n // 2), "init.gamma": 0.45, "final.id_acc": 1.0,
            "final.ood_inferential_acc": np.where(y, 0.8, 0.0), "final.ood_symmetric_acc": np.where(y, 0.1, 0.9),
            "best.ood_inferential_acc": np.nan, "best.ood_symmetric_acc": np.nan,
            "outcome": np.where(y, "composes", "memorizes"), "at_fraction": 0.05, "step": 10}
    for j in range(n_noise):
        rows[f"noise{j}"] = rng.normal(size=n)
    if signal:
        rows["good"] = np.where(y, 1.0, -1.0) + 0.3 * rng.normal(size=n)
    return S.with_design(pd.DataFrame(rows))


def test_verdict_finds_a_separating_feature_on_held_out_runs():
    v = S.verdict_table(_table(), fractions=(0.05,), repeats=5)
    cv = v[v.validation == "cv"].set_index("model")
    assert cv.loc["top3", "auc"] >= 0.95 and cv.loc["top3", "accuracy"] >= 0.9
    assert cv.loc["all", "n_runs"] == 40 and cv.loc["all", "n_composes"] == 20
    split = v[v.validation != "cv"]
    assert set(split.validation) == {"data_varied->init_varied", "init_varied->data_varied"}
    assert (split.n_runs == 20).all() and (split.auc >= 0.9).all()
    one = S.verdict_table(_table(), fractions=(0.05,), ks=("good", "absent"), repeats=3)   # a named feature alone
    assert set(one.model) == {"good"} and (one.auc >= 0.95).all()


def test_verdict_is_held_out_noise_scores_near_chance():
    """12 noise features on 40 runs: a logistic fit on all runs separates them in-sample, the
    cross-validated probabilities do not."""
    t = _table(signal=False)
    v = S.verdict_table(t, fractions=(0.05,), ks=(None,), repeats=5)
    cv = v[(v.validation == "cv")].iloc[0]
    cols = S.feature_columns(t)
    X, y = t[cols].to_numpy(), (t.outcome == "composes").to_numpy()
    in_sample = S._pipeline(None).fit(X, y).predict_proba(X)[:, 1]
    assert S._scores(y, in_sample)[0] > 0.8
    assert 0.25 < cv.auc < 0.75


def test_study_auc_leaves_out_neither_and_unfit():
    t = _table(n=20).drop(columns="design")
    t.loc[0, "outcome"], t.loc[1, "outcome"] = "neither", "unfit"
    a = S.study_auc(t, n_boot=50)
    assert (a.n_runs == 18).all()
    assert a.set_index("feature").loc["good", "auc"] == 1.0


def test_predictors_until_logs_early_and_last(tmp_path, tiny_overrides):
    from anchorlab.train import train

    sets = tiny_overrides + ["train.epochs=1", "train.eval_every=2", "train.log_predictors=true"]
    cfg = load_config("demo/small", sets + ["train.predictors_until=0.25"])
    assert cfg.run_id() == load_config("demo/small", sets).run_id()
    train(cfg, tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = [r["step"] for r in rows if "pred/margin/pair" in r]
    assert [r["step"] for r in rows] == list(range(0, 17, 2))
    assert logged == [0, 2, 4, 16]                     # up to 25% of 16 steps, then the last
    cfg = load_config("demo/small", sets + ["train.predictors_until=0.1"])    # 1.6 steps: the eval at 2 is nearest
    train(cfg, tmp_path / "run10")
    rows = [json.loads(line) for line in (tmp_path / "run10" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "pred/margin/pair" in r] == [0, 2, 16]
    from anchorlab.papers.analysis.auc import features_at_fractions

    got = features_at_fractions(tmp_path / "run10", (0.0, 0.1, 0.5, 1.0)).set_index("at_fraction")
    assert got.loc[0.1, "step"] == 2 and not np.isnan(got.loc[0.1, "margin/pair"])
    assert np.isnan(got.loc[0.5, "margin/pair"])        # nothing logged near step 8: missing, not step 2's
    with pytest.raises(ConfigError, match="train.predictors_until"):
        load_config("demo/small", ["train.predictors_until=1.5"])


def test_study_tables_from_a_tiny_sweep(tmp_path, tiny_overrides):
    from anchorlab.sweep.runner import run_sweep

    spec = {"name": "tiny-pred", "base": "demo/small",
            "set": tiny_overrides + ["train.epochs=1", "train.eval_every=2", "train.log_predictors=true",
                                     "train.predictors_until=0.1"],
            "zip": [{"train.init_seed": [0, 1], "train.data_seed": [0, 0]}]}
    run_sweep(spec, tmp_path / "sw", executor="inprocess")
    rows = F.study_rows(run_table([tmp_path / "sw"]))
    assert len(rows) == 2 * len(F.FRACTIONS) and rows.run_id.nunique() == 2
    assert sorted(rows.at_fraction.unique()) == sorted(F.FRACTIONS)
    assert set(rows.outcome) <= set(SOLUTIONS) and {"margin/pair", "srank/mean"} <= set(rows.columns)
    assert rows[rows.at_fraction == 1.0].step.unique().tolist() == [16]
    tables, files = F.make_predictors(run_table([tmp_path / "sw"]), tmp_path, "cpu", n_boot=20)
    assert set(tables) == {"runs", "auc", "verdict"} and "run_dir" not in tables["runs"].columns
    assert list(tables["auc"].columns) in ([], ["feature", "at_fraction", "auc", "auc_lo", "auc_hi", "n_runs"])
    # a committed study table joins: its runs are added once, a run found in a directory wins, outcomes re-read
    old = tables["runs"]
    extra = old[old.run_id == old.run_id.iloc[0]].assign(**{
        "run_id": "earlier", "final.id_acc": 1.0, "final.ood_inferential_acc": 0.9, "final.ood_symmetric_acc": 0.0,
        "outcome": "memorizes"})
    extra.to_csv(tmp_path / "old.csv", index=False)
    old.to_csv(tmp_path / "same.csv", index=False)
    rows2 = F.study_rows(run_table([tmp_path / "sw", tmp_path / "old.csv", tmp_path / "same.csv"]))
    assert rows2.run_id.nunique() == 3 and len(rows2) == 3 * len(F.FRACTIONS)
    assert set(rows2[rows2.run_id == "earlier"].outcome) == {"composes"}      # re-judged, not the stored label
    assert (rows2[rows2.run_id != "earlier"].run_dir.str.startswith(str(tmp_path))).all()
    assert (rows2[rows2.run_id == "earlier"].run_dir == "").all()            # a committed row has no directory
    early = rows2[rows2.run_id == "earlier"].set_index("at_fraction")
    assert early.loc[0.1, "margin/pair"] == old[old.run_id == old.run_id.iloc[0]].set_index("at_fraction").loc[
        0.1, "margin/pair"]                                                   # its features: the committed ones


def test_plot_auc_draws_and_names_missing_columns():
    from anchorlab.papers.plots.predictors import plot_auc

    t = pd.DataFrame({"feature": ["a", "b", "a", "b"], "at_fraction": [0, 0, 0.1, 0.1], "auc": [0.5, 0.9, 0.6, 0.95],
                      "auc_lo": [0.3, 0.8, 0.4, 0.9], "auc_hi": [0.7, 1.0, 0.8, 1.0], "n_runs": 40})
    fig = plot_auc(t)
    assert len(fig.axes[0].get_yticklabels()) == 2
    with pytest.raises(ConfigError, match="auc_lo"):
        plot_auc(t.drop(columns="auc_lo"))


# ------------------------------------------------------------------ the early verdict
def test_verdict_model_by_hand(tiny_overrides):
    from anchorlab.papers.analysis.verdict import VerdictModel

    vm = VerdictModel(0.1, ("a", "b"), (1.0, 0.0), (2.0, 1.0), (1.0, -1.0), 0.5, {"auc": 0.9},
                      {"model.d_model": 32, "init.gamma": 0.45})
    # logit = 0.5 + 1 * (3 - 1) / 2 - 1 * (0.5 - 0) / 1 = 1.0
    assert vm.p_composes({"a": 3.0, "b": 0.5, "c": 9.0}) == pytest.approx(1 / (1 + np.exp(-1.0)))
    assert vm.contributions({"a": 3.0, "b": 0.5}).contribution.tolist() == [1.0, -0.5]
    assert VerdictModel.from_json(vm.to_json()) == vm
    with pytest.raises(ConfigError, match="lacks feature.*b"):
        vm.p_composes({"a": 1.0, "b": float("nan")})
    cfg = load_config("demo/small", tiny_overrides + ["init.gamma=0.45"])
    assert vm.differences(cfg) == []
    assert vm.differences(load_config("demo/small", tiny_overrides + ["init.gamma=0.5"])) == ["init.gamma: 0.5 != 0.45"]
    with pytest.raises(ConfigError, match="one length"):
        VerdictModel(0.1, ("a",), (0.0, 1.0), (1.0,), (1.0,), 0.0)


def test_fit_verdict_analysis_and_callback(tmp_path, tiny_overrides, monkeypatch):
    from anchorlab.papers.analysis import verdict as V
    from anchorlab.analysis.registry import run_analysis
    from anchorlab.papers import analyses  # noqa: F401  (registers early-verdict)
    from anchorlab.sweep.runner import run_sweep
    from anchorlab.train import train

    sets = tiny_overrides + ["train.epochs=1", "train.eval_every=2", "train.log_predictors=true",
                             "train.predictors_until=0.1"]
    run_sweep({"name": "tiny-verdict", "base": "demo/small", "set": sets,
               "zip": [{"train.init_seed": [0, 1, 2, 3], "train.data_seed": [0, 0, 0, 0]}]}, tmp_path / "sw",
              executor="inprocess")
    rows = S.with_design(F.study_rows(run_table([tmp_path / "sw"])))
    first = rows.run_id.isin(sorted(rows.run_id.unique())[:2])
    rows["outcome"] = np.where(first, "composes", "memorizes")        # labels by hand: the fit is what is tested
    vm = S.fit_verdict(rows, 0.1, k=2)
    assert len(vm.features) == 2 and vm.at_fraction == 0.1
    assert "train.init_seed" not in vm.setting and vm.setting["model.d_model"] == 32
    at = rows[np.isclose(rows.at_fraction, 0.1)].set_index("run_id")
    p = {r: vm.p_composes(at.loc[r]) for r in at.index}
    assert min(p[r] for r in at.index[first[np.isclose(rows.at_fraction, 0.1)].to_numpy()]) > max(
        p[r] for r in at.index[~first[np.isclose(rows.at_fraction, 0.1)].to_numpy()])    # fits its training runs
    path = tmp_path / "verdict.json"
    path.write_text(vm.to_json())

    run_dir = at.run_dir.iloc[0]
    paths = run_analysis(run_dir, "early-verdict", tmp_path / "an", options=[f"model={path}"])
    got = pd.read_csv(paths["csv"]).iloc[0]
    assert got.p_composes == pytest.approx(p[at.index[0]]) and got.step == 2
    assert pd.isna(got.setting_differs) and paths["png"].exists()

    (tmp_path / "figs").mkdir()                                       # the callback uses the figures folder's model
    (tmp_path / "figs" / V.MODEL_FILE).write_text(vm.to_json())
    monkeypatch.setenv("ANCHORLAB_FIGURES", str(tmp_path / "figs"))
    train(load_config("demo/small", sets + ["train.init_seed=7"]), tmp_path / "cb")
    logged = [json.loads(x) for x in (tmp_path / "cb" / "metrics.jsonl").read_text().splitlines()]
    with_p = [r for r in logged if "verdict/p_composes" in r]
    assert vm.differences(load_config("demo/small", sets + ["train.init_seed=7"])) == []
    assert [r["step"] for r in with_p] == [2]                          # the evaluation nearest 10% of 16 steps
    feats = {k[len("pred/"):]: v for k, v in with_p[0].items() if k.startswith("pred/")}
    assert with_p[0]["verdict/p_composes"] == pytest.approx(vm.p_composes(feats))
    train(load_config("demo/small", sets + ["init.gamma=0.6"]), tmp_path / "other")   # not the fitted setting
    assert "verdict/p_composes" not in (tmp_path / "other" / "metrics.jsonl").read_text()


def test_the_committed_study_redraws_its_tables(tmp_path):
    """The committed study (docs/figures/predictors_cpu_runs.csv) read as a run table gives its committed
    AUC-free tables back: the same runs and features, the same verdicts (folds drawn in the table's order)."""
    from pathlib import Path

    committed = Path(__file__).resolve().parents[1] / "docs" / "figures" / "predictors_cpu_runs.csv"
    rows = run_table([committed])
    assert len(rows) == 40 and rows.run_id.is_unique and (rows.run_dir == "").all()
    study = S.with_design(F.study_rows(rows))
    old = pd.read_csv(committed)
    pd.testing.assert_frame_equal(study[old.columns.drop("run_dir")], old.drop(columns="run_dir"))
    v = S.verdict_table(study, fractions=(0.1,), ks=("margin/pair",))
    want = pd.read_csv(committed.with_name("predictors_cpu_verdict.csv"))
    want = want[(want.at_fraction == 0.1) & (want.model == "margin/pair")].reset_index(drop=True)
    pd.testing.assert_frame_equal(v.reset_index(drop=True), want)

"""Prediction experiments: time-to-threshold, per-pair speed, suspect data, complexity targets."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from anchorlab.analysis.speed import (complexity_slowdown, pair_fit_speed, rule_violating_pairs,
                                      speed_table, steps_to_threshold, summarize_pair_speed,
                                      summarize_speed, suspect_report)
from anchorlab.config import ConfigError
from anchorlab.sweep.runtable import histories_of
from anchorlab.papers.runs import rows_of
from anchorlab.tasks.anchor import AnchorTaskConfig as TaskConfig
from anchorlab.tasks.anchor import AnchorTask

SPE = 10  # steps per epoch of the synthetic histories


def hist(values, metric="train_loss", every=5, extra=None):
    """Eval rows every `every` steps; row 0 is step 0 with the given value."""
    rows = []
    for i, v in enumerate(values):
        r = {"step": i * every, "epoch": i * every / SPE, metric: v}
        if extra:
            r.update({k: vals[i] for k, vals in extra.items()})
        rows.append(r)
    return rows


# ------------------------------------------------------------ time to threshold
def test_first_crossing_at_known_eval_and_nan_rows_skipped():
    # loss dips below 0.05 first at row 4 (step 20), rises, dips again later
    h = hist([math.nan, 1.0, 0.3, 0.08, 0.04, 0.06, 0.01])
    c = steps_to_threshold(h, threshold=5e-2)
    assert not c.censored
    assert c.steps == 20 and c.epochs == 2.0 and c.value == 0.04


def test_threshold_is_inclusive_and_direction_above():
    c = steps_to_threshold(hist([math.nan, 0.2, 0.05]), threshold=0.05)
    assert c.steps == 10 and not c.censored
    acc = hist([0.0, 0.3, 0.59, 0.61, 0.9], metric="acc")
    c = steps_to_threshold(acc, metric="acc", threshold=0.6, below=False)
    assert c.steps == 15 and c.epochs == 1.5


def test_never_crossing_is_censored_at_last_finite_eval():
    h = hist([math.nan, 2.0, 1.0, 0.5, 0.2])
    c = steps_to_threshold(h, threshold=5e-2)
    assert c.censored and c.steps == 20 and c.epochs == 2.0 and c.value == 0.2
    # a diverged tail (NaN) does not move the censoring point to the NaN rows
    c = steps_to_threshold(hist([math.nan, 2.0, 1.0, math.nan, math.nan]), threshold=5e-2)
    assert c.censored and c.steps == 10


def test_linear_interpolation_between_evals():
    # between step 10 (0.30) and step 15 (0.10) the line hits 0.15 at 3/4 of the way
    h = hist([math.nan, 0.5, 0.3, 0.1], every=5)
    c = steps_to_threshold(h, threshold=0.15, interpolate=True)
    assert c.steps == pytest.approx(13.75) and c.epochs == pytest.approx(1.375)
    assert steps_to_threshold(h, threshold=0.15).steps == 15      # without: the eval itself
    # crossing at the first finite row: nothing to interpolate from
    c0 = steps_to_threshold(hist([math.nan, 0.01, 0.001]), threshold=0.05, interpolate=True)
    assert c0.steps == 5


def test_history_order_and_dataframe_input():
    h = hist([math.nan, 1.0, 0.04, 0.01])
    shuffled = pd.DataFrame([h[2], h[0], h[3], h[1]])
    assert steps_to_threshold(shuffled, threshold=0.05).steps == 10


def test_bad_inputs_raise_config_error():
    with pytest.raises(ConfigError, match="metric"):
        steps_to_threshold(hist([1.0, 0.1]), metric="nope")
    with pytest.raises(ConfigError, match="history"):
        steps_to_threshold([])
    with pytest.raises(ConfigError, match="epoch"):
        steps_to_threshold([{"step": 0, "train_loss": 1.0}])


# ------------------------------------------------------------ per-pair speed
def test_pair_fit_speed_each_pair_its_own_crossing():
    extra = {"acc/11/train": [0.0, 0.7, 0.9, 1.0, 1.0],
             "acc/12/train": [0.0, 0.1, 0.5, 0.6, 0.9],
             "acc/21/train": [0.0, 0.1, 0.2, 0.3, 0.4],     # never reaches 0.6
             "acc/11/test": [0.0, 0.0, 0.0, 0.0, 0.0]}       # other split: ignored
    h = hist([math.nan, 1, 1, 1, 1], extra=extra)
    df = pair_fit_speed(h, threshold=0.6).set_index("pair")
    assert sorted(df.index) == ["11", "12", "21"]
    assert df.loc["11", "steps"] == 5 and not df.loc["11", "censored"]
    assert df.loc["12", "steps"] == 15 and df.loc["12", "epochs"] == 1.5
    assert df.loc["21", "censored"] and df.loc["21", "epochs"] == 2.0
    # a higher threshold moves the first pair later
    assert pair_fit_speed(h, threshold=0.95).set_index("pair").loc["11", "steps"] == 15


# ------------------------------------------------------------ many runs
def fake_run(k, depth, gamma, seed, losses):
    return {"run_id": f"r{k}{depth}{gamma}{seed}", "name": "x", "status": "finished",
            "config": {"task": {"complexity_k": k}, "model": {"n_layers": depth},
                       "init": {"gamma": gamma}, "train": {"init_seed": seed, "data_seed": seed}},
            "history": hist([math.nan, *losses])}


def test_speed_table_and_censored_summary():
    runs = [fake_run(0, 1, 0.8, 0, [0.5, 0.01, 0.0]),          # crosses at step 10 -> 1.0 epoch
            fake_run(0, 1, 0.8, 1, [0.5, 0.2, 0.01]),          # step 15 -> 1.5
            fake_run(5, 1, 0.8, 0, [0.5, 0.4, 0.3]),           # censored at 1.5
            fake_run(5, 1, 0.8, 1, [0.5, 0.4, 0.04])]          # 1.5
    t = speed_table(rows_of(runs), histories_of(runs))
    assert list(t.k) == [0, 0, 5, 5] and t.censored.tolist() == [False, False, True, False]
    assert t.epochs.tolist() == [1.0, 1.5, 1.5, 1.5]
    s = summarize_speed(t).set_index("k")
    assert s.loc[0, "epochs"] == pytest.approx(1.25) and s.loc[0, "n_censored"] == 0
    assert s.loc[0, "sem"] == pytest.approx(np.std([1.0, 1.5], ddof=1) / np.sqrt(2))
    assert s.loc[5, "n_censored"] == 1 and s.loc[5, "censored"] and s.loc[5, "n"] == 2
    r = complexity_slowdown(summarize_speed(t), k_hi=5).iloc[0]
    assert r.ratio == pytest.approx(1.5 / 1.25) and r.hi_censored and not r.lo_censored
    assert r.bound == "lower"
    both = complexity_slowdown(summarize_speed(t[t.censored | (t.k == 5)].assign(censored=True)), k_hi=5)
    assert both.empty  # no k=0 cell left
    allc = complexity_slowdown(summarize_speed(t.assign(censored=True)), k_hi=5).iloc[0]
    assert allc.bound == "unknown" and math.isnan(allc.ratio)


def test_summarize_pair_speed_means_over_seeds():
    df = pd.DataFrame({"pair": ["11", "11", "12"], "epochs": [1.0, 3.0, 2.0],
                       "censored": [False, True, False]})
    s = summarize_pair_speed(df).set_index("pair")
    assert s.loc["11", "epochs"] == 2.0 and s.loc["11", "censored"] and not s.loc["12", "censored"]
    assert math.isnan(s.loc["12", "sem"])


# ------------------------------------------------------------ suspect data
def synthetic_pair_table(rng, bad, n_seeds=3):
    rows = []
    for a in range(1, 5):
        for b in range(1, 5):
            lab = f"{a}{b}"
            base = 10.0 if lab in bad else 2.0
            for s in range(n_seeds):
                rows.append(dict(pair=lab, epochs=base + rng.uniform(-0.5, 0.5), censored=False))
    return pd.DataFrame(rows)


def test_suspect_report_finds_slow_bad_pairs():
    rng = np.random.default_rng(0)
    bad = {"12", "21", "34", "43"}
    df = synthetic_pair_table(rng, bad)
    rep = suspect_report(df, known_bad=[(1, 2), (2, 1), "34", "43"])
    assert set(rep.flagged) == bad
    assert rep.precision == 1.0 and rep.recall == 1.0 and rep.auc == 1.0
    assert set(rep.table.label[rep.table["rank"] <= 4]) == bad
    # top-k rule with too few slots: 2 flagged, both bad -> precision 1, recall 1/2
    rep2 = suspect_report(df, known_bad=bad, top=2)
    assert rep2.precision == 1.0 and rep2.recall == 0.5 and math.isnan(rep2.cutoff)
    # known-bad pairs that are *fast*: nothing of them is flagged
    rep3 = suspect_report(df, known_bad={"11", "22"})
    assert rep3.recall == 0.0 and rep3.precision == 0.0
    assert rep3.auc < 0.5     # never slower than the 4 slow pairs; a coin flip vs the other 10


def test_suspect_report_from_history_and_censored_sorts_slowest():
    extra = {"acc/11/train": [0, 0.9, 1, 1], "acc/12/train": [0, 0.2, 0.3, 0.4],
             "acc/21/train": [0, 0.1, 0.2, 0.4], "acc/22/train": [0, 0.8, 1, 1]}
    h = hist([math.nan, 1, 1, 1], extra=extra)
    rep = suspect_report(h, known_bad=["12", "21"], top=2)
    assert set(rep.flagged) == {"12", "21"} and rep.table.censored.sum() == 2
    assert rep.precision == 1.0 and rep.recall == 1.0
    # ties: everything censored at the same epoch -> no ranking, the top rule flags all of them
    flat = pd.DataFrame({"pair": ["11", "12", "21", "22"], "epochs": [5.0] * 4, "censored": [True] * 4})
    rep_t = suspect_report(flat, known_bad=["12", "21"], top=2)
    assert rep_t.table.flagged.all() and rep_t.precision == 0.5 and rep_t.recall == 1.0 and rep_t.auc == 0.5
    with pytest.raises(ConfigError, match="top"):
        suspect_report(h, top=-1)


# ------------------------------------------------------------ complexity datasets
GROUPS = [((1, 2), (2, 1)), ((1, 3), (3, 1)), ((1, 4), (4, 1)),
          ((2, 3), (3, 2)), ((2, 4), (4, 2)), ((3, 4), (4, 3))]
STEPS = {1: 5, 2: 1, 3: -2, 4: -8}
AUTHORS_TARGET = {1: 4, 2: 1, 3: -5, 4: 5, 5: -9, 6: -6}  # group index -> the authors' x+s


@pytest.mark.parametrize("k", range(7))
def test_complexity_targets_first_k_groups_shifted(k):
    task = AnchorTask(TaskConfig(preset="complexity", complexity_k=k, n_train=4000))
    data = task.train_data(seed=k)
    shifted = {p for g in GROUPS[:k] for p in g}
    assert not task.held_out_pairs and len(task.trained_pairs) == 16
    seen = set()
    for (a, b) in task.pairs:
        sel = (data.pair[:, 0] == a) & (data.pair[:, 1] == b)
        assert sel.sum() > 50, (a, b)
        seen.add((a, b))
        diff = (data.targets[sel] - data.key[sel]).unique().tolist()
        group = next((i + 1 for i, g in enumerate(GROUPS) if (a, b) in g), None)
        expect = AUTHORS_TARGET[group] if (a, b) in shifted else STEPS[a] + STEPS[b]
        assert diff == [expect], ((a, b), diff, expect)
        # the key really is the token just before the anchors
        rows = torch.nonzero(sel).squeeze(1)
        assert torch.equal(data.tokens[rows, data.key_pos[rows]], data.key[rows])
    assert len(seen) == 16
    assert set(rule_violating_pairs(task.cfg)) == {f"{a}{b}" for a, b in shifted}


# ------------------------------------------------------------ figures
def test_plots_return_figures_and_write_png(tmp_path):
    import matplotlib.figure

    from anchorlab.papers.plots.speed import plot_complexity_speed, plot_pair_speed

    rows = []
    for g in (0.3, 0.8):
        for d in (1, 2):
            for k in (0, 2, 5):
                for s in range(2):
                    rows.append(dict(gamma=g, depth=d, k=k, seed=s, epochs=1.0 + k * g + 0.1 * s,
                                     censored=(g == 0.8 and k == 5 and s == 0)))
    summ = summarize_speed(pd.DataFrame(rows))
    fig = plot_complexity_speed(summ)
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 2
    assert fig.axes[0].get_title() == "small init (gamma 0.8)"
    titled = plot_complexity_speed(summ, gamma_label="paper gamma")
    assert [a.get_title() for a in titled.axes[:2]] == ["small init (paper gamma 0.8)", "large init (paper gamma 0.3)"]
    hatched = [p for p in fig.axes[0].patches if p.get_hatch()]
    assert len(hatched) == 2                        # k=5 at depths 1 and 2, small init only
    assert not [p for p in fig.axes[1].patches if p.get_hatch()]
    fig.savefig(tmp_path / "a.png")
    ps = pd.DataFrame({"pair": [f"{a}{b}" for a in range(1, 5) for b in range(1, 5)],
                       "epochs": np.arange(16, dtype=float), "censored": [False] * 15 + [True]})
    fig2 = plot_pair_speed(ps, highlight=["12", "21"])
    reds = [p for p in fig2.axes[0].patches if p.get_facecolor()[:3] == matplotlib.colors.to_rgb("tab:red")]
    assert len(reds) == 2
    fig2.savefig(tmp_path / "b.png")
    for name in ("a.png", "b.png"):
        assert (tmp_path / name).stat().st_size > 1000
    with pytest.raises(ConfigError, match="pair_speed"):
        plot_pair_speed(pd.concat([ps, ps]))


# ------------------------------------------------------------ a real (tiny) run
def test_functions_read_a_real_run_history(tmp_path, tiny_overrides):
    from anchorlab.config import experiment_from_dict
    from anchorlab.train import run as run_experiment

    cfg = experiment_from_dict({}, [*tiny_overrides, "task.preset=complexity", "task.complexity_k=1",
                                    "train.eval_every=8", "model.n_layers=1"])
    final = run_experiment(cfg, tmp_path / "r")
    t = speed_table(rows_of([final]), histories_of([final]), threshold=1e-9)           # unreachable: censored at the last eval
    row = t.iloc[0]
    assert row.k == 1 and row.depth == 1 and row.censored
    assert row.steps == final["steps"] and row.epochs == pytest.approx(final["history"][-1]["epoch"])
    ps = pair_fit_speed(final["history"], threshold=0.0)   # every pair crosses at the step-0 eval
    assert len(ps) == 16 and (ps.steps == 0).all() and not ps.censored.any()
    rep = suspect_report(final["history"], known_bad=rule_violating_pairs(cfg.task), top=2)
    assert len(rep.table) == 16 and rep.table.known_bad.sum() == 2


def test_gamma_convention_reads_the_run_tables_reference_width():
    """Paper gamma when every run sets its std at width 400, plain when none sets a reference width, else the
    bare word (a table that mixes conventions names none)."""
    from anchorlab.papers.reproduce.figures_prediction import gamma_convention

    assert gamma_convention(pd.DataFrame({"init.ref_width": [400.0, 400.0]})) == "paper gamma"
    assert gamma_convention(pd.DataFrame({"init.ref_width": [np.nan, np.nan]})) == "plain gamma"
    assert gamma_convention(pd.DataFrame({"init.gamma": [0.3]})) == "plain gamma"
    assert gamma_convention(pd.DataFrame({"init.ref_width": [400.0, np.nan]})) == "gamma"

"""Mechanism figures (NeurIPS Figs. 3-5, 7; journal Figs. 4, 5A-B): the std-matched cell's runs, the rule that
picks a composing and a memorizing run per seed, numbers per side over the seeds, the maker end to end."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anchorlab.analysis.over_seeds import group_mean, spread_over_seeds
from anchorlab.cli import main
from anchorlab.config import ConfigError
from anchorlab.papers.reproduce import FIGURES, figure_spec
from anchorlab.papers.reproduce.mechanism_picks import PickRule, pick_runs, picks_line
from anchorlab.sweep.grid import expand

ROOT = Path(__file__).resolve().parents[1]
CELL = ROOT / "docs" / "figures" / "fig2_cell_cpu.csv"
MECHANISM = ("neurips-fig3", "neurips-fig4", "neurips-fig5", "neurips-fig7", "journal-fig4", "journal-fig5ab")
PAPERS_OP_SET = "{1:+5,2:+1,3:-2,4:-8} (4,3) held out, (3,4)->x-6"
TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=512", "task.n_eval_per_group=8",
        "train.batch_size=256", "train.epochs=1", "train.eval_every=1", "train.amp=none", "train.threads=1"]


def _cell_rows() -> pd.DataFrame:
    """The committed Fig. 2 cell rows the CPU spec names: depth 2, papers' op set, 1/2x clock, paper gamma 0.3
    and 0.8, the three peaks inside the corrected range, seeds 0-2."""
    d = pd.read_csv(CELL)
    sel = ((d.clock == 0.5) & (d["model.n_layers"] == 2) & (d.op_set == PAPERS_OP_SET) & d.paper_gamma.isin([0.3, 0.8])
           & d.peak_lr.isin([1.25e-4, 1.77e-4, 2.5e-4]) & d.seed.isin([0, 1, 2]))
    return d[sel]


# ------------------------------------------------------------------ the CPU spec is the cell's runs
def test_cpu_spec_is_the_std_matched_cells_runs():
    runs = expand(figure_spec(FIGURES["neurips-fig3"], "cpu"))
    rows = _cell_rows()
    assert len(rows) == 18 and len(runs) == 18
    assert {r.run_id for r in runs} == set(rows.run_id)        # same configs, so the same run ids
    c = runs[0].config
    assert (c.model.n_layers, c.model.d_model, c.model.d_head, c.model.d_ff, c.model.n_heads) == (2, 128, 64, 384, 1)
    assert (c.init.ref_width, c.optim.lr, c.optim.min_lr, c.optim.weight_decay, c.train.amp) == \
        (400, 1e-5, 1e-5, 0.01, "auto")
    assert {r.config.init.gamma for r in runs} == {0.3, 0.8}
    assert sorted({r.config.optim.peak for r in runs}) == [1.25e-4, 1.77e-4, 2.5e-4]
    assert all(r.config.train.init_seed == r.config.train.data_seed for r in runs)
    for fid in MECHANISM:   # every mechanism figure reads the same 18 runs at CPU scale
        assert figure_spec(FIGURES[fid], "cpu") == figure_spec(FIGURES["neurips-fig3"], "cpu"), fid


def test_cpu_spec_runs_are_neurips_fig2s_cpu_runs_at_every_clock_and_lr_grid():
    fig2, fig3 = FIGURES["neurips-fig2"], FIGURES["neurips-fig3"]
    for options in ({}, {"clock": "1"}, {"clock": "2", "lrs": "nine"}):
        ours = {r.run_id for r in expand(figure_spec(fig3, "cpu", options=options))}
        theirs = {r.run_id: r.config for r in expand(figure_spec(fig2, "cpu", options=options))}
        assert len(ours) == 18 * (3 if options.get("lrs") == "nine" else 1) and ours <= set(theirs), options
        assert {theirs[i].model.n_layers for i in ours} == {2}
    half = {r.run_id for r in expand(figure_spec(fig3, "cpu"))}
    assert half.isdisjoint(r.run_id for r in expand(figure_spec(fig3, "cpu", options={"clock": "1"})))
    with pytest.raises(ConfigError, match="^--clock: must be one of 0.5, 1, 2"):
        figure_spec(fig3, "cpu", options={"clock": "3"})


def test_demo_scale_keeps_the_demos_pair():
    assert {r.config.init.gamma for r in expand(figure_spec(FIGURES["neurips-fig3"], "demo"))} == {0.3, 0.45}
    assert {r.config.init.gamma for r in expand(figure_spec(FIGURES["journal-fig4"], "demo"))} == {0.3, 0.45, 0.6}


# ------------------------------------------------------------------ the picking rule
def _cands(rows):
    return pd.DataFrame(rows, columns=["run_id", "seed", "init.gamma", "peak_lr", "final.id_acc",
                                       "final.ood_inferential_acc", "final.ood_symmetric_acc"])


def test_rule_on_the_committed_cell_picks_two_composing_seeds_and_three_memorizing():
    d = _cell_rows().drop(columns="init.gamma").rename(columns={"paper_gamma": "init.gamma"})   # sides by paper gamma
    p = pick_runs(d).set_index(["side", "seed"])
    assert p.loc[("small_init", 0), "run_id"] == "953fc174ac24"     # 1.77e-4: inferential 0.61, ID 0.995
    assert p.loc[("small_init", 1), "run_id"] == "001a4a299875"     # 2.5e-4: inferential 0.78, ID 1.0
    none = p.loc[("small_init", 2)]
    assert not none.picked and pd.isna(none.run_id) and none.eligible == 0 and none.candidates == 3
    assert "none" in none.note and "0.278" in none.note             # best final inferential of seed 2's runs
    assert [p.loc[("large_init", s), "run_id"] for s in (0, 1, 2)] == ["34019002b0e7", "9ac13c1bbd9e",
                                                                       "5a2afe3cedeb"]
    assert picks_line(p.reset_index()) == ("small init composes: 2 of 3 seeds (none: seed 2); "
                                           "large init memorizes: 3 of 3 seeds")


def test_rule_bars_ties_and_seeds_missing_on_a_side():
    c = _cands([
        ("a", 0, 0.8, 1e-4, 0.95, 0.70, 0.0), ("b", 0, 0.8, 2e-4, 0.85, 0.95, 0.0),   # b: higher, but unfit
        ("c", 0, 0.8, 3e-4, 1.00, 0.70, 0.0),                                         # tie with a: higher ID wins
        ("d", 1, 0.8, 1e-4, 0.99, 0.49, 0.0),                                         # just under the bar
        ("e", 0, 0.3, 2e-4, 1.00, 0.0, 0.90), ("f", 0, 0.3, 1e-4, 1.00, 0.0, 0.90),   # tie: lower lr wins
        ("g", 1, 0.3, 1e-4, 0.99, 0.0, math.nan),                                     # no symmetric recorded
        ("h", 2, 0.3, 1e-4, 0.99, 0.0, 0.80),                                         # seed 2: large side only
        ("m", 0, 0.5, 1e-4, 1.00, 0.99, 0.0)])                                        # middle gamma: no side
    p = pick_runs(c).set_index(["side", "seed"])
    assert list(p.index) == [(s, k) for s in ("small_init", "large_init") for k in (0, 1, 2)]
    assert p.loc[("small_init", 0), "run_id"] == "c" and p.loc[("small_init", 0), "eligible"] == 2
    assert not p.loc[("small_init", 1), "picked"] and not p.loc[("small_init", 2), "picked"]
    assert p.loc[("small_init", 2), "candidates"] == 0
    assert p.loc[("large_init", 0), "run_id"] == "f"
    assert not p.loc[("large_init", 1), "picked"] and p.loc[("large_init", 2), "run_id"] == "h"
    assert "m" not in set(p.run_id)
    loose = pick_runs(c, PickRule(id_min=0.8, compose_min=0.4)).set_index(["side", "seed"])
    assert loose.loc[("small_init", 0), "run_id"] == "b" and loose.loc[("small_init", 1), "run_id"] == "d"


def test_rule_reads_the_judgements_metric_columns():
    from anchorlab.papers.eval.judgement import MAPPINGS as JUDGEMENT
    from anchorlab.papers.reproduce.mechanism_picks import MAPPINGS

    assert MAPPINGS == JUDGEMENT


def test_rule_errors_name_the_field():
    with pytest.raises(ConfigError, match="^id_min: must be <= 1.0"):
        PickRule(id_min=1.5)
    with pytest.raises(ConfigError, match="compose_min"):
        PickRule(compose_min=-0.1)
    with pytest.raises(ConfigError, match="lack column.*final.ood_symmetric_acc"):
        pick_runs(_cands([]).drop(columns="final.ood_symmetric_acc"))
    with pytest.raises(ConfigError, match="two init rates"):
        pick_runs(_cands([("a", 0, 0.8, 1e-4, 1.0, 1.0, 0.0)]))
    assert pick_runs(_cands([])).empty


def _fake_run(sweep: Path, sets: list[str], id_acc: float, inferential: float, symmetric: float) -> str:
    from anchorlab.config import experiment_from_dict

    cfg = experiment_from_dict({}, sets)
    d = sweep / "runs" / cfg.run_id()
    d.mkdir(parents=True)
    (d / "final.json").write_text(json.dumps({
        "run_id": cfg.run_id(), "status": "finished", "config": cfg.to_dict(), "steps": 10, "total_steps": 10,
        "final": {"id_acc": id_acc, "ood_inferential_acc": inferential, "ood_symmetric_acc": symmetric}}))
    return cfg.run_id()


def test_candidates_are_the_last_specs_runs_and_depth_two_where_depths_mix(tmp_path):
    from anchorlab.papers.reproduce.mechanism_picks import candidate_table

    sweep = tmp_path / "sweep"
    ids = {(g, L, seed): _fake_run(sweep, [f"init.gamma={g}", f"model.n_layers={L}", f"train.init_seed={seed}"],
                                   0.95, 0.6 if g == 0.8 else 0.0, 0.7 if g == 0.3 else 0.0)
           for g in (0.3, 0.8) for L in (1, 2) for seed in (0, 1)}
    c = candidate_table(sweep)                                # no sweep.yaml: every completed run, depth 2
    assert set(c.run_id) == {v for (g, L, s), v in ids.items() if L == 2} and (c["model.n_layers"] == 2).all()
    assert c["final.ood_inferential_acc"][c["init.gamma"] == 0.8].eq(0.6).all() and set(c.seed) == {0, 1}
    spec = {"name": "x", "base": "neurips/paper", "set": ["model.n_layers=1"],
            "axes": {"init.gamma": [0.3, 0.8]}, "zip": [{"train.init_seed": [0, 1]}]}
    import yaml

    (sweep / "sweep.yaml").write_text(yaml.safe_dump(spec))   # the last spec run here: its runs only
    assert candidate_table(sweep).empty                       # neurips/paper's defaults: none of these runs
    spec["base"] = {}
    (sweep / "sweep.yaml").write_text(yaml.safe_dump(spec))
    c = candidate_table(sweep)
    assert set(c.run_id) == {v for (g, L, s), v in ids.items() if L == 1}
    p = pick_runs(c)
    assert p.picked.all() and len(p) == 4


# ------------------------------------------------------------------ numbers per side over the seeds
def test_spread_over_seeds_gives_n_mean_sd_and_keeps_an_empty_side():
    runs = pd.DataFrame({"side": ["small_init", "small_init", "small_init", "large_init"],
                         "x": [0.2, 0.4, np.nan, 0.9], "y": [1.0, 3.0, 5.0, 2.0], "flag": [True] * 4})
    s = spread_over_seeds(runs, "side", groups=["small_init", "large_init", "other"])
    assert set(s.metric) == {"x", "y"}                          # booleans are not numbers to average
    x = s[(s.side == "small_init") & (s.metric == "x")].iloc[0]
    assert x.n == 2 and x["mean"] == pytest.approx(0.3) and x.sd == pytest.approx(np.std([0.2, 0.4], ddof=1))
    assert (x["min"], x["max"]) == pytest.approx((0.2, 0.4))
    one = s[(s.side == "large_init") & (s.metric == "y")].iloc[0]
    assert one.n == 1 and one["mean"] == 2.0 and math.isnan(one.sd)
    other = s[s.side == "other"]
    assert len(other) == 2 and (other.n == 0).all() and other["mean"].isna().all()
    assert group_mean(s, "side", "small_init", "y") == pytest.approx(3.0)
    assert math.isnan(group_mean(s, "side", "other", "y")) and math.isnan(group_mean(s, "side", "x", "nope"))
    with pytest.raises(ConfigError, match="^by: "):
        spread_over_seeds(runs, "seed")
    with pytest.raises(ConfigError, match="^metrics: .*zz"):
        spread_over_seeds(runs, "side", ["x", "zz"])


# ------------------------------------------------------------------ the figure end to end
def _set_final(run_dir: Path, id_acc: float, inferential: float, symmetric: float) -> None:
    p = run_dir / "final.json"
    f = json.loads(p.read_text())
    f["final"].update(id_acc=id_acc, ood_inferential_acc=inferential, ood_symmetric_acc=symmetric)
    p.write_text(json.dumps(f))


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    """The CPU spec's 18 runs at a tiny size (a few steps each), trained once through `reproduce neurips-fig4`."""
    out = tmp_path_factory.mktemp("mech") / "fig"
    args = ["reproduce", "neurips-fig4", "--scale", "cpu", "--out", str(out), "--executor", "inprocess",
            "--no-progress"]
    for s in TINY:
        args += ["--set", s]
    assert main(args) == 0
    return out, args


def test_tiny_runs_that_fit_nothing_are_reported_not_substituted(cell):
    out, _ = cell
    runs = list((out / "sweep" / "runs").iterdir())
    assert len(runs) == 18
    picks = pd.read_csv(out / "neurips-fig4" / "picks.csv")
    assert len(picks) == 6 and not picks.picked.any() and picks.note.str.startswith("none").all()
    assert pd.read_csv(out / "neurips-fig4" / "mechanism_summary.csv")["n"].eq(0).all()
    claims = pd.read_csv(out / "neurips-fig4" / "paper_vs_ours.csv")
    assert claims.ours.iloc[0] == "small init composes: 0 of 3 seeds (none: seed 0, 1, 2); " \
                                  "large init memorizes: 0 of 3 seeds (none: seed 0, 1, 2)"
    assert pd.to_numeric(claims.ours.iloc[1:]).isna().all()
    assert not any(p.is_dir() and p.name.endswith(("seed0", "seed1", "seed2")) for p in (out / "neurips-fig4").iterdir())


@pytest.fixture(scope="module")
def edited(cell):
    """``cell`` with chosen final metrics (the tests before it see the tiny runs as trained): small init,
    seeds 0 and 1 compose (seed 0 at two lrs: the higher inferential wins), seed 2 composes only unfit; large
    init, every seed memorizes. Returns (out, args, run_of(gamma, seed, lr) -> run id)."""
    out, args = cell
    cands = pd.read_csv(out / "neurips-fig4" / "candidates.csv")
    sweep = out / "sweep" / "runs"

    def run_of(gamma, seed, lr):
        r = cands[(cands["init.gamma"] == gamma) & (cands.seed == seed) & np.isclose(cands.peak_lr, lr)]
        assert len(r) == 1
        return r.run_id.iloc[0]

    _set_final(sweep / run_of(0.8, 0, 1.77e-4), 0.99, 0.6, 0.0)
    _set_final(sweep / run_of(0.8, 0, 2.5e-4), 0.95, 0.8, 0.0)
    _set_final(sweep / run_of(0.8, 1, 1.25e-4), 1.0, 0.7, 0.0)
    _set_final(sweep / run_of(0.8, 2, 2.5e-4), 0.85, 0.9, 0.0)      # composes but never fit: not eligible
    for seed in (0, 1, 2):
        _set_final(sweep / run_of(0.3, seed, 1.77e-4), 1.0, 0.0, 0.6 + 0.1 * seed)
    return out, args, run_of


def test_maker_analyzes_every_picked_run_and_reports_means_over_seeds(edited):
    out, args, run_of = edited
    assert main([*args, "--no-train"]) == 0
    picks = pd.read_csv(out / "neurips-fig4" / "picks.csv").set_index(["side", "seed"])
    assert picks.loc[("small_init", 0), "run_id"] == run_of(0.8, 0, 2.5e-4)
    assert picks.loc[("small_init", 1), "run_id"] == run_of(0.8, 1, 1.25e-4)
    assert not picks.loc[("small_init", 2), "picked"] and "none" in picks.loc[("small_init", 2), "note"]
    assert picks.xs("large_init").picked.all()
    runs = pd.read_csv(out / "neurips-fig4" / "mechanism_runs.csv")
    assert sorted(zip(runs.side, runs.seed)) == [("large_init", 0), ("large_init", 1), ("large_init", 2),
                                                 ("small_init", 0), ("small_init", 1)]
    assert set(runs.run_id) == set(picks[picks.picked].run_id)
    assert runs.set_index("run_id").loc[run_of(0.3, 2, 1.77e-4), "ood_symmetric_acc"] == pytest.approx(0.8)
    summ = pd.read_csv(out / "neurips-fig4" / "mechanism_summary.csv")
    for side, n in (("small_init", 2), ("large_init", 3)):
        s = summ[summ.side == side].set_index("metric")
        assert s.loc["L0 anchors->key", "n"] == n
        col = runs[runs.side == side]["L0 anchors->key"]
        assert s.loc["L0 anchors->key", "mean"] == pytest.approx(col.mean())
        assert s.loc["L0 anchors->key", "sd"] == pytest.approx(col.std(ddof=1))
    assert summ.set_index(["side", "metric"]).loc[("large_init", "ood_symmetric_acc"), "mean"] == pytest.approx(0.7)
    for label in ("small_init_seed0", "small_init_seed1", "large_init_seed0", "large_init_seed2"):
        assert (out / "neurips-fig4" / label / "cos-ao2.png").exists(), label
    assert (out / "neurips-fig4" / "small_init_seed1" / "cos-v2.png").exists()
    assert not (out / "neurips-fig4" / "large_init_seed0" / "cos-v2.png").exists()    # V(2): the inferential solution only
    assert not (out / "neurips-fig4" / "small_init_seed2").exists()
    claims = pd.read_csv(out / "neurips-fig4" / "paper_vs_ours.csv")
    assert claims.ours.iloc[0] == "small init composes: 2 of 3 seeds (none: seed 2); " \
                                  "large init memorizes: 3 of 3 seeds"
    want = summ.set_index(["side", "metric"]).loc[("small_init", "contrast X_ao(2)"), "mean"]
    assert float(claims.ours.iloc[1]) == pytest.approx(want)           # the claim reads the side's mean
    readme = (out / "neurips-fig4" / "README.md").read_text()
    assert "pick_runs" in readme and "2 of 3 seeds" in readme


def test_demo_scale_analyzes_the_pair_as_it_comes(edited):
    from anchorlab.papers.reproduce.figures_mechanism import picks_for

    out, _, _ = edited
    _, strict = picks_for(out / "sweep", "cpu")
    _, demo = picks_for(out / "sweep", "demo")                   # the bars at 0: every side and seed has a run
    assert demo.picked.all() and len(demo) == 6 and not strict.picked.all()


def test_complexity_figure_reads_the_same_picks(edited):
    pytest.importorskip("scipy")
    out, args, _ = edited
    fig5 = [a if a != "neurips-fig4" else "neurips-fig5" for a in args]
    assert main([*fig5, "--no-train"]) == 0
    runs = pd.read_csv(out / "neurips-fig5" / "complexity_runs.csv")
    picks = pd.read_csv(out / "neurips-fig5" / "picks.csv")
    assert set(runs.run_id) == set(picks[picks.picked].run_id)
    summ = pd.read_csv(out / "neurips-fig5" / "complexity_summary.csv").set_index(["side", "metric"])
    small = runs[runs.side == "small_init"]
    assert summ.loc[("small_init", "mean_abs_cos"), "mean"] == pytest.approx(small.mean_abs_cos.mean())
    assert "d_model" not in set(summ.index.get_level_values("metric"))
    claims = pd.read_csv(out / "neurips-fig5" / "paper_vs_ours.csv")
    diff = summ.loc[("small_init", "mean_abs_cos"), "mean"] - summ.loc[("large_init", "mean_abs_cos"), "mean"]
    assert float(claims.ours.iloc[1]) == pytest.approx(diff)


def test_dry_run_prints_the_cells_runs_the_hours_and_the_rule(capsys, tmp_path):
    assert main(["reproduce", "neurips-fig3", "--scale", "cpu", "--dry-run", "--out", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    for rid in _cell_rows().run_id:
        assert rid in out
    assert "18 runs, 18 to train" in out and "h on this CPU" in out and "scale rule (cpu): the std-matched" in out
    assert not (tmp_path / "d").exists()

"""The clean-picks rule: eligibility, ranking, the retrain-cost bound and the matched set."""

from pathlib import Path

import pandas as pd
import pytest

from anchorlab.config import ConfigError
from anchorlab.papers.clean_picks import CleanRule, pick


def _cands():
    rows = [  # run_id, preset, gamma, wd, steps, id, inferential, symmetric
        ("c1", "p", 0.45, 0.0, 4680, 1.0, 0.90, 0.0), ("c2", "p", 0.45, 0.0, 4680, 1.0, 0.85, 0.1),
        ("c3", "q", 0.8, 0.0, 90000, 1.0, 0.95, 0.0),           # cleaner but too long to retrain
        ("c4", "p", 0.45, 0.0, 4680, 0.94, 0.99, 0.0),          # ID below the bar
        ("c5", "p", 0.45, 0.0, 4680, 1.0, 0.79, 0.0),           # mapping below the bar
        ("m1", "q", 0.3, 0.1, 4680, 1.0, 0.0, 1.0), ("m2", "q", 0.3, 0.0, 4680, 1.0, 0.0, 1.0),
        ("m3", "q", 0.3, 0.0, 2000, 1.0, 0.0, 1.0), ("m4", "p", 0.45, 0.0, 4680, 1.0, 0.0, 0.9),
        ("m5", "p", 0.5, 0.0, 4680, 1.0, 0.0, 0.95)]           # same preset, another gamma: not matched
    return pd.DataFrame([dict(zip(["run_id", "preset", "gamma", "weight_decay", "planned_steps", "final.id_acc",
                                   "final.ood_inferential_acc", "final.ood_symmetric_acc"], r), table="t.csv",
                              ref_width=None) for r in rows])


def test_rule_ranks_by_the_mapping_then_id_then_cost_and_skips_what_it_cannot_retrain():
    p = pick(_cands(), CleanRule(per_side=2, matched=1, max_steps=10_000))
    comp = p[p.side == "composes"]
    assert list(comp.run_id) == ["c3", "c1", "c2"] and list(comp.picked) == [False, True, True]
    assert "90,000 planned steps" in comp.note.iloc[0]
    mem = p[(p.side == "memorizes") & (p.set == "cleanest")]
    assert list(mem.run_id) == ["m3", "m2"]              # ties at 1.0: fewer steps, then less decay
    matched = p[p.set == "matched"]
    assert list(matched.run_id) == ["m4"]                # the composing picks' preset and gamma only


def test_rule_refuses_bad_bars():
    with pytest.raises(ConfigError, match="bar"):
        CleanRule(bar=1.5)
    with pytest.raises(ConfigError, match="per_side"):
        CleanRule(per_side=0)


def test_clean_mechanism_measures_and_judges_two_tiny_runs(tmp_path, tiny_overrides):
    """Every measure of the claims table comes out of a trained run, and the judgement reads the sides apart."""
    from anchorlab.config import experiment_from_dict, load_yaml
    from anchorlab.papers.analysis.clean_mechanism import MEASURES, judged, per_run
    from anchorlab.train import train

    rows = []
    for i, (side, s) in enumerate((("composes", "cleanest"), ("memorizes", "cleanest"), ("memorizes", "matched"))):
        cfg = experiment_from_dict(load_yaml("demo/small"), [*tiny_overrides, "model.d_model=64", "model.d_head=32",
                                                             f"train.init_seed={i}"])
        d = tmp_path / f"r{i}"
        train(cfg, d)
        rows.append({"side": side, "set": s, "rank": 1, "run_id": cfg.run_id(), "preset": "p", "gamma": 0.45,
                     "weight_decay": 0.0, "retrained.final.id_acc": 1.0, "retrained.final.ood_inferential_acc": 0.9,
                     "retrained.final.ood_symmetric_acc": 0.0, "same_solution": True, "run_dir": str(d)})
    rows.append({**rows[0], "same_solution": False, "run_id": "gone", "run_dir": str(tmp_path / "nowhere")})
    retrained = pd.DataFrame(rows)
    runs, sp = per_run(retrained, top_k=5, n_inputs=64, n_draws=1)
    assert len(runs) == 3 and "gone" not in set(runs.run_id)       # a pick that lost its solution is left out
    for _, col, _, _ in MEASURES:
        assert col in runs and runs[col].notna().all(), col
    assert ((runs["top2_share"] > 0) & (runs["top2_share"] <= 1)).all()
    j = judged(runs)
    assert set(j.comparison) == {"cleanest", "matched"} and (j.a_n == 1).all() and (j.b_n == 1).all()
    one = j[(j.comparison == "cleanest") & (j.measure == "L1 last->key")].iloc[0]
    assert one.reading == ("as the paper, apart" if one.a_mean < one.b_mean else "the other way")
    from anchorlab.papers.analysis.clean_mechanism import init_contrast, judge

    emb, spec = init_contrast(retrained[retrained.same_solution].assign(
        side=["small_init", "large_init", "large_init"], seed=[0, 0, 1]), top_k=4)
    assert len(emb) == 3 and len(spec) == 12 and emb.top2_share.between(0, 1).all()
    ji = judge(emb[emb.side == "small_init"], emb[emb.side == "large_init"], "init", ("C7",), "small_init", "large_init")
    assert set(ji.claim) == {"C7"} and (ji.b_n == 2).all()
    assert len(sp) == 15 and (sp.groupby("run_id").share.sum() <= 1 + 1e-9).all()
    assert (sp.groupby("run_id").share.apply(lambda s: s.is_monotonic_decreasing)).all()
    from anchorlab.papers.plots.spectrum import plot_spectra

    fig = plot_spectra(pd.concat([sp, spec]))          # one panel per comparison: init, and the clean picks
    assert len(fig.axes) == 2 and all(len(ax.lines) >= 3 for ax in fig.axes)


def test_claim_status_follows_the_legend():
    from anchorlab.papers.analysis.clean_mechanism import claim_status

    def j(readings, kinds=None):
        rows = [{"comparison": c, "claim": "C4", "kind": ">", "reading": r} for c, r in readings]
        return pd.DataFrame(rows)

    apart = "as the paper, apart"
    assert claim_status(j([("cleanest", apart), ("matched", apart)]), "C4") == "reproduced"
    assert claim_status(j([("cleanest", apart), ("matched", "as the paper, overlapping")]), "C4") == "partly"
    assert claim_status(j([("cleanest", "the other way"), ("cleanest", "the other way"), ("cleanest", apart),
                           ("matched", apart)]), "C4") == "not reproduced"
    with pytest.raises(ValueError, match="C5"):
        claim_status(j([("cleanest", apart)]), "C5")
    init = pd.DataFrame([{"comparison": "init", "claim": "C4", "kind": ">", "reading": apart}])
    assert claim_status(init, "C4", ("init",)) == "reproduced"


def test_the_demo_rate_sweep_is_the_committed_demo_runs():
    """C7's init contrast reads the demo's runs: the preset expands to exactly the committed rows' run ids."""
    from pathlib import Path

    from anchorlab.sweep.grid import expand

    rows = pd.read_csv(Path(__file__).resolve().parents[1] / "docs" / "figures" / "demo_rate_cpu.csv")
    rows = rows[rows.op_set == "{1:+5,2:+1,3:-2,4:-8}"]
    assert {r.run_id for r in expand("demo_rate_cpu")} == set(rows.run_id) and len(rows) == 20


def test_two_directions_is_a_level_every_small_init_run_must_reach():
    """C7's "from two directions" binds the composing / small-init side: every run's +3 / +4 angle at the bar
    (45 degrees) or more reads as the paper, one run short of it does not, whatever the other side does."""
    from anchorlab.papers.analysis.clean_mechanism import LEVELS, judge

    bar = LEVELS["two directions"]
    small = pd.DataFrame({"angle_deg": [bar, 80.0]})
    assert judge(small, pd.DataFrame({"angle_deg": [90.0]}), "init", ("C7",)).reading.item() == "as the paper"
    short = pd.DataFrame({"angle_deg": [bar - 1, 80.0]})
    assert judge(short, pd.DataFrame({"angle_deg": [0.0]}), "init", ("C7",)).reading.item() == "not as the paper"


def test_c7_status_counts_the_two_directions_row():
    """The committed init contrast: the spectrum and ordering rows read as the paper, the angle row does not
    (the small init's +3 / +4 moves mostly point one way), so C7 reads "partly" by the legend."""
    from anchorlab.papers.analysis.clean_mechanism import claim_status

    j = pd.read_csv(Path(__file__).resolve().parents[1] / "docs" / "figures" / "clean_mechanism_cpu_judged.csv")
    c7 = j[(j.claim == "C7") & (j.comparison == "init")].set_index("measure").reading
    assert c7["angle_deg"] == "not as the paper" and c7.drop("angle_deg").str.startswith("as the paper").all()
    assert claim_status(j, "C7", ("init",)) == "partly"


def test_lead_figures_draw_the_first_ranked_clean_pick_of_each_side(tmp_path):
    """The claim pages' lead figures come from the runs the statuses read: rank 1 of the cleanest set per side,
    and one seed of each init on the journal's task."""
    import matplotlib.pyplot as plt
    import pandas as pd
    import pytest

    from anchorlab.papers.analysis import clean_figures as cf

    r = pd.DataFrame({"side": ["composes", "composes", "memorizes", "memorizes"],
                      "set": ["cleanest", "cleanest", "matched", "cleanest"], "rank": [2, 1, 1, 1],
                      "picked": [True, True, True, True], "run_dir": ["c2", "c1", "m-matched", "m1"]})
    assert cf.lead_runs(r) == {"composes": "c1", "memorizes": "m1"}
    init = pd.DataFrame({"side": ["large_init", "small_init", "small_init"], "run_dir": ["l0", "s0", "s1"]})
    assert list(cf.init_runs(init).items()) == [("small_init", "s0"), ("large_init", "l0")]
    with pytest.raises(ValueError, match="^side: no run for large_init"):
        cf.init_runs(init[init.side == "small_init"])
    pngs = []
    for i, w in enumerate((40, 60)):
        plt.imsave(tmp_path / f"{i}.png", [[0.5] * w] * 30)
        pngs.append(tmp_path / f"{i}.png")
    out = cf.side_by_side(pngs, tmp_path / "both.png")
    h, w = plt.imread(out).shape[:2]
    assert w > h     # one row


def test_journal_picks_take_the_cleanest_runs_of_each_init_without_decay():
    """The journal-task rule: small init (gamma >= 0.6) composing above 0.95, large init (gamma <= 0.4) fitting
    the seen pairs with OOD under 0.05, weight decay 0, depth two; ranked by OOD from its side's clean end."""
    import pandas as pd
    import pytest

    from anchorlab.config import ConfigError
    from anchorlab.papers.journal_picks import JournalRule, pick

    rows = [  # run_id, gamma, wd, layers, ID, OOD
        ("a", 0.8, 0.0, 2, 1.0, 0.999), ("b", 0.6, 0.0, 2, 1.0, 0.971), ("c", 0.6, 0.0, 2, 1.0, 0.9455),
        ("d", 0.8, 0.0116, 2, 1.0, 1.0), ("e", 0.5, 0.0, 2, 1.0, 0.99), ("f", 0.8, 0.0, 2, 0.9, 0.99),
        ("g", 0.4, 0.0, 2, 1.0, 0.0065), ("h", 0.4, 0.0, 2, 1.0, 0.0), ("i", 0.4, 0.0, 4, 1.0, 0.0),
        ("j", 0.4, 0.0, 2, 1.0, 0.2), ("k", 0.8, 0.0, 2, 1.0, 0.98)]
    t = pd.DataFrame(rows, columns=["run_id", "init.gamma", "optim.weight_decay", "model.n_layers", "final.id_acc",
                                    "final.ood_acc"]).assign(**{"train.init_seed": 0, "op_set": "x"})
    p = pick(t)
    assert p[p.arm == "small_init"].run_id.tolist() == ["a", "k", "b"]       # c under the bar; d decays; e, f out
    assert p[p.arm == "large_init"].run_id.tolist() == ["h", "g"]            # i is deeper; j composes some
    assert pick(t, JournalRule(per_side=1)).run_id.tolist() == ["a", "h"]
    with pytest.raises(ConfigError, match="^small_min: must exceed large_max"):
        JournalRule(small_min=0.4)


def test_the_retraining_commands_train_as_the_command_line_did(tmp_path, monkeypatch):
    """The committed runs trained under the CLI (process settings on); a retraining entry point asks for the same."""
    import os

    from anchorlab.config.process_settings import PROCESS_SETTINGS_ENV, process_settings
    from anchorlab.papers import journal_picks

    monkeypatch.setenv(PROCESS_SETTINGS_ENV, "unset")   # recorded, so the variable main sets is undone after
    monkeypatch.delenv(PROCESS_SETTINGS_ENV)
    assert journal_picks.main(["--out", str(tmp_path), "--pick-only"]) == 0
    assert process_settings() and (tmp_path / "picks.csv").exists()
    monkeypatch.setenv(PROCESS_SETTINGS_ENV, "off")           # an explicit choice is kept
    journal_picks.main(["--out", str(tmp_path), "--pick-only"])
    assert os.environ[PROCESS_SETTINGS_ENV] == "off"

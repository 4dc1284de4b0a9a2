"""Journal Fig. 3B / 5C / 10 at CPU scale: the std rule of its preset, the journal's cell judgement on a
hand-made run table, the figure end to end on tiny runs, its committed table redrawn, and the dry run."""

import dataclasses
import math

import pandas as pd
import pytest

from anchorlab.cli import main
from anchorlab.eval.definitions import metric_definition
from anchorlab.papers.eval.journal_cells import (JOURNAL_LR_SUM, claim_lines, claim_summary, depth_table, journal_cells,
                                          journal_label, journal_view, journal_wd, main_cells)
from anchorlab.papers.reproduce import FIGURES
from anchorlab.papers.reproduce.runner import figure_spec
from anchorlab.sweep.grid import expand
from anchorlab.train.run import init_model

D = metric_definition("authors-fig3")
CPU_LR_SUM = 6.3385   # the preset's clock at 1/2x (the figure writes each run's own)


def _preset_configs():
    return {r.config.init.gamma: r.config for r in expand("journal_fig3_cpu") if r.config.train.init_seed == 0}


# ------------------------------------------------------------------ the std rule
def test_every_parameter_has_the_width_640_models_std_at_each_paper_gamma():
    cfgs = _preset_configs()
    assert sorted(cfgs) == [0.4, 0.5, 0.6, 0.8]
    c = cfgs[0.5]
    assert (c.model.d_model, c.model.n_heads, c.model.d_head, c.model.d_ff, c.model.n_layers) == (128, 2, 64, 256, 2)
    assert c.init.ref_width == 640 and c.init.fan_in == "d_model" and c.init.residual_scale
    wide = dataclasses.replace(c, model=dataclasses.replace(c.model, d_model=640, n_heads=10, d_ff=1280),
                               init=dataclasses.replace(c.init, ref_width=None))
    _, small_t = init_model(c)
    _, wide_t = init_model(wide)
    both = small_t.merge(wide_t, on="name", suffixes=("", "_640"))
    assert len(both) == len(small_t) == len(wide_t)
    weights = both[both.role.isin(["q", "k", "v", "o", "mlp_in", "mlp_out", "embed", "pos", "readout"])]
    assert set(weights.role) >= {"q", "k", "v", "o", "mlp_in", "mlp_out", "embed", "readout"}
    pd.testing.assert_series_equal(weights.target_std, weights.target_std_640, check_names=False, rtol=1e-12)
    # the biases keep PyTorch's default U(+-1/sqrt(fan_in)) (the authors' GPT-2; gamma does not enter), the fan-in
    # read at width 640 (init.bias: pytorch_ref), so they match the width-640 model's too
    assert c.init.bias == "pytorch_ref"
    biases = both[both.role == "bias"]
    assert len(biases) == 6 * 2 + 1 and (biases.fan_in_rule == "pytorch_default").all()   # 6 a block, the readout
    pd.testing.assert_series_equal(biases.target_std, biases.target_std_640, check_names=False, rtol=1e-12)
    for r in biases.itertuples():
        assert abs(r.measured_std - r.target_std) < 6 * r.target_std / math.sqrt(2 * int(r.numel)), r.name
    # with the plain PyTorch default (true fan-in) they would be sqrt(640 / 128) times larger
    _, plain_t = init_model(dataclasses.replace(c, init=dataclasses.replace(c.init, bias="pytorch")))
    plain = plain_t[plain_t.role == "bias"].merge(wide_t, on="name", suffixes=("", "_640"))
    assert (plain.target_std / plain.target_std_640).to_numpy() == pytest.approx(math.sqrt(5), rel=1e-12)
    # the drawn tensors have it too (6 sampling sigmas), and it is not the plain-gamma std at width 128
    for r in weights.itertuples():
        n = int(r.numel)
        assert abs(r.measured_std - r.target_std) < 6 * r.target_std / math.sqrt(2 * n), r.name
    q = weights[weights.role == "q"].iloc[0]
    assert q.target_std == pytest.approx(640 ** -0.5) and q.target_std < 0.5 * 128 ** -0.5
    # every paper gamma: 640^-gamma, the residual projections / sqrt(2 x 2 layers)
    for g, cfg in cfgs.items():
        _, t = init_model(cfg)
        for role, div in (("q", 1.0), ("mlp_in", 1.0), ("embed", 1.0), ("o", math.sqrt(4)), ("mlp_out", math.sqrt(4))):
            got = t[t.role == role].target_std
            assert len(got) and got.to_numpy() == pytest.approx(640 ** -g / div, rel=1e-12), (g, role)


# ------------------------------------------------------------------ the judgement on a hand-made table
def _run(gamma, wd, seed, id_b, ood_b, id_f, ood_f, comm, sr=math.nan, layers=4):
    return {"run_id": f"r{gamma}-{wd}-{seed}-{layers}", "status": "finished", "init.gamma": gamma,
            "init.ref_width": 640, "model.d_model": 128, "model.n_layers": layers, "optim.weight_decay": wd,
            "clock": 0.5, "seed": seed, f"best.{D.id}": id_b, f"best.{D.ood}": ood_b, f"final.{D.id}": id_f,
            f"final.{D.ood}": ood_f, f"final.{D.commutativity}": comm, f"best.{D.commutativity}": 1.0,
            "lr_sum": CPU_LR_SUM, "cond/wq0_stable_rank": sr}


def _grid():
    rows = []
    # gamma 0.4: phase 1 at wd 0 (the mean ID 0.875 < 0.9 although seed 0 fits), 2c at the largest decay
    rows += [_run(0.4, 0.0, 0, 0.95, 0.1, 0.95, 0.1, 0.5, 60), _run(0.4, 0.0, 1, 0.80, 0.1, 0.8, 0.1, 0.5, 62)]
    rows += [_run(0.4, 1.16, s, 0.99, 0.2, 0.99, 0.2, 0.9, 30) for s in (0, 1)]
    # gamma 0.8: 2n at wd 0 (the best OOD reaches 0.6 on one seed only: mean 0.45), phase 3 at 1.16
    rows += [_run(0.8, 0.0, 0, 1.0, 0.6, 1.0, 0.2, 0.6, 20), _run(0.8, 0.0, 1, 1.0, 0.3, 1.0, 0.3, 0.6, 22)]
    rows += [_run(0.8, 1.16, s, 1.0, 0.9, 1.0, 0.4, 1.0, 5) for s in (0, 1)]
    return pd.DataFrame(rows)


def test_phase_per_cell_is_read_from_the_mean_id_and_ood_in_both_readings():
    diverged = {**_run(0.4, 0.0, 2, 0.0, 0.0, 0.0, 0.0, 0.0), "status": "diverged"}   # never judged
    view = journal_view(pd.concat([_grid(), pd.DataFrame([diverged])], ignore_index=True), D)
    assert len(view) == 8 and view.paper_gamma.tolist() == view["init.gamma"].tolist() and (view.journal_wd.isin([0.0, 1.0])).all()
    assert view.set_index("run_id").phase_best["r0.4-0.0-0-4"] == "2n"   # the run alone fits ID
    assert not {"weight_decay", "n_layers", "id_best", "commutativity", "stable_rank"} & set(view.columns)   # no copies
    cells = journal_cells(view, D).set_index(["gamma_axis", "optim.weight_decay"])
    assert cells.loc[(0.4, 0.0)].phase_best == "1" and cells.loc[(0.4, 0.0)].id_best == pytest.approx(0.875)
    assert cells.loc[(0.4, 1.16)].phase_best == "2c" and not cells.loc[(0.4, 1.16)].comm_low
    assert cells.loc[(0.8, 0.0)].phase_best == "2n" and cells.loc[(0.8, 0.0)].comm_low
    assert cells.loc[(0.8, 1.16)].phase_best == "3" and cells.loc[(0.8, 1.16)].phase_final == "2c"
    assert cells.loc[(0.8, 1.16)].commutativity == 1.0   # the final commutativity, not its best over training
    assert cells.loc[(0.4, 0.0)].stable_rank == pytest.approx(61) and (cells.n_seeds == 2).all()
    # the journal's cells at the matched rows: (0.4, 0) phase 1, (0.4, 1) 2c, (0.8, 0) and (0.8, 1) phase 3
    assert cells.journal_phase.tolist() == ["1", "2c", "3", "3"]
    assert cells.agrees_best.tolist() == [True, True, False, True]


def test_decay_rows_and_the_journals_cells():
    assert journal_wd(1.16, CPU_LR_SUM) == 1.0 and journal_wd(0.0116, CPU_LR_SUM) == 0.01
    assert journal_wd(0.116, CPU_LR_SUM) == 0.1 and journal_wd(0.0, math.nan) == 0.0
    assert math.isnan(journal_wd(0.1, math.nan)) and journal_wd(0.01, JOURNAL_LR_SUM) == 0.01
    assert journal_label(0.5, 0.01) == "2n" and journal_label(0.55, 0.1) == "2c" and journal_label(0.45, 1.0) == "3"
    assert journal_label(0.3, 0.0) == "" and journal_label(0.5, 0.5) == "" and journal_label(math.nan, 0.0) == ""


def test_claims_read_along_rows_and_columns_against_the_journal():
    lines = claim_lines(journal_cells(journal_view(_grid(), D), D)).set_index(["claim", "line"])
    init0 = lines.loc[("phase 1 -> 2 -> 3 with the init rate", "wd 0 (journal 0)")]
    assert init0.journal == "1 -> 3" and init0.journal_reading == "rises"
    assert init0.ours_best == "1 -> 2n" and init0.reading_best == "rises" and init0.holds_best
    assert init0.matches_best == "1/2"
    col08 = lines.loc[("phase 1 -> 2 -> 3 with the weight decay", "gamma 0.8")]
    assert col08.journal_reading == "flat" and col08.reading_best == "rises" and not col08.holds_best
    col04 = lines.loc[("phase 1 -> 2 -> 3 with the weight decay", "gamma 0.4")]
    assert col04.journal == "1 -> 2c" and col04.holds_best and col04.reading_final == "rises"
    sr = lines.loc[("stable rank falls with the init rate", "wd 1.16 (journal 1)")]
    assert sr.ours_best == "30 -> 5" and sr.reading_best == "falls" and sr.journal_reading == "falls" and sr.holds_best
    t = lines.reset_index()
    assert claim_summary(t, "phase 1 -> 2 -> 3 with the weight decay") == "1 of 2 lines"
    # gamma 0.4: falls as the journal's phase rises (holds); gamma 0.8: falls where the journal stays in phase 3
    assert claim_summary(t, "stable rank falls with the weight decay") == "1 of 2 lines"


def test_a_corner_at_another_depth_is_kept_out_of_the_claims_and_listed_apart():
    rows = pd.concat([_grid(), pd.DataFrame([_run(0.4, 0.0, s, 0.99, 0.1, 0.99, 0.1, 0.3, 90, layers=2)
                                             for s in (0, 1)])])
    cells = journal_cells(journal_view(rows, D), D)
    assert len(cells) == 5 and (main_cells(cells)["model.n_layers"] == 4).all() and len(main_cells(cells)) == 4
    d = depth_table(cells)
    assert d["model.n_layers"].tolist() == [2, 4] and d.phase_best.tolist() == ["2n", "1"]


def test_a_table_without_the_definitions_columns_is_one_line():
    from anchorlab.config import ConfigError

    with pytest.raises(ConfigError, match=r"column\(s\) best.acc/12/test, best.acc/43/train missing"):
        journal_view(_grid().drop(columns=[f"best.{D.id}", f"best.{D.ood}"]), D)


# ------------------------------------------------------------------ the figure
def test_journal_fig3_end_to_end_on_tiny_runs_and_redrawn_from_its_table(tmp_path, tiny_overrides, capsys):
    from anchorlab.papers.reproduce.figures_journal3 import make_journal3
    from anchorlab.sweep.runner import run_sweep
    from anchorlab.papers.runs import run_table

    spec = {"name": "tiny-journal3", "base": "journal/paper",
            "set": tiny_overrides + ["model.n_layers=2", "model.n_heads=2", "train.epochs=1", "init.ref_width=640",
                                     "train.eval_every=8"],
            "axes": {"init.gamma": [0.4, 0.8], "optim.weight_decay": [0.0, 1.0]}}
    run_sweep(spec, tmp_path / "sweep", executor="inprocess")
    out = tmp_path / "fig"
    tables, files = make_journal3(run_table([tmp_path / "sweep"]), out, "cpu")
    runs, cells = tables["runs"], tables["cells"]
    assert len(runs) == 4 and sorted(runs.paper_gamma.unique()) == [0.4, 0.8]
    for col in ("paper_gamma", "optim.weight_decay", "seed", f"best.{D.id}", f"best.{D.ood}", f"final.{D.id}",
                f"final.{D.ood}", "phase_best", "phase_final", "final.commutativity", "cond/wq0_stable_rank", "lr_sum",
                "cond/wq0_mean_abs_cos"):
        assert col in runs, col
    assert runs["cond/wq0_stable_rank"].between(1, 32).all() and runs.lr_sum.gt(0).all()
    assert len(cells) == 4 and cells.phase_best.notna().all() and cells.stable_rank.notna().all()
    assert set(tables["claims"].claim.str.split(" with the ").str[-1]) == {"init rate", "weight decay"}
    for name in ("fig3b_best.png", "fig3b_final.png", "fig5c.png", "fig10.png"):
        assert files[name].stat().st_size > 5000, name
    # the per-run table, committed, redraws the cells, claims and stable ranks without weights or training
    committed = tmp_path / "journal_fig3_cpu.csv"
    runs.to_csv(committed, index=False)
    again = tmp_path / "again"
    assert main(["reproduce", "journal-fig3", "--from-table", str(committed), "--no-train", "--out", str(again)]) == 0
    cells.to_csv(tmp_path / "cells_from_runs.csv", index=False)
    pd.testing.assert_frame_equal(pd.read_csv(again / "journal-fig3" / "cells.csv"), pd.read_csv(tmp_path / "cells_from_runs.csv"))
    assert (again / "journal-fig3" / "fig5c.png").exists() and not (again / "journal-fig3" / "fig10.png").exists() and not (again / "sweep").exists()
    claims = pd.read_csv(again / "journal-fig3" / "paper_vs_ours.csv")
    assert claims.ours.str.fullmatch(r"\d+ of \d+ lines").sum() >= 4


def test_dry_run_states_the_rule_the_options_and_the_cost(tmp_path, capsys):
    fig = FIGURES["journal-fig3"]
    assert set(fig.sweeps) == {"demo", "cpu", "paper"} and fig.tables is not None
    assert main(["reproduce", "journal-fig3", "--dry-run", "--out", str(tmp_path / "d")]) == 0
    text = capsys.readouterr().out
    assert "32 runs, 32 to train" in text and "h on this CPU" in text
    assert "scale rule (cpu): std-matched: width 128 with the stds of width 640" in text and "--depth 2|4|10" in text
    assert main(["reproduce", "journal-fig3", "--dry-run", "--cells", "corner", "--depth", "2", "--out",
                 str(tmp_path / "d")]) == 0
    assert "2 runs, 2 to train" in capsys.readouterr().out
    corners = {(r.config.init.gamma, r.config.optim.weight_decay, r.config.model.n_layers)
               for r in expand(figure_spec(fig, "cpu", options={"cells": "corners", "clock": "1"}))}
    assert corners == {(g, w, 2) for g in (0.4, 0.8) for w in (0.0, 0.582)}   # the clock's own decay rows
    assert main(["reproduce", "journal-fig3", "--dry-run", "--cells", "corners", "--out", str(tmp_path / "d")]) == 0
    assert "8 runs, 8 to train" in capsys.readouterr().out
    assert main(["reproduce", "journal-fig3", "--dry-run", "--clock", "2", "--out", str(tmp_path / "d")]) == 2
    assert "--clock: must be one of 0.5, 1, got '2'" in capsys.readouterr().err
    one = {r.config.optim.weight_decay for r in expand(_clock_spec("1"))}
    assert one == {0.0, 0.00582, 0.0582, 0.582}


def _clock_spec(clock):
    from anchorlab.papers.reproduce.runner import figure_spec

    return figure_spec(FIGURES["journal-fig3"], "cpu", options={"clock": clock})


def test_longer_clock_reading_by_the_rule():
    from anchorlab.papers.eval.journal_cells import longer_clock_reading

    assert longer_clock_reading(0.95, 0.6) == "fit cut short"
    assert longer_clock_reading(0.95, 0.4) == "fits, not phase 3"
    assert longer_clock_reading(0.85, 0.9) == "still unfit"
    assert longer_clock_reading(float("nan"), 0.9) == "still unfit"
    from anchorlab.papers.eval.journal_cells import control_reading

    assert control_reading(0.95, 0.6) == "control: phase 3" and control_reading(0.95, 0.4) == "control: fits, not phase 3"
    assert control_reading(0.5, 0.9) == "control: unfit"


def test_clock_pairs_match_the_twin_by_decay_exponent():
    """A 1x run (half the wd, twice the lr sum) pairs with its 1/2x twin of the same init, seed and decay row, and
    is read by the rule on each reading; a run without a twin is an error naming it."""
    from pathlib import Path

    from anchorlab.config import ConfigError
    from anchorlab.eval.definitions import METRIC_DEFINITIONS
    from anchorlab.papers.eval.journal_cells import clock_pairs

    short = pd.read_csv(Path(__file__).resolve().parents[1] / "docs" / "figures" / "journal_fig3_cpu.csv")
    short = short[short["model.n_layers"] == 2]
    top = short[short["optim.weight_decay"] == short["optim.weight_decay"].max()]
    long = top[top["init.gamma"] == 0.8].copy()
    long["run_id"] = ["long0", "long1"]
    long["clock"], long["lr_sum"] = 1.0, long.lr_sum * 2
    long["optim.weight_decay"] = long["optim.weight_decay"] / 2
    long["final.acc/12/test"], long["final.acc/43/train"] = [0.99, 0.7], [0.8, 0.9]
    d = METRIC_DEFINITIONS["authors-fig3"]
    p = clock_pairs(short, long, d).set_index("run_id")
    assert set(p.short_run_id) == set(top[top["init.gamma"] == 0.8].run_id)
    assert p.loc["long0", "reading_final"] == "fit cut short" and p.loc["long1", "reading_final"] == "still unfit"
    assert (p.short_clock == 0.5).all() and not p.short_fitted.any()
    long["init.gamma"] = 0.7      # an init the shorter clock never ran: no twin
    with pytest.raises(ConfigError, match="long0"):
        clock_pairs(short, long, d)


def test_clock_verdict_counts_the_shorter_clock_failures_and_waits_for_every_run():
    """The verdict counts only runs unfit on the shorter clock, names the controls apart, says pending until every
    planned run is in, and words all / none / some by the counts; a bad reading is a one-line error."""
    from anchorlab.config import ConfigError
    from anchorlab.papers.eval.journal_cells import clock_verdict

    def pairs(readings, fitted):
        return pd.DataFrame({"reading_final": readings, "reading_best": readings, "short_fitted": fitted})

    two = pairs(["fit cut short", "still unfit"], [False, False])
    assert "pending: 2 of 4" in clock_verdict(two, 4, "final") and "Verdict:" not in clock_verdict(two, 4, "final")
    four = pairs(["fit cut short", "still unfit", "fit cut short", "control: phase 3"], [False, False, False, True])
    v = clock_verdict(four, 4, "final")
    assert "of 3 run(s) unfit" in v and "2 *fit cut short*, 1 *still unfit*, 0 *fits, not phase 3*" in v
    assert "runs fitted on the shorter clock: *control: phase 3*" in v and "2 of 3 failures" in v
    every = pairs(["fit cut short"] * 3 + ["still unfit"], [False] * 3 + [True])
    assert "every failure on the shorter clock was a fit cut short" in clock_verdict(every, 4, "best")
    none = pairs(["still unfit"] * 4, [False] * 4)
    assert "no failure on the shorter clock was a fit cut short" in clock_verdict(none, 4, "best")
    with pytest.raises(ConfigError, match="reading"):
        clock_verdict(four, 4, "last")


def test_c3_reading_recomputes_the_committed_claims_under_the_figure_codes_definitions():
    """The one-line C3 reading recomputes each claim's lines from the committed runs under both definitions; under
    the figure code's, best over training, it must match the figure run's own claims table, and the line names
    both readings and both definitions."""
    from anchorlab.papers.docs import c3
    from anchorlab.papers.reproduce.figures_journal3 import INIT, WD

    h = c3._holds_by_definition()
    for claim in (INIT, WD):
        assert h["authors-fig3", claim, "best"] == c3._journal_holds(claim)
        for name, _ in c3.DEFINITIONS:
            k, n = h[name, claim, "final"]
            assert 0 <= k <= n == h[name, claim, "best"][1]
    line = c3.c3_journal_reading()
    assert "final:" in line and "the text's ID and OOD" in line


def test_results_line_of_the_1x_row_is_the_final_reading_of_its_table():
    """results.md's C3 line is the final reading's verdict of the 1x table on the C3 page, not a copy of it."""
    from anchorlab.papers.docs import c3

    line, page = c3.c3_one_x_verdict(), c3.c3_one_x()
    final = next(x for x in page.splitlines() if x.startswith("- final reading"))
    assert line.endswith(final[len("- final "):]) and "(4 of 4 runs)" in line

"""The papers' judgement (best over lrs and training per seed and mapping, then the mean over seeds)
and the per-run rate, on a hand-made table."""

import math

import pandas as pd
import pytest

from anchorlab.config import ConfigError
from anchorlab.papers.eval.judgement import contrast_cells, contrast_rates, paper_cells, seed_bests

LRS = (1e-3, 2e-3, 4e-3)


def _runs() -> pd.DataFrame:
    rows = []
    # small init: (final id, final inf, final sym, best inf, best sym) per lr; seed 0's best inferential
    # comes from lr 2e-3 and its best symmetric from 4e-3: the mappings are selected separately
    small = {0: [(1.0, 0.20, 0.40, 0.3, 0.5), (0.95, 0.85, 0.05, 0.9, 0.1), (1.0, 0.10, 0.60, 0.6, 0.7)],
             1: [(1.0, 0.15, 0.85, 0.2, 0.9), (1.0, 0.35, 0.60, 0.4, 0.8), (1.0, 0.05, 0.30, 0.1, 0.3)]}
    large = {0: [(1.0, 0.0, 0.95, 0.0, 1.0), (1.0, 0.0, 0.95, 0.0, 1.0), (1.0, 0.0, 0.60, 0.0, 1.0)],
             1: [(1.0, 0.0, 0.95, 0.0, 1.0), (1.0, 0.0, 0.95, 0.0, 1.0), (0.5, 0.0, 0.95, 0.0, 1.0)]}
    for setting, table in (("large_init", large), ("small_init", small)):
        for seed, per_lr in table.items():
            for lr, (i, inf, sym, binf, bsym) in zip(LRS, per_lr):
                rows.append({"op_set": "A", "setting": setting, "seed": seed, "peak_lr": lr, "final.id_acc": i,
                             "final.ood_inferential_acc": inf, "final.ood_symmetric_acc": sym, "best.id_acc": 1.0,
                             "best.ood_inferential_acc": binf, "best.ood_symmetric_acc": bsym})
    return pd.DataFrame(rows)


def test_seed_bests_take_each_mapping_over_lrs_on_its_own():
    sb = seed_bests(_runs(), ["op_set", "setting"]).set_index(["setting", "seed"])
    assert sb.loc[("small_init", 0), "inferential_best"] == 0.9 and sb.loc[("small_init", 0), "symmetric_best"] == 0.7
    assert sb.loc[("small_init", 1), "inferential_best"] == 0.4 and sb.loc[("small_init", 1), "symmetric_best"] == 0.9
    assert (sb.n_lrs == 3).all()


def test_paper_cell_is_the_mean_over_seeds_of_the_bests_and_the_per_run_rate_counts_runs():
    c = paper_cells(_runs(), ["op_set", "setting"], threshold=0.5).set_index("setting")
    assert math.isclose(c.loc["small_init", "inferential_best"], (0.9 + 0.4) / 2)
    assert math.isclose(c.loc["small_init", "symmetric_best"], (0.7 + 0.9) / 2)
    assert c.loc["small_init", "n_seeds"] == 2 and c.loc["small_init", "n_runs"] == 6
    # each lr and seed on its own, final metrics: only seed 0 at 2e-3 composes (ID 0.95 >= 0.9, 0.85 >= 0.5)
    assert math.isclose(c.loc["small_init", "inferential_per_run"], 1 / 6)
    assert math.isclose(c.loc["small_init", "inferential_final"], (0.2 + 0.85 + 0.1 + 0.15 + 0.35 + 0.05) / 6)
    # large init: 0.60 passes at 0.5, the run with ID 0.5 never does
    assert math.isclose(c.loc["large_init", "symmetric_per_run"], 5 / 6)
    assert math.isclose(paper_cells(_runs(), ["op_set", "setting"], 0.8).set_index("setting")
                        .loc["large_init", "symmetric_per_run"], 4 / 6)
    one = paper_cells(_runs()[lambda d: d.setting == "small_init"], [], 0.5)   # no keys: one cell
    assert len(one) == 1 and math.isclose(one.inferential_best[0], 0.65)
    with pytest.raises(ConfigError, match="best.ood_symmetric_acc"):
        paper_cells(_runs().drop(columns="best.ood_symmetric_acc"), ["setting"], 0.5)


def test_contrast_by_the_papers_rule_at_both_thresholds_beside_the_per_run_rates():
    cells = contrast_cells(_runs(), "large_init", "small_init", thresholds=(0.5, 0.8))
    assert list(cells.threshold) == [0.5, 0.8]
    assert list(cells.large_memorizes) == [True, True] and list(cells.small_composes) == [True, False]
    assert list(cells.contrast) == [True, False]
    assert cells["small_init.inferential_best"].tolist() == pytest.approx([0.65, 0.65])
    r = contrast_rates(cells, "large_init", "small_init").set_index("threshold")
    assert r.loc[0.5, "paper_contrast_rate"] == 1.0 and r.loc[0.8, "paper_contrast_rate"] == 0.0
    assert r.loc[0.5, "small_composes_per_run"] == pytest.approx(1 / 6)
    assert r.loc[0.5, "large_memorizes_per_run"] == pytest.approx(5 / 6)
    assert r.loc[0.8, "large_memorizes_per_run"] == pytest.approx(4 / 6)
    assert r.loc[0.5, "cells"] == 1 and r.loc[0.5, "runs"] == 12


def test_cell_solution_reads_both_mappings_and_the_strict_contrast_asks_the_other_below():
    from anchorlab.papers.eval.judgement import cell_solution

    assert cell_solution(0.95, 0.7, 0.2, 0.5) == "composes" and cell_solution(0.95, 0.2, 0.7, 0.5) == "memorizes"
    assert cell_solution(0.95, 0.6, 0.9, 0.5) == "both" and cell_solution(0.95, 0.3, 0.4, 0.5) == "neither"
    assert cell_solution(0.85, 0.9, 0.0, 0.5) == "unfit" and cell_solution(float("nan"), 0.9, 0.0, 0.5) == "unfit"
    # the hand-made small init passes the papers' rule at 0.5 (inferential 0.65) but its mirror's best is 0.8
    cells = contrast_cells(_runs(), "large_init", "small_init", thresholds=(0.5, 0.8)).set_index("threshold")
    assert cells.loc[0.5, "small_init.solution"] == "both" and cells.loc[0.8, "small_init.solution"] == "memorizes"
    assert bool(cells.loc[0.5, "contrast"]) and not bool(cells.loc[0.5, "contrast_only"])
    assert cells.large_memorizes_only.all() and not cells.small_composes_only.any()
    r = contrast_rates(cells.reset_index(), "large_init", "small_init").set_index("threshold")
    assert r.loc[0.5, "paper_contrast_rate"] == 1.0 and r.loc[0.5, "paper_contrast_only_rate"] == 0.0
    # the same small init with its mirror never reached: the strict reading agrees with the papers' rule
    low = _runs().assign(**{"best.ood_symmetric_acc": lambda d: d["best.ood_symmetric_acc"].where(
        d.setting == "large_init", 0.1)})
    strict = contrast_cells(low, "large_init", "small_init", thresholds=(0.5,))
    assert strict.contrast_only.tolist() == [True] and strict["small_init.solution"].tolist() == ["composes"]


def test_the_fitted_reading_takes_each_runs_best_only_where_id_had_fitted():
    from anchorlab.papers.eval.judgement import fitted_bests

    curves = pd.DataFrame(
        [("a", 0, 0.10, 0.0, 0.0), ("a", 1, 0.80, 0.72, 0.05),   # composes while ID is still fitting ...
         ("a", 2, 0.95, 0.01, 0.10), ("a", 3, 1.00, 0.02, 0.60),  # ... and takes the mirror once fitted
         ("b", 0, 0.50, 0.90, 0.0), ("b", 1, 0.85, 0.70, 0.0)],   # never fits: nothing counts
        columns=["run_id", "step", "id_acc", "inferential", "symmetric"])
    fb = fitted_bests(curves, id_min=0.9).set_index("run_id")
    assert (fb.loc["a", "best.ood_inferential_acc"], fb.loc["a", "best.ood_symmetric_acc"]) == (0.02, 0.60)
    assert (fb.loc["b", "best.ood_inferential_acc"], fb.loc["b", "best.ood_symmetric_acc"]) == (0.0, 0.0)
    assert fb.loc["a", "best.id_acc"] == 1.0 and fb.loc["b", "best.id_acc"] == 0.85
    assert fb.fitted_evals.tolist() == [2, 0]
    loose = fitted_bests(curves, id_min=0.8).set_index("run_id")   # the line moves what counts
    assert loose.loc["a", "best.ood_inferential_acc"] == 0.72 and loose.loc["b", "best.ood_inferential_acc"] == 0.70
    with pytest.raises(ConfigError, match="id_min"):
        fitted_bests(curves, id_min=1.5)
    with pytest.raises(ConfigError, match="symmetric"):
        fitted_bests(curves.drop(columns="symmetric"))


def test_a_cell_whose_seeds_ran_different_lrs_is_marked_partial():
    runs = _runs()
    full = paper_cells(runs, ["op_set", "setting"], threshold=0.5).set_index("setting")
    assert (full.lrs_min == 3).all() and (full.lrs_max == 3).all()
    # drop one lr of small init's seed 1: its cell now averages a 3-lr best and a 2-lr best
    drop = runs[(runs.setting == "small_init") & (runs.seed == 1)].index[0]
    part = paper_cells(runs.drop(index=drop), ["op_set", "setting"], threshold=0.5).set_index("setting")
    assert (part.loc["small_init", "lrs_min"], part.loc["small_init", "lrs_max"]) == (2, 3)
    assert part.loc["large_init", "lrs_min"] == part.loc["large_init", "lrs_max"] == 3

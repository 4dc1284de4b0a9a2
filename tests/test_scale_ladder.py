"""The scale ladder (reproduce study-scale): its design, its rule and its verdict."""

import math
from pathlib import Path

import pandas as pd
import pytest

from anchorlab.papers.reproduce import figures_scale as fs
from anchorlab.sweep.grid import expand, load_sweep

FIGS = Path(__file__).parents[1] / "docs" / "figures"


def test_wilson_interval_known_values():
    lo, hi = fs.wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    lo, hi = fs.wilson(0, 3)
    assert lo == 0.0 and hi == pytest.approx(0.5615, abs=1e-4)
    assert all(math.isnan(v) for v in fs.wilson(0, 0))


def test_wilson_interval_holds_its_rate_exactly():
    """lo <= k/n <= hi for every k of every n (6 of 6 once gave hi = 1 - 1e-16, a negative error bar)."""
    for n in range(1, 60):
        for k in range(n + 1):
            lo, hi = fs.wilson(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0, (k, n, lo, hi)


def test_the_design_is_the_issues_ladder_on_one_precision_path():
    runs = expand(load_sweep(fs.SWEEP))
    assert len(runs) == 72
    rungs = {(r.config.model.d_model, r.config.task.n_train) for r in runs}
    assert rungs == {(w, n) for _, w, n in fs.RUNGS}
    for r in runs:
        c = r.config
        assert c.optim.peak == pytest.approx(1.77e-4 * 128 / c.model.d_model, rel=1e-3)   # the cell's width rule
        assert c.init.ref_width == 400 and c.init.gamma in (0.3, 0.8)
        assert c.train.bf16_path == "autocast" and c.model.d_ff == 3 * c.model.d_model
        assert c.train.init_seed == c.train.data_seed in (0, 1, 2)
        spe, total, _ = c.train.plan(c.task.n_train)         # the 1/2x clock at every rung, 900k included
        assert total == 46_098 and round(c.optim.warmup_epochs * spe) == 2_196
        assert round((c.optim.warmup_epochs + c.optim.cosine_epochs) * spe) == 46_098
    # the committed width-128 rows are this design's runs (same config, same run id)
    committed = set(pd.read_csv(FIGS / "opset_many_cpu.csv").run_id) | set(pd.read_csv(FIGS / "fig2_cell_cpu.csv").run_id)
    w128 = {r.run_id for r in runs if (r.config.model.d_model, r.config.task.n_train) == (128, 100_000)}
    assert len(w128 & committed) == 14 and len(w128) == 18


def _rungs(rates: dict[str, tuple[int, int, int, int]], ready: bool = True) -> pd.DataFrame:
    rows = []
    for rung, (ks, ns, kl, nl) in rates.items():
        s_lo, s_hi = fs.wilson(ks, ns)
        l_lo, l_hi = fs.wilson(kl, nl)
        rows.append({"rung": rung, "op_set": "all", "n_small": ns, "small_composes": ks, "compose_rate": ks / ns,
                     "compose_lo": s_lo, "compose_hi": s_hi, "n_large": nl, "large_memorizes": kl,
                     "memorize_rate": kl / nl, "memorize_lo": l_lo, "memorize_hi": l_hi, "ready": ready})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("w64, w256, verdict", [
    ((1, 9, 3, 9), (9, 9, 9, 9), "sharpens"),
    ((3, 9, 6, 9), (4, 9, 6, 9), "flat"),
    ((1, 9, 6, 9), (9, 9, 6, 9), "mixed"),      # only the small init's rate moves
    ((9, 9, 9, 9), (1, 9, 1, 9), "mixed"),      # both fall: not "sharpens", and they moved
])
def test_the_width_verdict_follows_the_rule(w64, w256, verdict):
    v = fs.verdict_table(_rungs({"w64": w64, "w256": w256})).set_index("comparison")
    assert v.loc["width", "verdict"] == verdict
    assert v.loc["data", "verdict"].startswith("pending")


def test_the_verdict_waits_for_both_rungs():
    v = fs.verdict_table(_rungs({"w64": (1, 9, 3, 9), "w256": (9, 9, 9, 9)}, ready=False)).set_index("comparison")
    assert v.loc["width", "verdict"].startswith("pending (w64: 18 runs, w256: 18 runs)")


def test_runs_are_judged_per_run_and_a_rung_is_ready_with_seeds_0_and_1():
    op = "{1:+5,2:+1,3:-2,4:-8} (4,3) held out, (3,4)->x-6"
    base = {"op_set": op, "rung": "w64", "best.ood_inferential_acc": 0.9, "best.ood_symmetric_acc": 0.9}
    runs = pd.DataFrame([
        {**base, "paper_gamma": 0.8, "seed": 0, "final.id_acc": 0.95, "outcome": "composes"},
        {**base, "paper_gamma": 0.8, "seed": 1, "final.id_acc": 0.5, "outcome": "unfit"},
        {**base, "paper_gamma": 0.3, "seed": 0, "final.id_acc": 1.0, "outcome": "memorizes"},
    ])
    t = fs.rung_table(runs)
    row = t[t.op_set == "all"].iloc[0]
    assert (row.small_composes, row.n_small, row.small_unfit, row.large_memorizes, row.n_large) == (1, 2, 1, 1, 1)
    assert not row.ready       # the large init's seed 1 is missing
    full = pd.concat([runs, pd.DataFrame([{**base, "paper_gamma": 0.3, "seed": 1, "final.id_acc": 1.0,
                                           "outcome": "neither"}])])
    assert fs.rung_table(full).query("op_set == 'all'").ready.iloc[0]


def test_the_figure_redraws_from_the_committed_rows(tmp_path):
    from anchorlab.papers.reproduce import reproduce

    tables = [str(FIGS / "opset_many_cpu.csv"), str(FIGS / "fig2_cell_cpu.csv")]
    ladder = FIGS / "scale_ladder_cpu.csv"
    if ladder.exists():
        tables.append(str(ladder))
    res = reproduce("study-scale", "cpu", tmp_path, from_tables=tables, train=False)
    runs = pd.read_csv(tmp_path / "study-scale" / "runs.csv")
    assert set(runs.columns) >= {"op_set", "width", "n_train", "paper_gamma", "peak_lr", "seed", "final.id_acc",
                                 "final.ood_inferential_acc", "final.ood_symmetric_acc", "best.ood_inferential_acc",
                                 "best.ood_symmetric_acc", "steps_to_id_fit", "wall_seconds", "precision", "device"}
    assert (runs[runs.rung == "w128"].width == 128).all() and len(runs[runs.rung == "w128"]) >= 14
    assert "rates_by_rung.png" in res
    if ladder.exists():   # the committed table redraws itself, fit timing included where no curves come with a row
        pd.testing.assert_frame_equal(runs, pd.read_csv(ladder))


def test_results_line_gives_each_verdict_and_its_rates_once_in(monkeypatch):
    """results.md's C1 line: each comparison's verdict, with both rungs' rates where the verdict is in."""
    from anchorlab.papers.docs import c1_scale

    rungs = _rungs({"w128": (2, 9, 6, 9), "w128 x 900k": (1, 6, 4, 6), "w64": (2, 9, 4, 9)})
    monkeypatch.setattr(c1_scale, "table", lambda name: pd.DataFrame())
    monkeypatch.setattr(fs, "rung_table", lambda runs: rungs)
    line = c1_scale.c1_ladder_line()
    assert ("data, w128 -> w128 x 900k: **flat** (small composes 2 of 9 -> 1 of 6, large memorizes 6 of 9 -> "
            "4 of 6)") in line
    assert "width, w64 -> w256: **pending (w64: 18 runs, w256: 0 runs)**." in line


def test_the_block_says_which_rate_moved_against_its_half_width(monkeypatch):
    """C1's ladder block: a verdict that is in names each rate's change, the half-width it is read against and
    whether it moved; a pending one says only that it is pending."""
    from anchorlab.papers.docs import c1_scale

    rungs = _rungs({"w64": (2, 9, 4, 9), "w256": (1, 6, 6, 6)})
    for c in ("small_unfit", "large_unfit"):
        rungs[c] = 0
    rungs["papers_cell_small_inferential"] = rungs["papers_cell_large_symmetric"] = 0.5
    monkeypatch.setattr(c1_scale, "table", lambda name: pd.DataFrame())
    monkeypatch.setattr(fs, "rung_table", lambda runs: rungs)
    block = c1_scale.c1_ladder()
    def half(a, b):    # the larger Wilson half-width of the two rungs
        return max((fs.wilson(*a)[1] - fs.wilson(*a)[0]) / 2, (fs.wilson(*b)[1] - fs.wilson(*b)[0]) / 2)

    assert half((2, 9), (1, 6)) > 0.06 and half((4, 9), (6, 6)) < 0.56
    assert ("- width (w64 -> w256): **mixed**: small init composes 0.22 -> 0.17, change -0.06 against half-width "
            f"{half((2, 9), (1, 6)):.2f}: flat; large init memorizes 0.44 -> 1.00, change 0.56 against half-width "
            f"{half((4, 9), (6, 6)):.2f}: up") in block
    assert "- data (w128 -> w128 x 900k): **pending (w128: 0 runs, w128 x 900k: 0 runs)**\n" in block

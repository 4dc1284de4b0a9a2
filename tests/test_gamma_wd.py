"""The init-rate x weight-decay grid: decay exponents match the journal's rows, AdamW's shrinkage is
exp(-exponent), and the tables reduce hand-made runs the papers' way."""

import json
import math

import pandas as pd
import pytest
import torch

from anchorlab.config import load_config
from anchorlab.papers.eval.wd_grid import grid_cells, grid_view, rescue_table
from anchorlab.papers.reproduce.figures_wd import decay_exponent, make_wd
from anchorlab.sweep.grid import expand, resolve_sweep
from anchorlab.papers.runs import run_table
from anchorlab.train.optim import lr_at, lr_sum


def test_the_decay_exponent_is_adamws_shrinkage_of_a_weight_with_no_gradient():
    cfg = load_config("demo/small", ["optim.weight_decay=0.3"])
    spe, total = 390, 4680
    p = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.AdamW([p], lr=1.0, weight_decay=0.3)
    for s in range(total):
        opt.param_groups[0]["lr"] = lr_at(s, spe, cfg.optim)
        p.grad = torch.zeros_like(p)
        opt.step()
    s, e = decay_exponent(cfg)
    assert s == pytest.approx(lr_sum(spe, total, cfg.optim)) and e == pytest.approx(0.3 * s)
    assert float(p.detach()[0]) == pytest.approx(math.exp(-e), rel=1e-3)
    assert s == pytest.approx(4.93, abs=0.01)


def test_the_grid_spec_matches_the_journals_rows_by_decay_exponent():
    runs = [r.config for r in expand(resolve_sweep("gamma_wd_cpu"))]
    assert len(runs) == 60 and {c.init.ref_width for c in runs} == {400}
    assert sorted({c.init.gamma for c in runs}) == [0.3, 0.4, 0.5]
    journal = load_config("journal/paper")
    j_sum = decay_exponent(journal)[0]
    assert j_sum == pytest.approx(7.38, abs=0.01)
    mine = sorted({decay_exponent(c)[1] for c in runs})
    assert mine == pytest.approx([wd * j_sum for wd in (0.0, 0.01, 0.1, 1.0)], rel=0.01, abs=1e-9)
    assert [c.train.init_seed for c in runs[:12]] == [1] * 12   # the memorizing draw leads


def _fake(root, gamma, wd, seed, fin, best):
    cfg = load_config("demo/small", ["init.ref_width=400", f"init.gamma={gamma}",
                                    f"optim.weight_decay={wd}", f"train.init_seed={seed}"])
    d = root / "runs" / cfg.run_id()
    d.mkdir(parents=True)
    keys = ("id_acc", "ood_inferential_acc", "ood_symmetric_acc")
    (d / "final.json").write_text(json.dumps({
        "run_id": cfg.run_id(), "status": "finished", "steps": 4680, "config": cfg.to_dict(),
        "final": dict(zip(keys, fin)), "best": dict(zip(keys, best))}))


def test_tables_on_hand_made_runs(tmp_path):
    # gamma 0.3: seed 1 memorizes at wd 0 and composes at wd 1 (rescued); seed 0 composes at both
    _fake(tmp_path, 0.3, 0.0, 1, (1.0, 0.0, 1.0), (1.0, 0.2, 1.0))
    _fake(tmp_path, 0.3, 1.0, 1, (0.99, 0.7, 0.1), (1.0, 0.8, 0.3))
    _fake(tmp_path, 0.3, 0.0, 0, (1.0, 0.6, 0.3), (1.0, 0.7, 0.4))
    _fake(tmp_path, 0.3, 1.0, 0, (0.5, 0.4, 0.0), (0.6, 0.6, 0.1))   # does not fit ID
    tables, files = make_wd(run_table([tmp_path]), tmp_path, "cpu")
    rows = tables["runs"]
    assert len(rows) == 4 and set(rows.paper_gamma) == {0.3}
    assert rows.decay_exponent.max() == pytest.approx(4.93, abs=0.01)     # wd 1 x the demo clock's sum of lr
    assert dict(zip(zip(rows["optim.weight_decay"], rows.seed), rows.phase)) == {(0.0, 0): 3, (0.0, 1): 2,
                                                                              (1.0, 0): 1, (1.0, 1): 3}
    cells = grid_cells(rows)
    pd.testing.assert_frame_equal(cells, tables["cells"])
    c0 = cells[cells["optim.weight_decay"] == 0.0].iloc[0]
    assert c0.inferential_best == pytest.approx((0.2 + 0.7) / 2) and c0.symmetric_best == pytest.approx(0.7)
    assert c0.composes_rate == 0.5 and c0.memorizes_rate == 0.5 and c0.n_seeds == 2 and c0.phase == 3 - 1
    c1 = cells[cells["optim.weight_decay"] == 1.0].iloc[0]
    assert c1.id_best == pytest.approx(0.8) and c1.phase == 1   # mean best ID 0.8 < 0.9
    r = rescue_table(rows).set_index("seed")
    assert bool(r.loc[1, "rescued"]) and not bool(r.loc[0, "rescued"]) and r.loc[0, "wd=1"] == "unfit"
    assert bool(r.loc[1, "rescued_best"]) and r.loc[1, "best wd=0"] == "memorizes"
    assert r.loc[0, "best wd=1"] == "unfit" and r.loc[0, "best wd=0"] == "composes"
    assert rows["cond/wq0_mean_abs_cos"].isna().all()   # fake runs hold no weights
    assert files["gamma_wd.png"].stat().st_size > 5000 and len(tables["rescue"]) == 2


def test_the_committed_grid_redraws_its_cells_and_rescues():
    from pathlib import Path

    figs = Path(__file__).resolve().parents[1] / "docs" / "figures"
    for stem in ("gamma_wd_cpu", "wd_rescue_cpu"):
        view = grid_view(run_table([figs / f"{stem}.csv"]))
        assert len(view) == len(pd.read_csv(figs / f"{stem}.csv"))
        want = pd.read_csv(figs / f"{stem}_cells.csv")
        cells = grid_cells(view)
        pd.testing.assert_frame_equal(cells[want.columns], want, check_dtype=False)
        pd.testing.assert_frame_equal(rescue_table(view), pd.read_csv(figs / f"{stem}_rescue.csv"))


def test_condensation_is_read_from_a_trained_run(tmp_path, tiny_overrides):
    from anchorlab.papers.reproduce.figures_wd import condensation_matrices, with_run_values
    from anchorlab.train import train

    cfg = load_config("demo/small", tiny_overrides + ["init.ref_width=400", "init.gamma=0.5",
                                                      "optim.weight_decay=0.1"])
    train(cfg, tmp_path / "runs" / cfg.run_id())
    view = grid_view(with_run_values(run_table([tmp_path])))
    assert 0.0 < view.loc[0, "cond/wq0_mean_abs_cos"] <= 1.0 and 0.0 < view.loc[0, "cond/win0_largest_group_frac"] <= 1
    assert 1.0 <= view.loc[0, "cond/wq0_stable_rank"] <= 16
    assert view.loc[0, "decay_exponent"] == pytest.approx(0.1 * decay_exponent(cfg)[0])
    mats = condensation_matrices(view)
    (C,) = mats.values()
    assert list(mats) == [(0.5, 0.1)] and C.shape == (16, 16) and abs(C.diagonal() - 1).max() < 1e-5


def test_the_rescue_spec_reruns_the_predictor_studys_draws_at_the_journals_rows():
    rescue = [r.config for r in expand(resolve_sweep("wd_rescue_cpu"))]
    pred = {(c.train.data_seed, c.train.init_seed): c for c in (r.config for r in expand(resolve_sweep("predictors_cpu")))}
    assert len(rescue) == 16
    j_sum = decay_exponent(load_config("journal/paper"))[0]
    for c in rescue:
        p = pred[(c.train.data_seed, c.train.init_seed)]   # the same draw, model, init and clock
        assert (c.init, c.model, c.task) == (p.init, p.model, p.task)
        assert (c.optim.peak, c.train.epochs) == (p.optim.peak, p.train.epochs)
    assert sorted({decay_exponent(c)[1] / j_sum for c in rescue}) == pytest.approx([0.0, 0.01, 0.1, 1.0], rel=0.01)

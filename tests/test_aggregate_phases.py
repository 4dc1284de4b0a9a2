"""Aggregation rules (best over lr per seed, mean/std over seeds), phases, and phase figures.

Expected numbers are computed by hand from the synthetic tables below; values at
the thresholds use exact binary fractions (0.375 + 0.625 = 1.0) so boundary
checks do not depend on rounding.
"""

import math

import numpy as np
import pandas as pd
import pytest

from anchorlab.config import ConfigError
from anchorlab.eval.phases import PhaseThresholds, classify_phase, classify_phases
from anchorlab.plots.phase import pivot_grid
from anchorlab.sweep.aggregate import AggregateOptions, aggregate, history_table, phase_diagram, runs_table

NAN = math.nan


def long_table(runs):
    """Runs (dicts with axis values, status, best/final metric dicts) -> the store's long format."""
    rows = []
    for r in runs:
        base = {k: v for k, v in r.items() if k not in ("best", "final")}
        metrics = [(kind, m, v) for kind in ("best", "final") for m, v in r.get(kind, {}).items()]
        if not metrics:
            rows.append({**base, "kind": None, "step": None, "metric": None, "value": NAN})
        for kind, m, v in metrics:
            rows.append({**base, "kind": kind, "step": 10, "metric": m, "value": v})
    return pd.DataFrame(rows)


def run(rid, gamma, lr, seed, status="finished", **best):
    final = {k: (v - 0.125 if not k.endswith("loss") else v + 1.0) for k, v in best.items()}
    return {"run_id": rid, "status": status, "init.gamma": gamma, "optim.lr": lr, "train.init_seed": seed,
            "best": best, "final": final}


@pytest.fixture
def table():
    # gamma 0.5: every run finished. gamma 0.8: failures and a divergence.
    return long_table([
        run("a", 0.5, 1e-4, 0, id_acc=0.95, ood_acc=0.25, train_loss=0.30, ood_symmetric_acc=NAN),
        run("b", 0.5, 2e-4, 0, id_acc=0.85, ood_acc=0.375, train_loss=0.10, ood_symmetric_acc=0.75),
        run("c", 0.5, 1e-4, 1, id_acc=0.91, ood_acc=0.625, train_loss=0.20, ood_symmetric_acc=0.25),
        run("d", 0.5, 2e-4, 1, id_acc=0.99, ood_acc=0.125, train_loss=0.50, ood_symmetric_acc=NAN),
        {"run_id": "e", "status": "failed", "init.gamma": 0.8, "optim.lr": 1e-4, "train.init_seed": 0},
        run("f", 0.8, 2e-4, 0, id_acc=0.97, ood_acc=0.875, train_loss=0.05, ood_symmetric_acc=0.0),
        run("g", 0.8, 1e-4, 1, status="diverged", id_acc=0.25, ood_acc=0.0, train_loss=NAN,
            ood_symmetric_acc=0.5),
        {"run_id": "h", "status": "failed", "init.gamma": 0.8, "optim.lr": 2e-4, "train.init_seed": 1},
        {"run_id": "i", "status": "pending", "init.gamma": 0.8, "optim.lr": 3e-4, "train.init_seed": 1},
    ])


def cell(df, gamma):
    rows = df[df["init.gamma"] == gamma]
    assert len(rows) == 1
    return rows.iloc[0]


def test_runs_table_is_one_row_per_run(table):
    wide = runs_table(table, "best")
    assert sorted(wide.run_id) == list("abcdefghi")
    assert wide.set_index("run_id").loc["f", "ood_acc"] == 0.875
    assert math.isnan(wide.set_index("run_id").loc["e", "id_acc"])       # failed run kept, no metrics
    fin = runs_table(table, "final").set_index("run_id")
    assert fin.loc["f", "ood_acc"] == 0.75 and fin.loc["f", "train_loss"] == 1.05


def test_neurips_rule_best_over_lr_then_mean_over_seeds(table):
    out = aggregate(table, AggregateOptions(source="best"))
    assert list(out.columns[:1]) == ["init.gamma"] and "optim.lr" not in out and "train.init_seed" not in out
    c = cell(out, 0.5)
    # seed 0: max(.25, .375) = .375; seed 1: max(.625, .125) = .625 -> mean .5, sample std
    assert c.ood_acc == pytest.approx(0.5)
    assert c.ood_acc_std == pytest.approx(np.std([0.375, 0.625], ddof=1))
    assert c.id_acc == pytest.approx((0.95 + 0.99) / 2)                   # each metric maximised independently
    assert c.train_loss == pytest.approx((0.10 + 0.20) / 2)               # losses are minimised
    assert c.ood_symmetric_acc == pytest.approx((0.75 + 0.25) / 2)        # NaN values skipped
    assert (c.n_runs, c.n_failed, c.n_seeds) == (4, 0, 2)


def test_source_final_uses_last_evaluation(table):
    c = cell(aggregate(table, AggregateOptions(source="final")), 0.5)
    assert c.ood_acc == pytest.approx(((0.375 - 0.125) + (0.625 - 0.125)) / 2)
    assert c.train_loss == pytest.approx((1.10 + 1.20) / 2)


def test_select_by_picks_one_run_per_seed(table):
    c = cell(aggregate(table, AggregateOptions(select_by="ood_acc")), 0.5)
    # seed 0 picks lr 2e-4 (ood .375, id .85); seed 1 picks lr 1e-4 (ood .625, id .91)
    assert c.ood_acc == pytest.approx(0.5)
    assert c.id_acc == pytest.approx((0.85 + 0.91) / 2)


def test_failed_runs_excluded_by_default(table):
    c = cell(aggregate(table), 0.8)
    # only run f succeeded: one seed, std undefined; pending run i counts as a run, not a failure
    assert c.ood_acc == pytest.approx(0.875) and math.isnan(c.ood_acc_std)
    assert (c.n_runs, c.n_failed, c.n_seeds) == (5, 3, 1)


def test_failed_runs_as_zero(table):
    c = cell(aggregate(table, AggregateOptions(failed="zero")), 0.8)
    # seed 0: max(0 (failed e), .875) ; seed 1: max(0 (diverged g), 0 (failed h)) -> mean .4375
    assert c.ood_acc == pytest.approx(0.875 / 2)
    assert c.id_acc == pytest.approx(0.97 / 2)
    assert c.n_seeds == 2
    assert c.train_loss == pytest.approx(0.05)                            # losses of failures are NaN


def test_cell_with_only_failures_is_nan_not_missing():
    t = long_table([{"run_id": "x", "status": "failed", "init.gamma": 1.0, "optim.lr": 1e-4},
                    run("y", 0.5, 1e-4, 0, id_acc=1.0, ood_acc=1.0)])
    out = aggregate(t)
    c = cell(out, 1.0)
    assert c.n_seeds == 0 and c.n_failed == 1 and math.isnan(c.ood_acc)


def test_aggregate_options_validation():
    with pytest.raises(ConfigError, match="aggregate.source"):
        AggregateOptions(source="last")
    with pytest.raises(ConfigError, match="aggregate.failed"):
        AggregateOptions.from_dict({"failed": "drop"})
    with pytest.raises(ConfigError, match="aggregate.colour"):
        AggregateOptions.from_dict({"colour": 1})
    with pytest.raises(ConfigError, match="aggregate.seeds"):
        AggregateOptions.from_dict({"seeds": "optim.lr"})
    o = AggregateOptions.from_dict({"seeds": "train.data_seed", "thresholds": {"id": 0.8, "commutativity": 0.6}})
    assert o.seeds == ("train.data_seed",) and o.thresholds == PhaseThresholds(0.8, 0.5, 0.6)
    assert AggregateOptions.from_dict(o.to_dict()) == o


@pytest.mark.parametrize("id_acc, ood_acc, comm, expected", [
    (0.9, 0.5, NAN, (3, "3")),          # both thresholds exactly: good
    (0.8999, 1.0, 1.0, (1, "1")),       # poor ID wins regardless of OOD
    (0.95, 0.4999, 0.7, (2, "2c")),     # commutativity at threshold: commutative
    (0.95, 0.4999, 0.6999, (2, "2n")),
    (0.95, 0.0, NAN, (2, "2")),         # no commutativity measured
    (NAN, 0.9, 1.0, (None, None)),
    (0.95, NAN, 1.0, (None, None)),
    (0.2, NAN, NAN, (1, "1")),          # poor ID is decidable without OOD
])
def test_classify_phase_boundaries(id_acc, ood_acc, comm, expected):
    assert classify_phase(id_acc, ood_acc, comm) == expected


def test_thresholds_are_used_and_validated():
    t = PhaseThresholds(id_threshold=0.5, ood_threshold=0.9, comm_threshold=0.2)
    assert classify_phase(0.6, 0.8, 0.3, t) == (2, "2c")
    assert classify_phase(0.6, 0.8, 0.1, t) == (2, "2n")
    for bad in (1.5, -0.1, "a", True):
        with pytest.raises(ConfigError, match="thresholds.ood_threshold"):
            PhaseThresholds(ood_threshold=bad)
    with pytest.raises(ConfigError, match="thresholds.odd"):
        PhaseThresholds.from_dict({"odd": 0.5})
    assert PhaseThresholds.from_dict({"ood": 0.6}).ood_threshold == 0.6


def test_classify_phases_table(table):
    df = pd.DataFrame({"id_acc": [0.5, 0.95, 0.95, NAN], "ood_acc": [0.9, 0.1, 0.6, 0.9],
                       "commutativity": [1.0, 0.9, 0.2, 1.0]})
    out = classify_phases(df)
    assert str(out.phase.dtype) == "Int64"
    assert out.phase.tolist()[:3] == [1, 2, 3] and out.phase.isna().tolist() == [False] * 3 + [True]
    assert out.phase_label.tolist()[:3] == ["1", "2c", "3"]
    assert "phase" not in df                                              # input untouched
    with pytest.raises(ConfigError, match="ood_acc"):
        classify_phases(df.drop(columns="ood_acc"))


def test_phase_diagram_on_cells(table):
    out = phase_diagram(table).set_index("init.gamma")
    assert out.loc[0.5, "phase"] == 3          # id .97, ood mean exactly .5 -> good OOD
    assert out.loc[0.8, "phase"] == 3          # only run f counts: id .97, ood .875
    strict = phase_diagram(table, AggregateOptions(thresholds=PhaseThresholds(ood_threshold=0.6)))
    assert strict.set_index("init.gamma").loc[0.5, "phase_label"] == "2"   # no commutativity column


def test_pivot_grid_and_history():
    cells = pd.DataFrame({"init.gamma": [0.8, 0.5, 0.8, 0.5], "model.n_layers": [1, 1, 2, 2],
                          "v": [1.0, 2.0, 3.0, 4.0]})
    g = pivot_grid(cells, "init.gamma", "model.n_layers", "v")
    assert list(g.columns) == [0.5, 0.8] and list(g.index) == [1, 2]
    assert g.loc[2, 0.5] == 4.0 and g.loc[1, 0.8] == 1.0
    with pytest.raises(ConfigError, match="several rows"):
        pivot_grid(pd.concat([cells, cells]), "init.gamma", "model.n_layers", "v")
    long = pd.DataFrame({"run_id": "r", "kind": "history", "step": [10, 0, 10, 0],
                         "metric": ["id_acc", "id_acc", "train_loss", "train_loss"], "value": [0.9, 0.1, 0.2, 2.0]})
    h = history_table(long, "r")
    assert h.step.tolist() == [0, 10] and h.id_acc.tolist() == [0.1, 0.9] and h.train_loss.tolist() == [2.0, 0.2]
    with pytest.raises(ConfigError, match="no history"):
        history_table(long, "other")


# ------------------------------------------------------------------ figures
def _cells_gamma_depth():
    rows = []
    for gi, g in enumerate([0.3, 0.5, 0.8]):
        for d in (1, 2):
            rows.append({"init.gamma": g, "model.n_layers": d, "optim.weight_decay": [0.0, 0.1][d - 1],
                         "id_acc": 0.5 if (gi == 0 and d == 2) else 0.99,
                         "ood_symmetric_acc": 1.0 - gi / 2, "ood_inferential_acc": gi / 2,
                         "ood_acc": gi / 2, "commutativity": [0.5, 0.9, 1.0][gi]})
    return pd.DataFrame(rows)


def _nonempty(paths):
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    for p in paths:
        assert p.exists() and p.stat().st_size > 1000
    assert paths[0].read_bytes()[:4] == b"\x89PNG" and paths[1].read_bytes()[:4] == b"%PDF"


def test_figures_write_png_and_pdf(tmp_path):
    from anchorlab.plots.phase import plot_mapping_grid, plot_ood_heatmap, plot_phase_vs_gamma, plot_run_history
    from anchorlab.plots.save import save_figure as save

    cells = _cells_gamma_depth()
    _nonempty(save(plot_mapping_grid(cells), tmp_path / "fig2"))
    _nonempty(save(plot_ood_heatmap(cells, y="model.n_layers"), tmp_path / "fig3b"))
    one = classify_phases(cells[cells["model.n_layers"] == 1].assign(id_acc_std=0.01))
    fig = plot_phase_vs_gamma(one)
    # bands: one coloured span per gamma, in the phase colours
    assert len(fig.axes[0].patches) == 3
    _nonempty(save(fig, tmp_path / "fig3a"))
    hist = pd.DataFrame({"step": [0, 10, 20], "train_loss": [2.0, 1.0, 0.5], "id_acc": [0.0, 0.5, 0.9],
                         "ood_inferential_acc": [0.0, 0.2, 0.4]})
    _nonempty(save(plot_run_history(hist), tmp_path / "curves"))
    with pytest.raises(ConfigError, match="ood_symmetric_acc"):
        plot_mapping_grid(cells.drop(columns="ood_symmetric_acc"))


def test_fig2_hatches_poor_id_cells():
    from anchorlab.plots.phase import plot_mapping_grid

    fig = plot_mapping_grid(_cells_gamma_depth())
    hatched = [p for p in fig.axes[0].patches if p.get_hatch()]
    assert len(hatched) == 1                                              # only gamma .3, depth 2
    assert hatched[0].get_xy() == (-0.5, 0.5)

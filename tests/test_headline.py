"""NeurIPS Fig. 2 from the run table: the cell specs expand to the documented runs (the std-matched cpu spec
shares run ids with the committed rows), the run table reads fake runs right, the maker judges them the
papers' way, and the committed table redraws the committed cells exactly."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.papers.eval.judgement import cell_table, fitted_rows, ordered, pair_table, seed_table
from anchorlab.papers.reproduce import FIGURES, figure_spec
from anchorlab.papers.reproduce.figures_fig2 import make_fig2
from anchorlab.sweep.grid import expand, resolve_sweep
from anchorlab.papers.runs import PAPER_STEPS, at_step_table, curve_table, in_progress_table, run_table
from anchorlab.train.optim import lr_at
from anchorlab.train.run import steps_plan

FIGS = Path(__file__).resolve().parents[1] / "docs" / "figures"
PAPERS = ("{1: 5, 2: 1, 3: -2, 4: -8}", "{'4,3': held_out, '3,4': 'shift:-6'}")


def test_the_cell_specs_expand_to_the_documented_runs_and_share_them():
    cell = {r.run_id: r.config for r in expand(resolve_sweep("fig2_cell_cpu"))}
    clock = {r.run_id: r.config for r in expand(resolve_sweep("fig2_cell_clock_cpu"))}
    depth = {r.run_id: r.config for r in expand(resolve_sweep("fig2_depth_cpu"))}
    assert (len(cell), len(clock), len(depth)) == (243, 243, 96)
    assert len(set(cell) & set(clock)) == 81 and len(set(clock) & set(depth)) == 18   # shared in one --out
    assert not set(cell) & set(depth)                          # the depth sweep runs the 1/2x clock
    assert sorted({x.optim.peak for x in depth.values()}) == [1.25e-4, 1.77e-4, 2.5e-4]   # the corrected range
    assert {x.model.n_layers for x in depth.values()} == {1, 2, 3, 4}
    c = next(iter(cell.values()))
    assert (c.model.d_model, c.model.d_head, c.model.d_ff, c.init.ref_width) == (128, 64, 384, 400)
    assert all(x.train.amp == "auto" for x in [*cell.values(), *clock.values(), *depth.values()])
    assert sorted({x.optim.peak for x in cell.values()}) == pytest.approx(
        [1.25e-4 * 2 ** (k / 2) for k in range(-2, 7)], rel=2e-3)   # a factor-sqrt2 grid around the paper's
    assert len({x.task.anchors[1] for x in cell.values()}) == 3
    # the 1x clock is the paper's: 92.2k steps, 4.4k of warmup from 1e-5, sum of lr ~12 at peak 2.5e-4
    one = next(x for x in cell.values() if x.optim.peak == 2.5e-4)
    spe, total, _ = steps_plan(one, one.task.n_train)
    assert abs(total / PAPER_STEPS - 1) < 1e-3 and round(one.optim.warmup_epochs * spe) == 4391
    assert sum(lr_at(i, spe, one.optim) for i in range(0, total, 10)) * 10 == pytest.approx(12.0, rel=0.01)
    assert sorted({round(steps_plan(x, x.task.n_train)[1] / PAPER_STEPS, 2) for x in clock.values()}) == [0.5, 1, 2]


def _ids(**options) -> dict:
    return {r.run_id: r.config for r in expand(figure_spec(FIGURES["neurips-fig2"], "cpu", options=options))}


def test_the_std_matched_fig2_spec_is_the_committed_cells_setting_at_every_clock():
    std = _ids()
    assert std == {r.run_id: r.config for r in expand(resolve_sweep("fig2_std_cpu"))}   # the named preset
    assert len(std) == 3 * 4 * 3 * 3
    assert {(x.init.gamma, x.init.ref_width, x.model.d_model) for x in std.values()} == {
        (g, 400, 128) for g in (0.3, 0.5, 0.8)}
    assert {x.model.n_layers for x in std.values()} == {1, 2, 3, 4}
    assert {x.train.init_seed for x in std.values()} == {0, 1, 2}
    assert {round(steps_plan(x, x.task.n_train)[1] / PAPER_STEPS, 2) for x in std.values()} == {0.5}
    depth = {r.run_id for r in expand(resolve_sweep("fig2_depth_cpu"))}
    clock = {r.run_id: r.config for r in expand(resolve_sweep("fig2_cell_clock_cpu"))}
    half = {i for i, c in clock.items() if round(steps_plan(c, c.task.n_train)[1] / PAPER_STEPS, 2) == 0.5}
    assert len(set(std) & depth) == 72 and len(set(std) & half) == 27     # the same configs, the same run ids
    committed = set(pd.read_csv(FIGS / "fig2_cell_cpu.csv").run_id)
    assert len(set(std) & committed) == 63                                 # already run, never to retrain
    for value, steps in (("1", 1.0), ("2", 2.0)):                        # --clock: the clock map's runs at depth 2
        other = _ids(clock=value)
        assert {round(steps_plan(x, x.task.n_train)[1] / PAPER_STEPS, 2) for x in other.values()} == {steps}
        deep2 = {i for i, c in other.items() if c.model.n_layers == 2}
        assert deep2 <= set(clock) and len(deep2) == 27
    nine = _ids(lrs="nine")
    peaks = sorted({x.optim.peak for x in nine.values()})
    assert len(nine) == 3 * 4 * 9 * 3 and len(peaks) == 9
    assert peaks == pytest.approx([1.1e-4 * (1 + k / 4) for k in range(9)]) and 1.1e-4 <= peaks[0] <= peaks[-1] <= 3.3e-4
    with pytest.raises(ConfigError, match="--clock: must be one of 0.5, 1, 2"):
        _ids(clock="3")
    with pytest.raises(ConfigError, match="--depth: figure neurips-fig2 has no such option"):
        _ids(depth="2")
    with pytest.raises(ConfigError, match="--clock: applies at scale cpu"):
        figure_spec(FIGURES["neurips-fig2"], "paper", options={"clock": "2"})


def test_the_committed_table_redraws_the_committed_cells_exactly():
    rows = ordered(run_table([FIGS / "fig2_cell_cpu.csv"]))
    assert len(rows) == 262 and rows.run_id.is_unique and (rows.source == str(FIGS / "fig2_cell_cpu.csv")).all()
    pd.testing.assert_frame_equal(cell_table(rows), pd.read_csv(FIGS / "fig2_cell_cpu_cells.csv"), check_exact=True)
    pd.testing.assert_frame_equal(seed_table(rows), pd.read_csv(FIGS / "fig2_cell_cpu_seeds.csv"), check_exact=True)
    curves = curve_table([FIGS / "fig2_cell_cpu.csv"])                   # the committed trajectories beside it
    pd.testing.assert_frame_equal(cell_table(fitted_rows(rows, curves)),
                                  pd.read_csv(FIGS / "fig2_cell_cpu_cells_fitted.csv"), check_exact=True)


def _fake_run(root, gamma, lr, seed, anchors, rules, inf, sym, steps=PAPER_STEPS, sets=(), **extra):
    cfg = experiment_from_dict({}, ["model.d_model=128", "init.ref_width=400", f"init.gamma={gamma}",
                                    f"optim.peak_lr={lr}", f"train.init_seed={seed}", f"train.data_seed={seed}",
                                    "task.preset=custom", f"task.anchors={anchors}", f"task.pair_rules={rules}", *sets])
    rid = cfg.run_id()
    final = {"id_acc": 0.99, "ood_inferential_acc": inf[0], "ood_symmetric_acc": sym[0]}
    best = {"id_acc": 1.0, "ood_inferential_acc": inf[1], "ood_symmetric_acc": sym[1]}
    d = root / "runs" / rid
    d.mkdir(parents=True)
    (d / "final.json").write_text(json.dumps({"run_id": rid, "status": "finished", "steps": steps,
                                              "wall_seconds": 1.0, "config": cfg.to_dict(), "final": final,
                                              "best": best, **extra}))


def _make(sources, out):
    out.mkdir(parents=True, exist_ok=True)
    return make_fig2(run_table(sources), out, "cpu")


def test_the_maker_on_fake_runs(tmp_path):
    other = ("{1: -2, 2: 3, 3: 1, 4: -5}", "{'3,2': held_out, '2,3': 'shift:9'}")
    for seed, lr, inf, sym in ((0, 1e-4, (0.4, 0.9), (0.1, 0.2)), (0, 2e-4, (0.1, 0.3), (0.8, 0.9)),
                               (1, 1e-4, (0.2, 0.5), (0.3, 0.4)), (1, 2e-4, (0.6, 0.7), (0.0, 0.1))):
        _fake_run(tmp_path / "a", 0.8, lr, seed, *PAPERS, inf, sym,
                  **({"device": "cpu: Some CPU (AVX512)"} if seed else
                     {"precision": {"matmul_dtype": "bfloat16", "reason": "train.amp=auto: this CPU multiplies "
                                                                        "bfloat16 in hardware (AVX512)"}}))
    _fake_run(tmp_path / "b", 0.3, 1e-4, 0, *other, (0.0, 0.1), (1.0, 1.0), steps=PAPER_STEPS // 2)
    # the GPU twin of a gamma-0.8 run (compiled, so another run id): its own cell, never mixed with the CPU's
    _fake_run(tmp_path / "b", 0.8, 1e-4, 0, *PAPERS, (0.0, 0.05), (0.95, 0.97), sets=["train.compile=true"],
              device="cuda: NVIDIA H200")
    tables, files = _make([tmp_path / "a", tmp_path / "b"], tmp_path / "out")
    rows = tables["runs"]
    assert len(rows) == 6 and {"run_id", "op_set", "paper_gamma", "peak_lr", "seed", "clock", "device",
                               "precision", "init.gamma", "model.n_layers", "final.id_acc",
                               "best.ood_symmetric_acc", "run_dir"} <= set(rows.columns)
    assert set(rows.paper_gamma) == {0.3, 0.8} and set(rows.clock) == {0.5, 1.0}
    r = rows[(rows.paper_gamma == 0.8) & (rows.seed == 0) & (rows.peak_lr == 2e-4)].iloc[0]
    assert (r["best.ood_inferential_acc"], r["best.ood_symmetric_acc"], r["final.ood_inferential_acc"],
            r["final.ood_symmetric_acc"]) == (0.3, 0.9, 0.1, 0.8)
    assert r.op_set.startswith("{1:+5,2:+1,3:-2,4:-8} (4,3) held out") and r.precision == "bfloat16"
    # the device: final.json's, else the one its precision reason names, else unrecorded
    assert r.device == "cpu" and set(rows[rows.seed == 1].device) == {"cpu: Some CPU (AVX512)"}
    assert rows[rows.paper_gamma == 0.3].iloc[0].device == "unrecorded"
    assert (rows.device == "cuda: NVIDIA H200").sum() == 1
    cells = tables["cells"]
    # gamma 0.3 and the GPU twin (peak 1e-4) have no peak inside the range
    assert list(cells.lrs) == ["all", "all", "[1.1e-4, 3.3e-4]", "all"] and list(cells.devices)[-1] == "cuda"
    gpu = cells[(cells.devices == "cuda") & (cells.lrs == "all")].iloc[0]
    assert (gpu.n_runs, gpu.inferential_best, gpu.symmetric_best) == (1, 0.05, 0.97)
    cells = cells[cells.devices != "cuda"]
    c = cells[(cells.paper_gamma == 0.8) & (cells.lrs == "all")].iloc[0]
    assert math.isclose(c.inferential_best, (0.9 + 0.7) / 2) and math.isclose(c.symmetric_best, (0.9 + 0.4) / 2)
    assert math.isclose(c.inferential_per_run, 1 / 4) and c.n_seeds == 2 and c.n_runs == 4
    assert math.isclose(c.inferential_final, (0.4 + 0.1 + 0.2 + 0.6) / 4)   # the final-metric reading beside it
    assert c.devices == "cpu" and set(cells[cells.paper_gamma == 0.3].devices) == {"unrecorded"}
    # both mappings passed 0.5 at some lr and time: the papers' rule reads composes, the cell reads "both"
    assert c.solution == "both"
    md = files["map.md"].read_text()   # the map at a glance, one table per lr reading
    assert md.count("| clock | depth |") == 2 and "| 0.8 | 2 (4) | 0.80 / 0.65 (1.00) | both | 1/4 / " in md
    # the paper's corrected range keeps only the 2e-4 runs: each seed's best is that run's
    c = cells[(cells.paper_gamma == 0.8) & (cells.lrs != "all")].iloc[0]
    assert math.isclose(c.inferential_best, (0.3 + 0.7) / 2) and math.isclose(c.symmetric_best, (0.9 + 0.1) / 2)
    assert c.n_runs == 2
    seeds = tables["seeds"]
    s0 = seeds[(seeds.paper_gamma == 0.8) & (seeds.seed == 0) & (seeds.lrs == "all") & (seeds.devices == "cpu")].iloc[0]
    assert (s0.inferential_best, s0.symmetric_best, s0.n_lrs) == (0.9, 0.9, 2)   # each mapping's best lr
    only_a = run_table([tmp_path / "a"])
    assert set(cell_table(only_a, lr_range=None).lrs) == {"all"}
    low = seed_table(only_a, lr_range=(5e-5, 1.5e-4))
    assert set(low.lrs) == {"all", "[5e-5, 1.5e-4]"} and (low[low.lrs != "all"].n_lrs == 1).all()
    with pytest.raises(ValueError, match="0 < LO <= HI"):
        cell_table(only_a, lr_range=(3e-4, 1e-4))
    assert files["fig2_cell.png"].stat().st_size > 5000
    assert "cells_fitted" not in tables                # fake runs without trajectories: no fitted reading


def test_two_depths_draw_fig2_and_one_depth_does_not(tmp_path):
    from anchorlab.papers.plots.headline import depth_groups

    for gamma, inf, sym in ((0.3, (0.0, 0.1), (0.9, 1.0)), (0.8, (0.8, 0.9), (0.0, 0.1))):
        _fake_run(tmp_path / "a", gamma, 2e-4, 0, *PAPERS, inf, sym)
    _, files = _make([tmp_path / "a"], tmp_path / "one")
    assert "fig2.png" not in files and not (tmp_path / "one" / "fig2.png").exists()   # depth 2 alone: no diagram
    _fake_run(tmp_path / "a", 0.8, 2e-4, 0, *PAPERS, (0.1, 0.2), (0.0, 0.0), sets=["model.n_layers=1"])
    tables, files = _make([tmp_path / "a"], tmp_path / "two")
    cells = tables["cells"]
    # one group: the papers' op set at 1x, read over the corrected range (2e-4 lies inside it)
    assert depth_groups(cells) == [(1.0, cells.op_set.iloc[0], "unrecorded", "[1.1e-4, 3.3e-4]")]
    assert files["fig2.png"].stat().st_size > 5000
    assert depth_groups(cells[cells.n_layers == 2]) == []


def test_the_fig2_diagram_outlines_a_cell_whose_seeds_lack_some_of_the_rows_lrs_as_partial():
    from matplotlib.patches import Rectangle

    from anchorlab.papers.plots.headline import partial_cells, plot_depth

    cell = dict(clock=0.5, op_set="papers'", devices="cpu", lrs="[1.1e-4, 3.3e-4]", id_best=1.0, threshold=0.5,
                inferential_per_run=0.0, symmetric_per_run=0.5)
    cells = pd.DataFrame([{**cell, "paper_gamma": g, "n_layers": d, "n_runs": n, "n_seeds": s,
                           "inferential_best": 0.1, "symmetric_best": 0.9}
                          for g, d, n, s in ((0.3, 2, 9, 3), (0.8, 2, 9, 3), (0.3, 3, 2, 1), (0.8, 3, 6, 2))])
    assert partial_cells(cells) == [False, False, True, False]   # 2 seeds at every lr is whole; 1 seed at 2 of 3 not
    fig = plot_depth(cells)
    dashed = [a for ax in fig.axes for a in ax.patches if isinstance(a, Rectangle) and a.get_linestyle() == "--"]
    assert len(dashed) == 2                                   # the one partial cell, in both mappings' panels
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert sum("partial" in t for t in texts) == 2 and "per run 0% of 2, 1 seed\npartial" in texts
    assert "per run 50% of 9, 3 seeds" in texts
    assert not any(partial_cells(cells.assign(n_runs=cells.n_seeds * 3)))
    # 9 runs of 3 seeds, but 4, 3 and 2 lrs: the seeds' bests come from different grids
    uneven = cells.assign(n_runs=cells.n_seeds * 3, lrs_min=[3, 2, 3, 3], lrs_max=[3, 4, 3, 3])
    assert partial_cells(uneven) == [False, True, False, False]


def test_a_depth_only_sweep_writes_its_tables_without_the_depth_2_curves(tmp_path):
    _fake_run(tmp_path / "d", 0.8, 2e-4, 0, *PAPERS, (0.4, 0.6), (0.0, 0.1), sets=["model.n_layers=3"])
    run = next((tmp_path / "d" / "runs").iterdir())
    final = json.loads((run / "final.json").read_text())
    final["history"] = [{"step": s, "id_acc": s / 10, "ood_inferential_acc": s / 20, "ood_symmetric_acc": 0.0}
                        for s in (0, 5, 10)]
    (run / "final.json").write_text(json.dumps(final))
    tables, files = _make([tmp_path / "d"], tmp_path / "d3")
    assert set(tables["cells"].n_layers) == {3}
    assert len(tables["curves"]) == 3                                 # its trajectory is kept in the table
    assert "curves.png" not in files                                  # the figure draws depth 2 only
    assert "cells_fitted" in tables                                   # every run has its trajectory


def test_committed_rows_join_the_runs_found_and_a_run_found_wins(tmp_path):
    _fake_run(tmp_path / "a", 0.3, 1e-4, 0, *PAPERS, (0.0, 0.1), (1.0, 1.0))
    _fake_run(tmp_path / "a", 0.3, 2e-4, 0, *PAPERS, (0.0, 0.0), (0.9, 0.95))
    run_a = next((tmp_path / "a" / "runs").iterdir())
    final_a = json.loads((run_a / "final.json").read_text())
    final_a["history"] = [{"step": s, "id_acc": s / 20, "ood_inferential_acc": 0.0, "ood_symmetric_acc": s / 10}
                          for s in (0, 5, 10)] + [{"step": 10, "train_loss": 0.1}]   # no evaluation: not a point
    (run_a / "final.json").write_text(json.dumps(final_a))
    tables, files = _make([tmp_path / "a"], tmp_path / "first")
    first = tmp_path / "first.csv"
    tables["runs"].to_csv(first, index=False)
    tables["curves"].to_csv(tmp_path / "first_curves.csv", index=False)   # committed beside it, as X_curves.csv
    curves = tables["curves"]
    assert list(curves.columns) == ["run_id", "step", "id_acc", "inferential", "symmetric"]
    assert curves.run_id.unique().tolist() == [run_a.name] and curves.symmetric.tolist() == [0.0, 0.5, 1.0]
    assert files["curves.png"].stat().st_size > 5000
    _fake_run(tmp_path / "b", 0.8, 1e-4, 0, *PAPERS, (0.7, 0.8), (0.1, 0.2))
    _fake_run(tmp_path / "b", 0.3, 2e-4, 0, *PAPERS, (0.0, 0.0), (0.5, 0.6))   # the same run, read again
    joined, _ = _make([tmp_path / "b", first], tmp_path / "joined")
    rows = joined["runs"]
    assert len(rows) == 3 and rows.run_id.is_unique
    assert sorted(rows.paper_gamma) == [0.3, 0.3, 0.8]
    again = rows[(rows.paper_gamma == 0.3) & (rows.peak_lr == 2e-4)].iloc[0]
    assert again["best.ood_symmetric_acc"] == 0.6          # the directory's row, not the table's 0.95
    assert (again.source, again.run_dir != "") == (str(tmp_path / "b"), True)
    cells = joined["cells"]
    assert cells[(cells.paper_gamma == 0.3) & (cells.lrs == "all")].iloc[0].symmetric_best == 1.0   # best over both lrs
    pd.testing.assert_frame_equal(joined["curves"], curves)   # the committed trajectories join too
    alone, _ = _make([first], tmp_path / "alone")               # committed rows alone regenerate
    pd.testing.assert_frame_equal(alone["cells"], tables["cells"])
    pd.testing.assert_frame_equal(alone["curves"], curves)
    pd.DataFrame({"x": [1]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ConfigError, match="--from-table .*bad.csv: no run_id column"):
        run_table([tmp_path / "bad.csv"])
    with pytest.raises(ConfigError, match="neither a directory nor a CSV"):
        run_table([tmp_path / "nowhere"])


def test_runs_stopped_before_their_end_are_read_as_in_progress_and_stay_out_of_the_cells(tmp_path):
    import yaml

    _fake_run(tmp_path / "a", 0.3, 1e-4, 0, *PAPERS, (0.0, 0.1), (1.0, 1.0))
    cfg = experiment_from_dict({}, ["model.d_model=128", "init.ref_width=400", "init.gamma=0.8",
                                    "optim.peak_lr=2e-4", "task.preset=custom", f"task.anchors={PAPERS[0]}",
                                    f"task.pair_rules={PAPERS[1]}", "train.epochs=236.4"])
    d = tmp_path / "a" / "runs" / cfg.run_id()
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    evals = [(0, 0.0, 0.0, 0.0), (1000, 0.6, 0.7, 0.1), (2000, 0.9, 0.4, 0.3)]   # step, ID, inferential, symmetric
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "id_acc": i, "ood_inferential_acc": a,
                                                         "ood_symmetric_acc": b, "train_loss": 1.0 / (s + 1),
                                                         "wall_seconds": s / 100}) + "\n" for s, i, a, b in evals)
                                     + '{"step": 3000, "id_a')                  # a line cut short by a kill
    done = next(p for p in (tmp_path / "a" / "runs").iterdir() if p != d)   # a finished run is never in progress
    (done / "metrics.jsonl").write_text(json.dumps({"step": 0, "id_acc": 0.0}) + "\n")
    (done / "config.yaml").write_text("{}")
    tables, _ = _make([tmp_path / "a"], tmp_path / "out")
    rows, p = tables["runs"], tables["in_progress"]
    assert len(rows) == 1 and rows.iloc[0].paper_gamma == 0.3          # the cells read finished runs alone
    assert len(p) == 1
    r = p.iloc[0]
    assert (r.status, r.steps, r.precision, r.paper_gamma, r.peak_lr) == ("in_progress", 2000, "float32", 0.8, 2e-4)
    assert (r["best.ood_inferential_acc"], r["final.ood_inferential_acc"], r["best.ood_symmetric_acc"],
            r["final.id_acc"]) == (0.7, 0.4, 0.3, 0.9)
    planned = steps_plan(cfg, cfg.task.n_train)[1]                       # the planned clock, not the steps reached
    assert planned > 10 * 2000 and r.clock == round(planned / PAPER_STEPS, 2)
    # at a step: every run that reached it, read as if it stopped there (the finished one stopped at step 0)
    r = at_step_table([tmp_path / "a"], [1000])
    assert len(r) == 1
    r = r.iloc[0]
    assert (r.status, r.steps, r["final.id_acc"], r["final.ood_inferential_acc"], r["best.ood_inferential_acc"]) == (
        "at_step", 1000, 0.6, 0.7, 0.7)
    r = at_step_table([tmp_path / "a"], [1000, 2000, 2500])           # no run trained to step 2500
    assert r.steps.tolist() == [1000, 2000] and r["best.ood_inferential_acc"].tolist() == [0.7, 0.7]
    assert r["final.ood_inferential_acc"].tolist() == [0.7, 0.4]
    assert cfg.train.amp == "none"                                       # the default: float32
    bf16 = experiment_from_dict(cfg.to_dict(), ["train.amp=auto", "train.max_steps=2000"])   # an amp twin, cut short
    e = tmp_path / "b" / "runs" / bf16.run_id()
    e.mkdir(parents=True)
    (e / "config.yaml").write_text(yaml.safe_dump(bf16.to_dict()))
    (e / "metrics.jsonl").write_text((d / "metrics.jsonl").read_text())
    twins = at_step_table([tmp_path / "a", tmp_path / "b"], [1000]).set_index("run_id")
    assert twins.loc[cfg.run_id()].precision == "float32" and twins.loc[bf16.run_id()].precision == "unrecorded"
    assert twins.loc[bf16.run_id()].clock < twins.loc[cfg.run_id()].clock   # the clock it planned: max_steps cuts it
    assert len(in_progress_table([tmp_path / "a", tmp_path / "b"])) == 2


def test_the_documented_robustness_command_trains_the_cells_large_and_small_init_runs():
    from anchorlab.papers.robustness import Setting, study_spec
    from anchorlab.tasks.anchor.opsets import random_op_sets

    sets = ["model.d_ff=384", "init.ref_width=400", "optim.lr=1e-5", "optim.min_lr=1e-5", "train.amp=auto",
            "train.bf16_path=autocast", "train.epochs=236.4",
            "optim.warmup_epochs=11.26", "optim.cosine_epochs=225.14", "train.eval_every=1000"]
    lrs = [6.25e-5, 8.84e-5, 1.25e-4, 1.77e-4, 2.5e-4, 3.54e-4, 5e-4, 7.07e-4, 1e-3]
    spec = study_spec("demo/small", random_op_sets(3, 0), [0, 1, 2],
                      [Setting("large_init", {"init.gamma": 0.3}), Setting("small_init", {"init.gamma": 0.8})],
                      sets, vary={"optim.peak_lr": lrs})
    rob = {r.run_id for r in expand(spec)}
    assert len(rob) == 162 and rob <= {r.run_id for r in expand(resolve_sweep("fig2_cell_cpu"))}


def cell_row(**given) -> dict:
    """One depth-2 row of a cell table for the figure tests: every column a plain value unless ``given``."""
    return dict(dict(clock=1.0, lrs="all", op_set="a", devices="cpu", n_layers=2, paper_gamma=0.3, n_runs=9,
                     n_seeds=3, id_best=1.0, inferential_best=0.1, symmetric_best=0.9, inferential_per_run=0.0,
                     symmetric_per_run=0.5), **given)


def test_the_cell_figure_draws_a_clocks_every_peak_row_only_where_it_holds_other_runs_than_the_range():
    from anchorlab.papers.plots.headline import panel_rows, plot_cell

    def cell(clock, lrs, gamma, n):
        return cell_row(clock=clock, lrs=lrs, op_set="papers'", paper_gamma=gamma, n_runs=n)

    rng = "[1.1e-4, 3.3e-4]"
    cells = pd.DataFrame([cell(0.5, "all", 0.3, 12), cell(0.5, rng, 0.3, 9),     # a wider grid at 1/2x: both rows
                          cell(1.0, "all", 0.3, 9), cell(1.0, rng, 0.3, 9),      # 1x: the same runs, one row
                          cell(2.0, "all", 0.3, 4)])                             # 2x: no range reading, kept
    assert panel_rows(cells) == [(0.5, "all"), (0.5, rng), (1.0, rng), (2.0, "all")]
    assert len(plot_cell(cells).axes) == 4
    assert panel_rows(cells.assign(n_runs=9)) == [(0.5, rng), (1.0, rng), (2.0, "all")]


def test_the_cell_figure_blanks_a_panel_without_runs_and_keeps_its_legend():
    from anchorlab.papers.plots.headline import plot_cell

    def cell(clock, op, gamma):
        return cell_row(clock=clock, op_set=op, paper_gamma=gamma)

    # the first panel (1/2x, op set "a") has no runs: blank, and the legend comes from a filled one
    cells = pd.DataFrame([cell(0.5, "b", 0.3), cell(1.0, "a", 0.3), cell(1.0, "b", 0.8)])
    fig = plot_cell(cells)
    blank = [ax for ax in fig.axes if not ax.axison]
    assert len(blank) == 1 and "no runs at clock 0.5x" in blank[0].texts[0].get_text()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"inferential: papers' cell", "symmetric: papers' cell", "paper, depth 2 (>=)"} <= set(labels)
    assert any(lab.startswith("hatched") for lab in labels) and any(lab.startswith("per-run rate") for lab in labels)
    ticks = [t.get_text() for ax in fig.axes if ax.axison for t in ax.get_xticklabels()]
    assert ticks and all("3 seeds, 9 runs" in t for t in ticks)


def test_the_cell_figure_names_each_op_set_by_its_held_out_pair():
    from anchorlab.papers.plots.headline import op_title, plot_cell

    papers, other = "{1:+5,2:+1,3:-2,4:-8} (4,3) held out, (3,4)->x-6", "{1:-2,2:+3,3:+1,4:-5} (3,2) held out, (2,3)->x+9"
    assert op_title(papers) == "(4,3) held out, {1:+5,2:+1,3:-2,4:-8}"
    assert op_title("papers'") == "papers'"     # text of another form stays as it is

    def cell(op, gamma):
        return cell_row(op_set=op, paper_gamma=gamma)

    fig = plot_cell(pd.DataFrame([cell(papers, 0.3), cell(other, 0.3)]))
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0].startswith("(4,3) held out") and titles[1].startswith("(3,2) held out")


def test_the_cell_figure_legend_names_the_papers_values_when_the_first_panel_has_none():
    from anchorlab.papers.plots.headline import plot_cell

    def cell(clock, gamma):
        return cell_row(clock=clock, op_set="a", paper_gamma=gamma)

    # the first panel holds only gamma 0.5, where the paper gives no value; the second holds 0.3
    labels = [t.get_text() for t in plot_cell(pd.DataFrame([cell(0.5, 0.5), cell(1.0, 0.3)])).legends[0].get_texts()]
    assert "paper, depth 2 (>=)" in labels
    labels = [t.get_text() for t in plot_cell(pd.DataFrame([cell(0.5, 0.5)])).legends[0].get_texts()]
    assert "paper, depth 2 (>=)" not in labels and "symmetric: papers' cell" in labels


def test_the_fitted_reading_rereads_the_cells_from_the_trajectories_and_refuses_runs_without_one(tmp_path):
    # seed 0 composes only before ID fits, then takes the mirror; seed 1 composes once fitted
    hist = {0: [(1000, 0.6, 0.8, 0.0), (2000, 1.0, 0.05, 0.9)], 1: [(1000, 0.95, 0.7, 0.1), (2000, 1.0, 0.6, 0.2)]}
    for seed, h in hist.items():
        _fake_run(tmp_path / "a", 0.8, 2e-4, seed, *PAPERS, (h[-1][2], max(e[2] for e in h)),
                  (h[-1][3], max(e[3] for e in h)),
                  history=[{"step": s, "id_acc": i, "ood_inferential_acc": a, "ood_symmetric_acc": b}
                           for s, i, a, b in h])
    tables, files = _make([tmp_path / "a"], tmp_path / "t")
    papers_cell, fitted = tables["cells"].iloc[0], tables["cells_fitted"].iloc[0]
    assert (papers_cell.inferential_best, papers_cell.symmetric_best) == ((0.8 + 0.7) / 2, (0.9 + 0.2) / 2)
    assert (fitted.inferential_best, fitted.symmetric_best) == ((0.05 + 0.7) / 2, (0.9 + 0.2) / 2)
    assert papers_cell.solution == "both" and fitted.solution == "memorizes"
    assert fitted.inferential_per_run == papers_cell.inferential_per_run   # the per-run rate reads final metrics
    md = files["map_fitted.md"].read_text()
    assert "only at evaluations with ID >= 0.9" in md and "| memorizes |" in md
    assert files["fig2_cell_fitted.png"].stat().st_size > 5000   # its depth-2 figure, the bars named as this reading
    assert "fig2_fitted.png" not in files   # one depth: no Fig. 2 under this reading either
    h = [(1000, 0.5, 0.9, 0.0), (2000, 0.95, 0.1, 0.8)]   # depth 3: composes only while ID is fitting
    _fake_run(tmp_path / "a", 0.8, 2e-4, 0, *PAPERS, (0.1, 0.9), (0.8, 0.8), sets=["model.n_layers=3"],
              history=[{"step": s, "id_acc": i, "ood_inferential_acc": a, "ood_symmetric_acc": b} for s, i, a, b in h])
    tables, files = _make([tmp_path / "a"], tmp_path / "t2")
    deep = tables["cells_fitted"].query("n_layers == 3").iloc[0]
    assert (deep.inferential_best, deep.symmetric_best) == (0.1, 0.8)
    assert files["fig2_fitted.png"].stat().st_size > 5000 and files["fig2.png"].exists()
    _fake_run(tmp_path / "b", 0.3, 2e-4, 0, *PAPERS, (0.0, 0.1), (1.0, 1.0))   # a run without a history
    both = run_table([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(ConfigError, match="no trajectory"):
        fitted_rows(both, curve_table([tmp_path / "a", tmp_path / "b"]))
    tables, _ = _make([tmp_path / "a", tmp_path / "b"], tmp_path / "u")
    assert "cells_fitted" not in tables and len(tables["cells"])      # the maker leaves the fitted reading out


def test_the_map_says_where_a_cells_seeds_ran_different_lrs():
    from anchorlab.papers.reproduce.fig2_map import cells_markdown

    base = dict(threshold=0.5, id_min=0.9, solution="memorizes", n_runs=14)
    cells = pd.DataFrame([cell_row(**base, lrs_min=4, lrs_max=5), cell_row(**base, op_set="b", lrs_min=5, lrs_max=5)])
    md = cells_markdown(cells)
    assert "| 3 (14; 4-5 lrs a seed) |" in md and "| b | cpu | 0.3 | 3 (14) |" in md
    # a table from before the columns existed reads as it did
    assert "lrs a seed" not in cells_markdown(cells.drop(columns=["lrs_min", "lrs_max"]))


def test_the_map_counts_the_contrast_case_by_case_where_both_gammas_ran_the_same_seed_and_lr():
    from anchorlab.papers.reproduce.fig2_map import pairs_markdown

    def row(gamma, seed, lr, i, inf, sym, device="cpu: X", op="a"):
        return {"clock": 0.5, "model.n_layers": 2, "op_set": op, "paper_gamma": gamma, "peak_lr": lr, "seed": seed,
                "final.id_acc": i, "final.ood_inferential_acc": inf, "final.ood_symmetric_acc": sym,
                "best.ood_inferential_acc": inf, "best.ood_symmetric_acc": sym, "best.id_acc": i,
                "status": "finished", "device": device}

    rows = pd.DataFrame([
        row(0.3, 0, 1e-4, 1.0, 0.0, 0.9), row(0.8, 0, 1e-4, 1.0, 0.8, 0.0),     # contrast
        row(0.3, 1, 1e-4, 1.0, 0.0, 0.9), row(0.8, 1, 1e-4, 0.5, 0.8, 0.0),     # the small init did not fit
        row(0.3, 0, 2e-4, 1.0, 0.6, 0.1), row(0.8, 0, 2e-4, 1.0, 0.9, 0.0),     # the large init composes too
        row(0.8, 2, 1e-4, 1.0, 0.9, 0.0),                                        # no large-init twin: not a case
        row(0.3, 0, 1e-4, 1.0, 0.0, 1.0, device="cuda: H"),                     # another device: no twin there
        row(0.5, 0, 1e-4, 1.0, 0.0, 1.0)])                                       # the middle gamma is no side
    p = pair_table(rows).iloc[0]
    assert len(pair_table(rows)) == 1 and p.devices == "cpu"
    assert (p.cases, p.contrast, p.large_memorizes, p.small_composes) == (3, 1, 2, 2)
    assert pair_table(rows, threshold=0.85).iloc[0].small_composes == 1
    md = pairs_markdown(pair_table(rows), 0.5, 0.9)
    assert "Case by case" in md and "| 0.5x | 2 | a | cpu | 3 | 1 | 2 | 2 |" in md
    assert pairs_markdown(pair_table(rows[rows.paper_gamma == 0.8]), 0.5, 0.9) == ""

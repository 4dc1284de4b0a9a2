"""``anchorlab reproduce``: the registry lists every figure; one CPU figure runs end to end."""

import math

import pandas as pd
import pytest

from anchorlab.cli import main
from anchorlab.papers.reproduce import FIGURES, figure_spec
from anchorlab.papers.reproduce.runner import SCALES

TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=256", "train.epochs=1", "train.eval_every=2"]

REQUIRED = ["neurips-fig2", "neurips-fig3", "neurips-fig4", "neurips-fig5", "neurips-fig6", "journal-fig3",
            "journal-fig4", "journal-fig5ab", "journal-fig5c", "journal-fig7a", "journal-fig7b", "journal-fig8",
            "journal-fig10", "journal-fig7c", "journal-fig7e", "journal-fig7a-matched", "journal-fig7b-matched"]


STUDIES = ["journal-gamma-wd", "journal-wd-rescue", "study-predictors"]   # the CPU studies, registered as figures


def test_every_figure_with_data_is_registered_with_its_scales():
    assert set(REQUIRED + STUDIES) <= set(FIGURES)
    for fid, fig in FIGURES.items():
        assert "cpu" in fig.sweeps, fid
        # a paper figure has its paper scale; a CPU study (paper "study", or a note saying so) may have none
        assert "paper" in fig.sweeps or fig.paper == "study" or "cpu only" in fig.notes, fid
        assert fig.shows and fig.readings, fid
        assert (fig.make is None) != (fig.tables is None), fid
    assert {"demo", "cpu", "paper"} == set(FIGURES["neurips-fig2"].sweeps)
    assert all(FIGURES[f].tables is not None for f in ["neurips-fig2", *STUDIES])   # they read the run table


def test_list_prints_runs_and_compute_per_scale(capsys, shared_datasets, monkeypatch):
    monkeypatch.setenv("ANCHORLAB_DATA_DIR", str(shared_datasets))
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for fid in REQUIRED:
        assert fid in out
    assert "1134 runs" in out                      # fig2 at paper scale: 7 gammas x 6 depths x 9 lrs x 3 seeds
    assert "  108 runs" in out and "    8 runs" in out   # fig2 at cpu scale (3 gammas x 4 depths x 3 lrs x 3 seeds), demo
    assert "h on this CPU" in out and "h on one GPU" in out
    assert "options: --clock 0.5|1|2 (default 0.5; cpu)" in out
    assert "claims: C1, C2" in out                 # neurips-fig2's C-ids


def test_paper_scale_specs_expand_to_the_papers_grids():
    from anchorlab.sweep.grid import expand

    runs = expand(figure_spec(FIGURES["neurips-fig2"], "paper"))
    peaks = sorted({r.config.optim.peak for r in runs})
    assert len(runs) == 7 * 6 * 9 * 3 and len(peaks) == 9
    assert {r.config.model.d_model for r in runs} == {400}


def test_reproduce_fig2_end_to_end_at_demo_scale_reduced(tmp_path, capsys):
    out = tmp_path / "fig2"
    args = ["reproduce", "neurips-fig2", "--scale", "demo", "--out", str(out), "--executor", "inprocess",
            "--no-progress"]
    for s in TINY:
        args += ["--set", s]
    assert main(args) == 0
    for f in ("fig2.png", "fig2_cell.png", "cells.csv", "runs.csv", "seeds.csv", "pairs.csv", "cells_fitted.csv",
              "map.md", "paper_vs_ours.csv", "README.md", "sweep/results.sqlite"):
        assert (out / f if f.startswith("sweep") else out / "neurips-fig2" / f).exists(), f
    assert (out / "neurips-fig2" / "fig2.png").stat().st_size > 5000
    cells = pd.read_csv(out / "neurips-fig2" / "cells.csv")
    assert len(cells) == 4 and set(cells.paper_gamma) == {0.3, 0.8} and set(cells.n_layers) == {1, 2}
    assert {"inferential_best", "symmetric_best", "inferential_final", "inferential_per_run", "solution"} <= set(cells)
    assert (cells.n_seeds == 2).all() and (cells.lrs == "all").all()     # the demo's one peak lies outside the range
    claims = pd.read_csv(out / "neurips-fig2" / "paper_vs_ours.csv")
    assert len(claims) == 8 and claims.paper.notna().all()
    ours = pd.to_numeric(claims.ours, errors="coerce").dropna()
    assert len(ours) == 7 and ours.between(0, 1).all()                 # accuracies and fractions, all computed
    readme = (out / "neurips-fig2" / "README.md").read_text()
    assert "| claim | paper | ours |" in readme and "8 runs" in readme and "Scale rule (demo): a fast look" in readme
    # a second call trains nothing new
    assert main(args) == 0
    assert len(list((out / "sweep" / "runs").iterdir())) == 8
    # --no-train with other settings: the figure is redrawn from the 8 runs there, nothing is trained
    (out / "neurips-fig2" / "fig2.png").unlink()
    assert main([*args, "--set", "train.epochs=3", "--no-train"]) == 0
    assert len(list((out / "sweep" / "runs").iterdir())) == 8 and (out / "neurips-fig2" / "fig2.png").exists()
    assert "8 completed runs found" in (out / "neurips-fig2" / "README.md").read_text()
    # a partly run sweep merges with committed rows: the runs a committed table holds are never trained again
    committed = pd.read_csv(out / "neurips-fig2" / "runs.csv")
    committed.iloc[:6].to_csv(tmp_path / "committed.csv", index=False)
    again = tmp_path / "again"
    assert main([*(a if a != str(out) else str(again) for a in args), "--from-table", str(tmp_path / "committed.csv")]) == 0
    assert len(list((again / "sweep" / "runs").iterdir())) == 2        # only the 2 runs the table lacks
    pd.testing.assert_frame_equal(pd.read_csv(again / "neurips-fig2" / "cells.csv"), cells)
    assert "6 committed rows from" in (again / "neurips-fig2" / "README.md").read_text()
    capsys.readouterr()
    assert main(["reproduce", "neurips-fig2", "--out", str(tmp_path / "empty"), "--no-train"]) == 2
    assert "--no-train" in capsys.readouterr().err and not (tmp_path / "empty" / "sweep").exists()


def test_the_committed_fig2_table_redraws_its_cells_without_training(tmp_path, capsys):
    from pathlib import Path

    committed = Path(__file__).resolve().parents[1] / "docs" / "figures" / "fig2_cell_cpu.csv"
    out = tmp_path / "redraw"
    assert main(["reproduce", "neurips-fig2", "--from-table", str(committed), "--no-train", "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out / "neurips-fig2" / "cells.csv"), pd.read_csv(committed.with_name("fig2_cell_cpu_cells.csv")),
                                  check_exact=True)
    assert not (out / "sweep").exists() and len(pd.read_csv(out / "neurips-fig2" / "runs.csv")) == 262
    assert (out / "neurips-fig2" / "fig2.png").stat().st_size > 5000 and (out / "neurips-fig2" / "map_fitted.md").exists()
    claims = pd.read_csv(out / "neurips-fig2" / "paper_vs_ours.csv").set_index("claim")
    assert claims.ours.str.fullmatch("memorizes / composes").sum() == 1   # depth 2 at 1/2x, the papers' op set
    capsys.readouterr()
    assert main(["reproduce", "neurips-fig2", "--dry-run", "--from-table", str(committed), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "108 runs, 45 to train (63 held by the committed tables)" in text and "h on this CPU" in text
    assert "scale rule (cpu): std-matched" in text and "elsewhere" in text
    assert main(["reproduce", "neurips-fig2", "--dry-run", "--clock", "2", "--out", str(tmp_path / "c2")]) == 0
    assert "108 runs, 108 to train" in capsys.readouterr().out
    assert main(["reproduce", "journal-fig5c", "--from-table", str(committed), "--no-train", "--out", str(out)]) == 2
    assert "--from-table: figure journal-fig5c is drawn from its sweep directory only" in capsys.readouterr().err
    assert main(["reproduce", "neurips-fig2", "--from-table", str(tmp_path / "no.csv"), "--no-train", "--out",
                 str(out)]) == 2
    assert "no.csv: no such file" in capsys.readouterr().err


def test_unknown_figure_and_scale_are_one_line_errors(capsys):
    assert main(["reproduce", "neurips-fig99"]) == 2
    assert "unknown figure" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["reproduce", "neurips-fig2", "--scale", "huge"])


def test_a_claim_that_cannot_be_computed_is_nan_not_a_crash():
    from anchorlab.papers.reproduce.runner import claims_table

    t = claims_table(FIGURES["neurips-fig2"], {"cells": pd.DataFrame({"x": [1]})})
    assert len(t) == 8 and all(isinstance(v, float) and math.isnan(v) for v in t.ours)


def test_list_is_quick_never_prints_nan_states_its_rates_and_downloads_nothing(capsys, tmp_path, monkeypatch):
    import time
    import urllib.request

    from anchorlab.papers.reproduce.estimate import CPU_FLOPS

    monkeypatch.setenv("ANCHORLAB_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("ANCHORLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("--list downloaded a file"))
    t = time.perf_counter()
    assert main(["reproduce", "--list"]) == 0
    took = time.perf_counter() - t
    out = capsys.readouterr().out
    assert "nan" not in out.lower()
    assert f"{CPU_FLOPS:.0e} FLOP/s per worker (measured" in out and "FLOP/s (measured: width-128" in out
    assert "journal-fig6" in out and "compute not estimated (model.arch 'concept_unet'" in out
    assert "journal-fig7a" in out     # its files: read before in this process, or "needs the dataset files here"
    assert took < 20          # was a minute (it generated the PrOntoQA sets to size their vocabularies)


LIST_IN_SUBPROCESS = """
import contextlib, io, sys
{preload}
from anchorlab.cli import main
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    assert main(["reproduce", "--list"]) == 0
print(sorted(m for m in ("torch", "pandas", "matplotlib") if m in sys.modules))
print(buf.getvalue(), end="")
"""


def _list_in_subprocess(tmp_path, preload: str = "") -> tuple[str, str]:
    import os
    import subprocess
    import sys

    env = {**os.environ, "ANCHORLAB_DATA_DIR": str(tmp_path / "empty"), "ANCHORLAB_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", LIST_IN_SUBPROCESS.format(preload=preload)], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    loaded, _, out = r.stdout.partition("\n")
    return loaded, out


def test_list_imports_neither_torch_nor_pandas_and_prints_what_it_printed_with_them(tmp_path):
    loaded, out = _list_in_subprocess(tmp_path)
    assert loaded == "[]"                        # torch, pandas, matplotlib: none imported by --list
    loaded_all, out_all = _list_in_subprocess(tmp_path, preload="import torch, pandas")
    assert loaded_all == "['pandas', 'torch']"
    assert out == out_all                        # the same listing as with the heavy modules loaded
    assert out.startswith(f"{len(FIGURES)} figures; runs and estimated training compute per scale")
    lines = out.splitlines()
    for fid, fig in FIGURES.items():
        i = next(k for k, line in enumerate(lines) if line.startswith(f"{fid} "))
        scales = [line.split()[0] for line in lines[i + 1:i + 1 + len(fig.sweeps)]]
        assert scales == [s for s in SCALES if s in fig.sweeps], fid
    assert "1134 runs" in out and "h on this CPU" in out and "h on one GPU" in out
    assert "nan" not in out.lower()


def test_cpu_hours_use_the_bf16_rate_only_where_the_run_resolves_to_bf16():
    from anchorlab.config import load_config
    from anchorlab.papers.reproduce.estimate import CPU_BF16_FLOPS, CPU_EMULATED_BF16_FLOPS, CPU_FLOPS, cpu_rate, sweep_compute

    auto = load_config("demo/small", ["train.amp=auto"])
    fp32 = load_config("demo/small", ["train.amp=none"])
    assert cpu_rate(auto, bf16_units=True) == CPU_BF16_FLOPS
    assert cpu_rate(auto, bf16_units=False) == CPU_FLOPS          # auto keeps float32 without bf16 units
    assert cpu_rate(fp32, bf16_units=True) == CPU_FLOPS
    bf16 = load_config("demo/small", ["train.amp=bf16"])
    assert cpu_rate(bf16, bf16_units=True) == CPU_BF16_FLOPS
    assert cpu_rate(bf16, bf16_units=False) == CPU_EMULATED_BF16_FLOPS < CPU_FLOPS   # emulated: slower, not fp32's
    with_units = sweep_compute([auto, fp32], workers=1, bf16_units=True)
    without = sweep_compute([auto, fp32], workers=1, bf16_units=False)
    assert with_units["pflop"] == without["pflop"]
    # half the FLOPs at the bf16 rate, half at the float32 rate
    assert with_units["cpu_hours"] / without["cpu_hours"] == pytest.approx((1 / CPU_BF16_FLOPS + 1 / CPU_FLOPS)
                                                                         / (2 / CPU_FLOPS))


def test_a_figure_has_exactly_one_maker_and_options_change_its_spec_or_refuse():
    from anchorlab.config import ConfigError
    from anchorlab.papers.reproduce.registry import Figure, Option
    from anchorlab.papers.reproduce.runner import apply_options

    with pytest.raises(ValueError, match="exactly one of make"):
        Figure("x", "study", "n", "s", {"cpu": "fig2_demo"})
    with pytest.raises(ValueError, match="exactly one of make"):
        Figure("x", "study", "n", "s", {"cpu": "fig2_demo"}, make=lambda *a: ({}, {}), tables=lambda *a: ({}, {}))
    with pytest.raises(ValueError, match="default 'c' is not one of"):
        Option("o", {"a": {}}, "c", "help")
    opt = Option("width", {"small": {"model.d_model": 64}, "peaks": {"init.gamma": [0.3]}}, "small", "h")
    fig = Figure("x", "study", "n", "s", {"cpu": "fig2_demo", "paper": "fig2_paper"}, tables=lambda *a: ({}, {}),
                 options=(opt,))
    spec = {"set": [], "axes": {"init.gamma": [0.3, 0.8]}, "zip": [{"train.init_seed": [0, 1]}]}
    assert apply_options(fig, "cpu", spec, {})["set"] == [{"model.d_model": 64}]          # the default applies
    assert apply_options(fig, "cpu", spec, {"width": "peaks"})["axes"]["init.gamma"] == [0.3]   # an axis: replaced
    assert apply_options(fig, "paper", spec, {}) == {**spec, "set": []}                   # not at this scale
    with pytest.raises(ConfigError, match="--width: applies at scale cpu"):
        apply_options(fig, "paper", spec, {"width": "peaks"})
    with pytest.raises(ConfigError, match="--width: must be one of small, peaks, got 'huge'"):
        apply_options(fig, "cpu", spec, {"width": "huge"})
    part = Option("part", {"ends": {"init.gamma": slice(0, 1)}}, "ends", "h")   # a slice keeps part of an axis
    after = Figure("z", "study", "n", "s", {"cpu": "fig2_demo"}, tables=lambda *a: ({}, {}), options=(opt, part))
    assert apply_options(after, "cpu", spec, {})["axes"]["init.gamma"] == [0.3]
    assert apply_options(after, "cpu", {**spec, "axes": {"init.gamma": [0.5, 0.9]}}, {})["axes"]["init.gamma"] == [0.5]
    zipped = Option("seeds", {"a": {"train.init_seed": [3]}}, "a", "h")
    with pytest.raises(ConfigError, match="train.init_seed varies in a zip group"):
        apply_options(Figure("y", "study", "n", "s", {"cpu": "fig2_demo"}, tables=lambda *a: ({}, {}),
                             options=(zipped,)), "cpu", spec, {})


def test_journal_fig10_reads_its_runs_through_the_run_table(tmp_path, tiny_overrides):
    from anchorlab.papers.reproduce.figures_phase import make_fig10
    from anchorlab.sweep.runner import run_sweep

    spec = {"name": "tiny-fig10", "base": "demo/small", "set": tiny_overrides + ["train.epochs=1"],
            "axes": {"init.gamma": [0.3, 0.8], "optim.weight_decay": [0.0]}}
    run_sweep(spec, tmp_path / "sweep", executor="inprocess")
    tables, files = make_fig10(tmp_path / "sweep", tmp_path, "cpu")
    t = tables["condensation"]
    assert sorted(t["init.gamma"]) == [0.3, 0.8] and (t["optim.weight_decay"] == 0.0).all() and (t.seed == 0).all()
    assert t.mean_abs_cos.between(0, 1).all() and files["fig10.png"].stat().st_size > 5000

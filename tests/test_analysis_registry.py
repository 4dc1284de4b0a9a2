"""The analysis registry: every entry computes tables and draws a figure; files, task checks, options, backend."""

import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

import anchorlab
from anchorlab.analysis.complexity import complexity_summary, sweep_stable_ranks
from anchorlab.analysis.mechanism import CosAo2Options, MaskKeyOptions
from anchorlab.analysis.registry import (ANALYSES, MULTI_RUN, analyses_for, get_analysis, run_analysis,
                                         run_multi_analysis)
from anchorlab.config import ConfigError, experiment_from_dict, options_from_strings
from anchorlab.papers import analyses as papers_analyses  # registers the papers' analyses (early-verdict)
from anchorlab.papers.analysis.verdict import VerdictModel
from anchorlab.tasks.seq2seq import PairsTask
from anchorlab.train import load_run, train

# a verdict model on two step-0 features (a run without logged predictors gets them from its config)
VERDICT = Path(tempfile.mkdtemp()) / "verdict.json"
VERDICT.write_text(VerdictModel(0.0, ("margin/pair", "embed/cos_pair"), (0.0, 0.0), (1.0, 0.1), (1.0, 1.0),
                                0.0).to_json())

# small enough that all the analyses together take seconds
SMALL = {"flow": [], "flow-scores": ["n_inputs=64"],
         "mask-key": ["n_per_pair=4", "method=pca", "n_accuracy=8"],
         "mask-anchor2": ["g_values=[40,41,42]", "n_draws=1", "n_accuracy=8"],
         "tsne-ao1": ["n_inputs=80", "max_points=40", "method=pca"],
         "cos-ao2": ["keys=[30,31,32,33,34,35,36]", "n_draws=1"], "cos-v2": ["keys=[30,31,32,33]", "n_draws=1"],
         "condensation": ["threshold=0.8"], "embedding": [], "cov-spectrum": ["top_k=4"], "stable-rank": [],
         "addition-grid": [], "coord-check": ["widths=[16,32]", "steps=1", "batch_size=4"],
         "early-verdict": ["model=" + str(VERDICT)], "answers": ["split=test"]}
COMPLEXITY = ["condensation", "embedding", "cov-spectrum", "stable-rank"]
ANY_TASK = COMPLEXITY + ["coord-check"]  # addition-grid is tested on addition runs (tests/test_reasoning_figures.py)


@pytest.fixture(scope="module")
def anchor_run(tmp_path_factory):
    """A tiny trained anchor-task run (24 steps, ~2 s)."""
    cfg = experiment_from_dict({}, ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=2000",
                                    "task.n_eval_per_group=16", "train.batch_size=250", "train.epochs=3",
                                    "train.eval_every=100", "train.threads=1"])
    return train(cfg, tmp_path_factory.mktemp("anchor") / "run").run_dir


@pytest.fixture(scope="module")
def pairs_run(tmp_path_factory):
    """A tiny trained seq2seq run on in-memory pairs (reverse three letters)."""
    rng = random.Random(0)
    words = [" ".join(rng.choice("abcdef") for _ in range(3)) for _ in range(64)]
    pairs = [(w, " ".join(reversed(w.split()))) for w in words]
    task = PairsTask.from_pairs(pairs, {"id": pairs[:16]})
    dims = task.dims()
    cfg = experiment_from_dict({
        "task": {"name": "pairs"},
        "model": {"arch": "gpt2", "n_layers": 2, "d_model": 16, "n_heads": 2, "d_head": 8, "d_ff": 32,
                  "vocab_size": dims["vocab_size"], "max_len": dims["max_len"]},
        "train": {"batch_size": 32, "epochs": 2, "threads": 1}})
    return train(cfg, tmp_path_factory.mktemp("pairs") / "run", task=task).run_dir


def test_every_analysis_computes_tables_and_draws_a_figure(anchor_run):
    assert set(SMALL) == set(ANALYSES)  # a new entry needs small options here
    run = load_run(anchor_run)
    for name, analysis in ANALYSES.items():
        assert analysis.name == name and analysis.summary and "\n" not in analysis.summary
        if not analysis.applies_to("anchor"):
            continue
        opts = options_from_strings(analysis.options, SMALL[name])
        tables = analysis.compute(run, opts)
        assert tables and all(isinstance(t, pd.DataFrame) and len(t) > 0 for t in tables.values()), name
        fig = analysis.plot(tables, opts, "label")
        assert isinstance(fig, Figure) and fig.axes, name
        assert "label" in fig.axes[0].get_title(), name


def test_run_analysis_writes_one_csv_per_table_and_a_png(anchor_run, tmp_path):
    paths = run_analysis(anchor_run, "mask-anchor2", tmp_path, SMALL["mask-anchor2"])
    assert paths == {"csv": tmp_path / "mask-anchor2.csv", "summary": tmp_path / "mask-anchor2_summary.csv",
                     "accuracy": tmp_path / "mask-anchor2_accuracy.csv", "png": tmp_path / "mask-anchor2.png"}
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(pd.read_csv(paths["csv"])) == (3 * 4) ** 2
    assert pd.read_csv(paths["summary"]).metric.tolist() == ["equal_g_contrast"]
    # options as a mapping of Python values; default output directory RUN/analysis
    paths = run_analysis(anchor_run, "flow-scores", options={"n_inputs": 32, "by_pair": False})
    assert set(paths) == {"csv", "summary", "png"} and paths["csv"] == anchor_run / "analysis" / "flow-scores.csv"
    assert set(pd.read_csv(paths["csv"]).group) == {"all"}


def test_complexity_analyses_run_on_a_seq2seq_run(pairs_run, tmp_path):
    assert analyses_for("pairs") == ANY_TASK and analyses_for("scan") == ANY_TASK
    vocab = load_run(pairs_run).cfg.model.vocab_size
    assert vocab < 20
    for name in COMPLEXITY:
        paths = run_analysis(pairs_run, name, tmp_path)
        assert paths["png"].stat().st_size > 1000 and len(pd.read_csv(paths["csv"])) > 0, name
    run = load_run(pairs_run)
    assert pd.read_csv(tmp_path / "embedding.csv").token.tolist() == list(range(vocab))  # all token ids
    matrices = [n for n, p in run.model.named_parameters() if p.ndim == 2]
    assert pd.read_csv(tmp_path / "stable-rank.csv").name.tolist() == matrices


def test_multi_run_complexity_tables(anchor_run, pairs_run, tmp_path):
    df = complexity_summary([anchor_run, pairs_run])
    assert df.run.tolist() == [str(anchor_run), str(pairs_run)] and df.d_model.tolist() == [16, 16]
    assert df.stable_rank.between(1, 16).all() and df.ordinal_r2.between(0, 1).all()
    assert df.diff_consistency_3.notna().tolist() == [True, False]  # +3 steps only mean something on anchor runs
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r1").symlink_to(anchor_run)
    (tmp_path / "runs" / "unfinished").mkdir()
    sr = sweep_stable_ranks(tmp_path)
    assert sr.run_id.tolist() == ["r1"] and sr.stable_rank.iloc[0] == pytest.approx(df.stable_rank.iloc[0])


def test_run_multi_analysis_writes_one_table(anchor_run, pairs_run, tmp_path):
    assert set(MULTI_RUN) == {"compare-runs", "complexity-summary", "answers-summary"}
    path, table = run_multi_analysis([anchor_run, pairs_run], "complexity-summary", tmp_path, ["threshold=0.8"])
    assert path == tmp_path / "complexity-summary.csv" and len(pd.read_csv(path)) == 2 == len(table)
    path, table = run_multi_analysis([anchor_run], "compare-runs", tmp_path, {"n_inputs": 16, "n_draws": 1})
    assert path == tmp_path / "compare-runs.csv" and table.run.tolist() == [str(anchor_run)]
    with pytest.raises(ConfigError, match=r"^analysis 'compare-runs': needs a run of task anchor, .* 'pairs' run"):
        run_multi_analysis([anchor_run, pairs_run], "compare-runs", tmp_path / "x")
    with pytest.raises(ConfigError, match=r"^n_draws: must be >= 1"):
        run_multi_analysis([anchor_run], "compare-runs", tmp_path / "x", ["n_draws=0"])
    with pytest.raises(ConfigError, match=r"^analysis: must be one of compare-runs, complexity-summary, answers-summary"):
        run_multi_analysis([anchor_run], "flow", tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_mechanism_analysis_on_a_seq2seq_run_is_a_one_line_error(pairs_run, tmp_path):
    with pytest.raises(ConfigError) as e:
        run_analysis(pairs_run, "flow-scores", tmp_path / "out")
    msg = str(e.value)
    assert "\n" not in msg and "'flow-scores'" in msg and "'pairs'" in msg and "anchor" in msg
    assert msg.endswith("analyses for 'pairs': condensation, embedding, cov-spectrum, stable-rank, coord-check")
    assert not (tmp_path / "out").exists()


def test_options_parse_from_strings_and_bad_options_name_the_field(anchor_run, tmp_path):
    o = options_from_strings(CosAo2Options, ["keys=[30,31,32,33]", "lower=[[3,3],[2,2]]", "upper=[[1,2],[1,3]]",
                                             "layer=null", "center=true"])
    assert o == CosAo2Options(keys=(30, 31, 32, 33), lower=((3, 3), (2, 2)), upper=((1, 2), (1, 3)), center=True)
    o = options_from_strings(MaskKeyOptions, ["layers=[0]", "hook=blocks.0.hook_ao", "n-per-pair=3"])
    assert o.layers == (0,) and o.hook == "blocks.0.hook_ao" and o.n_per_pair == 3
    bad = {"flow": (["n_bogus=3"], r"^n_bogus: unknown key; allowed: tokens, key_pos"),
           "tsne-ao1": (["method=umap"], r"^method: must be one of 'tsne', 'pca'"),
           "flow-scores": (["n_inputs=abc"], r"^n_inputs: expected an integer"),
           "mask-key": (["n_per_pair=0"], r"^n_per_pair: must be >= 1"),
           "cos-ao2": (["keys=[5]"], r"^keys: need at least two"),
           "cos-v2": (["lower=[4,3]"], r"^lower/upper: give both"),
           "mask-anchor2": (["g_values=[40,x]"], r"^g_values: expected tuple or NoneType"),
           "embedding": (["diff_steps=[0]"], r"^diff_steps: must be nonzero"),
           "condensation": (["threshold=1.5"], r"^threshold: must be <= 1"),
           "early-verdict": (["threshold=0"], r"^threshold: must be > 0"),
           "answers": (["split=ood"], r"^split: must be one of train, test, all")}
    for name, (opts, match) in bad.items():
        with pytest.raises(ConfigError, match=match):
            options_from_strings(get_analysis(name).options, opts)
        with pytest.raises(ConfigError, match=match):  # the same error through the registry
            run_analysis(anchor_run, name, tmp_path, opts)
    with pytest.raises(ConfigError, match=r"^analysis: must be one of flow, flow-scores, .*stable-rank, addition-grid, answers, coord-check, early-verdict, got 'nope'"):
        get_analysis("nope")
    with pytest.raises(ConfigError, match="^override 'keys': expected KEY=VALUE"):
        options_from_strings(CosAo2Options, ["keys"])
    assert not list(tmp_path.iterdir())


def test_importing_plots_and_analyses_keeps_the_matplotlib_backend():
    code = ("import importlib, pkgutil, sys, matplotlib\n"
            "before = matplotlib.get_backend()\n"
            "import anchorlab.plots\n"
            "for m in pkgutil.iter_modules(anchorlab.plots.__path__):\n"
            "    importlib.import_module('anchorlab.plots.' + m.name)\n"
            "import anchorlab.analysis.registry\n"
            "print(before, matplotlib.get_backend(), 'matplotlib.pyplot' in sys.modules)\n")
    src = os.path.dirname(os.path.dirname(anchorlab.__file__))  # the anchorlab under test
    env = {**os.environ, "MPLBACKEND": "pdf", "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["pdf", "pdf", "False"]


def test_the_library_registry_knows_no_paper_analysis_until_the_papers_register_theirs():
    code = ("import anchorlab.analysis.registry as r; a = 'early-verdict' in r.ANALYSES; "
            "import anchorlab.papers.analyses; print(a, 'early-verdict' in r.ANALYSES)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]
    assert ANALYSES["early-verdict"] is papers_analyses.EARLY_VERDICT

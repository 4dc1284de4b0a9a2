"""Every per-run analysis by name: its options, compute function, figure and the tasks it fits.

This is the only place that knows options, files and figures. An analysis is
a frozen options dataclass, a pure ``compute(run, opts) -> {table: DataFrame}``
(first table = the main one) and a ``plot(tables, opts, label) -> Figure``
that only draws. :func:`run_analysis` ties them to a run directory::

    run_analysis("runs/eB", "cos-ao2", options=["keys=[30,31,32,33]", "n_draws=8"])
    # -> {"csv": runs/eB/analysis/cos-ao2.csv, "summary": .../cos-ao2_summary.csv, "png": .../cos-ao2.png}

:data:`MULTI_RUN` holds the tables that put several runs side by side
(``compare-runs``, ``complexity-summary``); :func:`run_multi_analysis` writes
one CSV of them. The pure functions behind them (:func:`compare_runs`,
:func:`complexity_summary`, :func:`sweep_stable_ranks`) are re-exported here.

Options are strings ``key=value`` with YAML values (``keys=[30,31,32]``,
``lower=[[3,3],[2,2]]``, ``layers=null``, ``center=true``) or a mapping of
Python values; see :func:`anchorlab.config.options_from_strings`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from anchorlab.config import ConfigError, options_from_strings
from anchorlab.io import atomic_write
from anchorlab.plots import complexity as cplots
from anchorlab.plots.answers import answers_figure
from anchorlab.plots.coord_check import coord_check_figure
from anchorlab.plots import mechanism as mplots
from anchorlab.plots import reasoning as rplots
from anchorlab.analysis import answers as ans
from anchorlab.analysis import complexity as cx
from anchorlab.analysis import coord_check as cc
from anchorlab.analysis import mechanism as mech
from anchorlab.analysis import reasoning as rsn
from anchorlab.analysis.complexity import complexity_summary, sweep_stable_ranks
from anchorlab.analysis.mechanism import compare_runs

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from anchorlab.train import RunResult

log = logging.getLogger(__name__)

Tables = dict[str, pd.DataFrame]


@dataclass(frozen=True)
class Analysis:
    """One analysis: ``tasks`` = the task names it applies to (None = any transformer run)."""

    name: str
    summary: str
    options: type
    compute: Callable[[RunResult, Any], Tables]
    plot: Callable[[Tables, Any, str], Figure] | None
    tasks: tuple[str, ...] | None = None

    def applies_to(self, task: str) -> bool:
        return self.tasks is None or task in self.tasks


ANCHOR = ("anchor",)

ANALYSES: dict[str, Analysis] = {a.name: a for a in (
    Analysis("flow", "information flow of one input, line width = attention or contribution (NeurIPS Fig. 3a,c)",
             mech.FlowOptions, mech.compute_flow, mplots.flow_figure, ANCHOR),
    Analysis("flow-scores", "mean role-to-role attention per layer (NeurIPS Fig. 3a,c, numbers)",
             mech.FlowScoresOptions, mech.compute_flow_scores, mplots.flow_scores_figure, ANCHOR),
    Analysis("mask-key", "key token masked: 2-D embedding of the outputs + accuracy (journal Fig. 4A,C)",
             mech.MaskKeyOptions, mech.compute_mask_key, mplots.mask_key_figure, ANCHOR),
    Analysis("mask-anchor2", "second anchor masked: output cosine grouped by g + accuracy (journal Fig. 4B,D)",
             mech.MaskAnchor2Options, mech.compute_mask_anchor2, mplots.mask_anchor2_figure, ANCHOR),
    Analysis("tsne-ao1", "t-SNE of X_ao(1) at the last position (NeurIPS Fig. 3b)",
             mech.TsneAo1Options, mech.compute_tsne_ao1, mplots.tsne_ao1_figure, ANCHOR),
    Analysis("cos-ao2", "cosine of X_ao(2) across probe pairs, equal targets boxed (NeurIPS Fig. 4a,b)",
             mech.CosAo2Options, mech.compute_cos_ao2, mplots.cos_ao2_figure, ANCHOR),
    Analysis("cos-v2", "cosine of V(2) at the first anchor, equal single-anchor values boxed (NeurIPS Fig. 4c)",
             mech.CosV2Options, mech.compute_cos_v2, mplots.cos_v2_figure, ANCHOR),
    Analysis("condensation", "cosine of a matrix's rows in clustered order + condensation scores (NeurIPS Fig. 5a,b)",
             cx.CondensationOptions, cx.compute_condensation, cplots.condensation_figure),
    Analysis("embedding", "PCA of token embeddings + ordinal scores (NeurIPS Fig. 5c,d)",
             cx.EmbeddingOptions, cx.compute_embedding, cplots.embedding_figure),
    Analysis("cov-spectrum", "eigenvalues of the token-embedding covariance (NeurIPS Fig. 7, final weights)",
             cx.CovSpectrumOptions, cx.compute_cov_spectrum, cplots.cov_spectrum_figure),
    Analysis("stable-rank", "stable rank of every 2-D parameter (journal Fig. 5C)",
             cx.StableRankOptions, cx.compute_stable_rank, cplots.stable_rank_figure),
    Analysis("addition-grid", "accuracy of every a + b as a 100x100 heatmap, held-out square outlined (journal Fig. 7C)",
             rsn.AdditionGridOptions, rsn.compute_addition_grid, rplots.addition_grid_figure, ("addition",)),
    Analysis("answers", "every answer on the held-out pairs, named: composition, mirror, another pair's target, other",
             ans.AnswersOptions, ans.compute_answers, answers_figure, ANCHOR),
    Analysis("coord-check", "init std and the first steps' activation scales vs width (mup-style coordinate check)",
             cc.CoordCheckOptions, cc.compute_coord_check, coord_check_figure),
)}


@dataclass(frozen=True)
class MultiRunAnalysis:
    """A table of several runs: ``compute(runs, **fields of opts) -> DataFrame`` (one row per run)."""

    name: str
    summary: str
    options: type
    compute: Callable[..., pd.DataFrame]
    tasks: tuple[str, ...] | None = None

    def applies_to(self, task: str) -> bool:
        return self.tasks is None or task in self.tasks


MULTI_RUN: dict[str, MultiRunAnalysis] = {a.name: a for a in (
    MultiRunAnalysis("compare-runs", "headline mechanism numbers (accuracy, flow scores, contrasts) side by side",
                     mech.CompareRunsOptions, compare_runs, ANCHOR),
    MultiRunAnalysis("complexity-summary", "stable rank, condensation and ordinal scores side by side",
                     cx.ComplexitySummaryOptions, complexity_summary),
    MultiRunAnalysis("answers-summary", "the top answer on each held-out pair and the share of each kind, side by side",
                     ans.AnswersSummaryOptions, ans.answers_summary, ANCHOR),
)}


def register_analysis(analysis: Analysis) -> Analysis:
    """Add ``analysis`` to :data:`ANALYSES` (a layer above the library, such as :mod:`anchorlab.papers.analyses`,
    adds its own this way); registering the same name twice with a different analysis is an error."""
    if ANALYSES.get(analysis.name, analysis) is not analysis:
        raise ValueError(f"analysis {analysis.name!r} is registered already")
    ANALYSES[analysis.name] = analysis
    return analysis


def get_analysis(name: str) -> Analysis:
    """The analysis called ``name``; ConfigError listing the names otherwise."""
    if name not in ANALYSES:
        raise ConfigError(f"analysis: must be one of {', '.join(ANALYSES)}, got {name!r} (a layer above adds its own "
                          f"when imported: `import anchorlab.papers.analyses` for the papers')")
    return ANALYSES[name]


def analyses_for(task: str) -> list[str]:
    """Names of the analyses that apply to runs of task ``task``."""
    return [n for n, a in ANALYSES.items() if a.applies_to(task)]


def check_task(analysis: Analysis | MultiRunAnalysis, task: str, run_dir: str | Path) -> None:
    """One-line ConfigError when ``analysis`` does not apply to a ``task`` run."""
    if not analysis.applies_to(task):
        raise ConfigError(f"analysis {analysis.name!r}: needs a run of task {', '.join(analysis.tasks or ())}, "
                          f"but {run_dir} is a {task!r} run; analyses for {task!r}: {', '.join(analyses_for(task))}")


def run_label(run: RunResult) -> str:
    """``<run dir name> (gamma=<init.gamma>, plain)``, or ``(gamma=<g> at width <W>)`` where ``init.ref_width``
    reads every width-counting fan-in at W: the prefix of every figure title, naming the gamma's convention."""
    w = run.cfg.init.ref_width
    return f"{Path(run.run_dir).name} (gamma={run.cfg.init.gamma}{', plain' if w is None else f' at width {w}'})"


def write_tables(tables: Mapping[str, pd.DataFrame], out_dir: Path, name: str) -> dict[str, Path]:
    """Main (first) table -> ``<name>.csv`` (key "csv"); each other -> ``<name>_<table>.csv`` (key = table)."""
    paths = {}
    for i, (key, df) in enumerate(tables.items()):
        path = out_dir / (f"{name}.csv" if i == 0 else f"{name}_{key}.csv")
        paths["csv" if i == 0 else key] = atomic_write(path, lambda p, d=df: d.to_csv(p, index=False))
    return paths


def run_analysis(run_dir: str | Path, name: str, out_dir: str | Path | None = None,
                 options: Sequence[str] | Mapping[str, Any] = ()) -> dict[str, Path]:
    """Run analysis ``name`` on the run in ``run_dir`` and write its files into ``out_dir``
    (default ``RUN/analysis``): the tables as CSV (:func:`write_tables`) and the figure as
    ``<name>.png`` (key "png"). Returns the paths. The run is only read (final weights, else
    the latest checkpoint).

    The task and the options are checked before the weights are loaded.
    """
    from anchorlab.plots.save import save_figure
    from anchorlab.train import config_of, load_run

    analysis = get_analysis(name)
    check_task(analysis, config_of(run_dir).task.name, run_dir)
    opts = options_from_strings(analysis.options, options)
    run = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "analysis"
    log.info("analysis %s of %s -> %s (%s)", name, run_dir, out, opts)
    tables = analysis.compute(run, opts)
    paths = write_tables(tables, out, name)
    if analysis.plot is not None:
        fig = analysis.plot(tables, opts, run_label(run))
        paths["png"] = save_figure(fig, out / name, formats=("png",), dpi=130)[0]
    return paths


def run_multi_analysis(run_dirs: Sequence[str | Path], name: str, out_dir: str | Path | None = None,
                       options: Sequence[str] | Mapping[str, Any] = ()) -> tuple[Path, pd.DataFrame]:
    """Table ``name`` of :data:`MULTI_RUN` over ``run_dirs``, written as ``<out_dir>/<name>.csv``
    (default ``FIRST_RUN/analysis``); returns (path, table). Tasks and options are checked first."""
    if name not in MULTI_RUN:
        raise ConfigError(f"analysis: must be one of {', '.join(MULTI_RUN)} for several runs, got {name!r}")
    if not run_dirs:
        raise ConfigError(f"analysis {name!r}: needs at least one run directory")
    from anchorlab.train import config_of

    analysis = MULTI_RUN[name]
    for rd in run_dirs:
        check_task(analysis, config_of(rd).task.name, rd)
    opts = options_from_strings(analysis.options, options)
    table = analysis.compute(list(run_dirs), **{f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)})
    out = Path(out_dir) if out_dir is not None else Path(run_dirs[0]) / "analysis"
    return write_tables({name: table}, out, name)["csv"], table


__all__ = ["Analysis", "ANALYSES", "register_analysis", "MultiRunAnalysis", "MULTI_RUN", "get_analysis", "analyses_for", "check_task",
           "run_label", "write_tables", "run_analysis", "run_multi_analysis", "compare_runs", "complexity_summary",
           "sweep_stable_ranks"]

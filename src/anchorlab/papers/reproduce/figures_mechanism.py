"""Mechanism and complexity figures from runs that reason and runs that memorize: NeurIPS Figs. 3-5 and 7,
journal Figs. 4, 5A-B.

Each figure trains (or finds) its sweep's runs, picks per seed a small-init run that composes and a
large-init run that memorizes (:func:`anchorlab.papers.reproduce.mechanism_picks.pick_runs`, the one rule), runs
the registered analyses (:mod:`anchorlab.analysis.registry`) on every picked run into
``out/<side>_seed<k>/``, and reports their headline numbers (``compare_runs`` / ``complexity_summary``)
per run (``<kind>_runs``) and per side as mean and spread over the seeds (``<kind>_summary``, long:
side, metric, n, mean, sd, min, max). The claims read the means. ``picks`` lists every side and seed,
a seed with no qualifying run as a row with ``picked`` False and the reason; ``candidates`` every run the
rule looked at.

Scales: ``cpu`` = the std-matched Fig. 2 cell's runs (sweeps/mechanism_cpu.yaml, run ids shared with
``neurips-fig2``); ``paper`` = one run per side at paper scale; ``demo`` = the demo's fast pair, analyzed
as it comes (the rule's bars at 0: that pair is not a composing / memorizing pair by the papers' std).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.papers.reproduce.figures_fig2 import CLOCKS, LRS
from anchorlab.papers.reproduce.mechanism_picks import DEFAULT_RULE, SIDES, PickRule, candidate_table, pick_runs, picks_line
from anchorlab.papers.reproduce.registry import Figure, Made, Option, Reading, Tables, register

if TYPE_CHECKING:
    import pandas as pd

# the rule's bars per scale (a scale not named here: DEFAULT_RULE)
RULES: dict[str, PickRule] = {"demo": PickRule(id_min=0.0, compose_min=0.0, memorize_min=0.0)}
# per-run columns that describe the run, not a number to average
_NOT_METRICS = ("seed", "peak_lr", "gamma", "d_model", "weight_decay")


def picks_for(sweep_dir: Path, scale: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(candidates, picks) of a sweep directory under the scale's rule."""
    cands = candidate_table(sweep_dir)
    return cands, pick_runs(cands, RULES.get(scale, DEFAULT_RULE))


def _picked(picks: pd.DataFrame, cands: pd.DataFrame) -> pd.DataFrame:
    p = picks[picks.picked.astype(bool)][["side", "seed", "run_id", "peak_lr"]]
    return p.merge(cands[["run_id", "run_dir"]], on="run_id", how="left").reset_index(drop=True)


def _analyses(picked: pd.DataFrame, out: Path, names: Sequence[str], only: Mapping[str, str]) -> dict[str, Path]:
    """Run analyses ``names`` on every picked run (``only[name]``: on that side's runs only)."""
    from anchorlab.analysis.registry import run_analysis

    files = {}
    for r in picked.itertuples():
        label = f"{r.side}_seed{r.seed}"
        for name in names:
            if only.get(name, r.side) != r.side:
                continue
            for k, p in run_analysis(r.run_dir, name, out / label).items():
                files[f"{label}/{name}.{k}"] = p
    return files


def per_run_table(picked: pd.DataFrame, kind: str) -> pd.DataFrame:
    """side, seed, run_id, peak_lr, then the headline numbers of every picked run (``compare_runs`` for
    kind ``mechanism``, ``complexity_summary`` for ``complexity``)."""
    import pandas as pd

    from anchorlab.analysis.registry import compare_runs, complexity_summary

    keys = picked[["side", "seed", "run_id", "peak_lr"]].reset_index(drop=True)
    if picked.empty:
        return keys
    numbers = (compare_runs if kind == "mechanism" else complexity_summary)(list(picked.run_dir))
    return pd.concat([keys, numbers.drop(columns="run").reset_index(drop=True)], axis=1)


def side_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per side, every headline number of :func:`per_run_table` as n, mean, sd, min, max over its seeds."""
    from anchorlab.analysis.over_seeds import spread_over_seeds

    metrics = [c for c in runs.columns if c not in ("side", "run_id", *_NOT_METRICS)]
    return spread_over_seeds(runs, "side", metrics, groups=SIDES)


def _maker(names: Sequence[str], kind: str, only: Mapping[str, str] | None = None):
    def make(sweep_dir: Path, out: Path, scale: str) -> Made:
        cands, picks = picks_for(sweep_dir, scale)
        picked = _picked(picks, cands)
        files = _analyses(picked, out, names, only or {})
        runs = per_run_table(picked, kind)
        return {f"{kind}_summary": side_summary(runs), f"{kind}_runs": runs, "picks": picks,
                "candidates": cands.drop(columns="run_dir")}, files
    return make


# ------------------------------------------------------------------ claims read the side means
def _at(t: pd.DataFrame, col: str, side: str) -> float:
    from anchorlab.analysis.over_seeds import group_mean

    return group_mean(t, "side", side, col)


def _diff(t: pd.DataFrame, col: str) -> float:
    """small-init mean minus large-init mean of a number (NaN when a side has no picked run)."""
    return _at(t, col, "small_init") - _at(t, col, "large_init")


def _mean(kind: str, col: str, side: str) -> Callable[[Tables], float]:
    return lambda t: _at(t[f"{kind}_summary"], col, side)


def _mean_diff(kind: str, col: str) -> Callable[[Tables], float]:
    return lambda t: _diff(t[f"{kind}_summary"], col)


PICKS_CLAIM = Reading("runs analyzed: per seed, a small-init run that composes and a large-init run that memorizes "
                    "(mechanism_picks.pick_runs)", "one model per side", lambda t: picks_line(t["picks"]))

NEURIPS_SWEEPS = {"demo": "mechanism_demo", "cpu": "mechanism_cpu", "paper": "mechanism_paper"}
JOURNAL_SWEEPS = {"demo": "journal_mechanism_demo", "cpu": "mechanism_cpu", "paper": "journal_mechanism_paper"}
# the same choices as neurips-fig2's, so `--clock 1` here reads the runs `neurips-fig2 --clock 1` trains
OPTIONS = (Option("clock", CLOCKS, "0.5", "the optimizer clock, a fraction of the paper's 92,190 steps (as neurips-fig2)"),
           Option("lrs", LRS, "range", "the grid's three peaks inside the corrected range, or the paper's nine "
                                       "(as neurips-fig2)"))
RULES_TEXT = {
    "demo": "a fast look, not the papers' init: the demo's pair (plain gamma, width 128, one seed, the demo's clock), "
            "both on the paper's large-init side by std; analyzed as they come (the picking bars at 0)",
    "cpu": "the std-matched Fig. 2 cell's depth-2 runs on the papers' op set (sweeps/mechanism_cpu.yaml): paper gamma "
           "0.8 and 0.3 (width 128 at init.ref_width 400), the three peaks inside the corrected lr range, seeds 0-2, "
           "1/2x the paper's optimizer steps unless --clock; the same run ids as neurips-fig2's, so one --out trains "
           "them once; per seed one picked run per side, numbers as the mean over the picked seeds",
    "paper": "the papers' own setting (App. A: width 400, 210 epochs), one seed: one picked run per side (a middle "
             "init rate, where the spec has one, is on neither side)",
}
NOTE = ("Runs picked by anchorlab.papers.reproduce.mechanism_picks.pick_runs: " + DEFAULT_RULE.describe() + ". Numbers: "
        "per side the mean over its picked runs (n, sd, min, max in *_summary.csv; every picked run in *_runs.csv; "
        "picks.csv names each side and seed's run and why, or why none; candidates.csv every run looked at).")


def _figure(**kw) -> Figure:
    return register(Figure(options=OPTIONS, rules=RULES_TEXT, **kw))


_figure(
    id="neurips-fig3", cids=("C4",), paper="NeurIPS 2024", number="Fig. 3",
    shows="information flow of the symmetric and the inferential solution, and t-SNE of X_ao(1)",
    sweeps=NEURIPS_SWEEPS, make=_maker(["flow", "flow-scores", "tsne-ao1"], "mechanism"),
    readings=(
        PICKS_CLAIM,
        Reading("inferential solution, layer 1: the key moves to the anchors (anchors->key, small minus large init)",
              "higher for the inferential solution", _mean_diff("mechanism", "L0 anchors->key")),
        Reading("inferential solution, layer 2: the last token reads the anchors (last->anchors, small minus large)",
              "higher for the inferential solution", _mean_diff("mechanism", "L1 last->anchors")),
        Reading("symmetric solution, layer 1: the last token merges both anchors (last->anchors, large init)",
              "high", _mean("mechanism", "L0 last->anchors", "large_init")),
    ),
    notes=NOTE)

_figure(
    id="neurips-fig4", cids=("C5",), paper="NeurIPS 2024", number="Fig. 4",
    shows="cosine similarity of X_ao(2) (both solutions) and of V(2) at the first anchor (inferential solution)",
    sweeps=NEURIPS_SWEEPS, make=_maker(["cos-ao2", "cos-v2"], "mechanism", {"cos-v2": "small_init"}),
    readings=(
        PICKS_CLAIM,
        Reading("inferential solution: equal inferential targets give near-parallel X_ao(2) (equal-target contrast)",
              "high for inferential, low for symmetric", _mean("mechanism", "contrast X_ao(2)", "small_init")),
        Reading("symmetric solution: X_ao(2) equal-target contrast", "low",
              _mean("mechanism", "contrast X_ao(2)", "large_init")),
        Reading("inferential solution: V(2) at the first anchor groups by g(x; a1) (contrast)", "high",
              _mean("mechanism", "contrast V(2)", "small_init")),
    ),
    notes=NOTE + " Raw cosines are dominated by a shared mean vector at CPU scale; the summary also "
                       "gives centred contrasts.")

_figure(
    id="neurips-fig5", cids=("C6", "C7"), paper="NeurIPS 2024", number="Fig. 5",
    shows="condensation of W_Q(1) rows and PCA of the token embeddings, small vs large init",
    sweeps=NEURIPS_SWEEPS, make=_maker(["condensation", "embedding"], "complexity"),
    readings=(
        PICKS_CLAIM,
        Reading("small init condenses W_Q(1) (mean |cos| of rows, small minus large init)", "positive",
              _mean_diff("complexity", "mean_abs_cos")),
        Reading("small init orders the embeddings by value (ordinal Spearman, small init)", "ordered",
              _mean("complexity", "ordinal_spearman", "small_init")),
        Reading("large init: ordinal Spearman of the embeddings", "no clear order",
              _mean("complexity", "ordinal_spearman", "large_init")),
    ),
    notes=NOTE, extra="analysis")

_figure(
    id="neurips-fig7", cids=("C7",), paper="NeurIPS 2024", number="Fig. 7 (App. B)",
    shows="eigenvalues of the covariance of the token embeddings, small vs large init",
    sweeps=NEURIPS_SWEEPS, make=_maker(["cov-spectrum"], "complexity"),
    readings=(PICKS_CLAIM,
            Reading("small init: a few large eigenvalues (stable rank of W_Q(1), small minus large init)",
                  "fewer directions for small init", _mean_diff("complexity", "stable_rank"))),
    notes=NOTE + " The paper plots the spectrum over training; here the final weights' spectrum "
                       "(train.log_complexity=true records it at every evaluation).", extra="analysis")

_figure(
    id="journal-fig4", cids=("C4",), paper="journal", number="Fig. 4",
    shows="masking the key (t-SNE of outputs by anchor pair) and the second anchor (cosine by g(x; a1))",
    sweeps=JOURNAL_SWEEPS, make=_maker(["mask-key", "mask-anchor2"], "mechanism"),
    readings=(
        PICKS_CLAIM,
        Reading("reasoning phase (small init, composes): outputs with equal g(x; a1) align when the second anchor "
              "is masked (centred contrast)", "high in phase 3, low in phase 2",
              _mean("mechanism", "contrast anchor2-masked centered", "small_init")),
        Reading("large init (memorizes): second-anchor-masked centred contrast", "low",
              _mean("mechanism", "contrast anchor2-masked centered", "large_init")),
    ),
    notes=NOTE + " The journal's own task holds out (3,4) and (4,3); the CPU scale reads the NeurIPS "
                       "op set's cell (paper scale: the journal task).")

_figure(
    id="journal-fig5ab", cids=("C6",), paper="journal", number="Fig. 5A-B",
    shows="condensation of W_Q(1) and embedding PCA across the phases (2-layer single-head model)",
    sweeps=JOURNAL_SWEEPS, make=_maker(["condensation", "embedding"], "complexity"),
    readings=(PICKS_CLAIM,
            Reading("condensation is higher at small init (mean |cos|, small minus large init)", "positive",
                  _mean_diff("complexity", "mean_abs_cos"))),
    notes=NOTE, extra="analysis")

__all__ = ["RULES", "picks_for", "per_run_table", "side_summary"]

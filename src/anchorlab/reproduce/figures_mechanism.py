"""Mechanism and complexity figures from a few trained models: NeurIPS Figs. 3-5 and 7, journal Figs. 4, 5A-B.

Each figure trains its models through a small sweep (one model per init rate),
then runs the registered analyses (:mod:`anchorlab.analysis.registry`) on every
model into ``out/<label>/`` and puts their headline numbers side by side
(``compare_runs`` / ``complexity_summary``), which is what the claims read.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ..sweep.results import finals
from .registry import Claim, Figure, Made, register

if TYPE_CHECKING:
    import pandas as pd


def _label(f: dict) -> str:
    return f"gamma{f['config']['init']['gamma']:g}"


def _analyses(sweep_dir: Path, out: Path, names: Sequence[str], only: str | None = None) -> dict[str, Path]:
    """Run analyses ``names`` on every model (or only the largest-gamma one with ``only='small_init'``)."""
    from ..analysis.registry import run_analysis

    runs = finals(sweep_dir)
    if only == "small_init" and runs:
        runs = [max(runs, key=lambda f: f["config"]["init"]["gamma"])]
    files = {}
    for f in runs:
        for name in names:
            for k, p in run_analysis(f["run_dir"], name, out / _label(f)).items():
                files[f"{_label(f)}/{name}.{k}"] = p
    return files


def _summary(sweep_dir: Path, kind: str) -> pd.DataFrame:
    from ..analysis.registry import compare_runs, complexity_summary

    dirs = [f["run_dir"] for f in finals(sweep_dir)]
    t = compare_runs(dirs) if kind == "mechanism" else complexity_summary(dirs)
    return t.sort_values("gamma").reset_index(drop=True)


def _at(t: pd.DataFrame, col: str, which: str) -> float:
    if t.empty or col not in t:
        return math.nan
    row = t.iloc[-1] if which == "small_init" else t.iloc[0]
    return float(row[col])


def _diff(t: pd.DataFrame, col: str) -> float:
    """small-init value minus large-init value of a column."""
    return _at(t, col, "small_init") - _at(t, col, "large_init")


def _maker(names: Sequence[str], kind: str, only: dict[str, str] | None = None):
    def make(sweep_dir: Path, out: Path, scale: str) -> Made:
        files: dict[str, Path] = {}
        for name in names:
            files.update(_analyses(sweep_dir, out, [name], (only or {}).get(name)))
        return {f"{kind}_summary": _summary(sweep_dir, kind)}, files
    return make


NEURIPS_SWEEPS = {"cpu": "mechanism_cpu", "paper": "mechanism_paper"}
JOURNAL_SWEEPS = {"cpu": "journal_mechanism_cpu", "paper": "journal_mechanism_paper"}
SCALE_NOTE = ("CPU scale: the demo's width-128 models (docs/demo.md); the paper: width 400, 900k sequences, "
              "210 epochs.")

register(Figure(
    id="neurips-fig3", paper="NeurIPS 2024", number="Fig. 3",
    shows="information flow of the symmetric and the inferential solution, and t-SNE of X_ao(1)",
    sweeps=NEURIPS_SWEEPS, make=_maker(["flow", "flow-scores", "tsne-ao1"], "mechanism"),
    claims=(
        Claim("inferential solution, layer 1: the key moves to the anchors (anchors->key, small minus large init)",
              "higher for the inferential solution", lambda t: _diff(t["mechanism_summary"], "L0 anchors->key")),
        Claim("inferential solution, layer 2: the last token reads the anchors (last->anchors, small minus large)",
              "higher for the inferential solution", lambda t: _diff(t["mechanism_summary"], "L1 last->anchors")),
        Claim("symmetric solution, layer 1: the last token merges both anchors (last->anchors, large init)",
              "high", lambda t: _at(t["mechanism_summary"], "L0 last->anchors", "large_init")),
    ),
    notes=SCALE_NOTE))

register(Figure(
    id="neurips-fig4", paper="NeurIPS 2024", number="Fig. 4",
    shows="cosine similarity of X_ao(2) (both solutions) and of V(2) at the first anchor (inferential solution)",
    sweeps=NEURIPS_SWEEPS, make=_maker(["cos-ao2", "cos-v2"], "mechanism", {"cos-v2": "small_init"}),
    claims=(
        Claim("inferential solution: equal inferential targets give near-parallel X_ao(2) (equal-target contrast)",
              "high for inferential, low for symmetric",
              lambda t: _at(t["mechanism_summary"], "contrast X_ao(2)", "small_init")),
        Claim("symmetric solution: X_ao(2) equal-target contrast", "low",
              lambda t: _at(t["mechanism_summary"], "contrast X_ao(2)", "large_init")),
        Claim("inferential solution: V(2) at the first anchor groups by g(x; a1) (contrast)", "high",
              lambda t: _at(t["mechanism_summary"], "contrast V(2)", "small_init")),
    ),
    notes=SCALE_NOTE + " Raw cosines are dominated by a shared mean vector at CPU scale; the summary also "
                       "gives centred contrasts."))

register(Figure(
    id="neurips-fig5", paper="NeurIPS 2024", number="Fig. 5",
    shows="condensation of W_Q(1) rows and PCA of the token embeddings, small vs large init",
    sweeps=NEURIPS_SWEEPS, make=_maker(["condensation", "embedding"], "complexity"),
    claims=(
        Claim("small init condenses W_Q(1) (mean |cos| of rows, small minus large init)", "positive",
              lambda t: _diff(t["complexity_summary"], "mean_abs_cos")),
        Claim("small init orders the embeddings by value (ordinal Spearman, small init)", "ordered",
              lambda t: _at(t["complexity_summary"], "ordinal_spearman", "small_init")),
        Claim("large init: ordinal Spearman of the embeddings", "no clear order",
              lambda t: _at(t["complexity_summary"], "ordinal_spearman", "large_init")),
    ),
    notes=SCALE_NOTE, extra="analysis"))

register(Figure(
    id="neurips-fig7", paper="NeurIPS 2024", number="Fig. 7 (App. B)",
    shows="eigenvalues of the covariance of the token embeddings, small vs large init",
    sweeps=NEURIPS_SWEEPS, make=_maker(["cov-spectrum"], "complexity"),
    claims=(Claim("small init: a few large eigenvalues (stable rank of W_Q(1), small minus large init)",
                  "fewer directions for small init", lambda t: _diff(t["complexity_summary"], "stable_rank")),),
    notes=SCALE_NOTE + " The paper plots the spectrum over training; here the final weights' spectrum "
                       "(train.log_complexity=true records it at every evaluation).", extra="analysis"))

register(Figure(
    id="journal-fig4", paper="journal", number="Fig. 4",
    shows="masking the key (t-SNE of outputs by anchor pair) and the second anchor (cosine by g(x; a1))",
    sweeps=JOURNAL_SWEEPS, make=_maker(["mask-key", "mask-anchor2"], "mechanism"),
    claims=(
        Claim("phase 3 (smallest init): outputs with equal g(x; a1) align when the second anchor is masked "
              "(centred contrast)", "high in phase 3, low in phase 2",
              lambda t: _at(t["mechanism_summary"], "contrast anchor2-masked centered", "small_init")),
        Claim("largest init: second-anchor-masked centred contrast", "low",
              lambda t: _at(t["mechanism_summary"], "contrast anchor2-masked centered", "large_init")),
    ),
    notes="CPU scale: width 128, 100k sequences, 12 epochs, three init rates."))

register(Figure(
    id="journal-fig5ab", paper="journal", number="Fig. 5A-B",
    shows="condensation of W_Q(1) and embedding PCA across the phases (2-layer single-head model)",
    sweeps=JOURNAL_SWEEPS, make=_maker(["condensation", "embedding"], "complexity"),
    claims=(Claim("condensation rises with the init rate (mean |cos|, smallest minus largest init)", "positive",
                  lambda t: _diff(t["complexity_summary"], "mean_abs_cos")),),
    notes="CPU scale: width 128, 100k sequences, 12 epochs, three init rates.", extra="analysis"))

"""NeurIPS Fig. 7 and Fig. 5c's step structure as an init contrast, read on the journal's task (C7).

The demo's setting (``demo_rate_cpu``: the journal's task at width 128 with the stds of width 640, 1/10x its
clock, journal gamma 0.4 and 0.8, ten seeds each) trained, then every run's key embeddings read on their own
(:func:`anchorlab.papers.analysis.clean_mechanism.init_tables`): the covariance spectrum as shares of its
trace, the participation ratio, the +3 / +4 directions in the leading PC plane and the magnitude ordering, with
the journal's Fig. 4D masked contrast beside them. Tables: ``runs`` (per run), ``judged`` (small against large
init, per measure), ``spectra`` (long); figure ``spectra.png``. The committed tables are
``docs/figures/clean_mechanism_cpu_init.csv`` and ``clean_mechanism_cpu_spectra.csv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.papers.reproduce.registry import Figure, Made, Reading, Tables, register

if TYPE_CHECKING:
    import pandas as pd


def side_rows(rows: "pd.DataFrame") -> "pd.DataFrame":
    """A run table of the two-init sweep -> run_id, side (the larger gamma: ``small_init``), seed, run_dir."""
    g = rows["init.gamma"].astype(float)
    return rows.assign(side=["small_init" if x == g.max() else "large_init" for x in g],
                       seed=rows["train.init_seed"])[["run_id", "side", "seed", "run_dir"]]


def make_spectrum(sweep_dir: Path, out: Path, scale: str) -> Made:
    """The sweep's runs -> (tables, files): per-run measures, their judgement, the spectra and their figure."""
    from anchorlab.papers.analysis.clean_mechanism import init_tables
    from anchorlab.papers.plots.spectrum import plot_spectra
    from anchorlab.papers.runs import run_table

    runs, judged, spectra = init_tables(side_rows(run_table([sweep_dir])))
    out.mkdir(parents=True, exist_ok=True)
    png = out / "spectra.png"
    plot_spectra(spectra).savefig(png, dpi=110)
    return {"runs": runs, "judged": judged, "spectra": spectra}, {"spectra.png": png}


def _reading(measure: str):
    def ours(t: Tables) -> str:
        j = t["judged"].set_index("measure")
        return f"{j.loc[measure, 'a_mean']:.2f} vs {j.loc[measure, 'b_mean']:.2f}: {j.loc[measure, 'reading']}"
    return ours


register(Figure(
    id="study-init-spectrum", cids=("C7",), paper="study", number="NeurIPS Fig. 7 and 5c on the journal task",
    shows="the key embeddings' covariance spectrum and +3 / +4 step directions, small against large init, every "
          "seed on its own, on the journal's task",
    sweeps={"cpu": "demo_rate_cpu"},
    make=make_spectrum,
    rules={"cpu": "the demo's setting (journal task, width 128 with the stds of width 640, 1/10x the clock), journal "
                  "gamma 0.4 vs 0.8, seeds 0-9; measures over the key tokens 40-79"},
    readings=(
        Reading("small init: a few large eigenvalues (share of the top two), above the large init",
                "few large (small init) vs evenly spread (large)", _reading("top2_share")),
        Reading("small init: fewer effective directions (participation ratio)", "qualitative",
                _reading("participation")),
        Reading("small init: +3 moves point one way in the PC plane", "ordered by steps of 3 and 4",
                _reading("consistency_3")),
        Reading("small init: the keys ordered by value along a leading PC", "ordered", _reading("ordinal_spearman")),
    ),
    notes="cpu: 20 runs of about five minutes (the demo's); the committed tables come from the demo's rate runs."))

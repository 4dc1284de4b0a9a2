"""The papers' layer: the figures, studies, claims and judgement built on the anchorlab library.

The library (config, tasks, model and the init rate, train, sweep and the run table, analysis, generic plots,
report) knows no paper figure and no study; everything specific to the two papers or to one study lives here:

* :mod:`anchorlab.papers.runs`: the run table with the papers' columns (op set, paper gamma, clock) and curves;
* :mod:`anchorlab.papers.reproduce`: every paper figure and CPU study (sweep per scale -> table -> figure, claims);
* :mod:`anchorlab.papers.eval`: the papers' judgement (the cell, lr readings, contrast, crossing, wd grid, phases);
* :mod:`anchorlab.papers.analysis` and :mod:`anchorlab.papers.analyses`: the predictors study's pipeline;
* :mod:`anchorlab.papers.plots`: the figures of the papers and the studies;
* :mod:`anchorlab.papers.demo_journal`, :mod:`anchorlab.papers.demo`, :mod:`anchorlab.papers.robustness`: the demo
  and the robustness study;
* ``papers/sweeps/`` (:data:`SWEEP_DIR`): every figure's and study's sweep preset, found by name through the
  library's search path (:mod:`anchorlab.sweep.presets`), which pyproject.toml's entry point
  ``anchorlab.sweeps`` points here.

Nothing in the library imports this package (tests/test_structure.py). Names are imported on first use::

    from anchorlab.papers import cell_table, curve_table, paper_cells, reproduce, run_table
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchorlab.registry import lazy_attribute

SWEEP_DIR = Path(__file__).resolve().parent / "sweeps"   # the figures' and studies' sweep presets

_API = {
    "reproduce": "anchorlab.papers.reproduce:reproduce",
    "cell_table": "anchorlab.papers.eval.judgement:cell_table",
    "paper_cells": "anchorlab.papers.eval.judgement:paper_cells",
    "run_table": "anchorlab.papers.runs:run_table",
    "curve_table": "anchorlab.papers.runs:curve_table",
}

__all__ = list(_API)


def __getattr__(name: str) -> Any:
    return lazy_attribute(_API, globals(), __name__, name)


if TYPE_CHECKING:  # pragma: no cover
    from anchorlab.papers.eval.judgement import cell_table, paper_cells
    from anchorlab.papers.reproduce import reproduce
    from anchorlab.papers.runs import curve_table, run_table

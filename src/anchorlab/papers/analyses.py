"""The papers' per-run analyses, added to the library's registry (:func:`anchorlab.analysis.registry.register_analysis`)
on import; ``anchorlab analyze`` imports this module, so its ``--list`` shows them.

* ``early-verdict``: will the run compose or memorize (4,3)? The predictors study's logistic verdict from the run's
  early predictors (:mod:`anchorlab.papers.analysis.early_verdict`).
"""

from __future__ import annotations

from anchorlab.analysis.registry import ANCHOR, Analysis, register_analysis
from anchorlab.papers.analysis import early_verdict as vd
from anchorlab.papers.plots import predictors as pplots

EARLY_VERDICT = register_analysis(Analysis(
    "early-verdict", "will the run compose or memorize (4,3)? a logistic verdict from its early predictors",
    vd.EarlyVerdictOptions, vd.compute_early_verdict, pplots.verdict_figure, ANCHOR))

"""``anchorlab reproduce``: every paper figure with data behind it, at CPU and at paper scale.

:data:`FIGURES` maps a figure id (``neurips-fig2``, ``journal-fig7b``, ...) to
its sweeps, maker and the paper's claims (:mod:`.registry`); :func:`reproduce`
runs one (:mod:`.runner`); :func:`describe_figures` lists them with their runs
and estimated compute. Figure modules: ``figures_*.py``.
"""

from anchorlab.papers.reproduce import figures_mechanism, figures_phase, figures_prediction, figures_realtasks  # noqa: F401  (register)
from anchorlab.papers.reproduce import figures_reasoning  # noqa: F401  (register)
from anchorlab.papers.reproduce import figures_lm  # noqa: F401  (register)
from anchorlab.papers.reproduce import figures_diffusion  # noqa: F401,E402  (register)
from anchorlab.papers.reproduce import figures_fig2, figures_predictors, figures_wd  # noqa: F401  (register)
from anchorlab.papers.reproduce import figures_opset, figures_opset_many  # noqa: F401  (register)
from anchorlab.papers.reproduce import figures_journal3  # noqa: F401  (register)
from anchorlab.papers.reproduce import figures_scale  # noqa: F401  (register)
from anchorlab.papers.reproduce.registry import FIGURES, Claim, Figure, register
from anchorlab.papers.reproduce.runner import describe_figures, figure_spec, reproduce

__all__ = ["FIGURES", "Claim", "Figure", "register", "describe_figures", "figure_spec", "reproduce"]

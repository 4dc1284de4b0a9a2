"""The papers' gamma conventions, one place: a gamma means an init std only with a width (std = width^-gamma).

The NeurIPS paper's gammas are read at its width 400 ("paper gamma"), the journal's at its width 640 ("journal
gamma"); a plain gamma is read at the model's own fan-in. Two questions, two functions:

* :func:`convert`: which gamma gives, at another width, the same std (``gamma x ln(from) / ln(to)``);
* :func:`read_at`: the gamma a run stands for in a convention: its ``init.gamma`` when the run reads its stds at
  that width (``init.ref_width``, or a model of that width without a reference), NaN otherwise.
"""

from __future__ import annotations

import math
from typing import Any

PAPER_WIDTH = 400     # NeurIPS 2024: d_model 400
JOURNAL_WIDTH = 640   # the journal's GPT-2-style model: d_model 640


def convert(gamma: float, from_width: float, to_width: float = PAPER_WIDTH) -> float:
    """The gamma that gives, at ``to_width``, the std ``from_width ** -gamma`` (default: the paper gamma)."""
    return float(gamma) * math.log(float(from_width)) / math.log(float(to_width))


def _known(v: Any) -> bool:
    try:
        return v is not None and not math.isnan(float(v))
    except (TypeError, ValueError):
        return False


def convention(ref_width: Any) -> str:
    """The name of the convention a run's gamma is read in: ``paper`` (stds read at 400), ``journal`` (640), else
    ``plain`` (the model's own fan-in, or another reference width)."""
    ref = int(float(ref_width)) if _known(ref_width) else None
    return {PAPER_WIDTH: "paper", JOURNAL_WIDTH: "journal"}.get(ref, "plain")


def read_at(gamma: float, ref_width: Any, d_model: Any, width: int = PAPER_WIDTH) -> float:
    """The gamma a run stands for in the convention of ``width``: ``gamma`` when the run's stds are read at
    ``width`` (``init.ref_width == width``, or ``d_model == width`` without a reference); NaN otherwise."""
    ref = int(float(ref_width)) if _known(ref_width) else None
    own = int(float(d_model)) if _known(d_model) else None
    return float(gamma) if (ref or own) == width else math.nan

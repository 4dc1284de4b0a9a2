"""Which way a metric improves: one rule for a run's "best" values and for sweep aggregation."""

from __future__ import annotations

import re

LOWER_WORDS = frozenset({"loss", "ppl"})
LOWER_NAMES = frozenset({"ood_other_frac"})


def lower_is_better(metric: str) -> bool:
    """Losses (``train_loss``, ``denoise_loss_010``), perplexities (``val_ppl``) and the
    "prediction matches no hypothesis" fraction are minimised; everything else is maximised."""
    return metric in LOWER_NAMES or bool(LOWER_WORDS.intersection(re.split(r"[_/]", metric)))

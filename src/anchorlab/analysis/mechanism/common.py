"""Steps shared by the mechanism analyses: option checks, key positions, per-pair inputs, labels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from anchorlab.config import check_range
from anchorlab.tasks.anchor import AnchorData, AnchorTask
from anchorlab.analysis.attention import sample_inputs

PAPER_EXAMPLE = (35, 63, 99, 4, 3, 38, 42, 36, 62)  # NeurIPS §5.1, key 99 at position 2
PAPER_EXAMPLE_KEY_POS = 2


def paper_example_fits(task: AnchorTask) -> bool:
    """Whether :data:`PAPER_EXAMPLE` is an input of ``task``: its length, anchors 4 and 3, and its other tokens in
    the task's value range."""
    c = task.cfg
    return (c.seq_len == len(PAPER_EXAMPLE) and {4, 3} <= set(c.anchors)
            and all(c.value_min <= v <= c.value_max for i, v in enumerate(PAPER_EXAMPLE) if i not in (3, 4)))


def check_positive(opts: object, *names: str) -> None:
    """Each named integer field of ``opts`` is >= 1 (None allowed)."""
    for n in names:
        v = getattr(opts, n)
        if v is not None:
            check_range(n, v, 1)


def key_positions(task: AnchorTask, given: Sequence[int] | None) -> list[int]:
    """``given``, else 0..T-4 (the last token stays a filler, so roles never collide)."""
    T = task.cfg.seq_len
    return list(given) if given is not None else (list(range(T - 3)) or [0])


def per_pair(task: AnchorTask, n: int, split: str, rng: np.random.Generator,
             positions: Sequence[int]) -> AnchorData:
    """``n`` sampled inputs for every anchor pair of the task, concatenated pair by pair: (P * n) rows."""
    parts = [sample_inputs(task, n, [p], split, rng, positions) for p in task.pairs]
    return AnchorData(*(torch.cat([getattr(d, f) for d in parts])
                        for f in ("tokens", "targets", "pair", "key", "key_pos")))

"""Random anchor op sets: other steps, another held-out pair, another non-inferential mirror.

An op set draws four distinct integer steps for the anchors 1..4, a random
held-out pair (a, b), a != b, and trains its mirror (b, a) with a
non-inferential shift (its inferential shift plus a non-zero offset) that
equals no pair's inferential target; every other pair is inferential. As a
task config it is ``task.preset: custom`` + ``task.anchors`` +
``task.pair_rules`` (:meth:`OpSet.task_overrides`). :data:`PAPERS` is the
papers' op set ({1:+5, 2:+1, 3:-2, 4:-8}, (4,3) held out, (3,4) -> x-6).
The robustness study (:mod:`anchorlab.robustness`) trains on them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ...config import ConfigError, check_range

ANCHORS = (1, 2, 3, 4)
PAPERS = {"anchors": {1: 5, 2: 1, 3: -2, 4: -8}, "held_out": (4, 3), "mirror_shift": -6}


@dataclass(frozen=True)
class OpSet:
    """Steps of anchors 1..4, the held-out pair, and the shift its mirror is trained with."""

    anchors: dict[int, int]
    held_out: tuple[int, int]
    mirror_shift: int

    @property
    def label(self) -> str:
        steps = ",".join(f"{a}:{s:+d}" for a, s in sorted(self.anchors.items()))
        a, b = self.held_out
        return f"{{{steps}}} ({a},{b}) held out, ({b},{a})->x{self.mirror_shift:+d}"

    def task_overrides(self) -> dict[str, Any]:
        a, b = self.held_out
        return {"task.preset": "custom", "task.anchors": dict(self.anchors),
                "task.pair_rules": {f"{a},{b}": "held_out", f"{b},{a}": f"shift:{self.mirror_shift}"}}


def _collides(anchors: Mapping[int, int], held: tuple[int, int], shift: int) -> bool:
    inf = {(x, y): anchors[x] + anchors[y] for x in anchors for y in anchors}
    return any(s == shift for p, s in inf.items() if p != (held[1], held[0]))


def random_op_sets(n: int, seed: int = 0, step_range: tuple[int, int] = (-8, 8),
                   offset_range: tuple[int, int] = (-6, 6), include_papers: bool = True) -> list[OpSet]:
    """``n`` op sets (the papers' first if ``include_papers``), drawn from ``numpy.random.default_rng(seed)``.

    Steps: four distinct non-zero integers in ``step_range``; the mirror's
    offset: a non-zero integer in ``offset_range`` whose target collides with
    no pair's inferential target; every target stays in 0..200.
    """
    check_range("op_sets", n, 1)
    lo, hi = step_range
    if hi - lo + 1 - (lo <= 0 <= hi) < len(ANCHORS):
        raise ConfigError(f"step_range: needs at least {len(ANCHORS)} distinct non-zero steps, got {step_range}")
    rng = np.random.default_rng([seed, 77])
    out = [OpSet(dict(PAPERS["anchors"]), PAPERS["held_out"], PAPERS["mirror_shift"])] if include_papers else []
    steps_pool = [s for s in range(lo, hi + 1) if s != 0]
    offsets = [o for o in range(offset_range[0], offset_range[1] + 1) if o != 0]
    pairs = [p for p in itertools.product(ANCHORS, ANCHORS) if p[0] != p[1]]
    seen = {out[0].label} if out else set()
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 10_000:
            raise ConfigError("op_sets: could not draw enough distinct op sets within the ranges; widen them")
        steps = rng.choice(steps_pool, size=len(ANCHORS), replace=False).tolist()
        anchors = dict(zip(ANCHORS, (int(s) for s in steps)))
        held = tuple(int(x) for x in pairs[rng.integers(len(pairs))])
        shift = anchors[held[0]] + anchors[held[1]] + int(rng.choice(offsets))
        sums = [anchors[x] + anchors[y] for x in anchors for y in anchors] + [shift]
        if _collides(anchors, held, shift) or 20 + min(sums) < 0 or 99 + max(sums) > 200:
            continue
        op = OpSet(anchors, held, shift)  # type: ignore[arg-type]
        if op.label not in seen:
            seen.add(op.label)
            out.append(op)
    return out

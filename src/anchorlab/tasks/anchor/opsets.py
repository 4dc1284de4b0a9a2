"""Random anchor op sets: other steps, another held-out pair, another non-inferential mirror.

An op set draws four distinct integer steps for the anchors 1..4, a random
held-out pair (a, b), a != b, and trains its mirror (b, a) with a
non-inferential shift (its inferential shift plus an offset); every other pair
is inferential. It is valid (:func:`op_set_problems` finds nothing) when

- the offset is at least :data:`MIN_OFFSET` (2) away from zero, so the mirror's
  answer is never one token from the composition;
- the mirror's shift equals no other pair's target, and the held-out pair's
  composition equals no trained pair's target (the mirror's included), so the
  inferential and the symmetric answers are each told apart from every answer
  the model was trained to give.

:func:`random_op_sets` draws only valid op sets (rejecting and drawing again, so
a seed's valid op sets keep their order). :func:`op_set_properties` names the
numbers that may decide between composing and memorizing (the held-out pair's
step gap, the mirror's offset against the spread of the steps, which answer lies
nearer the key). As a
task config it is ``task.preset: custom`` + ``task.anchors`` +
``task.pair_rules`` (:meth:`OpSet.task_overrides`). :data:`PAPERS` is the
papers' op set ({1:+5, 2:+1, 3:-2, 4:-8}, (4,3) held out, (3,4) -> x-6).
The robustness study (:mod:`anchorlab.papers.robustness`) trains on them.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from anchorlab.config import ConfigError, check_range

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

    @classmethod
    def from_label(cls, label: str) -> "OpSet":
        """The op set a :attr:`label` names (``{1:+5,2:+1,3:-2,4:-8} (4,3) held out, (3,4)->x-6``)."""
        m = re.fullmatch(r"\{(.*)\} \((\d),(\d)\) held out, \(\d,\d\)->x([+-]\d+)", label.strip())
        if not m:
            raise ConfigError(f"op_set: not an op-set label like '{{1:+5,2:+1,3:-2,4:-8}} (4,3) held out, "
                              f"(3,4)->x-6', got {label!r}")
        anchors = {int(k): int(v) for k, v in (e.split(":") for e in m.group(1).split(","))}
        return cls(anchors, (int(m.group(2)), int(m.group(3))), int(m.group(4)))

    def task_overrides(self) -> dict[str, Any]:
        a, b = self.held_out
        return {"task.preset": "custom", "task.anchors": dict(self.anchors),
                "task.pair_rules": {f"{a},{b}": "held_out", f"{b},{a}": f"shift:{self.mirror_shift}"}}


MIN_OFFSET = 2   # |mirror shift - composition| at least this


def op_set_problems(anchors: Mapping[int, int], held: tuple[int, int], shift: int) -> list[str]:
    """Why an op set is not a valid test of composing against memorizing (empty: valid)."""
    a, b = held
    comp = anchors[a] + anchors[b]
    trained = {(x, y): anchors[x] + anchors[y] for x in anchors for y in anchors if (x, y) not in ((a, b), (b, a))}
    out = []
    if abs(shift - comp) < MIN_OFFSET:
        out.append(f"the mirror ({b},{a}) answers x{shift:+d}, within {MIN_OFFSET - 1} of the composition x{comp:+d}")
    if any(v == shift for v in trained.values()):
        hit = next(p for p, v in trained.items() if v == shift)
        out.append(f"the mirror's target x{shift:+d} is also pair {hit}'s target")
    if comp == shift or comp in trained.values():
        hit = (b, a) if comp == shift else next(p for p, v in trained.items() if v == comp)
        out.append(f"the held-out composition x{comp:+d} is also the trained pair {hit}'s target")
    return out


def op_set_properties(op: OpSet) -> dict[str, float]:
    """The op-set numbers the crossing study tests as predictors of composing (docs/results.md, C1):
    ``step_gap`` |s_a - s_b| of the held-out pair; ``offset`` the mirror's shift minus the composition;
    ``offset_over_sd`` |offset| over the standard deviation (population) of the four steps; ``mirror_farther``
    1 when the mirror's answer lies farther from the key than the composition (|shift| > |composition|), else 0;
    ``composition`` and ``mirror_shift`` themselves."""
    a, b = op.held_out
    steps = np.array([op.anchors[k] for k in ANCHORS], dtype=float)
    comp = op.anchors[a] + op.anchors[b]
    offset = op.mirror_shift - comp
    return {"step_gap": float(abs(op.anchors[a] - op.anchors[b])), "offset": float(offset),
            "offset_over_sd": float(abs(offset) / steps.std()), "mirror_farther": float(abs(op.mirror_shift) > abs(comp)),
            "composition": float(comp), "mirror_shift": float(op.mirror_shift)}


def random_op_sets(n: int, seed: int = 0, step_range: tuple[int, int] = (-8, 8),
                   offset_range: tuple[int, int] = (-6, 6), include_papers: bool = True) -> list[OpSet]:
    """``n`` op sets (the papers' first if ``include_papers``), drawn from ``numpy.random.default_rng(seed)``.

    Steps: four distinct non-zero integers in ``step_range``; the mirror's
    offset: an integer in ``offset_range``; every op set is valid
    (:func:`op_set_problems`) and every target stays in 0..200.
    """
    check_range("op_sets", n, 1)
    lo, hi = step_range
    if hi - lo + 1 - (lo <= 0 <= hi) < len(ANCHORS):
        raise ConfigError(f"step_range: needs at least {len(ANCHORS)} distinct non-zero steps, got {step_range}")
    rng = np.random.default_rng([seed, 77])
    out = [OpSet(dict(PAPERS["anchors"]), PAPERS["held_out"], PAPERS["mirror_shift"])] if include_papers else []
    steps_pool = [s for s in range(lo, hi + 1) if s != 0]
    offsets = [o for o in range(offset_range[0], offset_range[1] + 1) if o != 0]   # too-small ones are rejected below
    if not any(abs(o) >= MIN_OFFSET for o in offsets):
        raise ConfigError(f"offset_range: needs an offset of size >= {MIN_OFFSET}, got {offset_range}")
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
        if op_set_problems(anchors, held, shift) or 20 + min(sums) < 0 or 99 + max(sums) > 200:
            continue
        op = OpSet(anchors, held, shift)  # type: ignore[arg-type]
        if op.label not in seen:
            seen.add(op.label)
            out.append(op)
    return out


# ------------------------------------------------------------------ the journal's task: both (3,4) and (4,3) unseen
JOURNAL_HELD = ((3, 4), (4, 3))


def journal_op_set_problems(anchors: Mapping[int, int]) -> list[str]:
    """Why steps ``anchors`` are not a valid test on the journal's task (empty: valid): (3,4) and (4,3) are both
    unseen, so their composition must be no trained pair's target (a model that borrowed that pair's answer would
    read as composing), and the four steps must be distinct and non-zero."""
    out = []
    steps = [anchors.get(k) for k in ANCHORS]
    if any(s is None for s in steps) or len(set(steps)) < len(ANCHORS) or 0 in steps:
        out.append(f"the steps must be four distinct non-zero integers for anchors 1..4, got {dict(anchors)}")
        return out
    comp = anchors[3] + anchors[4]
    hit = [(x, y) for x in ANCHORS for y in ANCHORS
           if (x, y) not in JOURNAL_HELD and anchors[x] + anchors[y] == comp]
    if hit:
        out.append(f"the unseen pairs' composition x{comp:+d} is also the trained pair {hit[0]}'s target")
    return out


def journal_op_sets(n: int, seed: int = 0, step_range: tuple[int, int] = (-8, 8)) -> list[dict[int, int]]:
    """``n`` step sets for the journal's task other than the papers' (anchors 1..4 -> step), drawn from
    ``numpy.random.default_rng([seed, 640])``: four distinct non-zero integers in ``step_range``, kept when
    :func:`journal_op_set_problems` finds nothing and every target stays in 0..200."""
    check_range("op_sets", n, 1)
    lo, hi = step_range
    pool = [s for s in range(lo, hi + 1) if s != 0]
    if len(pool) < len(ANCHORS):
        raise ConfigError(f"step_range: needs at least {len(ANCHORS)} distinct non-zero steps, got {step_range}")
    rng = np.random.default_rng([seed, 640])
    out: list[dict[int, int]] = []
    seen = {tuple(PAPERS["anchors"][k] for k in ANCHORS)}
    for _ in range(10_000):
        if len(out) == n:
            return out
        anchors = dict(zip(ANCHORS, (int(s) for s in rng.choice(pool, size=len(ANCHORS), replace=False))))
        sums = [anchors[x] + anchors[y] for x in ANCHORS for y in ANCHORS]
        key = tuple(anchors[k] for k in ANCHORS)
        if key in seen or journal_op_set_problems(anchors) or 20 + min(sums) < 0 or 99 + max(sums) > 200:
            continue
        seen.add(key)
        out.append(anchors)
    raise ConfigError("op_sets: could not draw enough distinct journal op sets within the range; widen it")


def steps_label(anchors: Mapping[int, int]) -> str:
    """``{1:+5,2:+1,3:-2,4:-8}``: a step set as the op-set labels write it."""
    return "{" + ",".join(f"{a}:{anchors[a]:+d}" for a in sorted(anchors)) + "}"

"""The anchor pair rules: which pairs are trained, how, and what each hypothesis predicts.

Each anchor ``a`` is a step ``g(x; a) = x + anchors[a]``; a pair's inferential
target is ``g(g(x; a1); a2)``. Per pair, a rule (``task.pair_rules`` or the
preset's) says what is trained: the inferential target, a fixed shift
(non-inferential, e.g. (3,4) -> x-6), or nothing (held out). Generation
(:mod:`.task`) and evaluation (:mod:`.metrics`) both read these rules.
"""

from __future__ import annotations

from anchorlab.tasks.anchor.config import AnchorTaskConfig

Pair = tuple[int, int]


class PairRules:
    """Targets and hypotheses of every pair of one :class:`AnchorTaskConfig`."""

    def __init__(self, cfg: AnchorTaskConfig) -> None:
        self.cfg = cfg
        self.rules = cfg.rules
        self.pairs = cfg.pairs
        self.trained_pairs = [p for p in self.pairs if self.rules[p][0] != "held_out"]
        self.held_out_pairs = [p for p in self.pairs if self.rules[p][0] == "held_out"]
        self.non_inferential_pairs = [p for p in self.pairs if self.rules[p][0] == "shift"]

    def step(self, a: int) -> int:
        return self.cfg.anchors[a]

    def inferential_shift(self, pair: Pair) -> int:
        return self.step(pair[0]) + self.step(pair[1])

    def designated_shift(self, pair: Pair) -> int | None:
        """Shift of the trained target; None for held-out pairs."""
        kind, s = self.rules[pair]
        if kind == "held_out":
            return None
        return s if kind == "shift" else self.inferential_shift(pair)

    def target_shift(self, pair: Pair) -> int:
        """Shift of the target stored with generated data (inferential for held-out pairs)."""
        d = self.designated_shift(pair)
        return self.inferential_shift(pair) if d is None else d

    def hypotheses(self, pair: Pair) -> dict[str, int | None]:
        """Candidate shifts for a pair: inferential, symmetric (mirror's trained
        target; None if the mirror is held out or the pair is its own mirror),
        designated (None if held out)."""
        mirror = (pair[1], pair[0])
        sym = self.designated_shift(mirror) if mirror != pair else None
        return {"inferential": self.inferential_shift(pair), "symmetric": sym,
                "designated": self.designated_shift(pair)}

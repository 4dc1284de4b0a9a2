"""The anchor-function task's config (NeurIPS §3; journal §III-B and Appendix B).

Selected by ``task.name: anchor`` (the default). The task itself is
:class:`anchorlab.tasks.anchor.task.AnchorTask`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anchorlab.config.base import check_choice, check_range, fail
from anchorlab.config.experiment import TaskConfig

# --------------------------------------------------------------------------- task
ANCHOR_PRESETS = ("neurips", "journal", "complexity", "custom")
PAIR_RULE_HELP = ("'inferential', 'held_out', or 'shift:<int>' (fixed target key+int, "
                  "e.g. 'shift:-6')")


def parse_pair(path: str, key: str) -> tuple[int, int]:
    """'3,4' -> (3, 4)."""
    try:
        a, b = (int(s) for s in str(key).replace(" ", "").split(","))
    except ValueError:
        fail(path, f"pair key must look like 'a,b' with integer anchors, got {key!r}")
    return a, b


def parse_rule(path: str, rule: str) -> tuple[str, int | None]:
    """'shift:-6' -> ('shift', -6); 'inferential' -> ('inferential', None)."""
    rule = str(rule).strip()
    if rule in ("inferential", "held_out"):
        return rule, None
    if rule.startswith("shift:"):
        try:
            return "shift", int(rule.split(":", 1)[1])
        except ValueError:
            pass
    fail(path, f"must be {PAIR_RULE_HELP}, got {rule!r}")
    raise AssertionError  # unreachable


@dataclass(frozen=True)
class AnchorTaskConfig(TaskConfig):
    """The anchor-function task (NeurIPS §3, journal §III-B and Appendix B).

    ``preset`` fills the per-pair rules; ``pair_rules`` entries override them.
    Values are the token ids ``value_min..value_max`` (inclusive); a sequence is
    ``seq_len`` input tokens with the key at a position in ``0..seq_len-3``
    followed by the two anchors. A key value ``x`` at position ``p`` is an
    ID-test key when ``x % split_mod == p`` (journal Appendix B).
    """

    name: str = "anchor"
    preset: str = "neurips"
    anchors: dict[int, int] = field(default_factory=lambda: {1: 5, 2: 1, 3: -2, 4: -8})
    value_min: int = 20
    value_max: int = 99
    seq_len: int = 9
    split_mod: int = 9
    pair_rules: dict[str, str] = field(default_factory=dict)
    # complexity preset: number of "noise groups" (NeurIPS §6 / App. A), and per
    # group (in the papers' order {12,21}, {13,31}, {14,41}, {23,32}, {24,42}, {34,43})
    # the offset of its designated target from the inferential one (both orders).
    # The papers give no values; the authors' generator uses x+4, x+1, x-5, x+5,
    # x-9, x-6 (code_for_anchor_func/data_generator/composition_random_data_complexity.py),
    # i.e. offsets -2, -2, -2, +6, -2, +4 for the default steps.
    complexity_k: int = 0
    complexity_offsets: tuple[int, ...] = (-2, -2, -2, 6, -2, 4)
    # a designated (non-inferential) target equal to another pair's inferential
    # target makes the two hypotheses indistinguishable; refused unless allowed
    allow_target_collisions: bool = False
    n_train: int = 900_000
    n_eval_per_group: int = 500
    vocab_size: int = 201

    def __post_init__(self) -> None:
        p = "task"
        check_choice(f"{p}.name", self.name, ("anchor",))
        check_choice(f"{p}.preset", self.preset, ANCHOR_PRESETS)
        if not self.anchors:
            fail(f"{p}.anchors", "must map at least one anchor token to an integer step")
        for a in self.anchors:
            if not isinstance(a, int) or isinstance(a, bool):
                fail(f"{p}.anchors", f"keys must be integer anchor tokens, got {a!r}")
        check_range(f"{p}.value_min", self.value_min, 0)
        if self.value_max < self.value_min:
            fail(f"{p}.value_max", f"must be >= value_min ({self.value_min}), got {self.value_max}")
        for a in self.anchors:
            if self.value_min <= a <= self.value_max:
                fail(f"{p}.anchors", f"anchor token {a} collides with values "
                      f"{self.value_min}..{self.value_max}")
        check_range(f"{p}.seq_len", self.seq_len, 3)
        check_range(f"{p}.split_mod", self.split_mod, 1)
        check_range(f"{p}.complexity_k", self.complexity_k, 0, len(self.noise_groups_all))
        if self.preset != "complexity" and self.complexity_k:
            fail(f"{p}.complexity_k", "is only used with preset 'complexity'")
        if self.complexity_k > len(self.complexity_offsets):
            fail(f"{p}.complexity_offsets", f"needs one offset per noise group used ({self.complexity_k}), "
                 f"got {len(self.complexity_offsets)}")
        for i, off in enumerate(self.complexity_offsets[: self.complexity_k]):
            if off == 0:
                fail(f"{p}.complexity_offsets[{i}]", "must be non-zero (0 is the inferential target)")
        check_range(f"{p}.n_train", self.n_train, 1)
        check_range(f"{p}.n_eval_per_group", self.n_eval_per_group, 1)
        check_range(f"{p}.vocab_size", self.vocab_size, 1)
        for k, r in self.pair_rules.items():
            a, b = parse_pair(f"{p}.pair_rules", k)
            if a not in self.anchors or b not in self.anchors:
                fail(f"{p}.pair_rules.{k}", f"anchors must be in {sorted(self.anchors)}")
            parse_rule(f"{p}.pair_rules.{k}", r)
        rules = self.rules
        if all(kind == "held_out" for kind, _ in rules.values()):
            fail(f"{p}.pair_rules", "every pair is held out: nothing to train on")
        lo, hi = self.target_range
        if lo < 0 or hi >= self.vocab_size:
            fail(f"{p}.vocab_size", f"targets span {lo}..{hi} but the vocabulary is "
                  f"0..{self.vocab_size - 1}; raise vocab_size or narrow the values/steps "
                  "(targets are never wrapped)")
        if max(self.anchors) >= self.vocab_size:
            fail(f"{p}.vocab_size", f"must exceed the largest anchor token {max(self.anchors)}")
        if not self.allow_target_collisions:
            for pair, other, shift in self.target_collisions():
                field_ = (f"{p}.pair_rules.{pair[0]},{pair[1]}" if f"{pair[0]},{pair[1]}" in self.pair_rules
                          else f"{p}.complexity_offsets" if self.preset == "complexity" else f"{p}.preset")
                fail(field_, f"the designated target of pair {pair} (x{shift:+d}) equals the inferential "
                     f"target of pair {other}, so memorizing and composing cannot be told apart; choose "
                     "another shift or set task.allow_target_collisions=true")

    def target_collisions(self) -> list[tuple[tuple[int, int], tuple[int, int], int]]:
        """(pair, other pair, shift) where a pair's non-inferential shift equals another pair's inferential one."""
        inf = {pr: self.anchors[pr[0]] + self.anchors[pr[1]] for pr in self.pairs}
        out = []
        for pr, (kind, s) in self.rules.items():
            if kind == "shift" and s != inf[pr]:
                out += [(pr, other, s) for other in self.pairs if other != pr and inf[other] == s]
        return out

    # ---- derived
    @property
    def pairs(self) -> list[tuple[int, int]]:
        an = sorted(self.anchors)
        return [(a, b) for a in an for b in an]

    @property
    def noise_groups_all(self) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        """Symmetric groups {(a,b),(b,a)}, a<b, in the papers' order."""
        an = sorted(self.anchors)
        return [((a, b), (b, a)) for i, a in enumerate(an) for b in an[i + 1:]]

    @property
    def rules(self) -> dict[tuple[int, int], tuple[str, int | None]]:
        """Full rule per pair: ('inferential'|'held_out'|'shift', shift or None)."""
        rules: dict[tuple[int, int], tuple[str, int | None]] = {
            pr: ("inferential", None) for pr in self.pairs}
        an = sorted(self.anchors)
        if self.preset == "neurips" and len(an) >= 4:
            a3, a4 = an[2], an[3]
            rules[(a3, a4)] = ("shift", self.anchors[a3] + self.anchors[a4] + 4)
            rules[(a4, a3)] = ("held_out", None)
        elif self.preset == "journal" and len(an) >= 4:
            rules[(an[2], an[3])] = ("held_out", None)
            rules[(an[3], an[2])] = ("held_out", None)
        elif self.preset == "complexity":
            for g, off in zip(self.noise_groups_all[: self.complexity_k], self.complexity_offsets):
                for a, b in g:
                    rules[(a, b)] = ("shift", self.anchors[a] + self.anchors[b] + off)
        for k, r in self.pair_rules.items():
            rules[parse_pair("task.pair_rules", k)] = parse_rule(f"task.pair_rules.{k}", r)
        return rules

    @property
    def target_range(self) -> tuple[int, int]:
        shifts = []
        for (a, b), (kind, s) in self.rules.items():
            shifts.append(self.anchors[a] + self.anchors[b])
            if kind == "shift":
                shifts.append(s)
        return self.value_min + min(shifts), self.value_max + max(shifts)

    def dims(self) -> dict[str, int]:
        return {"vocab_size": self.vocab_size, "max_len": self.seq_len}

    def check_model(self, model: Any) -> None:
        if getattr(model, "vocab_size", self.vocab_size) < self.vocab_size:
            fail("model.vocab_size", f"must be >= task.vocab_size ({self.vocab_size}), got {model.vocab_size}")
        if getattr(model, "max_len", self.seq_len) < self.seq_len:
            fail("model.max_len", f"must be >= task.seq_len ({self.seq_len}), got {model.max_len}")

"""The anchor-function task (NeurIPS §3; journal §III-B and Appendix B).

A sequence holds ``seq_len`` tokens: random values (fillers), and at a key
position ``p`` in ``0..seq_len-3`` the key value ``x`` followed by two anchors
``(a1, a2)``. Each anchor is a step ``g(x; a) = x + anchors[a]``; the
inferential target is ``f(x; a1, a2) = g(g(x; a1); a2)``. Per pair, a rule
says what is trained: the inferential target, a fixed shift (non-inferential,
e.g. (3,4) -> x-6), or nothing (held out).

Key split (journal App. B): a key value ``x`` at position ``p`` is an ID-test
key when ``x % split_mod == p``, a training key otherwise; fillers are
unrestricted (as in the papers' code). Everything is generated vectorized
from an explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..config import TaskConfig

SPLITS = ("train", "test")


@dataclass(frozen=True)
class AnchorData:
    """A set of sequences; every field has N rows.

    tokens: (N, seq_len) int64; targets: (N,) designated target (inferential
    for held-out pairs); pair: (N, 2) the anchors; key: (N,); key_pos: (N,).
    """

    tokens: torch.Tensor
    targets: torch.Tensor
    pair: torch.Tensor
    key: torch.Tensor
    key_pos: torch.Tensor

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def to(self, device: torch.device | str) -> "AnchorData":
        return AnchorData(*(t.to(device) for t in (self.tokens, self.targets, self.pair,
                                                    self.key, self.key_pos)))

    def swapped(self) -> "AnchorData":
        """The same sequences with the two anchors exchanged (targets unchanged)."""
        tok = self.tokens.clone()
        rows = torch.arange(len(self))
        tok[rows, self.key_pos + 1] = self.tokens[rows, self.key_pos + 2]
        tok[rows, self.key_pos + 2] = self.tokens[rows, self.key_pos + 1]
        return AnchorData(tok, self.targets, self.pair.flip(1), self.key, self.key_pos)


class AnchorTask:
    """Targets, hypotheses and data generation for one :class:`TaskConfig`."""

    def __init__(self, cfg: TaskConfig) -> None:
        self.cfg = cfg
        self.rules = cfg.rules
        self.pairs = cfg.pairs
        self.trained_pairs = [p for p in self.pairs if self.rules[p][0] != "held_out"]
        self.held_out_pairs = [p for p in self.pairs if self.rules[p][0] == "held_out"]
        self.non_inferential_pairs = [p for p in self.pairs if self.rules[p][0] == "shift"]
        values = np.arange(cfg.value_min, cfg.value_max + 1)
        n_pos = cfg.seq_len - 2
        self._keys = {
            split: [values[(values % cfg.split_mod == p) == (split == "test")] for p in range(n_pos)]
            for split in SPLITS
        }
        for split in SPLITS:
            for p, ks in enumerate(self._keys[split]):
                if len(ks) == 0:
                    from ..config import ConfigError
                    raise ConfigError(f"task.split_mod: no {split} keys at key position {p} "
                                      f"with values {cfg.value_min}..{cfg.value_max}")

    # ---- mappings
    def step(self, a: int) -> int:
        return self.cfg.anchors[a]

    def inferential_shift(self, pair: tuple[int, int]) -> int:
        return self.step(pair[0]) + self.step(pair[1])

    def designated_shift(self, pair: tuple[int, int]) -> int | None:
        """Shift of the trained target; None for held-out pairs."""
        kind, s = self.rules[pair]
        if kind == "held_out":
            return None
        return s if kind == "shift" else self.inferential_shift(pair)

    def target_shift(self, pair: tuple[int, int]) -> int:
        """Shift of the target stored with generated data (inferential for held-out pairs)."""
        d = self.designated_shift(pair)
        return self.inferential_shift(pair) if d is None else d

    def hypotheses(self, pair: tuple[int, int]) -> dict[str, int | None]:
        """Candidate shifts for a pair: inferential, symmetric (mirror's trained
        target; None if the mirror is held out or the pair is its own mirror),
        designated (None if held out)."""
        mirror = (pair[1], pair[0])
        sym = self.designated_shift(mirror) if mirror != pair else None
        return {"inferential": self.inferential_shift(pair), "symmetric": sym,
                "designated": self.designated_shift(pair)}

    # ---- generation
    def sample(self, n: int, pairs: list[tuple[int, int]], split: str,
               rng: np.random.Generator) -> AnchorData:
        """n sequences, pairs uniform over ``pairs``, keys from ``split``."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        cfg = self.cfg
        pairs_arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        tokens = rng.integers(cfg.value_min, cfg.value_max + 1, size=(n, cfg.seq_len))
        pidx = rng.integers(0, len(pairs_arr), size=n)
        pos = rng.integers(0, cfg.seq_len - 2, size=n)
        key = np.empty(n, dtype=np.int64)
        u = rng.random(n)
        for p, allowed in enumerate(self._keys[split]):
            sel = pos == p
            key[sel] = allowed[(u[sel] * len(allowed)).astype(np.int64)]
        pr = pairs_arr[pidx]
        rows = np.arange(n)
        tokens[rows, pos] = key
        tokens[rows, pos + 1] = pr[:, 0]
        tokens[rows, pos + 2] = pr[:, 1]
        shift = np.array([self.target_shift(tuple(p)) for p in pairs_arr.tolist()])
        targets = key + shift[pidx]
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64))  # noqa: E731
        return AnchorData(t(tokens), t(targets), t(pr), t(key), t(pos))

    def train_data(self, seed: int, n: int | None = None) -> AnchorData:
        """The training set: trained pairs x training keys (stream 0 of ``seed``)."""
        rng = np.random.default_rng([seed, 0])
        return self.sample(n or self.cfg.n_train, self.trained_pairs, "train", rng)

    def eval_sets(self, seed: int, n: int | None = None) -> dict[tuple[tuple[int, int], str], AnchorData]:
        """Fixed evaluation groups: every (pair, key split), stream 1 of ``seed``.

        ``(pair, 'test')`` for a trained pair is the ID test set; held-out pairs
        are OOD under both key splits.
        """
        rng = np.random.default_rng([seed, 1])
        n = n or self.cfg.n_eval_per_group
        return {(p, s): self.sample(n, [p], s, rng) for p in self.pairs for s in SPLITS}


def pair_label(pair: tuple[int, int]) -> str:
    return f"{pair[0]}{pair[1]}"

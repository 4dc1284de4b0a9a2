"""Anchor-task data: a set of sequences with their pair, key and key position.

See :mod:`anchorlab.tasks.anchor.task` for how sequences are generated.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

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

    def batch(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        """Training rows ``idx``: tokens (B, seq_len) and targets (B,)."""
        return {"tokens": self.tokens[idx], "targets": self.targets[idx]}

    def swapped(self) -> "AnchorData":
        """The same sequences with the two anchors exchanged (targets unchanged)."""
        tok = self.tokens.clone()
        rows = torch.arange(len(self))
        tok[rows, self.key_pos + 1] = self.tokens[rows, self.key_pos + 2]
        tok[rows, self.key_pos + 2] = self.tokens[rows, self.key_pos + 1]
        return AnchorData(tok, self.targets, self.pair.flip(1), self.key, self.key_pos)



def pair_label(pair: tuple[int, int]) -> str:
    return f"{pair[0]}{pair[1]}"

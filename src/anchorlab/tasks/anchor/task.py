"""The anchor-function task (NeurIPS §3; journal §III-B and Appendix B).

A sequence holds ``seq_len`` tokens: random values (fillers), and at a key
position ``p`` in ``0..seq_len-3`` the key value ``x`` followed by two anchors
``(a1, a2)``; the target is the pair's rule applied to ``x`` (:mod:`.pairs`).

Key split (journal App. B): a key value ``x`` at position ``p`` is an ID-test
key when ``x % split_mod == p``, a training key otherwise; fillers are
unrestricted (as in the papers' code). Everything is generated vectorized
from an explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from anchorlab.config.base import ConfigError
from anchorlab.tasks.base import EvalResult, Forward, Task
from anchorlab.tasks.anchor.config import AnchorTaskConfig
from anchorlab.tasks.anchor.data import SPLITS, AnchorData, pair_label
from anchorlab.tasks.anchor.metrics import evaluate as evaluate_groups
from anchorlab.tasks.anchor.metrics import top_deviations
from anchorlab.tasks.anchor.pairs import PairRules


class AnchorTask(PairRules, Task):
    """Data generation and evaluation for one :class:`AnchorTaskConfig`; targets and hypotheses
    come from its pair rules (:class:`~.pairs.PairRules`).

    Implements the :class:`~anchorlab.tasks.base.Task` protocol: the loss is
    cross-entropy at the last position; evaluation is per (pair, key split)
    under each mapping hypothesis (:mod:`.metrics`).
    """

    name = "anchor"
    headline = ("train_loss", "train_acc", "id_acc", "ood_inferential_acc", "ood_symmetric_acc",
                "ood_other_frac", "commutativity")
    stackable = True

    def __init__(self, cfg: AnchorTaskConfig) -> None:
        PairRules.__init__(self, cfg)
        values = np.arange(cfg.value_min, cfg.value_max + 1)
        n_pos = cfg.seq_len - 2
        self._keys = {
            split: [values[(values % cfg.split_mod == p) == (split == "test")] for p in range(n_pos)]
            for split in SPLITS
        }
        for split in SPLITS:
            for p, ks in enumerate(self._keys[split]):
                if len(ks) == 0:
                    raise ConfigError(f"task.split_mod: no {split} keys at key position {p} "
                                      f"with values {cfg.value_min}..{cfg.value_max}")

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
        """The training set: trained pairs x training keys (stream 0 of ``seed``); cached per (seed, n)."""
        key = (seed, n or self.cfg.n_train)
        if getattr(self, "_train_key", None) != key:
            rng = np.random.default_rng([seed, 0])
            self._train, self._train_key = self.sample(key[1], self.trained_pairs, "train", rng), key
        return self._train

    def eval_sets(self, seed: int, n: int | None = None) -> dict[tuple[tuple[int, int], str], AnchorData]:
        """Fixed evaluation groups: every (pair, key split), stream 1 of ``seed``.

        ``(pair, 'test')`` for a trained pair is the ID test set; held-out pairs
        are OOD under both key splits.
        """
        rng = np.random.default_rng([seed, 1])
        n = n or self.cfg.n_eval_per_group
        return {(p, s): self.sample(n, [p], s, rng) for p in self.pairs for s in SPLITS}

    # ---- the Task protocol
    def dims(self) -> dict[str, int]:
        return self.cfg.dims()

    def seen_sets(self, seed: int, n: int | None = None) -> dict[tuple[tuple[int, int], str], AnchorData]:
        """``(pair, 'seen')``: the first ``n`` training sequences of each trained pair (the sequences the
        model is trained on; the authors' "training accuracy", journal Fig. 3)."""
        data = self.train_data(seed)
        n = n or self.cfg.n_eval_per_group
        out = {}
        for p in self.trained_pairs:
            idx = torch.nonzero((data.pair[:, 0] == p[0]) & (data.pair[:, 1] == p[1])).flatten()[:n]
            out[(p, "seen")] = AnchorData(*(t[idx] for t in (data.tokens, data.targets, data.pair, data.key,
                                                             data.key_pos)))
        return out

    def eval_data(self, seed: int) -> dict[tuple[tuple[int, int], str], AnchorData]:
        """Every (pair, key split) group of :meth:`eval_sets` plus the ``seen`` groups of :meth:`seen_sets`."""
        return {**self.eval_sets(seed), **self.seen_sets(seed)}

    def loss(self, fwd: Forward, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Cross-entropy of the last position's logits (NeurIPS §3.5)."""
        return F.cross_entropy(fwd(batch["tokens"], last_only=True).float(), batch["targets"])

    def evaluate(self, model: torch.nn.Module, eval_data: dict[tuple[tuple[int, int], str], AnchorData],
                 device: torch.device | str = "cpu") -> EvalResult:
        """Metrics (see :mod:`.metrics`), and tables ``groups`` (pair x split x hypothesis) and ``deviations``."""
        metrics, rows, devs = evaluate_groups(model, self, eval_data)
        return EvalResult(metrics, {"groups": rows, "deviations": devs})

    def summary_lines(self, result: EvalResult) -> list[str]:
        """Most frequent (prediction - inferential target) of each held-out pair."""
        devs = result.tables.get("deviations")
        if devs is None:
            return []
        return [f"  ({a},{b}) prediction - inferential target: "
                + ", ".join(f"{d:+d}: {p:.0%}" for d, p in top_deviations(devs, pair_label((a, b))))
                for a, b in self.held_out_pairs]

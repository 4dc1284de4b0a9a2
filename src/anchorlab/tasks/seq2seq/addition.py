"""Addition with a held-out square (journal Fig. 7C; Hu et al. 2024, "Case-based or rule-based").

Every problem ``a + b`` with ``a, b`` in 0..99 (10,000 problems). The test set
(``ood``) is the square ``square_min <= a, b <= square_max`` (40..60: 441
problems); a model that solves addition case by case, from training problems
near the query, has no neighbour inside the square, so only a rule reaches it.
The other 9,559 problems are split once (``split_seed``) into the training
problems and ``id`` (a held-out ``id_fraction`` of them, same distribution).

Rows are digit-level seq2seq pairs (:mod:`.encoding`)::

    4 2 + 1 7 <sep> 5 9 <eos>          (digit_order="normal")
    4 2 + 1 7 <sep> 9 5 <eos>          (digit_order="reversed": least significant first)

``<sep>`` is the ``=`` of ``a + b =``; the loss covers the sum's digits and
``<eos>``; the metric is greedy exact match of the whole answer
(:class:`~.task.Seq2SeqTask`). Operands are written without leading zeros.
:func:`grid_predictions` decodes all 10,000 problems of a trained model, the
table behind the (a, b) heatmap.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from anchorlab.config.base import ConfigError, check_choice, check_range
from anchorlab.tasks.base import no_grad
from anchorlab.tasks.seq2seq.encoding import Vocab, decode
from anchorlab.tasks.seq2seq.task import Row, Seq2SeqTask, Seq2SeqTaskConfig

if TYPE_CHECKING:  # imported where used: the config (read by `reproduce --list`) needs neither
    import pandas as pd
    import torch

log = logging.getLogger(__name__)

N = 100                      # operands 0..N-1
ORDERS = ("normal", "reversed")
SPLITS = ("train", "id", "ood")


def problem_text(a: int, b: int) -> str:
    """``a + b`` as digit tokens: (42, 7) -> ``"4 2 + 7"``."""
    return f"{' '.join(str(a))} + {' '.join(str(b))}"


def answer_text(s: int, order: str = "normal") -> str:
    """The sum's digit tokens, most significant first (``normal``) or last (``reversed``)."""
    check_choice("task.digit_order", order, ORDERS)
    digits = list(str(s))
    return " ".join(digits if order == "normal" else digits[::-1])


def parse_problem(text: str) -> tuple[int, int]:
    """Inverse of :func:`problem_text`; ConfigError for anything else."""
    left, plus, right = text.partition(" + ")
    try:
        if not plus or not left or not right:
            raise ValueError
        return int("".join(left.split())), int("".join(right.split()))
    except ValueError:
        raise ConfigError(f"problem: expected digit tokens 'a + b' (e.g. '4 2 + 7'), got {text!r}") from None


def parse_answer(text: str, order: str = "normal") -> int | None:
    """Inverse of :func:`answer_text`; None when ``text`` is not a sequence of single digits."""
    toks = text.split()
    if not toks or not all(len(t) == 1 and t.isdigit() for t in toks):
        return None
    return int("".join(toks if order == "normal" else toks[::-1]))


def in_square(a: int | np.ndarray, b: int | np.ndarray, lo: int, hi: int):
    return (lo <= a) & (a <= hi) & (lo <= b) & (b <= hi)


def split_problems(square_min: int = 40, square_max: int = 60, id_fraction: float = 0.1,
                   split_seed: int = 0) -> dict[str, list[tuple[int, int]]]:
    """{"train", "id", "ood"}: lists of (a, b). ``ood`` = the square (row-major order);
    ``id`` = ``round(id_fraction * n_outside)`` problems outside it drawn with ``split_seed``."""
    outside = [(a, b) for a in range(N) for b in range(N) if not in_square(a, b, square_min, square_max)]
    square = [(a, b) for a in range(N) for b in range(N) if in_square(a, b, square_min, square_max)]
    n_id = int(round(id_fraction * len(outside)))
    perm = np.random.default_rng(split_seed).permutation(len(outside))
    id_idx = set(perm[:n_id].tolist())
    return {"train": [p for i, p in enumerate(outside) if i not in id_idx],
            "id": [p for i, p in enumerate(outside) if i in id_idx], "ood": square}


@functools.lru_cache(maxsize=8)
def _rows(square_min: int, square_max: int, id_fraction: float, split_seed: int,
          order: str) -> dict[str, tuple[Row, ...]]:
    split = split_problems(square_min, square_max, id_fraction, split_seed)
    return {k: tuple((problem_text(a, b), answer_text(a + b, order), "") for a, b in v) for k, v in split.items()}


@dataclass(frozen=True)
class AdditionTaskConfig(Seq2SeqTaskConfig):
    """Addition with a held-out square (journal Fig. 7C).

    ``square_min`` / ``square_max``: the held-out square (inclusive, in 0..99),
    ``digit_order``: ``normal`` or ``reversed`` sum, ``id_fraction``: share of
    the problems outside the square held out as ``id``, ``split_seed``: that
    draw (fixed per config, so every training seed is scored on the same
    problems). ``train_size`` (0 = all 8,603) subsamples the training problems
    with ``train.data_seed``.
    """

    name: str = "addition"
    square_min: int = 40
    square_max: int = 60
    digit_order: str = "normal"
    id_fraction: float = 0.1
    split_seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("task.name", self.name, ("addition",))
        check_range("task.square_min", self.square_min, 0, N - 1)
        check_range("task.square_max", self.square_max, 0, N - 1)
        if self.square_max < self.square_min:
            raise ConfigError(f"task.square_max: must be >= task.square_min ({self.square_min}), "
                              f"got {self.square_max}")
        if (self.square_max - self.square_min + 1) ** 2 == N * N:
            raise ConfigError("task.square_min: the square covers every problem, nothing is left to train on")
        check_choice("task.digit_order", self.digit_order, ORDERS)
        check_range("task.id_fraction", self.id_fraction, 0.0, 1.0, lo_open=True, hi_open=True)
        check_range("task.split_seed", self.split_seed, 0)

    @property
    def n_train(self) -> int:
        """Training problems a run uses: ``train_size``, or all of them (for compute estimates)."""
        return self.train_size or len(self.raw()["train"])

    def raw(self) -> dict[str, tuple[Row, ...]]:
        return _rows(self.square_min, self.square_max, self.id_fraction, self.split_seed, self.digit_order)

    def eval_sources(self) -> dict[str, str]:
        return {"id": "id", "ood": "ood"}


class AdditionTask(Seq2SeqTask):
    """``id_exact``: held-out problems outside the square; ``ood_exact``: the square."""

    name = "addition"


@no_grad
def grid_predictions(model: torch.nn.Module, cfg: AdditionTaskConfig, batch_size: int = 1024,
                     device: torch.device | str = "cpu", cached: bool = True) -> pd.DataFrame:
    """Greedy answers to all N*N problems, one row per (a, b): ``split`` (train / id / ood; ``train``
    also for training problems a ``train_size`` subset left out), ``target``, ``prediction`` (<NA> when
    the output is not a digit sequence) and ``correct``. Decodes with the model's key/value cache
    (``cached=False``: the reference decoder, for any causal ``tokens -> logits`` module)."""
    import pandas as pd

    raw = cfg.raw()
    vocab = Vocab.from_pairs((a, b) for a, b, _ in raw["train"])
    split = split_problems(cfg.square_min, cfg.square_max, cfg.id_fraction, cfg.split_seed)
    which = {p: k for k, v in split.items() for p in v}
    probs = [(a, b) for a in range(N) for b in range(N)]
    was = model.training
    model.eval()
    out = decode(model, [problem_text(a, b) for a, b in probs], vocab, cfg.dims()["max_new_tokens"],
                 batch_size, device, cached)
    model.train(was)
    pred = [parse_answer(o, cfg.digit_order) for o in out]
    df = pd.DataFrame({"a": [a for a, _ in probs], "b": [b for _, b in probs],
                       "split": [which[p] for p in probs], "target": [a + b for a, b in probs],
                       "prediction": pd.array(pred, dtype="Int64")})
    df["correct"] = (df.prediction == df.target).fillna(False).astype(bool)
    return df

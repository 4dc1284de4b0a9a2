"""Sequence-to-sequence tasks as decoder-only language modelling (journal Fig. 7A,B).

A pair (input, output) becomes the row ``[input] <sep> [output] <eos>`` (see
:mod:`.encoding`); the loss covers output tokens and ``<eos>`` only. Every
family (SCAN, COGS, pairs from files) supplies its raw rows per split and
which split each evaluation set comes from; this module does the rest:

* the vocabulary is built from the whole training file (inputs and outputs;
  unseen words map to ``<unk>``), so it does not change with ``train_size``;
* ``train_size``: a random subset of the training rows drawn with
  ``train.data_seed`` (0 = all), the training-set-size axis of Fig. 7A,B;
* ``eval_max`` caps each evaluation set (fixed seed, stratified by row type,
  so every run sees the same examples);
* metrics: ``<set>_exact`` (greedy decoding, whole output equal),
  ``<set>_token_acc`` (teacher forced), plus a family's extra metrics.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from anchorlab.config.base import ConfigError, check_range
from anchorlab.config.experiment import TaskConfig
from anchorlab.tasks.base import EvalResult, Forward, Task, TensorData, no_grad
from anchorlab.tasks.seq2seq.encoding import EncodedPairs, Vocab, decode, encode_pairs, exact_match, masked_lm_loss

if TYPE_CHECKING:  # imported where used: the task configs (read by `reproduce --list`) need no torch
    import torch

log = logging.getLogger(__name__)

EVAL_SEED = 20_240_601  # fixed: every run evaluates the same capped subsets
Row = tuple[str, str, str]  # (input, output, type); type "" where a dataset has none


@dataclass(frozen=True)
class Seq2SeqTaskConfig(TaskConfig):
    """Fields shared by the seq2seq families.

    ``train_size``: training rows (0 = all), drawn with ``train.data_seed``.
    ``eval_max``: examples per evaluation set (0 = all). ``max_new_tokens``
    bounds greedy decoding (0 = longest target in the data + 1).
    ``data_dir``: where the files are (None: ``$ANCHORLAB_DATA_DIR`` or the
    download cache); not part of the run id.
    """

    name: str = ""
    train_size: int = 0
    data_dir: str | None = field(default=None, metadata={"identity": False})
    eval_max: int = 0
    max_new_tokens: int = 0
    eval_batch_size: int = 256

    def __post_init__(self) -> None:
        for n in ("train_size", "eval_max", "max_new_tokens"):
            check_range(f"task.{n}", getattr(self, n), 0)
        check_range("task.eval_batch_size", self.eval_batch_size, 1)

    # what a family defines
    def raw(self) -> dict[str, tuple[Row, ...]]:
        """The data as rows per split ({"train", ...}); cached per process by the family."""
        raise NotImplementedError

    def eval_sources(self) -> dict[str, str]:
        """Eval set -> the split it comes from ("train" = the training subset the model saw)."""
        raise NotImplementedError

    def keep_types(self) -> bool:
        """Whether ``train_size`` subsets keep every row whose type is not ``in_distribution``."""
        return False

    def dims(self) -> dict[str, int]:
        """vocab_size, max_len and max_new_tokens the data need (independent of seeds and caps)."""
        return data_dims(self)


def data_dims(task: Seq2SeqTaskConfig) -> dict[str, int]:
    raw = task.raw()
    vocab = Vocab.from_pairs((a, b) for a, b, _ in raw["train"])
    lens = lambda rows, f: max((f(r) for r in rows), default=0)  # noqa: E731
    all_rows = [r for rows in raw.values() for r in rows]
    max_new = task.max_new_tokens or lens(all_rows, lambda r: len(r[1].split())) + 1
    eval_rows = [r for name in task.eval_sources().values() if name in raw for r in raw[name]]
    prompt = lens(eval_rows, lambda r: len(r[0].split()) + 1)
    full = lens(all_rows, lambda r: len(r[0].split()) + len(r[1].split()) + 2)
    return {"vocab_size": len(vocab), "max_len": max(full, prompt + max_new - 1), "max_new_tokens": max_new}


@dataclass
class EvalSet:
    """Pairs to evaluate, their row types (COGS) and their teacher-forcing encoding."""

    pairs: list[tuple[str, str]]
    types: list[str]
    encoded: EncodedPairs


@dataclass
class Seq2SeqData:
    """Everything a run needs from the data; ``train.tokens`` is (N, T_train) right-padded."""

    vocab: Vocab
    train_pairs: list[tuple[str, str]]
    train: EncodedPairs
    row_len: torch.Tensor  # (N,) tokens in each training row (prompt + output + <eos>)
    eval_sets: dict[str, EvalSet]
    max_new_tokens: int

    def dims(self) -> dict[str, int]:
        """vocab_size and max_len these data need (rows, and decoding up to max_new_tokens)."""
        need = [int(self.row_len.max())]
        for es in self.eval_sets.values():
            if len(es.pairs):
                need += [es.encoded.tokens.shape[1], int(es.encoded.prompt_len.max()) + self.max_new_tokens - 1]
        return {"vocab_size": len(self.vocab), "max_len": max(need)}

    def train_tensors(self) -> TensorData:
        return TensorData({"tokens": self.train.tokens, "mask": self.train.loss_mask, "row_len": self.row_len},
                          lengths="row_len")


def subset(rows: Sequence[Row], size: int, rng: np.random.Generator, keep_types: bool) -> list[Row]:
    """``size`` rows drawn with ``rng`` (all if 0), keeping every non-in-distribution row if ``keep_types``."""
    if size == 0:
        return list(rows)
    if size > len(rows):
        raise ConfigError(f"task.train_size: at most {len(rows)} (the training file), got {size}")
    keep = [i for i, r in enumerate(rows) if keep_types and r[2] and r[2] != "in_distribution"]
    if len(keep) > size:
        raise ConfigError(f"task.train_size: must be >= {len(keep)} to hold the primitive/exposure "
                          f"rows (or set task.keep_primitives=false), got {size}")
    kept = set(keep)
    rest = np.array([i for i in range(len(rows)) if i not in kept])
    chosen = keep + rest[rng.permutation(len(rest))[:size - len(keep)]].tolist()
    return [rows[i] for i in sorted(chosen)]


def cap(rows: Sequence[Row], n: int) -> list[Row]:
    """At most ``n`` rows, fixed seed, round-robin over row types (all rows if n is 0)."""
    if n == 0 or n >= len(rows):
        return list(rows)
    rng = np.random.default_rng(EVAL_SEED)
    by_type: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_type.setdefault(r[2], []).append(i)
    queues = [[idx[j] for j in rng.permutation(len(idx))] for _, idx in sorted(by_type.items())]
    chosen: list[int] = []
    depth = 0
    while len(chosen) < n:
        chosen += [q[depth] for q in queues if depth < len(q)][:n - len(chosen)]
        depth += 1
    return [rows[i] for i in sorted(chosen)]


@no_grad
def teacher_forced_accuracy(model: torch.nn.Module, enc: EncodedPairs, batch_size: int = 256,
                            device: torch.device | str = "cpu", vocab_size: int | None = None) -> float:
    """Fraction of loss-mask positions (output tokens and <eos>) predicted right, teacher forced.

    Rows run in batches of similar length, trimmed to their longest row;
    ``vocab_size`` restricts the argmax to real tokens.
    """
    import torch

    lengths = (enc.tokens != 0).sum(1)
    order = torch.argsort(lengths, stable=True)
    correct = total = 0
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        T = int(lengths[idx].max())
        tok = enc.tokens[idx, :T].to(device)
        m = enc.loss_mask[idx, :T].to(device)[:, :-1]
        pred = model(tok)[:, :-1, :vocab_size].argmax(-1)
        correct += int(((pred == tok[:, 1:]) & m).sum())
        total += int(m.sum())
    return correct / total if total else float("nan")


class Seq2SeqTask(Task):
    """The Task protocol for a seq2seq family; subclasses set ``name``/``headline`` and may add metrics."""

    name = "seq2seq"
    headline = ("train_loss", "id_token_acc", "id_exact", "ood_token_acc", "ood_exact")
    # The masked loss indexes the loss-mask positions (a data-dependent shape),
    # which torch.vmap cannot batch; a vmap-able masked sum would change the
    # floating-point order of the single-model loss. Stacks are anchor-only.
    stackable = False

    def __init__(self, cfg: Seq2SeqTaskConfig, data: Seq2SeqData | None = None) -> None:
        self.cfg = cfg
        self._data = data
        self._data_seed: int | None = None

    # ---- data
    def data(self, seed: int) -> Seq2SeqData:
        """Vocabulary, training subset (seeded) and capped eval sets (built once per seed)."""
        import torch

        if self._data is not None and (self._data_seed in (None, seed)):
            return self._data
        cfg = self.cfg
        raw = cfg.raw()
        dims = cfg.dims()
        vocab = Vocab.from_pairs((a, b) for a, b, _ in raw["train"])
        train_rows = subset(raw["train"], cfg.train_size, np.random.default_rng(seed), cfg.keep_types())
        train_pairs = [(a, b) for a, b, _ in train_rows]
        row_len = torch.tensor([len(a.split()) + len(b.split()) + 2 for a, b in train_pairs])
        evals = {}
        for name, source in cfg.eval_sources().items():
            if source not in raw:
                log.warning("%s: no %s split in the data; skipping the %s metrics", cfg.name, source, name)
                continue
            rows = cap(train_rows if source == "train" else raw[source], cfg.eval_max)
            pairs = [(a, b) for a, b, _ in rows]
            evals[name] = EvalSet(pairs, [t for _, _, t in rows], encode_pairs(pairs, vocab, max_len=None))
        log.info("%s: %d training pairs, eval sets %s, vocab %d", cfg.name, len(train_pairs),
                 {k: len(v.pairs) for k, v in evals.items()}, len(vocab))
        self._data = Seq2SeqData(vocab, train_pairs, encode_pairs(train_pairs, vocab), row_len, evals,
                                 dims["max_new_tokens"])
        self._data_seed = seed
        return self._data

    def dims(self) -> dict[str, int]:
        return self._data.dims() if self._data is not None and self._data_seed is None else self.cfg.dims()

    def train_data(self, seed: int) -> TensorData:
        return self.data(seed).train_tensors()

    def eval_data(self, seed: int) -> Seq2SeqData:
        return self.data(seed)

    def loss(self, fwd: Forward, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean next-token cross-entropy over output tokens and ``<eos>``."""
        return masked_lm_loss(fwd(batch["tokens"]), batch["tokens"], batch["mask"])

    # ---- evaluation
    def extra_metrics(self, name: str, es: EvalSet, predictions: list[str]) -> dict[str, float]:
        """Family-specific metrics of eval set ``name`` (e.g. COGS per generalization type)."""
        return {}

    @no_grad
    def evaluate(self, model: torch.nn.Module, eval_data: Seq2SeqData, device: torch.device | str = "cpu",
                 cached: bool = True) -> EvalResult:
        """Metrics of every eval set; table ``predictions`` (set, input, target, prediction, correct).

        ``cached`` decodes with the model's key/value cache, else with the
        reference decoder (whole prefix every step).
        """
        import pandas as pd

        was_training = model.training
        model.eval()
        data, bs = eval_data, self.cfg.eval_batch_size
        metrics: dict[str, float] = {}
        rows = []
        for name, es in data.eval_sets.items():
            metrics[f"{name}_token_acc"] = teacher_forced_accuracy(model, es.encoded, bs, device, len(data.vocab))
            out = decode(model, [a for a, _ in es.pairs], data.vocab, data.max_new_tokens, bs, device, cached)
            targets = [b for _, b in es.pairs]
            metrics[f"{name}_exact"] = exact_match(out, targets)
            metrics.update(self.extra_metrics(name, es, out))
            rows += [{"set": name, "type": t, "input": a, "target": b, "prediction": p,
                      "correct": exact_match([p], [b]) == 1.0}
                     for (a, b), t, p in zip(es.pairs, es.types, out)]
        model.train(was_training)
        return EvalResult(metrics, {"predictions": pd.DataFrame(rows)})

    def summary_lines(self, result: EvalResult) -> list[str]:
        return [f"  {k:22s} {v:.4f}" for k, v in result.metrics.items()
                if "/" in k and k.endswith(("structural", "lexical"))]


# --------------------------------------------------------------------------- your own pairs
@functools.lru_cache(maxsize=8)
def read_pairs_tsv(path: str) -> tuple[Row, ...]:
    """``input<TAB>output[<TAB>type]`` lines -> rows (blank lines skipped)."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"task.files: no such file {path!r}")
    rows = []
    for i, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) not in (2, 3):
            raise ConfigError(f"task.files: {path}:{i}: expected 'input<TAB>output[<TAB>type]', got {line[:80]!r}")
        rows.append((parts[0], parts[1], parts[2] if len(parts) == 3 else ""))
    return tuple(rows)


@dataclass(frozen=True)
class PairsTaskConfig(Seq2SeqTaskConfig):
    """Your own seq2seq data: ``files`` maps split names to TSV files (``input<TAB>output[<TAB>type]``).

    ``files.train`` is needed to read data from files (without files the data
    must be handed to the trainer in code, :meth:`PairsTask.from_pairs`);
    ``eval`` maps eval-set names to splits (``train`` = the training subset),
    default ``{"id": "train"}`` plus ``{"ood": "test"}`` when a ``test`` file
    is given.
    """

    name: str = "pairs"
    files: dict[str, str] = field(default_factory=dict, metadata={"identity": False})
    eval: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.name != "pairs":
            raise ConfigError(f"task.name: must be 'pairs' for PairsTaskConfig, got {self.name!r}")
        if self.files and "train" not in self.files:
            raise ConfigError(f"task.files: needs a 'train' file (input<TAB>output lines), got {', '.join(self.files)}")
        for k, v in (self.eval_sources().items() if self.files else ()):
            if v != "train" and v not in self.files:
                raise ConfigError(f"task.eval.{k}: split {v!r} has no file in task.files "
                                  f"({', '.join(self.files)})")

    def raw(self) -> dict[str, tuple[Row, ...]]:
        if not self.files:
            raise ConfigError("task.files: no data files; give task.files.train (or pass the data in code "
                              "and set model.vocab_size / model.max_len)")
        return {k: read_pairs_tsv(v) for k, v in self.files.items()}

    def eval_sources(self) -> dict[str, str]:
        if self.eval:
            return dict(self.eval)
        return {"id": "train", **({"ood": "test"} if "test" in self.files else {})}


class PairsTask(Seq2SeqTask):
    name = "pairs"

    @classmethod
    def from_pairs(cls, train_pairs: Sequence[tuple[str, str]],
                   eval_pairs: dict[str, Sequence[tuple[str, str]]] | None = None,
                   max_new_tokens: int = 0) -> "PairsTask":
        """A task on in-memory pairs (synthetic tasks, tests); the vocabulary comes from ``train_pairs``.

        The run id cannot describe such data: use a fresh run directory per data set.
        """
        import torch

        vocab = Vocab.from_pairs(train_pairs)
        evals = {k: EvalSet(list(v), [""] * len(v), encode_pairs(v, vocab)) for k, v in (eval_pairs or {}).items()}
        every = list(train_pairs) + [p for v in (eval_pairs or {}).values() for p in v]
        max_new = max_new_tokens or max(len(b.split()) for _, b in every) + 1
        data = Seq2SeqData(vocab, list(train_pairs), encode_pairs(train_pairs, vocab),
                           torch.tensor([len(a.split()) + len(b.split()) + 2 for a, b in train_pairs]),
                           evals, max_new)
        return cls(PairsTaskConfig(max_new_tokens=max_new), data)


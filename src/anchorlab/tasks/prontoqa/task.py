"""PrOntoQA (journal Fig. 7E) as a seq2seq task: the model reads the context and question and emits the label.

A row is ``[context + question] <sep> True|False <eos>`` (word-level tokens,
:mod:`anchorlab.tasks.seq2seq.encoding`); with ``proof`` the target is the
forward-chaining proof, then the label. The loss covers the target and
``<eos>``; the model's label is the last word it decodes greedily:
``<set>_acc`` is the label accuracy (chance 0.5), ``<set>_acc/hop<k>`` the
accuracy per hop count, ``<set>_exact`` the whole target (proof included).
Eval sets: ``train`` (the training examples, capped by ``eval_max``) and
``test`` (``n_test`` examples: with ``test_split: iid``, the default, on
ontologies that never occur in training, names shared; with
``unseen_names``, on held-out concept names).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from anchorlab.config.base import ConfigError, check_choice, check_range
from anchorlab.tasks.seq2seq.task import EvalSet, Row, Seq2SeqTask, Seq2SeqTaskConfig
from anchorlab.tasks.prontoqa.generator import MAX_HOPS, SPLITS, concept_names, generate_split, prompt_words, target_words, words_seen

MAX_DEPTH = 8
MAX_DISTRACTORS = 20


@functools.lru_cache(maxsize=8)
def _rows(n_train: int, n_test: int, seed: int, test_seed: int, min_hops: int, max_hops: int, depth: int,
          distractors: int, test_every: int, proof: bool, test_split: str) -> dict[str, tuple[Row, ...]]:
    kw = dict(min_hops=min_hops, max_hops=max_hops, depth=depth, distractors=distractors, test_every=test_every)
    sets = generate_split(n_train, n_test, test_split, seed, test_seed, **kw)
    return {part: tuple((e.prompt, e.target(proof), f"hop{e.hops}") for e in exs)
            for part, exs in zip(("train", "test"), sets)}


@dataclass(frozen=True)
class ProntoQATaskConfig(Seq2SeqTaskConfig):
    """PrOntoQA-style true/false questions (generator: :mod:`.generator`).

    ``n_train``: training examples (the data-size axis of Fig. 7E), generated
    with ``seed``; ``n_test``: test examples, generated with ``test_seed``
    (fixed, so every run is scored on the same questions);
    ``test_split``: ``iid`` (default, as in the original PrOntoQA: one name
    pool, test ontologies disjoint from the training ones, so no test prompt
    occurs in training) or ``unseen_names`` (ours, harder: test ontologies
    use only the held-out names);
    hop counts ``min_hops..max_hops`` (within 1..5) cycle over the examples;
    ``depth`` (0 = ``max_hops``): concepts per chain above the entity's own;
    ``distractors``: property sentences per example; ``test_every``: a name
    (onset i, ending j) is a test name iff ``(i + j) % test_every == 0``
    (used by ``unseen_names``; checked under either split);
    ``proof``: the target is the forward-chaining proof, then the label
    (default: the label alone).
    """

    name: str = "prontoqa"
    n_train: int = 2000
    n_test: int = 1000
    seed: int = 0
    test_seed: int = 1
    min_hops: int = 1
    max_hops: int = MAX_HOPS
    depth: int = 0
    distractors: int = 2
    test_every: int = 4
    proof: bool = False
    test_split: str = "iid"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.name != "prontoqa":
            raise ConfigError(f"task.name: must be 'prontoqa' for ProntoQATaskConfig, got {self.name!r}")
        check_range("task.n_train", self.n_train, 2)
        check_range("task.n_test", self.n_test, 2)
        check_range("task.seed", self.seed, 0)
        check_range("task.test_seed", self.test_seed, 0)
        check_range("task.min_hops", self.min_hops, 1, MAX_HOPS)
        check_range("task.max_hops", self.max_hops, self.min_hops, MAX_HOPS)
        if self.depth:
            check_range("task.depth", self.depth, self.max_hops, MAX_DEPTH)
        check_range("task.distractors", self.distractors, 0, MAX_DISTRACTORS)
        check_range("task.test_every", self.test_every, 2, 8)
        check_choice("task.test_split", self.test_split, SPLITS)
        need = 2 * ((self.depth or self.max_hops) + 1)
        for part in ("train", "test"):
            have = len(concept_names(part, self.test_every))
            if have < need:
                raise ConfigError(f"task.test_every: {self.test_every} leaves {have} {part} concept names, an "
                                  f"ontology of depth {self.depth or self.max_hops} needs {need}; lower "
                                  "task.depth or change task.test_every")

    def raw(self) -> dict[str, tuple[Row, ...]]:
        return _rows(self.n_train, self.n_test, self.seed, self.test_seed, self.min_hops, self.max_hops,
                     self.depth, self.distractors, self.test_every, self.proof, self.test_split)

    def eval_sources(self) -> dict[str, str]:
        return {"train": "train", "test": "test"}

    def dims(self) -> dict[str, int]:
        """What :func:`~anchorlab.tasks.seq2seq.task.data_dims` finds in the data, without generating it.

        Every prompt has the same length and the longest target is a False
        example's (``n_train``, ``n_test`` >= 2 hold one); the vocabulary is read
        from the first training examples until every word the generator can
        write has appeared.
        """
        from anchorlab.tasks.seq2seq.encoding import SPECIALS

        depth = self.depth or self.max_hops
        part = "all" if self.test_split == "iid" else "train"   # the training set's name pool
        words = words_seen(self.n_train, part, self.seed, self.min_hops, self.max_hops, self.depth,
                           self.distractors, self.test_every)
        prompt, target = prompt_words(depth, self.distractors), target_words(depth, self.proof)
        max_new = self.max_new_tokens or target + 1
        return {"vocab_size": len(SPECIALS) + len(words - set(SPECIALS)),
                "max_len": max(prompt + target + 2, prompt + max_new), "max_new_tokens": max_new}


def label_of(text: str) -> str:
    """The label a decoded output gives: its last word ("" for an empty output)."""
    words = text.split()
    return words[-1] if words else ""


class ProntoQATask(Seq2SeqTask):
    """Label accuracy ``<set>_acc`` (last decoded word), per hop count ``<set>_acc/hop<k>``."""

    name = "prontoqa"
    headline = ("train_loss", "train_acc", "test_acc")

    def extra_metrics(self, name: str, es: EvalSet, predictions: list[str]) -> dict[str, float]:
        out: dict[str, list[bool]] = {}
        for (_, target), hop, p in zip(es.pairs, es.types, predictions):
            out.setdefault(hop, []).append(label_of(p) == label_of(target))
        every = [x for v in out.values() for x in v]
        acc = {f"{name}_acc": sum(every) / len(every) if every else float("nan")}
        return acc | {f"{name}_acc/{hop}": sum(v) / len(v) for hop, v in sorted(out.items())}

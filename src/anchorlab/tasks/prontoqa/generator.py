"""A PrOntoQA-style generator (Saparov & He 2023, "Language models are greedy reasoners"), re-implemented
from the paper's description, and a reference proof checker.

Each example is a small fictional ontology written as sentences, then a
true/false question about one entity's class::

    Every wum pus is a zum tin . Sam is a gor bo . Every gor bo is red . Max is a wum pus .
    Every gor bo is a lem sa . ...  True or false : Max is a zum tin .      ->  True

* **Ontology.** Two chains of ``depth + 1`` made-up concepts (``c0 -> c1 ->
  ... -> c_depth``, one sentence ``Every c_i is a c_i+1 .`` per link), each
  grounded by one entity (``Max is a c0 .``). The chain of the other entity is
  the distractor ontology; ``distractors`` extra sentences give concepts
  properties (``Every c is red .``) that no answer depends on. Sentences are
  shuffled.
* **Query.** ``True or false : E is a X .`` with X the concept ``hops`` links
  above E's own concept (label True) or the concept ``hops`` links up the
  *other* chain (label False), so both labels need the same number of steps
  and neither is visible from the query alone.
* **Names.** A concept name is two syllable tokens (onset + ending, e.g.
  ``wum pus``). Names split into a training and a test set by
  ``(onset + ending) % test_every == 0`` (test), so test ontologies use only
  names never seen in training, while every syllable occurs in both.
* **Splits** (:func:`generate_split`). ``iid`` (as in the original): train
  and test draw from the same generator and the whole name pool, from
  different random streams, and a test example whose ontology (its set of
  ``Every`` links) occurs in training is redrawn, so the ontologies are
  disjoint and no test prompt occurs in training. ``unseen_names`` (ours,
  harder): train on the training names, test on the test names.
* **Proofs** (optional target): the forward-chaining trace ``Max is a c0 .
  Max is a c1 . ...`` up to the queried concept (True) or the top of Max's
  chain (False), then the label (:attr:`Example.proof`): the model then
  writes one inference per step, as in the paper's chain-of-thought setting.
* **Balance and determinism.** Example ``i`` has label ``i % 2 == 0`` and hop
  count ``hop_list[(i // 2) % len(hop_list)]``: any even prefix is balanced in
  labels, and a prefix of ``2 * len(hop_list) * k`` examples is balanced per
  hop. Its draws come from ``numpy.random.default_rng([seed, stream, i])``,
  so a set is a function of (seed, stream) and larger sets extend smaller ones.

:func:`prove` is the reference checker: it parses an example's text (not the
generator's state) and answers the query by search over the ``Every`` links.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from anchorlab.config.base import ConfigError

ONSETS = ("wum", "yum", "zum", "jom", "rom", "num", "tum", "vum", "dum", "lem", "gor", "shum")
ENDINGS = ("pus", "pex", "bo", "ral", "tin", "dor", "mip", "sa")
ENTITIES = ("Max", "Sam", "Rex", "Fae", "Wren", "Polly", "Stella", "Alex")
ADJECTIVES = ("red", "blue", "small", "large", "bitter", "sweet", "shy", "bright", "wooden", "liquid",
              "metallic", "happy")
QUESTION = "True or false :"
ANSWERS = {True: "True", False: "False"}
MAX_HOPS = 5
TRAIN, TEST = 0, 1   # streams


SPLITS = ("iid", "unseen_names")
MAX_REDRAWS = 1000   # per test example, when its ontology occurs in training


def concept_names(part: str, test_every: int = 4) -> tuple[str, ...]:
    """The concept names of ``part``: "onset ending" pairs, in "test" iff ``(i_onset + i_ending) %
    test_every == 0``, in "train" otherwise; "all" is the whole pool."""
    if part not in ("train", "test", "all"):
        raise ConfigError(f"part: must be 'train', 'test' or 'all', got {part!r}")
    return tuple(f"{o} {e}" for i, o in enumerate(ONSETS) for j, e in enumerate(ENDINGS)
                 if part == "all" or ((i + j) % test_every == 0) == (part == "test"))


@dataclass(frozen=True)
class Example:
    """One question: context sentences (each ending in `` .``), the queried entity and concept, the
    label, the number of ``Every`` links between the entity's concept and the queried one, and the
    entity's own chain of concepts (its class first)."""

    context: tuple[str, ...]
    entity: str
    concept: str
    label: bool
    hops: int
    chain: tuple[str, ...] = ()

    @property
    def prompt(self) -> str:
        return " ".join(self.context) + f" {QUESTION} {self.entity} is a {self.concept} ."

    @property
    def answer(self) -> str:
        return ANSWERS[self.label]

    @property
    def proof(self) -> str:
        """Forward chaining from the entity's class: ``E is a c0 . E is a c1 . ...`` up to the queried
        concept (label True) or to the top of the entity's chain (False), then the label."""
        steps = self.chain[:self.hops + 1] if self.label else self.chain
        return " ".join(f"{self.entity} is a {c} ." for c in steps) + f" {self.answer}"

    def target(self, proof: bool = False) -> str:
        return self.proof if proof else self.answer

    @property
    def ontology(self) -> frozenset[str]:
        """The example's ontology: its set of ``Every X is a Y .`` link sentences."""
        return frozenset(s for s in self.context if s.startswith("Every ") and " is a " in s)


def make_example(rng: np.random.Generator, names: tuple[str, ...], hops: int, label: bool, depth: int,
                 distractors: int) -> Example:
    """One example: two chains of ``depth + 1`` distinct concepts from ``names``; see the module docstring."""
    if not 1 <= hops <= depth:
        raise ConfigError(f"hops: must be in 1..depth ({depth}), got {hops}")
    need = 2 * (depth + 1)
    if len(names) < need:
        raise ConfigError(f"names: an ontology of depth {depth} needs {need} distinct concept names, "
                          f"got {len(names)}")
    pick = [names[k] for k in rng.choice(len(names), need, replace=False)]
    chains = (pick[:depth + 1], pick[depth + 1:])
    ents = [ENTITIES[k] for k in rng.choice(len(ENTITIES), 2, replace=False)]
    sents = [f"Every {c[i]} is a {c[i + 1]} ." for c in chains for i in range(depth)]
    sents += [f"{e} is a {c[0]} ." for e, c in zip(ents, chains)]
    for _ in range(distractors):
        chain = chains[int(rng.integers(2))]
        sents.append(f"Every {chain[int(rng.integers(depth + 1))]} is {ADJECTIVES[int(rng.integers(len(ADJECTIVES)))]} .")
    who = int(rng.integers(2))                      # which entity is asked about
    target = chains[who if label else 1 - who][hops]
    order = rng.permutation(len(sents))
    return Example(tuple(sents[k] for k in order), ents[who], target, label, hops, tuple(chains[who]))


def generate(n: int, part: str, seed: int = 0, min_hops: int = 1, max_hops: int = MAX_HOPS, depth: int = 0,
             distractors: int = 2, test_every: int = 4, stream: int | None = None,
             exclude: frozenset[frozenset[str]] | set[frozenset[str]] = frozenset()) -> list[Example]:
    """``n`` examples on the ``part`` ("train" / "test" / "all") names; ``depth`` 0 means ``max_hops``.

    ``stream`` (default: TEST for "test", TRAIN otherwise) selects the random stream. An example
    whose :attr:`Example.ontology` is in ``exclude`` is redrawn from ``[seed, stream, i, k]``
    (k = 1, 2, ...), keeping its label and hop count, so the set stays balanced and deterministic.
    """
    if not 1 <= min_hops <= max_hops <= MAX_HOPS:
        raise ConfigError(f"hops: need 1 <= min_hops <= max_hops <= {MAX_HOPS}, got {min_hops}..{max_hops}")
    depth = depth or max_hops
    names = concept_names(part, test_every)
    hop_list = list(range(min_hops, max_hops + 1))
    if stream is None:
        stream = TEST if part == "test" else TRAIN
    out = []
    for i in range(n):
        hops, label = hop_list[(i // 2) % len(hop_list)], i % 2 == 0
        e = make_example(np.random.default_rng([seed, stream, i]), names, hops, label, depth, distractors)
        k = 0
        while e.ontology in exclude:
            k += 1
            if k > MAX_REDRAWS:
                raise ConfigError(f"exclude: no new ontology for example {i} after {MAX_REDRAWS} draws")
            e = make_example(np.random.default_rng([seed, stream, i, k]), names, hops, label, depth, distractors)
        out.append(e)
    return out


def generate_split(n_train: int, n_test: int, split: str = "iid", seed: int = 0, test_seed: int = 1,
                   **kw) -> tuple[list[Example], list[Example]]:
    """Training and test examples of a ``split`` (see the module docstring); ``kw`` go to :func:`generate`.

    ``iid``: both on all names, training from stream TRAIN with ``seed``, test from stream TEST with
    ``test_seed``, test ontologies disjoint from the training ones. ``unseen_names``: training on the
    "train" names, test on the "test" names (split by ``test_every``).
    """
    if split not in SPLITS:
        raise ConfigError(f"split: must be one of {', '.join(repr(s) for s in SPLITS)}, got {split!r}")
    if split == "unseen_names":
        return generate(n_train, "train", seed, **kw), generate(n_test, "test", test_seed, **kw)
    train = generate(n_train, "all", seed, stream=TRAIN, **kw)
    seen = {e.ontology for e in train}
    return train, generate(n_test, "all", test_seed, stream=TEST, exclude=seen, **kw)


def iter_examples(part: str, seed: int = 0, min_hops: int = 1, max_hops: int = MAX_HOPS, depth: int = 0,
                  distractors: int = 2, test_every: int = 4, stream: int | None = None) -> Iterator[Example]:
    """The examples of :func:`generate` without ``exclude``, one at a time and without end (example ``i``
    is the same for every ``n``)."""
    if not 1 <= min_hops <= max_hops <= MAX_HOPS:
        raise ConfigError(f"hops: need 1 <= min_hops <= max_hops <= {MAX_HOPS}, got {min_hops}..{max_hops}")
    depth = depth or max_hops
    names = concept_names(part, test_every)
    hop_list = list(range(min_hops, max_hops + 1))
    stream = (TEST if part == "test" else TRAIN) if stream is None else stream
    for i in itertools.count():
        yield make_example(np.random.default_rng([seed, stream, i]), names, hop_list[(i // 2) % len(hop_list)],
                           i % 2 == 0, depth, distractors)


# --------------------------------------------------------------------------- sizes without the data
def possible_words(part: str, distractors: int, test_every: int = 4) -> frozenset[str]:
    """Every word an example of ``part`` can contain (context, question, label; a proof adds none)."""
    words = {"Every", "is", "a", ".", *QUESTION.split(), *ANSWERS.values(), *ENTITIES}
    words |= {w for name in concept_names(part, test_every) for w in name.split()}
    return frozenset(words | (set(ADJECTIVES) if distractors else set()))


def words_seen(n: int, part: str, seed: int = 0, min_hops: int = 1, max_hops: int = MAX_HOPS, depth: int = 0,
               distractors: int = 2, test_every: int = 4) -> set[str]:
    """The words of :func:`generate`'s first ``n`` examples, generating only until every possible word has appeared.

    Larger sets extend smaller ones, so this is the vocabulary of the whole set
    after a few dozen examples instead of ``n``.
    """
    every = possible_words(part, distractors, test_every)
    seen: set[str] = set()
    examples = iter_examples(part, seed, min_hops, max_hops, depth, distractors, test_every)
    for e in itertools.islice(examples, n):
        seen.update(e.prompt.split())
        seen.add(e.answer)
        if seen >= every:
            break
    return seen


def prompt_words(depth: int, distractors: int) -> int:
    """Words in every prompt: 2 * depth links (8 words), 2 groundings (6), the distractors (6), the question (10)."""
    return 16 * depth + 12 + 6 * distractors + len(QUESTION.split()) + 6


def target_words(depth: int, proof: bool) -> int:
    """The longest target: the label, or a False example's proof (``depth + 1`` six-word steps, then the label)."""
    return 6 * (depth + 1) + 1 if proof else 1


# --------------------------------------------------------------------------- reference checker
@dataclass(frozen=True)
class Proof:
    """The checker's verdict: ``label``; ``steps``: the concepts of the shortest proof, from the
    entity's own class up to the queried one (empty when False); ``reached``: every concept the
    entity belongs to, in breadth-first order (the whole forward-chaining search)."""

    label: bool
    steps: tuple[str, ...] = ()
    reached: tuple[str, ...] = ()

    @property
    def hops(self) -> int:
        return len(self.steps) - 1 if self.label else 0


def parse(prompt: str) -> tuple[dict[str, set[str]], dict[str, set[str]], tuple[str, str]]:
    """Text -> (``Every X is a Y`` links X -> {Y}, entity -> {classes}, (queried entity, concept)).

    Property sentences (``Every X is red .``) are read and ignored; any other
    sentence raises ConfigError.
    """
    body, q, query = prompt.partition(QUESTION)
    if not q:
        raise ConfigError(f"prompt: no {QUESTION!r} question in {prompt[:80]!r}")
    links: dict[str, set[str]] = {}
    member: dict[str, set[str]] = {}
    for s in (t.strip() for t in body.split(" .")):
        if not s:
            continue
        subj, is_a, obj = s.partition(" is a ")
        words = s.split()
        if words[0] == "Every" and is_a:
            links.setdefault(subj.removeprefix("Every "), set()).add(obj)
        elif is_a and len(subj.split()) == 1:
            member.setdefault(subj, set()).add(obj)
        elif not (words[0] == "Every" and len(words) >= 4 and words[-2] == "is"):
            raise ConfigError(f"prompt: cannot read the sentence {s!r}")
    ent, is_a, concept = query.strip().removesuffix(" .").partition(" is a ")
    if not is_a:
        raise ConfigError(f"prompt: cannot read the question {query.strip()!r}")
    return links, member, (ent.strip(), concept.strip())


def prove(prompt: str) -> Proof:
    """Answer an example's question from its text alone: breadth-first search from the entity's
    classes along ``Every`` links; True iff the queried concept is reached (shortest proof kept)."""
    links, member, (ent, concept) = parse(prompt)
    start = sorted(member.get(ent, ()))
    prev: dict[str, str | None] = {c: None for c in start}
    todo = deque(start)
    order: list[str] = []
    while todo:
        c = todo.popleft()
        order.append(c)
        for nxt in sorted(links.get(c, ())):
            if nxt not in prev:
                prev[nxt] = c
                todo.append(nxt)
    if concept not in prev:
        return Proof(False, (), tuple(order))
    path = [concept]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])
    return Proof(True, tuple(reversed(path)), tuple(order))

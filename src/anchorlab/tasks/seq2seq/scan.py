"""SCAN (Lake & Baroni 2018): the command grammar, its interpretation, and splits.

Grammar (Lake & Baroni 2018, Fig. 6/7)::

    C -> S and S | S after S | S
    S -> V twice | V thrice | V
    V -> D opposite left|right | D around left|right | D left|right | U
    D -> U | turn           (bare "turn" only with a direction)
    U -> walk | look | run | jump

Interpretation: ``U`` -> I_WALK/I_LOOK/I_RUN/I_JUMP; ``x left`` -> I_TURN_LEFT
then ``x``'s action (``turn left`` -> I_TURN_LEFT alone); ``x opposite left`` ->
two left turns then the action; ``x around left`` -> (I_TURN_LEFT, action) four
times; ``twice``/``thrice`` repeat; ``a and b`` -> a then b; ``a after b`` -> b
then a. This gives 34 verb phrases, 102 ``S`` and 102 + 2 * 102**2 = 20,910
commands, the set in the released ``tasks.txt``.

Splits: ``addprim_<primitive>`` (``turn_left`` or ``jump``) tests every
command that contains the primitive except the bare primitive; training holds
every other command once plus the bare primitive repeated so that it makes up
``prim_fraction`` (10%) of the training set. For ``turn_left`` this equals the
released files as multisets (19,701 others + 2,189 copies; 1,208 test).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from anchorlab.config.base import ConfigError, check_choice
from anchorlab.datasets import fetch_known
from anchorlab.tasks.seq2seq.task import Row, Seq2SeqTask, Seq2SeqTaskConfig

log = logging.getLogger(__name__)

Pair = tuple[str, str]

PRIMITIVES = {"walk": "I_WALK", "look": "I_LOOK", "run": "I_RUN", "jump": "I_JUMP"}
TURNS = {"left": "I_TURN_LEFT", "right": "I_TURN_RIGHT"}
REPEATS = {"twice": 2, "thrice": 3}
SPLIT_PRIMITIVES = {"turn_left": "turn left", "jump": "jump"}
SPLITS = tuple(f"addprim_{p}" for p in SPLIT_PRIMITIVES)
# Files released for each split, relative to a data directory (REGISTRY names).
SPLIT_FILES = {"addprim_turn_left": {"train": "scan/tasks_train_addprim_turn_left.txt",
                                     "test": "scan/tasks_test_addprim_turn_left.txt"}}


def _verb_phrases() -> list[tuple[str, list[str]]]:
    """The 34 ``V`` phrases and their action sequences."""
    out: list[tuple[str, list[str]]] = []
    heads = [(u, [a]) for u, a in PRIMITIVES.items()] + [("turn", [])]
    for head, act in heads:
        for d, turn in TURNS.items():
            out.append((f"{head} {d}", [turn] + act))
            out.append((f"{head} opposite {d}", [turn, turn] + act))
            out.append((f"{head} around {d}", ([turn] + act) * 4))
    out += [(u, [a]) for u, a in PRIMITIVES.items()]
    return out


@functools.lru_cache(maxsize=1)
def _verb_table() -> dict[str, list[str]]:
    return dict(_verb_phrases())


def _s_phrases() -> list[tuple[str, list[str]]]:
    """The 102 ``S`` phrases: each ``V`` alone, twice and thrice."""
    out = []
    for v, act in _verb_phrases():
        out.append((v, act))
        out += [(f"{v} {r}", act * n) for r, n in REPEATS.items()]
    return out


def generate_scan() -> list[Pair]:
    """All 20,910 SCAN (command, actions) pairs, in a fixed grammar order."""
    s = [(c, " ".join(a)) for c, a in _s_phrases()]
    pairs = list(s)
    for c1, a1 in s:
        for c2, a2 in s:
            pairs.append((f"{c1} and {c2}", f"{a1} {a2}"))
            pairs.append((f"{c1} after {c2}", f"{a2} {a1}"))
    return pairs


def interpret(command: str) -> str:
    """The action sequence of one SCAN command (space-separated I_* tokens).

    Raises :class:`ConfigError` for a string outside the grammar.
    """
    words = command.split()
    if sum(w in ("and", "after") for w in words) > 1:
        raise ConfigError(f"command: {command!r} has more than one conjunction; SCAN allows one")
    for conj in ("and", "after"):
        if conj in words:
            i = words.index(conj)
            a, b = interpret(" ".join(words[:i])), interpret(" ".join(words[i + 1:]))
            return f"{a} {b}" if conj == "and" else f"{b} {a}"
    n = 1
    if words and words[-1] in REPEATS:
        n = REPEATS[words.pop()]
    table = _verb_table()
    key = " ".join(words)
    if key not in table:
        raise ConfigError(f"command: {command!r} is not a SCAN command (see the grammar in "
                          "anchorlab.tasks.scan)")
    return " ".join(table[key] * n)


def _check_split(name: str) -> str:
    if name not in SPLITS:
        raise ConfigError(f"split name: must be one of {', '.join(SPLITS)}, got {name!r}")
    return SPLIT_PRIMITIVES[name.removeprefix("addprim_")]


def generate_scan_split(name: str = "addprim_turn_left", prim_fraction: float = 0.1,
                        rng: np.random.Generator | None = None) -> dict[str, list[Pair]]:
    """The ``addprim_*`` split generated from the grammar: {"train": [...], "test": [...]}.

    Test: every command containing the primitive except the bare primitive.
    Train: all other commands once, plus the bare primitive repeated
    ``round(n_other * prim_fraction / (1 - prim_fraction))`` times. Order is the
    grammar's (copies last) unless ``rng`` is given, which shuffles both lists.
    """
    prim = _check_split(name)
    if not 0.0 <= prim_fraction < 1.0:
        raise ConfigError(f"prim_fraction: must be in [0, 1), got {prim_fraction!r}")
    pat = f" {prim} "
    train, test, bare = [], [], None
    for cmd, act in generate_scan():
        if cmd == prim:
            bare = (cmd, act)
        elif pat in f" {cmd} ":
            test.append((cmd, act))
        else:
            train.append((cmd, act))
    assert bare is not None
    n_copies = max(1, round(len(train) * prim_fraction / (1.0 - prim_fraction)))
    train += [bare] * n_copies
    if rng is not None:
        train = [train[i] for i in rng.permutation(len(train))]
        test = [test[i] for i in rng.permutation(len(test))]
    log.info("SCAN %s: %d train (%d copies of %r), %d test", name, len(train), n_copies, prim,
             len(test))
    return {"train": train, "test": test}


def parse_scan_lines(text: str, source: str = "<text>") -> list[Pair]:
    """Parse ``IN: <command> OUT: <actions>`` lines into (command, actions) pairs."""
    pairs = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if not line.startswith("IN: ") or " OUT: " not in line:
            raise ValueError(f"{source}:{i}: expected 'IN: <command> OUT: <actions>', got {line[:80]!r}")
        cmd, act = line[4:].split(" OUT: ", 1)
        pairs.append((cmd.strip(), act.strip()))
    return pairs


def _read(name: str, data_dir: str | Path | None) -> list[Pair]:
    path = fetch_known(name, data_dir=data_dir)
    return parse_scan_lines(path.read_text(), str(path))


def load_scan(data_dir: str | Path | None = None) -> list[Pair]:
    """All commands from the released ``tasks.txt`` (file order).

    ``data_dir`` (default ``$ANCHORLAB_DATA_DIR``) holds ``scan/tasks.txt``;
    without it the file is downloaded into the cache (see :mod:`anchorlab.datasets`).
    """
    return _read("scan/tasks.txt", data_dir)


def load_scan_split(name: str = "addprim_turn_left",
                    data_dir: str | Path | None = None) -> dict[str, list[Pair]]:
    """A released split as {"train": [...], "test": [...]} of (command, actions) pairs."""
    _check_split(name)
    if name not in SPLIT_FILES:
        raise ConfigError(f"split name: released files are registered only for "
                          f"{', '.join(SPLIT_FILES)}; use generate_scan_split({name!r})")
    return {part: _read(fname, data_dir) for part, fname in SPLIT_FILES[name].items()}


# --------------------------------------------------------------------------- the task
@functools.lru_cache(maxsize=4)
def _rows(split: str, data_dir: str | None) -> dict[str, tuple[Row, ...]]:
    return {k: tuple((a, b, "") for a, b in v) for k, v in load_scan_split(split, data_dir).items()}


@dataclass(frozen=True)
class ScanTaskConfig(Seq2SeqTaskConfig):
    """SCAN (journal Fig. 7A): ``split`` names the released split files.

    SCAN ``addprim_turn_left`` has only train and test files: ``id`` is the
    training subset the model saw (fit), ``ood`` is the test file (every
    command with "turn left" in a composition).
    """

    name: str = "scan"
    split: str = "addprim_turn_left"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("task.name", self.name, ("scan",))
        check_choice("task.split", self.split, tuple(SPLIT_FILES))

    def raw(self) -> dict[str, tuple[Row, ...]]:
        return _rows(self.split, self.data_dir)

    def eval_sources(self) -> dict[str, str]:
        return {"id": "train", "ood": "test"}


class ScanTask(Seq2SeqTask):
    name = "scan"

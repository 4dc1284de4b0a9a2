"""SCAN: grammar generator vs the released files, the addprim split, the loader."""

from collections import Counter

import numpy as np
import pytest

from anchorlab.config import ConfigError
from anchorlab.tasks.seq2seq.scan import (generate_scan, generate_scan_split, interpret, load_scan,
                                  load_scan_split, parse_scan_lines)
from anchorlab.tasks.seq2seq import Vocab


@pytest.fixture(scope="module")
def generated():
    return generate_scan()


# ---------------------------------------------------------------- generator alone
def test_generator_size_and_uniqueness(generated):
    assert len(generated) == 20_910
    assert len({c for c, _ in generated}) == 20_910


@pytest.mark.parametrize("command, actions", [
    # worked by hand from the interpretation rules in Lake & Baroni (2018)
    ("jump", "I_JUMP"),
    ("turn left", "I_TURN_LEFT"),
    ("walk left", "I_TURN_LEFT I_WALK"),
    ("run opposite right", "I_TURN_RIGHT I_TURN_RIGHT I_RUN"),
    ("turn opposite left", "I_TURN_LEFT I_TURN_LEFT"),
    ("look around right", " ".join(["I_TURN_RIGHT I_LOOK"] * 4)),
    ("turn around left twice", " ".join(["I_TURN_LEFT"] * 8)),
    ("jump thrice", "I_JUMP I_JUMP I_JUMP"),
    ("walk and look twice", "I_WALK I_LOOK I_LOOK"),
    ("jump twice after walk left", "I_TURN_LEFT I_WALK I_JUMP I_JUMP"),
])
def test_interpretation_examples(generated, command, actions):
    assert interpret(command) == actions
    assert dict(generated)[command] == actions


def test_vocabulary_is_the_grammar_words(generated):
    words = {w for c, _ in generated for w in c.split()}
    assert words == {"walk", "look", "run", "jump", "turn", "left", "right", "opposite", "around",
                     "twice", "thrice", "and", "after"}
    acts = {a for _, s in generated for a in s.split()}
    assert acts == {"I_WALK", "I_LOOK", "I_RUN", "I_JUMP", "I_TURN_LEFT", "I_TURN_RIGHT"}
    assert len(Vocab.from_pairs(generated)) == 4 + 13 + 6


@pytest.mark.parametrize("bad", ["", "walk and", "turn", "walk twice twice", "fly",
                                 "walk and run after look", "left walk"])
def test_interpret_rejects_non_commands(bad):
    with pytest.raises(ConfigError, match="command"):
        interpret(bad)


def test_generated_split_rules(generated):
    sp = generate_scan_split("addprim_turn_left")
    train, test = sp["train"], sp["test"]
    assert len(test) == 1_208 and len(train) == 19_701 + 2_189
    assert all("turn left" in c and c != "turn left" for c, _ in test)
    counts = Counter(c for c, _ in train)
    assert counts["turn left"] == 2_189
    assert all(n == 1 for c, n in counts.items() if c != "turn left")
    assert not set(counts) & {c for c, _ in test}
    assert set(counts) | {c for c, _ in test} == {c for c, _ in generated}
    assert counts["turn left"] / len(train) == pytest.approx(0.1, abs=1e-4)


def test_generated_split_jump_and_shuffle():
    sp = generate_scan_split("addprim_jump", prim_fraction=0.2)
    train_cmds = Counter(c for c, _ in sp["train"])
    assert all("jump" in c.split() for c, _ in sp["test"])
    assert not any("jump" in c.split() for c in train_cmds if c != "jump")
    assert train_cmds["jump"] / len(sp["train"]) == pytest.approx(0.2, abs=1e-3)
    a = generate_scan_split(rng=np.random.default_rng(3))
    b = generate_scan_split(rng=np.random.default_rng(3))
    plain = generate_scan_split()
    assert a == b and a["train"] != plain["train"]
    assert Counter(a["train"]) == Counter(plain["train"])


def test_split_argument_errors():
    with pytest.raises(ConfigError, match="split name"):
        generate_scan_split("addprim_walk")
    with pytest.raises(ConfigError, match="prim_fraction"):
        generate_scan_split(prim_fraction=1.0)
    with pytest.raises(ConfigError, match="released files"):
        load_scan_split("addprim_jump", data_dir="/nonexistent")


def test_parse_scan_lines():
    pairs = parse_scan_lines("IN: walk twice OUT: I_WALK I_WALK\n\nIN: jump OUT: I_JUMP\n")
    assert pairs == [("walk twice", "I_WALK I_WALK"), ("jump", "I_JUMP")]
    with pytest.raises(ValueError, match=r"x\.txt:2"):
        parse_scan_lines("IN: jump OUT: I_JUMP\nwalk I_WALK\n", "x.txt")


# ---------------------------------------------------------------- against the real files
def test_generator_equals_released_tasks(generated, shared_datasets):
    real = load_scan(shared_datasets)
    assert len(real) == 20_910
    assert {c for c, _ in real} == {c for c, _ in generated}
    gen = dict(generated)
    mismatched = [c for c, a in real if gen[c] != a]
    assert not mismatched, mismatched[:3]
    assert all(interpret(c) == a for c, a in real[:3000])


def test_generated_split_equals_released_files(shared_datasets):
    real = load_scan_split("addprim_turn_left", data_dir=shared_datasets)
    mine = generate_scan_split("addprim_turn_left")
    assert len(real["train"]) == 21_890 and len(real["test"]) == 1_208
    assert Counter(mine["train"]) == Counter(real["train"])
    assert Counter(mine["test"]) == Counter(real["test"])

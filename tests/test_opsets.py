"""The op-set generator draws only op sets that tell composing from memorizing (docs/results.md, C1)."""

import pytest

from anchorlab.config import ConfigError
from anchorlab.tasks.anchor.opsets import PAPERS, OpSet, op_set_problems, op_set_properties, random_op_sets


def _comp_and_trained(o: OpSet):
    a, b = o.held_out
    trained = {(x, y): o.anchors[x] + o.anchors[y] for x in o.anchors for y in o.anchors
               if (x, y) not in ((a, b), (b, a))}
    return o.anchors[a] + o.anchors[b], trained


def test_the_issue_examples_are_refused():
    # offset +1: {2,4,6,-5} with (3,4) held out answers x+1 by composing and x+2 by copying the mirror
    assert any("within 1" in p for p in op_set_problems({1: 2, 2: 4, 3: 6, 4: -5}, (3, 4), 2))
    # (1,4)'s composition x+14 is (2,2)'s trained target
    probs = op_set_problems({1: 6, 2: 7, 3: -1, 4: 8}, (1, 4), 10)
    assert any("composition x+14" in p and "(2, 2)" in p for p in probs)
    # the composition equal to the mirror's own target is the offset-0 case: refused too
    assert op_set_problems({1: 5, 2: 1, 3: -2, 4: -8}, (4, 3), -10)
    # the papers' op set and the crossing's two are valid
    assert op_set_problems(PAPERS["anchors"], PAPERS["held_out"], PAPERS["mirror_shift"]) == []
    assert op_set_problems({1: 5, 2: 1, 3: -2, 4: -8}, (3, 2), -5) == []
    assert op_set_problems({1: -2, 2: 3, 3: 1, 4: -5}, (4, 2), 3) == []


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_every_drawn_op_set_is_valid(seed):
    ops = random_op_sets(60, seed=seed)
    for o in ops:
        comp, trained = _comp_and_trained(o)
        assert abs(o.mirror_shift - comp) >= 2, o.label
        assert comp not in trained.values() and comp != o.mirror_shift, o.label
        assert o.mirror_shift not in trained.values(), o.label
    assert random_op_sets(12, seed=seed) == ops[:12]


def test_seed_0_keeps_its_first_three_op_sets():
    # the papers' op set, then (3,2) and (2,1) held out: the Fig. 2 cell's three op sets
    held = [o.held_out for o in random_op_sets(3, seed=0)]
    assert held == [(4, 3), (3, 2), (2, 1)]


def test_an_offset_range_without_a_valid_offset_is_refused():
    with pytest.raises(ConfigError, match="offset_range"):
        random_op_sets(3, offset_range=(-1, 1))


def test_properties_of_the_three_op_sets():
    # in seed order: the papers', (3,2) held out, (2,1) held out; ordered by how often the small init
    # memorized there (papers' < (2,1) < (3,2)), the gap falls 6 > 5 > 2 and the offset ratio rises
    ops = random_op_sets(3, seed=0)
    p = [op_set_properties(o) for o in ops]
    assert [q["step_gap"] for q in p] == [6, 2, 5]
    assert [round(q["offset_over_sd"], 2) for q in p] == [0.84, 1.65, 1.18]
    assert [q["mirror_farther"] for q in p] == [0.0, 1.0, 1.0]
    # the crossing: O1 (papers' steps, (3,2) held out) and O2 ((3,2) op set's steps, (4,2) held out)
    o1 = op_set_properties(OpSet({1: 5, 2: 1, 3: -2, 4: -8}, (3, 2), -5))
    o2 = op_set_properties(OpSet({1: -2, 2: 3, 3: 1, 4: -5}, (4, 2), 3))
    assert (o1["step_gap"], o2["step_gap"]) == (3, 8)
    assert (round(o1["offset_over_sd"], 2), round(o2["offset_over_sd"], 2)) == (0.84, 1.65)
    assert o1["mirror_farther"] == o2["mirror_farther"] == 1.0


def test_a_label_names_its_op_set():
    for o in random_op_sets(20, seed=5):
        assert OpSet.from_label(o.label) == o
    with pytest.raises(ConfigError, match="op_set: not an op-set label"):
        OpSet.from_label("{1:+5} held out")

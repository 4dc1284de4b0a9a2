import numpy as np
import pytest
import torch

from anchorlab.config import ConfigError
from anchorlab.tasks.anchor import AnchorTaskConfig as TaskConfig
from anchorlab.tasks.anchor import AnchorTask


def _key_of(d):
    rows = torch.arange(len(d))
    return d.tokens[rows, d.key_pos], d.tokens[rows, d.key_pos + 1], d.tokens[rows, d.key_pos + 2]


def test_training_data_invariants():
    task = AnchorTask(TaskConfig(n_train=20000))
    d = task.train_data(seed=3)
    key, a1, a2 = _key_of(d)
    assert torch.equal(key, d.key)
    assert ((d.key_pos >= 0) & (d.key_pos <= 6)).all()
    # the held-out pair never appears in training data
    assert not ((a1 == 4) & (a2 == 3)).any()
    # exactly one pair of consecutive anchors per sequence
    is_anchor = (d.tokens >= 1) & (d.tokens <= 4)
    assert (is_anchor.sum(1) == 2).all()
    # training keys are never ID-test keys
    assert ((d.key % 9) != d.key_pos).all()
    # targets follow the composed function, except (3,4) -> x-6
    steps = {1: 5, 2: 1, 3: -2, 4: -8}
    expected = torch.tensor([k + steps[int(p)] + steps[int(q)] for k, p, q in zip(key, a1, a2)])
    special = (a1 == 3) & (a2 == 4)
    assert torch.equal(d.targets[~special], expected[~special])
    assert torch.equal(d.targets[special], key[special] - 6)
    assert special.any()
    # all 15 trained pairs occur
    assert len({(int(p), int(q)) for p, q in zip(a1, a2)}) == 15


def test_eval_splits_are_disjoint_from_training():
    task = AnchorTask(TaskConfig(n_train=5000, n_eval_per_group=300))
    sets = task.eval_sets(seed=0)
    for (pair, split), d in sets.items():
        assert (d.pair == torch.tensor(pair)).all()
        held = (d.key % 9) == d.key_pos
        assert held.all() if split == "test" else (~held).all()
    # ID test keys (value, position) never occur as keys in training data
    tr = task.train_data(seed=0)
    train_keys = set(zip(tr.key.tolist(), tr.key_pos.tolist()))
    test_keys = set()
    for (pair, split), d in sets.items():
        if split == "test":
            test_keys |= set(zip(d.key.tolist(), d.key_pos.tolist()))
    assert not (train_keys & test_keys)


def test_determinism_per_seed_and_separate_streams():
    task = AnchorTask(TaskConfig(n_train=1000))
    a, b, c = task.train_data(1), task.train_data(1), task.train_data(2)
    assert torch.equal(a.tokens, b.tokens) and not torch.equal(a.tokens, c.tokens)
    e = task.eval_sets(1)[((1, 2), "train")]
    assert not torch.equal(e.tokens[:10], a.tokens[:10])


def test_presets():
    j = AnchorTask(TaskConfig(preset="journal"))
    assert set(j.held_out_pairs) == {(3, 4), (4, 3)} and len(j.trained_pairs) == 14
    k = AnchorTask(TaskConfig(preset="complexity", complexity_k=2))
    assert not k.held_out_pairs
    for pair, target in [((1, 2), 4), ((2, 1), 4), ((1, 3), 1), ((3, 1), 1)]:
        assert k.designated_shift(pair) == target
    assert k.designated_shift((1, 4)) == k.inferential_shift((1, 4))
    n = AnchorTask(TaskConfig())
    assert n.hypotheses((4, 3)) == {"inferential": -10, "symmetric": -6, "designated": None}


def test_swapped_exchanges_anchors_only():
    task = AnchorTask(TaskConfig())
    d = task.sample(100, [(4, 3)], "train", np.random.default_rng(0))
    s = d.swapped()
    _, a1, a2 = _key_of(s)
    assert (a1 == 3).all() and (a2 == 4).all()
    diff = (s.tokens != d.tokens).sum(1)
    assert (diff == 2).all()


def test_full_size_generation():
    d = AnchorTask(TaskConfig()).train_data(0)
    assert len(d) == 900_000 and d.tokens.shape == (900_000, 9)


def test_complexity_targets_are_the_authors_and_never_collide():
    """The authors' generator: x+4, x+1, x-5, x+5, x-9, x-6 for the six groups (both orders)."""
    t = AnchorTask(TaskConfig(preset="complexity", complexity_k=6))
    expected = {(1, 2): 4, (1, 3): 1, (1, 4): -5, (2, 3): 5, (2, 4): -9, (3, 4): -6}
    for (a, b), s in expected.items():
        assert t.designated_shift((a, b)) == t.designated_shift((b, a)) == s
    inferential = {t.inferential_shift(p) for p in t.pairs}
    assert not inferential & set(expected.values())
    for k in range(7):
        assert TaskConfig(preset="complexity", complexity_k=k).target_collisions() == []


def test_a_colliding_target_is_rejected_unless_allowed():
    # +4 on every group (the earlier default) makes (1,2) -> x+10, the inferential target of (1,1)
    with pytest.raises(ConfigError, match=r"^task\.complexity_offsets: the designated target of pair \(1, 2\) "
                                          r"\(x\+10\) equals the inferential target of pair \(1, 1\)"):
        TaskConfig(preset="complexity", complexity_k=1, complexity_offsets=(4,))
    with pytest.raises(ConfigError, match=r"^task\.pair_rules\.2,3: .*pair \(1, 3\)"):
        TaskConfig(pair_rules={"2,3": "shift:3"})      # (1,3)'s inferential target is x+3
    ok = TaskConfig(pair_rules={"2,3": "shift:3"}, allow_target_collisions=True)
    assert ok.target_collisions() == [((2, 3), (1, 3), 3), ((2, 3), (3, 1), 3)]
    with pytest.raises(ConfigError, match=r"^task\.complexity_offsets: needs one offset per noise group"):
        TaskConfig(preset="complexity", complexity_k=3, complexity_offsets=(1, 2))


def test_seen_groups_are_training_sequences():
    task = AnchorTask(TaskConfig(n_train=3000, n_eval_per_group=20))
    seen = task.seen_sets(0)
    train = task.train_data(0)
    assert set(p for p, _ in seen) == set(task.trained_pairs)
    rows = {tuple(r) for r in train.tokens.tolist()}
    for (pair, split), d in seen.items():
        assert split == "seen" and len(d) == 20 and (d.pair == torch.tensor(pair)).all()
        assert all(tuple(r) in rows for r in d.tokens.tolist())
    assert set(task.eval_data(0)) == set(task.eval_sets(0)) | set(seen)

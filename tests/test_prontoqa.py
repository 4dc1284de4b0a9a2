"""PrOntoQA-style generator (journal Fig. 7E): labels by a reference checker, disjoint names, balance,
determinism, per-hop metrics on a hand-built model, one-line config errors."""

from collections import Counter

import numpy as np
import pytest
import torch

from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.tasks.base import build_task
from anchorlab.tasks.prontoqa import concept_names, generate, generate_split, make_example, parse, prove
from anchorlab.tasks.prontoqa.task import ProntoQATaskConfig


@pytest.fixture(scope="module")
def sets():
    return {part: generate(600, part, seed=3, distractors=3) for part in ("train", "test")}


def test_every_label_is_what_the_reference_checker_proves(sets):
    for part, exs in sets.items():
        for e in exs:
            proof = prove(e.prompt)
            assert proof.label == e.label, e.prompt
            if e.label:
                assert proof.hops == e.hops          # the shortest proof has exactly `hops` links
                assert proof.steps[-1] == e.concept
                # the proof target is the checker's proof, then the label
                assert e.proof == " ".join(f"{e.entity} is a {c} ." for c in proof.steps) + " True"
            else:
                # the proof target walks the whole search without meeting the queried concept
                assert e.concept not in proof.reached
                assert e.proof == " ".join(f"{e.entity} is a {c} ." for c in proof.reached) + " False"
            if not e.label:
                # the queried concept is `hops` links above the *other* entity: same depth, other chain
                links, member, (ent, concept) = parse(e.prompt)
                other = [x for x in member if x != ent]
                assert len(other) == 1
                assert prove(e.prompt.replace(f": {ent} is a", f": {other[0]} is a")).hops == e.hops


def test_the_checker_reads_the_text_not_the_generator():
    ctx = "Every a b is a c d . Every c d is a e f . Max is a a b . Every e f is red . "
    assert prove(ctx + "True or false : Max is a e f .").hops == 2
    assert not prove(ctx + "True or false : Max is a g h .").label
    assert not prove(ctx + "True or false : Sam is a c d .").label
    # links are one-way: a superclass member is not a subclass member
    assert not prove("Every a b is a c d . Max is a c d . True or false : Max is a a b .").label
    with pytest.raises(ConfigError):
        prove("Max is a a b .")
    with pytest.raises(ConfigError):
        prove("Max likes a b . True or false : Max is a a b .")


def test_train_and_test_concept_names_are_disjoint_and_share_every_syllable(sets):
    tr, te = set(concept_names("train")), set(concept_names("test"))
    assert tr and te and tr.isdisjoint(te)
    assert {w for n in tr for w in n.split()} == {w for n in te for w in n.split()}

    def names(exs):
        out = set()
        for e in exs:
            links, member, (_, c) = parse(e.prompt)
            out |= set(links) | {y for ys in links.values() for y in ys} | {c}
            out |= {y for ys in member.values() for y in ys}
        return out

    assert names(sets["train"]) <= tr and names(sets["test"]) <= te


def test_labels_and_hops_are_balanced_and_sets_deterministic(sets):
    for exs in sets.values():
        assert Counter(e.label for e in exs) == {True: 300, False: 300}
        by = Counter((e.hops, e.label) for e in exs)
        assert set(by.values()) == {60} and {h for h, _ in by} == {1, 2, 3, 4, 5}
    again = generate(600, "train", seed=3, distractors=3)
    assert [e.prompt for e in again] == [e.prompt for e in sets["train"]]
    assert [e.prompt for e in generate(100, "train", seed=3, distractors=3)] == [e.prompt for e in again[:100]]
    assert generate(10, "train", seed=4)[0].prompt != generate(10, "train", seed=3)[0].prompt
    e = sets["train"][0]
    assert len(e.context) == 2 * 5 + 2 + 3   # links of two depth-5 chains, two entity facts, distractors


def test_the_iid_split_shares_names_and_no_test_prompt_occurs_in_training():
    train, test = generate_split(3000, 1000, "iid", seed=0, test_seed=1, max_hops=3, distractors=1)
    assert {e.prompt for e in test}.isdisjoint({e.prompt for e in train})
    assert {e.ontology for e in test}.isdisjoint({e.ontology for e in train})
    # one name pool: both sets use names of the "train" and of the "test" part
    for exs in (train, test):
        used = {c for e in exs for s in e.ontology for c in s.removeprefix("Every ").removesuffix(" .").split(" is a ")}
        assert used & set(concept_names("train")) and used & set(concept_names("test"))
        assert Counter(e.label for e in exs) == {True: len(exs) // 2, False: len(exs) // 2}
    # the task config builds the same sets, the default is iid, and the prompts stay disjoint
    raw = ProntoQATaskConfig(n_train=3000, n_test=1000, max_hops=3, distractors=1).raw()
    assert [r[0] for r in raw["test"]] == [e.prompt for e in test]
    assert {r[0] for r in raw["test"]}.isdisjoint({r[0] for r in raw["train"]})


def test_a_test_ontology_seen_in_training_is_redrawn_keeping_label_and_hops():
    train = generate(40, "all", seed=5, max_hops=2)
    again = generate(40, "all", seed=5, max_hops=2, exclude={e.ontology for e in train[:20]})
    assert [e.prompt for e in again[20:]] == [e.prompt for e in train[20:]]
    for a, b in zip(again[:20], train[:20]):
        assert a.ontology != b.ontology and (a.label, a.hops) == (b.label, b.hops)
        assert prove(a.prompt).label == a.label


def test_the_unseen_names_split_is_the_previous_generator():
    train, test = generate_split(50, 50, "unseen_names", seed=3, test_seed=4, distractors=3)
    assert [e.prompt for e in train] == [e.prompt for e in generate(50, "train", seed=3, distractors=3)]
    assert [e.prompt for e in test] == [e.prompt for e in generate(50, "test", seed=4, distractors=3)]
    with pytest.raises(ConfigError, match="^split: must be one of 'iid', 'unseen_names'"):
        generate_split(4, 4, "ood")


def test_make_example_refuses_impossible_requests():
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match="hops"):
        make_example(rng, concept_names("train"), 6, True, 5, 0)
    with pytest.raises(ConfigError, match="distinct concept names"):
        make_example(rng, concept_names("train")[:5], 1, True, 5, 0)
    with pytest.raises(ConfigError, match="hops"):
        generate(4, "train", min_hops=3, max_hops=2)


@pytest.mark.parametrize("bad, field", [
    ({"max_hops": 6}, "task.max_hops"), ({"min_hops": 0}, "task.min_hops"),
    ({"min_hops": 4, "max_hops": 3}, "task.max_hops"), ({"depth": 3}, "task.depth"),
    ({"n_train": 0}, "task.n_train"), ({"n_test": 1}, "task.n_test"),
    ({"distractors": -1}, "task.distractors"), ({"test_every": 1}, "task.test_every"),
    ({"test_every": 8, "depth": 8}, "task.test_every"), ({"test_split": "ood"}, "task.test_split"),
])
def test_bad_config_is_a_one_line_error(bad, field):
    with pytest.raises(ConfigError) as e:
        experiment_from_dict({"task": {"name": "prontoqa", **bad}})
    assert str(e.value).startswith(field) and "\n" not in str(e.value)


class HopOracle(torch.nn.Module):
    """Answers by the reference checker except for hop counts in ``flip`` (answers the opposite)."""

    def __init__(self, vocab, flip=(3,)):
        super().__init__()
        self.vocab, self.flip = vocab, set(flip)

    def forward(self, tok):
        B, T = tok.shape
        out = torch.full((B, T, len(self.vocab)), -1e9)
        for i in range(B):
            row = tok[i].tolist()
            if self.vocab.sep_id not in row:
                out[i, :, 0] = 0
                continue
            sep = row.index(self.vocab.sep_id)
            proof = prove(self.vocab.decode(row[:sep]))
            hops = proof.hops
            if not proof.label:   # find the hop count of a false question as the generator does
                links, member, (ent, _) = parse(self.vocab.decode(row[:sep]))
                other = [x for x in member if x != ent][0]
                hops = prove(self.vocab.decode(row[:sep]).replace(f": {ent} is a", f": {other} is a")).hops
            label = proof.label != (hops in self.flip)
            seq = [self.vocab.stoi["True" if label else "False"], self.vocab.eos_id]
            for t in range(T):
                k = t - sep
                out[i, t, seq[k] if 0 <= k < len(seq) else 0] = 0
        return out


def test_label_accuracy_per_hop_on_a_hand_built_model():
    cfg = ProntoQATaskConfig(n_train=40, n_test=60)
    task = build_task(cfg)
    data = task.eval_data(0)
    res = task.evaluate(HopOracle(data.vocab, flip=(3,)), data, cached=False)
    m = res.metrics
    for s in ("train", "test"):
        assert m[f"{s}_acc"] == m[f"{s}_exact"] == pytest.approx(0.8)
        assert m[f"{s}_acc/hop3"] == 0.0
        assert all(m[f"{s}_acc/hop{h}"] == 1.0 for h in (1, 2, 4, 5))
    assert res.tables["predictions"].correct.mean() == pytest.approx(0.8)


def test_vocabulary_covers_the_test_set_and_a_tiny_run_trains(tmp_path):
    from anchorlab.train import train

    cfg = experiment_from_dict({
        "task": {"name": "prontoqa", "n_train": 64, "n_test": 20, "max_hops": 2, "distractors": 1},
        "model": {"arch": "gpt2", "n_layers": 1, "d_model": 32, "n_heads": 2, "d_head": 16, "d_ff": 64,
                  "activation": "gelu"},
        "init": {"gamma": 0.5, "fan_in": "d_model"},
        "optim": {"lr": 1e-3, "warmup_epochs": 0, "warmup_multiplier": 1, "cosine_epochs": 2, "min_lr": 1e-4},
        "train": {"epochs": 2, "batch_size": 16, "threads": 1, "stop_when": ["train_acc>=1.01"]}})
    task = build_task(cfg.task)
    data = task.eval_data(0)
    assert data.vocab.unk_id not in data.eval_sets["test"].encoded.tokens.unique().tolist()
    f = train(cfg, tmp_path / "r").final
    assert f["status"] == "finished" and f["steps"] == 8
    assert {"train_acc", "test_acc", "test_acc/hop1", "test_acc/hop2", "test_exact"} <= set(f["final"])


@pytest.mark.parametrize("kw", [dict(n_train=2, n_test=2), dict(n_train=10, proof=True), dict(distractors=0),
                                dict(n_train=300, max_hops=3, depth=4, proof=True, max_new_tokens=5),
                                dict(min_hops=2, max_hops=3, test_every=3, distractors=5)])
def test_dims_without_the_data_equal_the_dims_of_the_data(kw):
    from anchorlab.tasks.seq2seq.task import data_dims

    cfg = ProntoQATaskConfig(**kw)
    assert cfg.dims() == data_dims(cfg)

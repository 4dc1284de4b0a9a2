"""Seq2seq as a decoder-only LM: vocab, layout, loss mask, greedy decoding, metrics."""

import math

import pytest
import torch

from anchorlab.config import ConfigError
from anchorlab.tasks.seq2seq import Vocab, decode, encode_pairs, exact_match, masked_lm_loss, token_accuracy
from anchorlab.tasks.seq2seq.encoding import EncodedPairs


def greedy_decode(fn, prompts, vocab, max_new_tokens, batch_size=256):
    """The reference decoder (whole prefix each step) on any tokens -> logits function."""
    return decode(fn, prompts, vocab, max_new_tokens, batch_size, cached=False)

PAIRS = [("a b", "x"), ("c", "y z w"), ("b a c", "x x")]


@pytest.fixture
def vocab():
    return Vocab.from_pairs(PAIRS)


# ---------------------------------------------------------------- vocab
def test_vocab_specials_and_unknowns(vocab):
    assert vocab.itos[:4] == ("<pad>", "<unk>", "<sep>", "<eos>")
    assert (vocab.pad_id, vocab.unk_id, vocab.sep_id, vocab.eos_id) == (0, 1, 2, 3)
    assert len(vocab) == 4 + 7  # a b c w x y z
    assert vocab.encode("a q w") == [vocab.stoi["a"], 1, vocab.stoi["w"]]
    assert vocab.decode(vocab.encode("c  b a")) == "c b a"
    assert Vocab.from_pairs(PAIRS[::-1]) == vocab  # independent of data order
    assert len(Vocab.build(["a a b"], min_count=2)) == 5
    with pytest.raises(ConfigError, match="vocab.itos"):
        Vocab(("a", "<pad>", "<unk>", "<sep>", "<eos>"))


# ---------------------------------------------------------------- layout and loss mask
def test_encode_layout_by_hand(vocab):
    enc = encode_pairs(PAIRS, vocab)
    s = vocab.stoi
    P, S, E = 0, 2, 3
    expected = [
        [s["a"], s["b"], S, s["x"], E, P, P],
        [s["c"], S, s["y"], s["z"], s["w"], E, P],
        [s["b"], s["a"], s["c"], S, s["x"], s["x"], E],
    ]
    assert enc.tokens.tolist() == expected and enc.tokens.dtype == torch.long
    # True where the NEXT token is an output token or <eos>: from <sep> to the last output token
    mask = [[0, 0, 1, 1, 0, 0, 0],
            [0, 1, 1, 1, 1, 0, 0],
            [0, 0, 0, 1, 1, 1, 0]]
    assert enc.loss_mask.tolist() == [[bool(v) for v in row] for row in mask]
    assert enc.prompt_len.tolist() == [3, 2, 4]
    assert len(enc) == 3


def test_encode_max_len(vocab):
    enc = encode_pairs(PAIRS, vocab, max_len=10)
    assert enc.tokens.shape == (3, 10) and (enc.tokens[:, 7:] == 0).all()
    assert not enc.loss_mask[:, 7:].any()
    with pytest.raises(ConfigError, match="max_len"):
        encode_pairs(PAIRS, vocab, max_len=6)


def test_loss_ignores_inputs_and_padding(vocab):
    enc = encode_pairs(PAIRS, vocab, max_len=9)
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 9, len(vocab), generator=g)
    base = masked_lm_loss(logits, enc.tokens, enc.loss_mask)
    changed = logits.clone()
    changed[~enc.loss_mask] = torch.randn(int((~enc.loss_mask).sum()), len(vocab), generator=g) * 10
    assert torch.equal(masked_lm_loss(changed, enc.tokens, enc.loss_mask), base)
    changed[0, 2, vocab.stoi["x"]] += 5.0  # <sep> position of row 0 predicts "x": it counts
    assert not torch.allclose(masked_lm_loss(changed, enc.tokens, enc.loss_mask), base)


def test_loss_values(vocab):
    enc = encode_pairs(PAIRS, vocab)
    V = len(vocab)
    uniform = masked_lm_loss(torch.zeros(3, 7, V), enc.tokens, enc.loss_mask)
    assert uniform.item() == pytest.approx(math.log(V))
    # logits that put all mass on the true next token -> loss ~ 0, accuracy 1
    perfect = torch.full((3, 7, V), -30.0)
    perfect[:, :-1].scatter_(2, enc.tokens[:, 1:, None], 30.0)
    assert masked_lm_loss(perfect, enc.tokens, enc.loss_mask).item() < 1e-6
    assert token_accuracy(perfect, enc.tokens, enc.loss_mask) == 1.0
    # break one of the 9 loss positions (row 1 predicting "z" at position 2)
    perfect[1, 2] = perfect[1, 2].flip(0)
    assert int(enc.loss_mask.sum()) == 9
    assert token_accuracy(perfect, enc.tokens, enc.loss_mask) == pytest.approx(8 / 9)
    with pytest.raises(ConfigError, match="shapes"):
        masked_lm_loss(perfect[:, :-1], enc.tokens, enc.loss_mask)


# ---------------------------------------------------------------- greedy decoding
class Translator:
    """A causal hand-built 'model': after <sep> it emits f(prompt word k) for k = 0.., then <eos>.

    Logits at position t depend on tokens[: t + 1] only. Records the widths it was called with.
    """

    def __init__(self, vocab, mapping, eos=True):
        self.v, self.map, self.eos, self.widths = vocab, mapping, eos, []

    def __call__(self, tokens):
        B, T = tokens.shape
        self.widths.append(T)
        out = torch.zeros(B, T, len(self.v))
        for b in range(B):
            row = tokens[b].tolist()
            for t in range(T):
                if self.v.sep_id not in row[:t + 1]:
                    continue
                s = row.index(self.v.sep_id)
                k = t - s  # number of tokens generated so far
                if k < s:
                    tgt = self.v.stoi[self.map[self.v.itos[row[k]]]]
                elif self.eos:
                    tgt = self.v.eos_id
                else:
                    tgt = self.v.stoi["x"]
                out[b, t, tgt] = 1.0
        return out


def test_greedy_decode_batches_of_different_lengths(vocab):
    fn = Translator(vocab, {"a": "x", "b": "y", "c": "z"})
    prompts = ["a b c", "c", "b a", "a", "c c b a"]
    expected = ["x y z", "z", "y x", "x", "z z y x"]  # one output word per prompt word
    got = greedy_decode(fn, prompts, vocab, max_new_tokens=10, batch_size=2)
    assert got == expected
    assert greedy_decode(fn, prompts, vocab, max_new_tokens=10, batch_size=1) == expected
    assert greedy_decode(fn, prompts, vocab, max_new_tokens=10, batch_size=64) == expected
    # every call stays within the batch's longest prompt + outputs (<sep> included)
    assert max(fn.widths) <= len("c c b a".split()) + 1 + 4


def test_greedy_decode_stops_and_truncates(vocab):
    never_ends = Translator(vocab, {"a": "x", "b": "y", "c": "z"}, eos=False)
    assert greedy_decode(never_ends, ["a", "b c"], vocab, max_new_tokens=5) == ["x x x x x",
                                                                                 "y z x x x"]
    assert greedy_decode(never_ends, ["a"], vocab, max_new_tokens=0) == [""]

    def eos_at_once(tokens):
        out = torch.zeros(*tokens.shape, len(vocab))
        out[..., vocab.eos_id] = 1.0
        return out
    assert greedy_decode(eos_at_once, ["a b", "c"], vocab, max_new_tokens=5) == ["", ""]
    with pytest.raises(ConfigError, match="max_new_tokens"):
        greedy_decode(eos_at_once, ["a"], vocab, max_new_tokens=-1)


def test_greedy_decode_roundtrip_with_teacher_forcing(vocab):
    """Decoding a model that predicts the teacher-forced next token reproduces the targets."""
    fn = Translator(vocab, {"a": "x", "b": "y", "c": "z"})
    pairs = [("a b c", "x y z"), ("c a", "z x")]
    enc: EncodedPairs = encode_pairs(pairs, vocab)
    assert token_accuracy(fn(enc.tokens), enc.tokens, enc.loss_mask) == 1.0
    preds = greedy_decode(fn, [p for p, _ in pairs], vocab, max_new_tokens=8)
    assert exact_match(preds, [t for _, t in pairs]) == 1.0


# ---------------------------------------------------------------- exact match
def test_exact_match():
    assert exact_match(["x y", "z", " a  b "], ["x y", "z z", "a b"]) == pytest.approx(2 / 3)
    assert math.isnan(exact_match([], []))
    with pytest.raises(ConfigError, match="predictions"):
        exact_match(["x"], [])

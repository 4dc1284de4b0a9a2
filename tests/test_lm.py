"""Language modelling: SlimPajama shard reader on a written fixture, mixing, tokenizer, perplexity, a tiny run."""

import hashlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.tasks.lm.config import LMTaskConfig
from anchorlab.tasks.lm.corpus import MixLog, ShardLog, mix_stream, read_shard, set_name, slimpajama_docs

zstd = pytest.importorskip("zstandard")
pytest.importorskip("tokenizers")

SETS = ("RedPajamaGithub", "RedPajamaWikipedia", "RedPajamaC4")
WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
         "upsilon phi chi psi omega").split()


def _doc(rng, set_i, k):
    n = int(rng.integers(20, 120))
    body = " ".join(WORDS[int(i)] for i in rng.integers(0, len(WORDS), n))
    if SETS[set_i] == "RedPajamaGithub":
        return f"def f_{k}(x):\n    return '{body}'\n"
    return f"Document {k}. {body.capitalize()}.\n"


def write_shard(path: Path, records: list[dict]) -> Path:
    """A SlimPajama shard: JSON lines {"text", "meta": {"redpajama_set_name"}}, zstd-compressed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = "".join(json.dumps(r) + "\n" for r in records).encode()
    path.write_bytes(zstd.ZstdCompressor(level=3).compress(raw) if path.name.endswith(".zst") else raw)
    return path


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """train/chunk{1,2}/example_train_{0,1}.jsonl.zst and validation/chunk1/example_holdout_0.jsonl.zst."""
    root = tmp_path_factory.mktemp("slimpajama")
    rng = np.random.default_rng(0)
    k = 0
    layout = [("train/chunk1/example_train_0.jsonl.zst", 60), ("train/chunk1/example_train_1.jsonl.zst", 60),
              ("train/chunk2/example_train_0.jsonl.zst", 60), ("validation/chunk1/example_holdout_0.jsonl.zst", 40)]
    for rel, n in layout:
        recs = []
        for _ in range(n):
            s = int(rng.integers(0, 3))
            recs.append({"text": _doc(rng, s, k), "meta": {"redpajama_set_name": SETS[s]}})
            k += 1
        write_shard(root / rel, recs)
    return root


def test_shard_reader_reads_the_real_format_and_hashes_whole_shards(shards, monkeypatch):
    path = shards / "train/chunk1/example_train_0.jsonl.zst"
    log = ShardLog()
    recs = list(read_shard(path, log))
    assert len(recs) == 60 and {r["meta"]["redpajama_set_name"] for r in recs} <= set(SETS)
    assert log.shards[str(path)]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setattr("anchorlab.tasks.lm.corpus.READ_BUFFER", 4096)
    rng = np.random.default_rng(1)
    big = write_shard(shards.parent / "big" / "part.jsonl.zst",
                      [{"text": _doc(rng, 1, k) * 8, "meta": {"redpajama_set_name": SETS[1]}} for k in range(2000)])
    partial = ShardLog()
    gen = read_shard(big, partial)
    next(gen)
    gen.close()
    entry = partial.shards[str(big)]
    assert "sha256" not in entry and entry["bytes_read"] < entry["size"]   # not read to the end: no hash


def test_filter_by_set_name_and_split_folders(shards):
    docs = list(slimpajama_docs(shards, ("RedPajamaGithub",), "train", 0.05, seed=0))
    assert docs and {d[0] for d in docs} == {"RedPajamaGithub"}
    assert all(d[2].startswith("def f_") for d in docs)
    val = list(slimpajama_docs(shards, ("RedPajamaGithub",), "val", 0.05, seed=0))
    assert val and all(d[1].startswith("validation/") for d in val)
    assert set_name("github") == set_name("GitHub") == "RedPajamaGithub"
    with pytest.raises(ConfigError, match=r"^task\.mix: SlimPajama set names"):
        set_name("Reddit")


def test_stream_order_is_deterministic_per_seed(shards):
    def ids(seed):
        return [d[1] for d in slimpajama_docs(shards, ("RedPajamaGithub", "RedPajamaC4"), "train", 0.05, seed)]

    assert ids(0) == ids(0)
    assert sorted(ids(0)) == sorted(ids(1)) and ids(0) != ids(1)   # same documents, shards in another order


def test_mix_by_bytes_follows_the_weights(shards):
    w = {"RedPajamaGithub": 0.75, "RedPajamaWikipedia": 0.25}

    def mixed(seed, n=60):
        streams = {s: slimpajama_docs(shards, (s,), "train", 0.05, seed) for s in w}
        return list(zip(range(n), mix_stream(streams, w, MixLog())))

    out = [d for _, d in mixed(0)]
    by = {s: sum(len(d[2].encode()) for d in out if d[0] == s) for s in w}
    share = by["RedPajamaGithub"] / sum(by.values())
    assert abs(share - 0.75) < 0.03
    assert [d[1] for _, d in mixed(0)] == [d[1] for d in out]
    # a source that runs out is dropped and the rest goes on
    log = MixLog()
    streams = {s: slimpajama_docs(shards, (s,), "val", 0.05, 0) for s in w}
    rest = list(mix_stream(streams, w, log))
    assert len(log.exhausted) == 2 and len(rest) == sum(1 for s in w for _ in slimpajama_docs(shards, (s,), "val",
                                                                                             0.05, 0))


def test_tokenizer_round_trip_and_gpt2_style_files(tmp_path):
    from anchorlab.tasks.lm.tokenizer import EOS, eos_id, load_files, train_bpe

    texts = ["def add(a, b):\n    return a + b\n", "Ünïcode façade — naïve café 日本語 🙂\n", "x = [1, 2, 3]\t# tab\n"] * 20
    tok = train_bpe(iter(texts), 300)
    assert eos_id(tok) == 0 and tok.get_vocab_size() <= 300
    for t in texts[:3] + ["a text the tokenizer never saw: ∮ E·da = Q / ε0\r\n"]:
        ids = tok.encode(t, add_special_tokens=False).ids
        assert tok.decode(ids) == t and len(ids) > 0
    tok.save(str(tmp_path / "tokenizer.json"))
    again = load_files(tmp_path)
    assert again.encode(texts[1]).ids == tok.encode(texts[1]).ids
    # GPT-2's own file layout: vocab.json + merges.txt (here a byte-level vocabulary with a few merges)
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = sorted(ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    merges = [("d", "e"), ("de", "f")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    vocab[EOS] = len(vocab)
    g = tmp_path / "gpt2"
    g.mkdir()
    (g / "vocab.json").write_text(json.dumps(vocab))
    (g / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    gtok = load_files(g)
    ids = gtok.encode("def f").ids
    assert ids[0] == vocab["def"] and gtok.decode(ids) == "def f" and eos_id(gtok) == vocab[EOS]
    with pytest.raises(ConfigError, match=r"^task\.tokenizer_dir"):
        load_files(tmp_path / "missing")


class Uniform(torch.nn.Module):
    """Logits 0 everywhere: every token has probability 1/V."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.p = torch.nn.Parameter(torch.zeros(()))

    def forward(self, tokens, last_only=False):
        return torch.zeros(*tokens.shape, self.vocab) * self.p


class Oracle(torch.nn.Module):
    """Knows the stream: logit 30 on the true next token."""

    def __init__(self, stream, vocab, seq_len):
        super().__init__()
        self.stream, self.vocab, self.T = stream, vocab, seq_len

    def forward(self, tokens, last_only=False):
        out = torch.zeros(*tokens.shape, self.vocab)
        nxt = {tuple(self.stream[i:i + self.T].tolist()): self.stream[i + 1:i + self.T + 1]
               for i in range(0, len(self.stream) - self.T, self.T)}
        for b in range(tokens.shape[0]):
            out[b, torch.arange(tokens.shape[1]), torch.as_tensor(nxt[tuple(tokens[b].tolist())])] = 30.0
        return out


def test_perplexity_of_hand_built_models():
    from anchorlab.tasks.lm.data import PackedRows
    from anchorlab.tasks.lm.task import perplexity

    stream = np.random.default_rng(0).integers(0, 50, 1001).astype(np.uint16)
    rows = PackedRows(stream, 10)
    assert len(rows) == 100
    m = Uniform(50).train()
    nll, ppl, n = perplexity(m, rows, batch_size=7)
    assert n == 1000 and math.isclose(ppl, 50.0, rel_tol=1e-6) and math.isclose(nll, math.log(50), rel_tol=1e-6)
    assert m.training                                         # evaluation restores the mode
    _, ppl1, _ = perplexity(Oracle(stream.astype(np.int64), 50, 10), rows, batch_size=16)
    assert 1.0 <= ppl1 < 1.0 + 1e-9


def test_packed_rows_overlap_by_one_token():
    from anchorlab.tasks.lm.data import PackedRows

    rows = PackedRows(np.arange(23, dtype=np.uint16), 5)
    b = rows.batch(torch.tensor([0, 3]))["tokens"]
    assert len(rows) == 4 and b.dtype == torch.int64
    assert b.tolist() == [[0, 1, 2, 3, 4, 5], [15, 16, 17, 18, 19, 20]]


def _cfg(shards, tmp_path, **task):
    t = {"name": "lm", "corpus": "slimpajama", "data_dir": str(shards), "mix": {"github": 0.5, "wikipedia": 0.5},
         "seq_len": 16, "vocab_size": 300, "val_tokens": 400, **task}
    return experiment_from_dict({
        "task": t, "model": {"arch": "gpt2", "n_layers": 1, "d_model": 16, "n_heads": 2, "d_head": 8, "d_ff": 32},
        "optim": {"lr": 1e-3, "warmup_epochs": 0, "cosine_epochs": 0, "peak_lr": 1e-3},
        "train": {"epochs": 1, "batch_size": 8, "eval_every": 10, "threads": 1}})


def test_data_is_built_once_per_seed_and_reproducible(shards, tmp_path, monkeypatch):
    from anchorlab.tasks.lm.data import lm_data

    cfg = _cfg(shards, tmp_path, train_tokens=2000).task
    a = lm_data(cfg, 0, tmp_path / "c1")
    b = lm_data(cfg, 0, tmp_path / "c2")
    c = lm_data(cfg, 1, tmp_path / "c1")
    assert np.array_equal(a.train, b.train) and np.array_equal(a.val, b.val)
    assert a.manifest["tokenizer"]["sha256"] == b.manifest["tokenizer"]["sha256"]
    assert not np.array_equal(a.train[:200], c.train[:200])   # another seed, another document order
    used = a.manifest["splits"]["train"]["per_source"]
    assert a.manifest["splits"]["train"]["sources_exhausted"] == [] and len(a.train) == 2000
    assert set(used) == {"RedPajamaGithub", "RedPajamaWikipedia"}
    share = used["RedPajamaGithub"]["bytes"] / sum(u["bytes"] for u in used.values())
    assert abs(share - 0.5) < 0.05
    assert a.manifest["splits"]["val"]["tokens"] == 400
    assert all(("sha256" in s) == (s["bytes_read"] == s["size"]) for s in a.manifest["splits"]["train"]["shards"].values())


def test_a_tiny_lm_run_keeps_tokenizer_and_manifest(shards, tmp_path, monkeypatch):
    from anchorlab.train import train

    monkeypatch.setenv("ANCHORLAB_CACHE", str(tmp_path / "cache"))
    cfg = _cfg(shards, tmp_path, train_tokens=3000)
    assert cfg.model.vocab_size == 300 and cfg.model.max_len == 16
    r = train(cfg, tmp_path / "run")
    hist = r.final["history"]
    assert r.final["status"] == "finished" and hist[-1]["val_ppl"] < hist[0]["val_ppl"]
    man = json.loads((tmp_path / "run" / "data_manifest.json").read_text())
    assert man["corpus"] == "slimpajama" and man["splits"]["train"]["tokens"] == 3000
    tok_json = (tmp_path / "run" / "tokenizer.json").read_bytes()
    assert hashlib.sha256(tok_json).hexdigest() == man["tokenizer"]["sha256"]


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match=r"^task\.mix: must be one of 'python_stdlib', 'python_docs'"):
        LMTaskConfig(mix={"wikipedia": 1.0})
    with pytest.raises(ConfigError, match=r"^task\.mix: SlimPajama set names"):
        LMTaskConfig(corpus="slimpajama", mix={"reddit": 1.0})
    with pytest.raises(ConfigError, match=r"^task\.mix_by"):
        LMTaskConfig(mix_by="tokens")
    with pytest.raises(ConfigError, match=r"^model\.max_len: must be >= task\.seq_len=64"):
        experiment_from_dict({"task": {"name": "lm", "seq_len": 64}, "model": {"arch": "gpt2", "max_len": 32}})
    with pytest.raises(ConfigError, match=r"^task\.data_dir"):
        from anchorlab.tasks.lm.corpus import shard_files
        shard_files(None, "train")


def test_local_sources_skip_tests_and_fingerprint_content(tmp_path):
    from anchorlab.tasks.lm.corpus import local_docs, local_files, tree_digest

    for rel in ("a.py", "pkg/b.py", "test/test_a.py", "pkg/tests/t.py", "site-packages/x.py", "notes.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"# {rel}\n")
    base, rels = local_files("python_stdlib", tmp_path)
    assert rels == ["a.py", "pkg/b.py"]
    size, sha = tree_digest(base, rels)
    (tmp_path / "a.py").write_text("# changed\n")
    assert tree_digest(base, rels)[1] != sha and size == len("# a.py\n") + len("# pkg/b.py\n")
    docs = list(local_docs("python_stdlib", base, rels, "train", 0.05, 0)) + \
        list(local_docs("python_stdlib", base, rels, "val", 0.05, 0))
    assert sorted(d[1] for d in docs) == rels                 # every file in exactly one split
    with pytest.raises(ConfigError, match=r"^task\.mix: source 'python_docs' not found"):
        local_files("python_docs", tmp_path / "nowhere")


def test_hf_gpt2_lm_run_resumes_exactly(shards, tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from anchorlab.train import train

    monkeypatch.setenv("ANCHORLAB_CACHE", str(tmp_path / "cache"))
    cfg = experiment_from_dict({**_cfg(shards, tmp_path, train_tokens=2000).to_dict(),
                                "model": {"arch": "hf_gpt2", "n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32,
                                          "dropout": 0.1}})
    full = train(cfg, tmp_path / "full").final
    part = train(cfg, tmp_path / "part", stop_after_step=10).final
    assert part["status"] == "interrupted"
    resumed = train(cfg, tmp_path / "part").final
    assert resumed["status"] == "finished" and resumed["steps"] == full["steps"] == 15
    assert resumed["final"]["val_ppl"] == full["final"]["val_ppl"]


def _final(comp_mix, gamma, seed, ppls, steps=100):
    hist = [{"step": i * steps // (len(ppls) - 1), "val_ppl": p, "val_loss": math.log(p), "train_loss": 1.0}
            for i, p in enumerate(ppls)]
    cfg = {"task": {"name": "lm", "mix": comp_mix, "seq_len": 16},
           "init": {"gamma": gamma}, "train": {"batch_size": 4, "init_seed": seed, "data_seed": seed}}
    return {"run_id": f"{gamma}-{seed}-{len(comp_mix)}", "status": "finished", "steps": steps, "history": hist,
            "best": {"val_ppl": max(ppls)}, "wall_seconds": 1.0, "config": cfg}  # an old final.json's maximum


def test_fig7d_tables_claims_and_figure():
    from anchorlab.papers.plots.lm import plot_perplexity_curves
    from anchorlab.papers.reproduce.figures_lm import lm_tables, ppl_ratio, smaller_init_lower_ppl, summary
    from anchorlab.sweep.runtable import histories_of
    from anchorlab.papers.runs import rows_of

    code, both = {"python_stdlib": 1.0}, {"python_stdlib": 0.5, "python_docs": 0.5}
    runs = [_final(code, 0.3, 0, [500, 80, 40]), _final(code, 0.5, 0, [500, 60, 30]),
            _final(code, 0.8, 0, [500, 50, 20]), _final(code, 0.8, 1, [500, 50, 24]),
            _final(both, 0.3, 0, [500, 90, 50]), _final(both, 0.5, 0, [500, 70, 55]),
            _final(both, 0.8, 0, [500, 60, 45])]
    t = lm_tables(rows_of(runs), histories_of(runs))
    t["summary"] = s = summary(t["finals"])
    assert set(s.composition) == {"code", "code+prose"} and len(s) == 6
    row = s[(s.composition == "code") & (s["init.gamma"] == 0.8)].iloc[0]
    assert row.final_val_ppl == 22 and row.seeds == 2 and row.tokens_seen == 100 * 4 * 16
    f = t["finals"]
    assert {"train.init_seed", "train.data_seed", "run_id"} <= set(f.columns) and "seed" not in f.columns
    assert f.best_val_ppl.tolist() == f["final.val_ppl"].tolist()   # the lowest after step 0, read from the history
    assert smaller_init_lower_ppl(t) == 0.5          # code falls with every gamma step; code+prose does not
    assert math.isclose(ppl_ratio(t), (40 / 22 + 50 / 45) / 2)
    assert len(t["curves"]) == 3 * len(runs) and t["curves"].tokens.max() == 100 * 4 * 16
    fig = plot_perplexity_curves(t["curves"], t["finals"])
    assert len(fig.axes) == 2 and "final 22" in fig.axes[0].get_legend().get_texts()[2].get_text()

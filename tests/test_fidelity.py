"""Choices that follow the authors' code where the papers are silent (docs/choices.md)."""

import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from anchorlab.cli import main
from anchorlab.config import ConfigError, InitConfig, ModelConfig, OptimConfig, experiment_from_dict, load_config
from anchorlab.model.init import apply_init_rate
from anchorlab.model.transformer import build_model
from anchorlab.train.optim import lr_at, param_groups


@pytest.mark.parametrize("d_model", [64, 400])
def test_embedding_std_per_convention(d_model):
    cfg = ModelConfig(d_model=d_model, d_head=d_model // 2, d_ff=3 * d_model, vocab_size=201, max_len=9)
    gamma = 0.8
    for conv, tok_fan, pos_fan in (("num_embeddings", 201, 9), ("d_model", d_model, d_model)):
        m = build_model(cfg)
        t = apply_init_rate(m, InitConfig(gamma=gamma, embed_fan_in=conv),
                            generator=torch.Generator().manual_seed(0)).set_index("name")
        for name, fan in (("embed.weight", tok_fan), ("pos_embed.weight", pos_fan)):
            assert t.fan_in[name] == fan and t.target_std[name] == pytest.approx(fan ** -gamma)
            assert t.fan_in_rule[name] == ("num_embeddings" if conv == "num_embeddings" else "embedding_dim")
        # measured std of the 201 x d token table within sampling error of the target
        assert t.measured_std["embed.weight"] == pytest.approx(tok_fan ** -gamma, rel=0.08)
        # the other matrices do not depend on the embedding convention
        assert t.fan_in["blocks.0.attn.W_Q.weight"] == d_model and t.fan_in_rule["readout.weight"] == "input_dim"
    # the example: at gamma 0.8, d_model 400 the position table's std differs ~21x
    assert (9 ** -0.8) / (400 ** -0.8) == pytest.approx(20.9, rel=0.01)


def test_paper_presets_use_the_authors_conventions():
    for name in ("neurips/paper", "neurips/complexity", "demo/small", "prediction/cpu", "prediction/paper",
                 "journal/mechanism"):
        c = load_config(name)
        assert c.init.embed_fan_in == "d_model" and c.optim.decay == "all", name
    j = load_config("journal/paper")
    assert (j.model.attn_norm, j.model.d_ff, j.init.bias, j.init.fan_in, j.optim.decay) == \
        ("q", 1280, "pytorch", "d_model", "all")
    assert ModelConfig().attn_norm == "qkv" and InitConfig().bias == "zero" and OptimConfig().decay == "matrices"


def test_decay_groups():
    m = build_model(ModelConfig(d_model=16, d_head=8, d_ff=32))
    wd = lambda cfg: {n: g["weight_decay"] for g in param_groups(m, cfg) for n in g["names"]}  # noqa: E731
    every = wd(OptimConfig(weight_decay=0.1, decay="all"))
    assert set(every.values()) == {0.1} and len(every) == len(list(m.parameters()))
    mats = wd(OptimConfig(weight_decay=0.1, decay="matrices"))
    assert mats["blocks.0.ln_attn.weight"] == 0.0 and mats["readout.bias"] == 0.0 and mats["embed.weight"] == 0.1
    with pytest.raises(ConfigError, match=r"^optim\.decay: must be one of 'all', 'matrices'"):
        experiment_from_dict({}, ["optim.decay=some"])


def test_peak_lr_sets_the_schedule_peak():
    c = OptimConfig(lr=1e-5, peak_lr=2e-4, warmup_epochs=10, warmup_multiplier=25, cosine_epochs=200, min_lr=1e-5)
    assert c.peak == 2e-4
    assert lr_at(10 * 100, 100, c) == pytest.approx(2e-4)            # end of warmup
    assert lr_at(5 * 100, 100, c) == pytest.approx(1e-5 + (2e-4 - 1e-5) / 2)
    assert OptimConfig(lr=1e-5, warmup_multiplier=25).peak == pytest.approx(2.5e-4)
    with pytest.raises(ConfigError, match=r"^optim\.peak_lr: must be >= 1e-05"):
        OptimConfig(lr=1e-5, peak_lr=1e-6)


def test_sweep_dry_run_prints_each_runs_peak_lr(capsys):
    assert main(["sweep", "fig2_paper", "--dry-run", "--out", "/nonexistent/never-written"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "run_id" in line)
    assert "optim.peak_lr" in header and "peak_lr" in header.replace("optim.peak_lr", "")
    rows = [line for line in out.splitlines() if line.split() and len(line.split()[0]) == 12 and line.split()[0] != "run_id"]
    peaks = {float(line.split()[-3]) for line in rows}
    assert len(peaks) == 9 and min(peaks) == pytest.approx(1e-4) and max(peaks) == pytest.approx(3e-4)


def test_pytorch_default_bias_init_is_seeded_and_bounded():
    cfg = ModelConfig(arch="gpt2", d_model=32, n_heads=2, d_head=16, d_ff=64, activation="gelu")
    tables = []
    for seed in (0, 0, 1):
        m = build_model(cfg)
        tables.append((apply_init_rate(m, InitConfig(gamma=0.5, fan_in="d_model", bias="pytorch"),
                                       generator=torch.Generator().manual_seed(seed)), m))
    b = [dict(m.named_parameters())["blocks.0.mlp.W_out.bias"].detach() for _, m in tables]
    assert torch.equal(b[0], b[1]) and not torch.equal(b[0], b[2])
    bound = 1 / math.sqrt(64)                                          # W_out: in_features = d_ff
    assert float(b[0].abs().max()) <= bound and float(b[0].abs().max()) > 0.5 * bound
    t = tables[0][0].set_index("name")
    assert t.fan_in_rule["blocks.0.mlp.W_out.bias"] == "pytorch_default"


def _reference_authors_block(blk, x):
    """The authors' journal block written out: queries from LN(x), keys/values from x; pre-LN FFN."""
    a = blk.attn
    B, T, _ = x.shape
    h = lambda t: t.view(B, T, a.n_heads, a.d_head).transpose(1, 2)  # noqa: E731
    q, k, v = h(a.W_Q(blk.ln_attn(x))), h(a.W_K(x)), h(a.W_V(x))
    s = q @ k.transpose(-1, -2) / math.sqrt(a.d_head)
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -1e9)
    z = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, -1)
    y = x + a.W_O(z)
    return y + blk.mlp.W_out(F.gelu(blk.mlp.W_in(blk.ln_mlp(y))))


def test_authors_block_matches_a_hand_written_reference():
    torch.manual_seed(0)
    cfg = ModelConfig(arch="gpt2", attn_norm="q", n_layers=1, d_model=12, n_heads=3, d_head=4, d_ff=20,
                      activation="gelu", vocab_size=30, max_len=7)
    model = build_model(cfg).double()
    blk = model.blocks[0]
    x = torch.randn(2, 7, 12, dtype=torch.float64) * 3
    torch.testing.assert_close(blk(x), _reference_authors_block(blk, x), rtol=0, atol=1e-12)
    # the textbook block differs on the same weights (keys/values read LN(x) there)
    textbook = build_model(ModelConfig(**{**cfg.__dict__, "attn_norm": "qkv"})).double()
    textbook.load_state_dict(model.state_dict())
    assert (textbook.blocks[0](x) - blk(x)).abs().max() > 1e-3
    # last-position trimming and the KV cache run the same block
    tok = torch.randint(0, 30, (2, 7))
    full = model(tok)
    torch.testing.assert_close(model(tok, last_only=True), full[:, -1], rtol=0, atol=1e-12)
    with pytest.raises(ConfigError, match=r"^model\.attn_norm: 'q' .* needs the pre-LN arch 'gpt2'"):
        ModelConfig(arch="neurips", attn_norm="q")


def test_authors_fig3_metric_definition_reads_pair_columns(tmp_path):
    from anchorlab.sweep.aggregate import AggregateOptions, phase_diagram
    from anchorlab.eval.definitions import METRIC_DEFINITIONS

    d = METRIC_DEFINITIONS["authors-fig3"]
    assert (d.id, d.ood, d.train) == ("acc/12/test", "acc/43/train", "acc/12/seen")
    rows = []
    for rid, g, idv, oodv in (("a", 0.3, 0.95, 0.1), ("b", 0.8, 0.5, 0.9)):
        for metric, v in (("id_acc", 0.99), ("ood_acc", 0.99), ("acc/12/test", idv), ("acc/43/train", oodv),
                          ("commutativity", 0.9)):
            rows.append({"run_id": rid, "status": "finished", "init.gamma": g, "kind": "best", "step": 1,
                         "metric": metric, "value": v})
    df = pd.DataFrame(rows)
    df.attrs["axes"] = ["init.gamma"]
    ours = phase_diagram(df, AggregateOptions(metrics="anchorlab"))
    theirs = phase_diagram(df, AggregateOptions(metrics="authors-fig3"))
    assert list(ours.phase) == [3, 3] and list(theirs.phase) == [2, 1]
    with pytest.raises(ConfigError, match=r"^aggregate\.metrics: must be one of 'anchorlab', 'authors-fig3'"):
        AggregateOptions.from_dict({"metrics": "mine"})

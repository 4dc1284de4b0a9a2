"""Init rate on Hugging Face GPT-2 and on every standard torch layer; unknown module types raise."""

import math

import pytest
import torch
from torch import nn

from anchorlab.config import ConfigError, InitConfig
from anchorlab.model.init import UnknownModuleError, apply_init_rate
from anchorlab.model.roles import CUSTOM, assign_roles, register_module


def _close(measured, target, n):
    # sampling error of a std estimate ~ std / sqrt(2n); allow 6 sigma
    return abs(measured / target - 1) < 6 / math.sqrt(2 * n) + 1e-3


@pytest.fixture(scope="module")
def hf():
    pytest.importorskip("transformers")
    from anchorlab.model.hf_gpt2 import build_hf_gpt2
    from anchorlab.model.hf_gpt2_config import HFGPT2Config

    return lambda **kw: build_hf_gpt2(HFGPT2Config(**{"n_layers": 2, "d_model": 48, "n_heads": 4, "d_ff": 192,
                                                      "max_len": 16, "vocab_size": 300, **kw}))


@pytest.mark.parametrize("gamma", [0.4, 0.9])
def test_conv1d_fan_in_is_dim0_and_measured_std_per_role(hf, gamma):
    m = hf()
    t = apply_init_rate(m, InitConfig(gamma=gamma, residual_scale=True), seed=3).set_index("name")
    blk = "hf.transformer.h.1."
    # Conv1D stores (in, out): c_fc is (48, 192) with fan-in 48; mlp.c_proj is (192, 48) with fan-in 192
    assert tuple(m.hf.transformer.h[1].mlp.c_fc.weight.shape) == (48, 192)
    expected = {"hf.transformer.wte.weight": ("embed", 300, 1.0), "hf.transformer.wpe.weight": ("pos", 16, 1.0),
                blk + "attn.c_attn.weight": ("qkv", 48, 1.0), blk + "attn.c_proj.weight": ("o", 48, 0.5),
                blk + "mlp.c_fc.weight": ("mlp_in", 48, 1.0), blk + "mlp.c_proj.weight": ("mlp_out", 192, 0.5)}
    for name, (role, fan_in, resid) in expected.items():
        r = t.loc[name]
        assert (r.role, r.fan_in) == (role, fan_in), name
        assert math.isclose(r.target_std, fan_in ** -gamma * resid), name   # resid: 1/sqrt(2 * 2 layers)
        assert _close(r.measured_std, r.target_std, r.numel), name
    assert "hf.lm_head.weight" not in t.index            # tied to wte: initialized once, as the embedding
    assert m.hf.lm_head.weight is m.hf.transformer.wte.weight
    assert t.loc[blk + "ln_2.weight", "role"] == "norm" and t.loc[blk + "attn.c_attn.bias", "target_std"] == 0


def test_packed_qkv_slices_take_their_groups_gammas(hf):
    m = hf()
    t = apply_init_rate(m, InitConfig(gamma=0.5, role_gammas={"qk": 1.0}), seed=0).set_index("name")
    w = m.hf.transformer.h[0].attn.c_attn.weight.detach()      # (48, 3 * 48): columns q | k | v
    q, k, v = w.split(48, dim=1)
    n = q.numel()
    assert _close(float(q.std()), 48 ** -1.0, n) and _close(float(k.std()), 48 ** -1.0, n)
    assert _close(float(v.std()), 48 ** -0.5, n)
    row = t.loc["hf.transformer.h.0.attn.c_attn.weight"]
    assert math.isnan(row.gamma) and row.group == "qk,vo"
    assert math.isclose(row.target_std, math.sqrt((2 * 48 ** -2.0 + 48 ** -1.0) / 3))


def test_a_raw_transformers_model_reads_width_and_depth_from_its_config(hf):
    from transformers import GPT2Config, GPT2LMHeadModel

    m = GPT2LMHeadModel(GPT2Config(n_layer=3, n_embd=32, n_head=2, vocab_size=64, n_positions=8,
                                   bos_token_id=None, eos_token_id=None))
    t = apply_init_rate(m, InitConfig(gamma=0.5, residual_scale=True, fan_in="d_model"), seed=0).set_index("name")
    r = t.loc["transformer.h.2.mlp.c_proj.weight"]
    assert r.fan_in == 32 and math.isclose(r.target_std, 32 ** -0.5 / math.sqrt(6))


def test_hf_model_forward_state_dict_and_tie(hf, tmp_path):
    from anchorlab.train.checkpoint import load_weights, save_weights

    m = hf().eval()
    tok = torch.randint(0, 300, (2, 10))
    full = m(tok)
    assert full.shape == (2, 10, 300)
    assert torch.allclose(m(tok, last_only=True), full[:, -1], atol=1e-5)
    assert "hf.lm_head.weight" not in m.state_dict()
    save_weights(tmp_path / "w.safetensors", m)            # no shared tensors in the file
    m2 = load_weights(tmp_path / "w.safetensors", hf())
    assert m2.hf.lm_head.weight is m2.hf.transformer.wte.weight
    assert torch.equal(m2.hf.lm_head.weight, m.hf.transformer.wte.weight)
    with pytest.raises(ValueError, match="max_len"):
        m(torch.zeros(1, 17, dtype=torch.long))


def test_hf_config_errors_name_the_field():
    from anchorlab.model.hf_gpt2_config import HFGPT2Config

    with pytest.raises(ConfigError, match=r"^model\.n_heads: must divide model\.d_model=48"):
        HFGPT2Config(d_model=48, n_heads=5)
    with pytest.raises(ConfigError, match=r"^model\.dropout"):
        HFGPT2Config(dropout=1.0)


class Scaler(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4, 4))


def test_unknown_module_raises_naming_it_and_touches_nothing():
    net = nn.Sequential(nn.Linear(4, 4), nn.Sequential(Scaler()))
    before = net[0].weight.detach().clone()
    with pytest.raises(UnknownModuleError) as e:
        apply_init_rate(net, 0.5)
    msg = str(e.value)
    assert "'1.0.weight'" in msg and "'1.0'" in msg and "Scaler" in msg and "\n" not in msg
    assert torch.equal(net[0].weight, before)               # refused before drawing anything
    with pytest.raises(UnknownModuleError, match="PReLU"):
        apply_init_rate(nn.Sequential(nn.PReLU()), 0.5)
    frozen = nn.Sequential(nn.Linear(4, 4), Scaler().requires_grad_(False))   # e.g. a fixed Fourier projection
    t = apply_init_rate(frozen, 0.5, seed=0).set_index("name")
    assert t.loc["1.weight", "fan_in_rule"] == "frozen" and torch.equal(frozen[1].weight, torch.ones(4, 4))
    try:
        register_module(Scaler, fan_in=lambda mod: mod.weight.shape[1])
        t = apply_init_rate(net, 1.0, seed=0).set_index("name")
        assert t.loc["1.0.weight", "fan_in"] == 4 and math.isclose(t.loc["1.0.weight", "target_std"], 0.25)
    finally:
        CUSTOM.pop(Scaler, None)


def test_every_standard_torch_layer_is_known():
    net = nn.ModuleDict({
        "lin": nn.Linear(8, 4), "c1": nn.Conv1d(4, 6, 3), "c2": nn.Conv2d(4, 6, 3, groups=2), "c3": nn.Conv3d(2, 3, 2),
        "t1": nn.ConvTranspose1d(4, 6, 3), "t2": nn.ConvTranspose2d(8, 4, (3, 2), stride=2, groups=2),
        "t3": nn.ConvTranspose3d(2, 3, 2), "emb": nn.Embedding(20, 8), "bag": nn.EmbeddingBag(30, 8),
        "ln": nn.LayerNorm(8), "gn": nn.GroupNorm(2, 4), "bn": nn.BatchNorm2d(4), "inn": nn.InstanceNorm2d(4, affine=True),
        "rms": nn.RMSNorm(8), "mha": nn.MultiheadAttention(16, 4, add_bias_kv=True),
        "mha_kv": nn.MultiheadAttention(16, 2, kdim=8, vdim=12),
    })
    t = apply_init_rate(net, 0.5, seed=0, bias="gamma").set_index("name")
    fan = t.fan_in.to_dict()
    assert fan["c2.weight"] == 2 * 9 and fan["t2.weight"] == 4 * 6 and fan["t1.weight"] == 4 * 3
    assert fan["emb.weight"] == 20 and fan["bag.weight"] == 30 and fan["lin.weight"] == 8
    assert fan["mha.in_proj_weight"] == 16 and t.loc["mha.in_proj_weight", "role"] == "qkv"
    assert fan["mha_kv.k_proj_weight"] == 8 and fan["mha_kv.v_proj_weight"] == 12
    assert t.loc["mha.out_proj.weight", "role"] == "o" and t.loc["mha.bias_k", "role"] == "bias"
    roles = assign_roles(net)
    assert {roles[f"{n}.weight"] for n in ("ln", "gn", "bn", "inn", "rms")} == {"norm"}
    assert "other" not in roles.values()


def test_missing_extras_fail_with_one_line_naming_the_extra(monkeypatch):
    from anchorlab.model.hf_gpt2 import build_hf_gpt2
    from anchorlab.model.hf_gpt2_config import HFGPT2Config
    from anchorlab.tasks.lm.tokenizer import train_bpe

    monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    monkeypatch.setitem(__import__("sys").modules, "tokenizers", None)
    with pytest.raises(ConfigError, match=r"^model\.arch 'hf_gpt2' needs transformers, which is not installed: "
                                          r"pip install 'anchorlab\[hf\]'$"):
        build_hf_gpt2(HFGPT2Config())
    with pytest.raises(ConfigError, match=r"pip install 'anchorlab\[lm\]'$"):
        train_bpe(["x"], 300)


@pytest.mark.parametrize("gamma", [0.3, 0.8])
def test_embed_std_sets_the_embedding_std_whatever_gamma(hf, gamma):
    m = hf(vocab_size=2000, max_len=256)
    t = apply_init_rate(m, InitConfig(gamma=gamma, embed_std=0.02, residual_scale=True), seed=1).set_index("name")
    for name in ("hf.transformer.wte.weight", "hf.transformer.wpe.weight"):
        r = t.loc[name]
        assert r.target_std == 0.02 and math.isnan(r.gamma) and r.fan_in_rule == "embed_std"
        assert _close(r.measured_std, 0.02, r.numel), (name, r.measured_std)
    # every other weight still follows the init rate
    c_fc = t.loc["hf.transformer.h.0.mlp.c_fc.weight"]
    assert c_fc.gamma == gamma and c_fc.target_std == pytest.approx(48 ** -gamma)
    # None keeps the init rate on the embeddings (fan-in = vocabulary size)
    t0 = apply_init_rate(m, InitConfig(gamma=gamma), seed=1).set_index("name")
    assert t0.loc["hf.transformer.wte.weight"].target_std == pytest.approx(2000 ** -gamma)
    assert t0.loc["hf.transformer.wte.weight"].fan_in_rule == "num_embeddings"


def test_embed_std_on_the_anchorlab_transformer_and_bad_values():
    from anchorlab.config import ModelConfig
    from anchorlab.model.transformer import build_model

    model = build_model(ModelConfig(vocab_size=500, max_len=64, d_model=32, d_head=16, d_ff=64))
    for gamma in (0.3, 0.8):
        t = apply_init_rate(model, InitConfig(gamma=gamma, embed_std=0.05), seed=0).set_index("name")
        emb = t[t.role.isin(["embed", "pos"])]
        assert len(emb) == 2 and (emb.target_std == 0.05).all()
        assert all(_close(v, 0.05, n) for v, n in zip(emb.measured_std, emb.numel))
    for bad, hint in ((0.0, "must be > 0"), (float("nan"), "finite"), (-1.0, "must be > 0")):
        with pytest.raises(ConfigError, match=f"^init.embed_std: .*{hint}"):
            InitConfig(embed_std=bad)

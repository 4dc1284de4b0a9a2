import math

import pytest
import torch
from torch import nn

from anchorlab.config import InitConfig, ModelConfig
from anchorlab.model.init import apply_init_rate
from anchorlab.model.roles import assign_roles
from anchorlab.model.transformer import build_model


@pytest.mark.parametrize("width", [64, 256])
@pytest.mark.parametrize("gamma", [0.3, 0.8])
def test_measured_std_matches_formula_per_role(width, gamma):
    cfg = ModelConfig(n_layers=2, d_model=width, n_heads=1, d_head=width // 2, d_ff=3 * width)
    m = build_model(cfg)
    t = apply_init_rate(m, gamma, seed=1)
    w = t[t.target_std.notna() & (t.target_std > 0)]
    expected = {"embed": 201, "pos": 9, "q": width, "k": width, "v": width, "o": width // 2,
                "mlp_in": width, "mlp_out": 3 * width, "readout": width}
    for r in w.itertuples():
        assert r.fan_in == expected[r.role]
        assert math.isclose(r.target_std, r.fan_in ** -gamma)
        # sampling error of a std estimate ~ std / sqrt(2n); allow 6 sigma
        assert abs(r.measured_std / r.target_std - 1) < 6 / math.sqrt(2 * r.numel) + 1e-3, r.name


def test_every_parameter_has_exactly_one_role():
    for arch in ("neurips", "gpt2"):
        m = build_model(ModelConfig(arch=arch, n_layers=3, d_model=16, d_head=8, d_ff=32))
        roles = assign_roles(m)
        names = [n for n, _ in m.named_parameters()]
        assert sorted(roles) == sorted(names) and len(names) == len(set(names))
        assert roles["blocks.2.attn.W_K.weight"] == "k" and roles["readout.weight"] == "readout"
        assert roles["blocks.0.ln_attn.weight"] == "norm" and roles["blocks.0.mlp.W_in.bias"] == "bias"


def test_role_gammas_conventions_and_bias_policy():
    m = build_model(ModelConfig(n_layers=1, d_model=64, d_head=32, d_ff=128))
    t = apply_init_rate(m, InitConfig(gamma=0.5, role_gammas={"qk": 1.0}, fan_in="d_model", bias="gamma"),
                        generator=torch.Generator().manual_seed(0)).set_index("name")
    assert math.isclose(t.loc["blocks.0.attn.W_Q.weight", "target_std"], 64 ** -1.0)
    assert math.isclose(t.loc["blocks.0.mlp.W_out.weight", "target_std"], 64 ** -0.5)  # d_model, not d_ff
    assert t.loc["blocks.0.attn.W_Q.bias", "target_std"] > 0
    assert float(m.blocks[0].ln_attn.weight.detach().min()) == 1.0


def test_uniform_has_the_same_std_and_seeds_are_reproducible():
    a, b = nn.Linear(512, 512), nn.Linear(512, 512)
    apply_init_rate(a, 0.5, distribution="uniform", seed=3)
    apply_init_rate(b, 0.5, distribution="uniform", seed=3)
    assert torch.equal(a.weight, b.weight)
    assert abs(float(a.weight.detach().std()) / 512 ** -0.5 - 1) < 0.01
    assert float(a.weight.detach().abs().max()) <= math.sqrt(3) * 512 ** -0.5 + 1e-6


def test_works_on_any_module_including_conv_and_embedding():
    net = nn.Sequential(nn.Embedding(50, 32), nn.Linear(32, 16), nn.Conv1d(16, 8, 3), nn.LayerNorm(8))
    t = apply_init_rate(net, 1.0, seed=0).set_index("name")
    assert t.loc["0.weight", "fan_in"] == 50 and t.loc["1.weight", "fan_in"] == 32
    assert t.loc["2.weight", "fan_in"] == 16 * 3
    assert math.isclose(t.loc["2.weight", "target_std"], 1 / 48)
    assert set(t.role) == {"embed", "linear", "conv", "bias", "norm"}

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


def _paper_ratio_model(width: int, n_layers: int = 2) -> nn.Module:
    """The paper's ratios at any width: d_head = d_model / 2, d_ff = 3 d_model (400 / 200 / 1200)."""
    return build_model(ModelConfig(n_layers=n_layers, d_model=width, n_heads=1, d_head=width // 2, d_ff=3 * width))


@pytest.mark.parametrize("embed_fan_in", ["d_model", "num_embeddings"])
def test_ref_width_gives_every_width_the_std_of_the_reference_width(embed_fan_in):
    gamma, ref = 0.8, 400
    init = InitConfig(gamma=gamma, ref_width=ref, embed_fan_in=embed_fan_in)
    at_ref = apply_init_rate(_paper_ratio_model(ref), InitConfig(gamma=gamma, embed_fan_in=embed_fan_in),
                             seed=0).set_index("name")
    for width in (64, 128):
        t = apply_init_rate(_paper_ratio_model(width), init, seed=1).set_index("name")
        w = t[t.target_std > 0]
        assert len(w) == 15   # embed, pos, readout + 2 layers x (q, k, v, o, mlp_in, mlp_out)
        for name, r in w.iterrows():
            # the target is exactly the std the same matrix has at the reference width
            assert math.isclose(r.target_std, at_ref.loc[name, "target_std"], rel_tol=1e-12), (width, name)
            assert math.isclose(r.target_std, r.std_fan_in ** -gamma) and r.ref_width == ref
            # and the drawn tensor has it, within the sampling error of a std (6 sigma)
            assert abs(r.measured_std / r.target_std - 1) < 6 / math.sqrt(2 * r.numel) + 1e-3, (width, name)
        # width fan-ins are read at the reference width; one-hot widths (vocabulary, positions) are kept
        assert t.loc["blocks.0.attn.W_Q.weight", "std_fan_in"] == ref
        assert t.loc["blocks.1.mlp.W_out.weight", "std_fan_in"] == 3 * ref
        assert t.loc["pos_embed.weight", "std_fan_in"] == (ref if embed_fan_in == "d_model" else 9)
        assert t.loc["blocks.0.attn.W_Q.weight", "fan_in"] == width   # the true fan-in is still reported


def test_ref_width_equal_to_d_model_changes_nothing():
    a, b = _paper_ratio_model(128), _paper_ratio_model(128)
    ta = apply_init_rate(a, InitConfig(gamma=0.5, embed_fan_in="d_model"), seed=2)
    tb = apply_init_rate(b, InitConfig(gamma=0.5, embed_fan_in="d_model", ref_width=128), seed=2)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert ta.target_std.equals(tb.target_std) and ta.ref_width.isna().all() and (tb.ref_width.dropna() == 128).all()


def test_ref_width_validation_and_run_ids():
    from anchorlab.config import ConfigError, experiment_from_dict

    for bad in (0, -5, 1.5, "wide", True):
        with pytest.raises(ConfigError, match="init.ref_width"):
            experiment_from_dict({"init": {"ref_width": bad}})
    with pytest.raises(ConfigError, match="init.ref_width: 400 needs the model width"):
        apply_init_rate(nn.Sequential(nn.Linear(8, 8)), InitConfig(gamma=0.5, ref_width=400), seed=0)
    plain = experiment_from_dict({})
    assert experiment_from_dict({"init": {"ref_width": None}}).run_id() == plain.run_id()   # unset: ids unchanged
    assert experiment_from_dict({"init": {"ref_width": 400}}).run_id() != plain.run_id()

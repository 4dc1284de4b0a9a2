"""The mup-style coordinate check: measured init std and activation scales across widths."""

import math

import pytest
import torch

from anchorlab.analysis.coord_check import CoordCheckOptions, coord_check, slopes, widen
from anchorlab.config import ConfigError, InitConfig, ModelConfig
from anchorlab.tasks.lm.task import next_token_loss

WIDTHS = (32, 64, 128)


@pytest.fixture(scope="module")
def hf_tables():
    pytest.importorskip("transformers")
    from anchorlab.model.hf_gpt2_config import HFGPT2Config

    cfg = HFGPT2Config(n_layers=2, d_model=32, n_heads=4, d_ff=128, max_len=32, vocab_size=256)
    batch = {"tokens": torch.randint(0, 256, (4, 33), generator=torch.Generator().manual_seed(0))}
    return {g: coord_check(cfg, InitConfig(gamma=g, residual_scale=True), batch,
                           lambda m, b: next_token_loss(m, b["tokens"]), WIDTHS, steps=2, lr=1e-3)
            for g in (0.5, 1.0)}


def test_init_std_is_measured_at_every_width_and_follows_fan_in(hf_tables):
    init = hf_tables[1.0]["init"]
    assert sorted(init.width.unique()) == list(WIDTHS)
    for r in init.itertuples():
        assert abs(r.measured_std / r.target_std - 1) < 6 / math.sqrt(2 * r.numel) + 1e-3, (r.width, r.name)
    qkv = init[init.name.str.endswith("h.0.attn.c_attn.weight")].set_index("width")
    assert list(qkv.fan_in) == list(WIDTHS)                     # Conv1D fan-in = d_model (dim 0), not 3 d_model
    assert math.isclose(qkv.target_std[32] / qkv.target_std[128], 4.0)   # std ~ width^-1 at gamma 1


def test_activation_scales_follow_fan_in_power(hf_tables):
    # LN output has unit coordinates, so q/k/v and the MLP pre-activation scale as width^(1/2 - gamma) at init
    for gamma, expect in ((0.5, 0.0), (1.0, -0.5)):
        s = slopes(hf_tables[gamma]["activations"]).set_index(["step", "role"]).slope
        assert abs(s[(0, "qkv")] - expect) < 0.08, (gamma, s[(0, "qkv")])
        assert abs(s[(0, "mlp_in")] - expect) < 0.08, (gamma, s[(0, "mlp_in")])
        assert abs(s[(0, "embed")]) < 0.05                      # token embedding std fixed by the vocabulary
    acts = hf_tables[0.5]["activations"]
    assert set(acts.step) == {0, 1, 2} and {"qkv", "o", "mlp_in", "mlp_out", "logits"} <= set(acts.role)
    assert (acts.n_modules[acts.role == "qkv"] == 2).all()      # averaged over both layers
    first = acts[acts.step == 0].groupby("width").loss.first()
    last = acts[acts.step == 2].groupby("width").loss.first()
    assert (last < first).all()                                 # the few steps do train


def test_figure_and_widen():
    from anchorlab.plots.coord_check import coord_check_figure

    batch = {"tokens": torch.randint(0, 20, (2, 9), generator=torch.Generator().manual_seed(1))}
    cfg = ModelConfig(arch="gpt2", n_layers=1, d_model=16, n_heads=2, d_head=8, d_ff=32, max_len=8, vocab_size=20)
    t = coord_check(cfg, InitConfig(gamma=0.5), batch, lambda m, b: next_token_loss(m, b["tokens"]), (16, 32, 64),
                    steps=1)
    assert {"q", "k", "v", "o", "mlp_in", "mlp_out", "embed", "pos", "logits"} <= set(t["activations"].role)
    fig = coord_check_figure(t, None, "tiny")
    assert len([a for a in fig.axes if a.get_visible()]) == 1 + t["activations"].role.nunique()
    w = widen(cfg, 64)
    assert (w.d_model, w.d_ff, w.d_head, w.n_heads) == (64, 128, 32, 2)
    with pytest.raises(ConfigError, match="widths"):
        CoordCheckOptions(widths=(64,))


def test_coord_check_of_a_run_through_the_analysis_registry(tmp_path, tiny_overrides):
    from anchorlab.analysis.registry import run_analysis
    from anchorlab.config import load_config
    from anchorlab.train import train

    cfg = load_config("demo/small", tiny_overrides + ["train.epochs=0.1"])
    train(cfg, tmp_path / "run")
    paths = run_analysis(tmp_path / "run", "coord-check", options=["widths=[16,32,64]", "steps=1", "batch_size=4"])
    assert paths["png"].exists() and paths["init"].exists() and paths["slopes"].exists()
    import pandas as pd

    acts = pd.read_csv(paths["csv"])
    assert sorted(acts.width.unique()) == [16, 32, 64] and set(acts.step) == {0, 1}

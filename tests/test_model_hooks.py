import pytest
import torch

from anchorlab.config import ModelConfig
from anchorlab.model.hooks import hooks
from anchorlab.model.init import apply_init_rate
from anchorlab.model.transformer import build_model


def _model(arch="neurips", **kw):
    cfg = ModelConfig(arch=arch, n_layers=2, d_model=32, n_heads=2, d_head=8, d_ff=48, **kw)
    m = build_model(cfg)
    apply_init_rate(m, 0.5, seed=0)
    return m.eval()


def _tokens(n=5, seed=0):
    return torch.randint(20, 100, (n, 9), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ["neurips", "gpt2"])
def test_noop_hooks_change_nothing_and_cache_keys_are_hook_names(arch):
    m, x = _model(arch), _tokens()
    ref = m(x)
    with hooks(m, [(lambda n: True, lambda t, n: None)]):
        same = m(x)
    assert torch.equal(ref, same)
    logits, cache = m.run_with_cache(x)
    assert torch.equal(logits, ref)
    assert set(cache) == set(m.hook_names)
    for name in ["hook_embed", "blocks.0.attn.hook_q", "blocks.1.attn.hook_pattern", "blocks.0.attn.hook_scores",
                 "blocks.0.attn.hook_qkv", "blocks.0.hook_ao", "blocks.1.mlp.hook_in", "blocks.1.mlp.hook_out",
                 "blocks.1.hook_do", "hook_logits"]:
        assert name in cache
    assert cache["blocks.0.attn.hook_pattern"].shape == (5, 2, 9, 9)
    # no hooks remain after the context
    assert all(len(mod._forward_hooks) == 0 for mod in m.modules())


def test_hook_values_match_the_equations():
    m, x = _model(), _tokens()
    _, c = m.run_with_cache(x)
    pat = c["blocks.0.attn.hook_pattern"]
    assert torch.allclose(pat.sum(-1), torch.ones_like(pat.sum(-1)))
    assert (pat.triu(1) == 0).all()  # causal
    b = m.blocks[0]
    # post-LN: X_ao = LN(X + X_qkv W_O)
    x_ao = b.ln_attn(c["hook_resid_in"] + b.attn.W_O(c["blocks.0.attn.hook_qkv"]))
    assert torch.allclose(x_ao, c["blocks.0.hook_ao"], atol=1e-6)
    x_do = b.ln_mlp(c["blocks.0.mlp.hook_out"] + c["blocks.0.hook_ao"])
    assert torch.allclose(x_do, c["blocks.0.hook_do"], atol=1e-6)


def test_intervention_replaces_activation_and_last_only_matches():
    m, x = _model(), _tokens()
    full = m(x)
    assert torch.allclose(m(x, last_only=True), full[:, -1], atol=1e-6)

    def uniform(t, name):
        T = t.shape[-1]
        return torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1).unsqueeze(1)

    with hooks(m, [("blocks.1.attn.hook_pattern", uniform)]):
        changed = m(x)
    assert not torch.allclose(changed, full)
    with pytest.raises(KeyError, match="valid names"):
        with hooks(m, [("blocks.9.attn.hook_pattern", uniform)]):
            pass


@pytest.mark.parametrize("arch", ["neurips", "gpt2"])
@pytest.mark.parametrize("n_layers", [1, 3])
def test_last_only_skips_work_but_keeps_logits_and_gradients(arch, n_layers):
    cfg = ModelConfig(arch=arch, n_layers=n_layers, d_model=32, n_heads=2, d_head=8, d_ff=48)
    m = build_model(cfg).double()
    apply_init_rate(m, 0.4, seed=1)
    x, y = _tokens(7, seed=3), torch.randint(20, 100, (7,), generator=torch.Generator().manual_seed(4))
    grads = []
    for last_only in (False, True):
        m.zero_grad()
        out = m(x, last_only=last_only)
        logits = out if last_only else out[:, -1]
        torch.nn.functional.cross_entropy(logits, y).backward()
        grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
        if last_only:
            assert torch.allclose(logits, ref, atol=1e-12)
        ref = logits.detach()
    for n in grads[0]:
        assert torch.allclose(grads[0][n], grads[1][n], atol=1e-12), n
    # the last block really works on one query position
    _, c = m.run_with_cache(x, last_only=True)
    last = n_layers - 1
    assert c[f"blocks.{last}.attn.hook_pattern"].shape == (7, 2, 1, 9)
    assert c[f"blocks.{last}.hook_do"].shape == (7, 1, 32)
    if n_layers > 1:
        assert c["blocks.0.attn.hook_pattern"].shape == (7, 2, 9, 9)

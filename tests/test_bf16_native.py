"""train.bf16_path=native: the bfloat16 primitives, the weight cache, and the forward against float32."""

import copy

import pytest
import torch

from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.model.bf16 import BF16, WeightCache, native_bf16
from anchorlab.model.hooks import hooks
from anchorlab.model.transformer import build_model
from anchorlab.train.precision import Precision, step_context

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def tiny_model(arch: str = "neurips", seed: int = 0, device: str = "cpu") -> torch.nn.Module:
    cfg = experiment_from_dict({}, ["model.d_model=32", "model.d_head=16", "model.n_heads=2", "model.d_ff=64",
                                    f"model.arch={arch}"])
    torch.manual_seed(seed)
    return build_model(cfg.model).to(device)


def tokens(model, B=16, seed=1, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.cfg.vocab_size, (B, 9), generator=g).to(device)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().float() - b.detach().float()).norm() / b.detach().float().norm())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("arch", ["neurips", "gpt2"])
@pytest.mark.parametrize("last_only", [True, False])
def test_native_forward_is_close_to_float32_and_returns_float32_logits(arch, last_only, device):
    m = tiny_model(arch, device=device)
    tok = tokens(m, device=device)
    ref = m(tok, last_only=last_only)
    with native_bf16(WeightCache(m)):
        out = m(tok, last_only=last_only)
    assert out.dtype == torch.float32 and out.shape == ref.shape
    assert not torch.equal(out, ref)                # it did compute in bfloat16
    assert rel(out, ref) < 2e-2                     # bf16 has 8 mantissa bits: ~0.4% per rounding, a few in a row


@pytest.mark.parametrize("arch", ["neurips", "gpt2"])
def test_native_gradients_are_float32_and_close_to_float32_gradients(arch):
    m = tiny_model(arch)
    n = copy.deepcopy(m)
    tok, y = tokens(m), torch.randint(0, m.cfg.vocab_size, (16,))
    torch.nn.functional.cross_entropy(m(tok, last_only=True), y).backward()
    with native_bf16(WeightCache(n)):
        loss = torch.nn.functional.cross_entropy(n(tok, last_only=True), y)
    loss.backward()
    for (name, p), q in zip(m.named_parameters(), n.parameters()):
        assert q.dtype == torch.float32 and q.grad is not None and q.grad.dtype == torch.float32, name
        if p.grad.norm() > 1e-6:
            cos = torch.nn.functional.cosine_similarity(p.grad.flatten(), q.grad.flatten(), dim=0)
            assert cos > 0.98, (name, float(cos))         # measured >= 0.995
            assert rel(q.grad, p.grad) < 0.25, name       # measured <= 0.1 (a LayerNorm bias of the gpt2 block)


def test_outside_the_context_the_forward_is_the_float32_forward_bit_for_bit():
    m = tiny_model()
    tok = tokens(m)
    before = m(tok)
    with native_bf16(WeightCache(m)):
        m(tok)
    assert torch.equal(m(tok), before)


def test_the_weight_cache_holds_bf16_copies_of_the_current_masters_after_each_optimizer_step():
    """Train a few steps reusing one cache; each step's native forward must equal the forward of a fresh
    cache made from the current masters (a cache that kept the step-0 copies would differ)."""
    m = tiny_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    cache = WeightCache(m)
    ctx = native_bf16(cache)
    tok, y = tokens(m), torch.randint(0, m.cfg.vocab_size, (16,))
    seen = []
    for _ in range(3):
        with ctx:
            out = m(tok, last_only=True)
        with native_bf16(WeightCache(m)):
            fresh = m(tok, last_only=True)
        assert torch.equal(out, fresh)
        seen.append(out.detach())
        opt.zero_grad()
        with ctx:
            torch.nn.functional.cross_entropy(m(tok, last_only=True), y).backward()
        opt.step()
    assert not torch.equal(seen[0], seen[-1])            # the weights moved, so a stale cache would show
    assert cache.refreshes == 3 * len(cache.linears)     # once per optimizer step, not once per forward
    for lin in cache.linears:
        w16, wt16, b16 = cache.copies(lin)
        assert w16.dtype == wt16.dtype == b16.dtype == BF16 and lin.weight.dtype == torch.float32
        assert torch.equal(w16, lin.weight.detach().to(BF16)) and torch.equal(b16, lin.bias.detach().to(BF16))
        assert torch.equal(wt16, w16.t()) and wt16.is_contiguous() == cache.transposed_copy


@pytest.mark.parametrize("transposed_copy", [True, False])
def test_each_layout_of_w_t_gives_the_per_linear_casts_and_the_same_forward(transposed_copy):
    """A contiguous copy of W.T (the AMX default) or W's transposed view (elsewhere): the cache's copies are
    each linear's own cast, and the forward and gradients agree with the other layout's to bf16 rounding
    (on the AVX512-BF16 EPYC of docs/engine.md, to the bit)."""
    m = tiny_model()
    tok = tokens(m)
    cache = WeightCache(m, transposed_copy=transposed_copy)
    for lin in cache.linears:
        w16, wt16, b16 = cache.copies(lin)
        assert wt16.is_contiguous() == transposed_copy and (wt16._base is w16) != transposed_copy
        assert torch.equal(wt16, lin.weight.detach().t().to(BF16)) and torch.equal(b16, lin.bias.detach().to(BF16))
    outs = []
    for t in (transposed_copy, not transposed_copy):
        m.zero_grad()
        with native_bf16(WeightCache(m, transposed_copy=t)):
            out = m(tok, last_only=True)
        out.square().sum().backward()
        outs.append((out.detach(), m.embed.weight.grad.clone()))
    assert rel(outs[0][0], outs[1][0]) < 1e-2 and rel(outs[0][1], outs[1][1]) < 1e-2


def test_one_stale_linear_refreshes_every_stale_linear_and_only_those():
    m = tiny_model()
    cache = WeightCache(m)
    first = cache.copies(cache.linears[0])
    assert cache.refreshes == len(cache.linears)          # all made at the first call
    with torch.no_grad():
        cache.linears[1].weight.add_(1.0)
    assert cache.copies(cache.linears[0]) is first        # not stale: the same copies
    assert cache.refreshes == len(cache.linears)
    w16 = cache.get(cache.linears[1])[0]
    assert cache.refreshes == len(cache.linears) + 1 and torch.equal(w16, cache.linears[1].weight.detach().to(BF16))


@pytest.mark.parametrize("amx,wt,copy", [(True, "auto", True), (False, "auto", False), (False, "copy", True),
                                          (True, "view", False)])
def test_the_training_step_copies_w_t_as_train_bf16_wt_says(monkeypatch, amx, wt, copy):
    """``auto``: the contiguous copy on a CPU with AMX only; ``copy`` / ``view`` wherever asked."""
    from anchorlab.train import precision as prec
    monkeypatch.setattr(prec, "cpu_matrix_units", lambda: prec.CpuMatrixUnits("AVX512", amx, True))
    ctx = step_context(Precision("bf16", "bf16", "test", path="native"), torch.device("cpu"), tiny_model(), wt=wt)
    assert ctx.weights.transposed_copy is copy


def test_train_bf16_wt_is_checked_in_one_line_and_left_out_of_the_run_id():
    base = {"task": {"name": "anchor"}, "train": {"amp": "bf16", "bf16_path": "native"}}
    with pytest.raises(ConfigError, match=r"train\.bf16_wt: must be one of 'auto', 'copy', 'view', got 'tall'"):
        experiment_from_dict({**base, "train": {**base["train"], "bf16_wt": "tall"}})
    ids = {experiment_from_dict({**base, "train": {**base["train"], "bf16_wt": w}}).run_id() for w in ("auto", "copy", "view")}
    assert len(ids) == 1


def test_the_cache_refreshes_after_load_state_dict():
    m, other = tiny_model(seed=0), tiny_model(seed=1)
    tok = tokens(m)
    cache = WeightCache(m)
    with native_bf16(cache):
        m(tok)
    m.load_state_dict(other.state_dict())
    with native_bf16(cache):
        a = m(tok)
    with native_bf16(WeightCache(other)):
        b = other(tok)
    assert torch.equal(a, b)


def test_hooks_see_bfloat16_activations_and_can_edit_them():
    m = tiny_model()
    tok = tokens(m)
    seen = {}

    def grab(x, name):
        seen[name] = x.dtype

    def zero(x, name):
        return torch.zeros_like(x)

    with native_bf16(WeightCache(m)):
        with hooks(m, [(lambda n: True, grab)]):
            m(tok)
        clean = m(tok)
        with hooks(m, [("blocks.1.mlp.hook_out", zero)]):
            edited = m(tok)
    assert seen["blocks.0.attn.hook_pattern"] == seen["blocks.1.hook_do"] == BF16
    assert seen["hook_embed"] == torch.float32 and seen["hook_logits"] == torch.float32
    assert not torch.equal(clean, edited)


def test_native_needs_a_model_with_the_native_path_and_no_compile():
    p = Precision("bf16", "bf16", "test", path="native")
    with pytest.raises(ConfigError, match=r"train\.bf16_path.*Linear.*'autocast'"):
        step_context(p, torch.device("cpu"), torch.nn.Linear(2, 2))
    with pytest.raises(ConfigError, match=r"train\.compile"):
        step_context(p, torch.device("cpu"), tiny_model(), compiled=True)
    assert isinstance(step_context(p, torch.device("cpu"), tiny_model()), native_bf16)
    assert not isinstance(step_context(Precision("bf16", "bf16", "test"), torch.device("cpu"), tiny_model()),
                          native_bf16)


def test_precision_path_is_checked():
    with pytest.raises(ValueError, match=r"Precision\.path"):
        Precision("bf16", "bf16", "test", path="fp16")
    assert Precision("none", "none", "test", path="native").path == "fp32"


def test_linear_without_signature_binding_builds_the_same_graph_and_gradients_as_function_apply():
    from anchorlab.model.bf16 import _apply, _Linear
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8)
    w16, wt16, b16 = WeightCache(lin).copies(lin)
    x = torch.randn(4, 3, 16).to(BF16)
    outs, grads = [], []
    for call in (lambda *a: _Linear.apply(*a), lambda *a: _apply(_Linear, *a)):
        lin.zero_grad()
        xi = x.clone().requires_grad_()
        out = call(xi, lin.weight, lin.bias, w16, wt16, b16)
        assert type(out.grad_fn).__name__ == "_LinearBackward"
        out.float().square().sum().backward()
        outs.append(out)
        grads.append((xi.grad, lin.weight.grad.clone(), lin.bias.grad.clone()))
    assert torch.equal(outs[0], outs[1])
    assert all(torch.equal(a, b) for a, b in zip(*grads))
    batched = torch.vmap(lambda t: _apply(_Linear, t, lin.weight, lin.bias, w16, wt16, b16))(x)   # through Function.apply
    assert batched.dtype == BF16 and rel(batched, outs[0]) < 1e-2     # a batched GEMM: bfloat16 roundings differ


def test_a_parametrized_linear_is_cached_from_its_current_weight():
    """A linear whose weight is a parametrization (not in ``_parameters``) is keyed and cast like any other
    (staleness is keyed on the computed weight, as before the cache read ``_parameters``)."""
    from torch.nn.utils import parametrize

    class Double(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    lin = torch.nn.Linear(8, 4)
    parametrize.register_parametrization(lin, "weight", Double())
    cache = WeightCache(lin)
    w16, wt16, b16 = cache.copies(lin)
    assert torch.equal(w16, lin.weight.detach().to(BF16)) and torch.equal(wt16, w16.t())
    assert torch.equal(b16, lin.bias.detach().to(BF16))


@pytest.mark.parametrize("transposed_copy", [True, False])
def test_the_stack_passes_each_models_bias_copy_and_w_t_in_the_asked_layout(monkeypatch, transposed_copy):
    """The stack's weight copies (train/stack_ops.py): per linear ``(W, W.T, b)`` in bfloat16, W.T contiguous
    only where asked, and the losses those copies give are each model's own on the single path."""
    from anchorlab.tasks.base import build_task
    from anchorlab.train import stack_ops
    models = [tiny_model(seed=s) for s in (0, 1)]
    task = build_task(experiment_from_dict({}, ["task.n_train=64", "task.n_eval_per_group=4"]).task)
    batch = task.train_data(0).batch(torch.arange(16))
    seen = []

    class spy(native_bf16):
        def __init__(self, weights):
            seen.append({lin: tuple(torch._C._functorch.get_unwrapped(t) if t is not None else None for t in e)
                         for lin, e in weights.items()})
            super().__init__(weights)

    monkeypatch.setattr(stack_ops, "native_bf16", spy)
    stack = stack_ops.StackedParams(models, torch.device("cpu"))
    losses = stack_ops.native_losses(models[0], task, True, transposed_copy)(stack.params, batch)
    for lin, (w16, wt16, b16) in seen[0].items():
        assert w16.dtype == wt16.dtype == b16.dtype == BF16 and b16.shape == (2, lin.out_features)
        assert wt16.is_contiguous() == transposed_copy and torch.equal(wt16, w16.transpose(1, 2))
    for g, m in enumerate(models):
        with native_bf16(WeightCache(m, transposed_copy=transposed_copy)):
            alone = task.loss(m, batch)
        assert float(losses[g].detach()) == pytest.approx(float(alone), rel=1e-2)

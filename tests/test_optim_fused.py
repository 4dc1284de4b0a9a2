"""``optim.fused``: torch's fused AdamW kernel, opt-in, in the run id only when on, refused by a stack."""

import contextlib

import pytest
import torch
import yaml

from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.tasks.base import build_task
from anchorlab.train import train
from anchorlab.train.optim import make_optimizer
from anchorlab.train.run import init_model
from anchorlab.train.single import train_step
from anchorlab.train.stacked import check_stackable, should_stack


def _train_steps(cfg, n=6):
    task = build_task(cfg.task)
    data = task.train_data(0)
    model, _ = init_model(cfg)
    opt = make_optimizer(model, cfg.optim)
    losses = [train_step(model, model, opt, task, data.batch(torch.arange(i * 64, (i + 1) * 64)),
                         contextlib.nullcontext(), cfg.optim.clip_norm).item() for i in range(n)]
    return opt, losses, model.state_dict()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_adamw_makes_the_foreach_update_to_rounding(tiny_overrides, dtype):
    """Five steps on the same gradients (drawn, not computed, so training's chaos cannot amplify a last-bit
    difference: the key bias, whose true gradient is zero, moves on rounding noise): the fused kernel puts
    every parameter where foreach does, to rounding."""
    over = tiny_overrides + ["optim.weight_decay=0.1", "optim.decay=matrices", f"train.dtype={dtype}"]
    params = {}
    for fused in (False, True):
        cfg = experiment_from_dict({}, over + [f"optim.fused={str(fused).lower()}"])
        model, _ = init_model(cfg)
        opt = make_optimizer(model, cfg.optim)
        assert bool(opt.defaults["fused"]) is fused and bool(opt.defaults["foreach"]) is (not fused)
        gen = torch.Generator().manual_seed(0)
        for _ in range(5):
            for p in model.parameters():
                p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype) * 1e-3
            opt.step()
        params[fused] = {k: v.detach().clone() for k, v in model.named_parameters()}
    w0 = dict(init_model(experiment_from_dict({}, over))[0].named_parameters())
    eps = torch.finfo(getattr(torch, dtype)).eps
    for k, a in params[False].items():
        b, moved = params[True][k], (params[False][k] - w0[k]).abs().max()
        assert moved > 0, k
        assert (b - a).abs().max() <= 16 * eps * max(1.0, float(a.abs().max())), k


def test_fused_training_follows_foreach(tiny_overrides):
    over = tiny_overrides + ["optim.weight_decay=0.1"]
    la = _train_steps(experiment_from_dict({}, over))[1]
    lb = _train_steps(experiment_from_dict({}, over + ["optim.fused=true"]))[1]
    assert la[0] == lb[0] and la[-1] < la[0]
    assert lb == pytest.approx(la, rel=1e-3)


def test_fused_is_in_the_run_id_only_when_on():
    base = experiment_from_dict({})
    assert experiment_from_dict({}, ["optim.fused=false"]).run_id() == base.run_id()
    assert experiment_from_dict({}, ["optim.fused=true"]).run_id() != base.run_id()
    with pytest.raises(ConfigError, match=r"^optim\.fused: expected true or false"):
        experiment_from_dict({}, ["optim.fused=yes please"])


def test_a_stack_refuses_fused_runs_and_the_sweep_trains_them_one_by_one(tiny_overrides):
    cfgs = [experiment_from_dict({}, tiny_overrides + [f"train.init_seed={s}", "optim.fused=true"]) for s in (0, 1)]
    with pytest.raises(ConfigError, match=r"^optim\.fused: .*config 0 has true"):
        check_stackable(cfgs)
    assert not should_stack(cfgs, "cpu")


def test_a_fused_run_trains_and_records_the_choice(tmp_path, tiny_overrides):
    cfg = experiment_from_dict({}, tiny_overrides + ["optim.fused=true", "train.epochs=0.5"])
    res = train(cfg, tmp_path / "run")
    assert res.final["status"] == "finished"
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["optim"]["fused"] is True


@pytest.mark.parametrize("flat", [False, True])
def test_a_fused_step_moves_the_parameters_version_counters(tiny_overrides, flat):
    """torch's fused kernel writes the parameters without moving their version counters; FusedAdamW (and the
    flat optimizer over it) moves them, as the foreach update does, so a cache keyed on them sees the step."""
    from anchorlab.train.flat import FlatAdamW

    cfg = experiment_from_dict({}, tiny_overrides + ["optim.fused=true"])
    model, _ = init_model(cfg)
    opt = make_optimizer(model, cfg.optim)
    if flat:
        opt = FlatAdamW.from_optimizer(model, opt)
    for p in model.parameters():
        p.grad = torch.full_like(p, 1e-3)
    before = {n: p._version for n, p in model.named_parameters()}
    opt.step()
    assert all(p._version > before[n] for n, p in model.named_parameters())


@pytest.mark.parametrize("flat", [False, True])
def test_native_bf16_with_fused_adamw_trains_on_the_updated_weights(tiny_overrides, flat):
    """On the native bfloat16 path the forward multiplies the weight cache's copies: with the fused update
    they follow the masters step by step, and training follows the foreach run's (it did not before
    FusedAdamW: the copies stayed at the init and the losses parted from the first steps)."""
    from anchorlab.model.bf16 import BF16
    from anchorlab.train.flat import FlatAdamW
    from anchorlab.train.precision import Precision, step_context

    over = tiny_overrides + ["train.amp=bf16", "train.bf16_path=native"]
    losses = {}
    for fused in (False, True):
        cfg = experiment_from_dict({}, over + [f"optim.fused={str(fused).lower()}"])
        task = build_task(cfg.task)
        data = task.train_data(0)
        model, _ = init_model(cfg)
        opt = make_optimizer(model, cfg.optim)
        opt = FlatAdamW.from_optimizer(model, opt) if flat else opt
        ctx = step_context(Precision("bf16", "bf16", "test", path="native"), torch.device("cpu"), model)
        losses[fused] = [train_step(model, model, opt, task, data.batch(torch.arange(i * 64, (i + 1) * 64)),
                                    ctx, cfg.optim.clip_norm).item() for i in range(8)]
        lin = ctx.weights.linears[0]
        assert torch.equal(ctx.weights.get(lin)[0], lin.weight.detach().to(BF16))
    assert losses[True] == pytest.approx(losses[False], rel=2e-3) and losses[True][-1] < losses[True][0]


def test_the_loop_refreshes_the_native_copies_whatever_writes_the_masters(tiny_overrides):
    """The training loop casts the native path's copies again after each optimizer step, so an optimizer that
    does not move the parameters' version counters (torch's own fused AdamW, not FusedAdamW) trains on the
    updated weights; the copies are the masters' casts after every step."""
    from anchorlab.model.bf16 import BF16
    from anchorlab.train.precision import Precision, step_context

    cfg = experiment_from_dict({}, tiny_overrides + ["train.amp=bf16", "train.bf16_path=native"])
    task = build_task(cfg.task)
    data = task.train_data(0)
    model, _ = init_model(cfg)
    raw = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)    # moves no version counter
    ctx = step_context(Precision("bf16", "bf16", "test", path="native"), torch.device("cpu"), model)
    assert ctx.weights.managed
    versions = [p._version for p in model.parameters()]
    for i in range(3):
        train_step(model, model, raw, task, data.batch(torch.arange(i * 64, (i + 1) * 64)), ctx, 0.0)
        for lin in ctx.weights.linears:
            w16, _, b16 = ctx.weights.copies(lin)
            assert torch.equal(w16, lin.weight.detach().to(BF16))
            assert b16 is None or torch.equal(b16, lin.bias.detach().to(BF16))
    assert [p._version for p in model.parameters()] == versions         # the counters never moved
    # a cache on its own (not managed) still reads the counters, and so misses such an update
    from anchorlab.model.bf16 import WeightCache

    alone = WeightCache(model)
    lin = alone.linears[0]
    before = alone.get(lin)[0].clone()
    with torch.no_grad():
        torch._foreach_add_([lin.weight.data], [torch.ones_like(lin.weight)])   # .data: no counter moved
    assert torch.equal(alone.get(lin)[0], before)

"""train.flat_params: clipping and AdamW over flat buffers give the per-tensor update's bits, resume across the
setting, hand over to the per-tensor AdamW when a parameter has no gradient, and keep tied weights tied."""

import contextlib

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from anchorlab.config import experiment_from_dict
from anchorlab.tasks.base import build_task
from anchorlab.train import train
from anchorlab.train.flat import FlatAdamW, clip_gradients
from anchorlab.train.optim import make_optimizer
from anchorlab.train.precision import resolve_precision, step_context
from anchorlab.train.run import init_model
from anchorlab.train.single import train_step

# 1024 / 64 = 16 steps per epoch, 2 epochs -> 32 steps, evaluated every 8; clipping bites at this lr
TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=64", "train.epochs=2", "train.eval_every=8", "optim.lr=1e-3", "optim.warmup_epochs=0.5",
        "optim.warmup_multiplier=2", "optim.cosine_epochs=1.5", "optim.min_lr=1e-4", "train.threads=1",
        "optim.weight_decay=0.1", "optim.decay=matrices", "optim.clip_norm=0.05"]
PATHS = {"fp32": ["train.amp=none"], "native": ["train.amp=bf16", "train.bf16_path=native"],
         "autocast": ["train.amp=bf16", "train.bf16_path=autocast"], "fp32, fused AdamW": ["train.amp=none", "optim.fused=true"]}


def _run(cfg, out):
    final = train(cfg, out).final
    return [h["train_loss"] for h in final["history"][1:]], load_file(str(out / "model.safetensors"))


@pytest.mark.parametrize("path", sorted(PATHS))
def test_flat_training_is_the_per_tensor_training_to_the_bit(tmp_path, path):
    runs = {}
    for flat in (True, False):
        cfg = experiment_from_dict({}, TINY + PATHS[path] + [f"train.flat_params={flat}"])
        runs[flat] = _run(cfg, tmp_path / str(flat))
    (la, wa), (lb, wb) = runs[True], runs[False]
    assert la == lb and len(set(la)) == len(la) == 4
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_flat_and_per_tensor_runs_share_a_run_id():
    a, b = (experiment_from_dict({}, TINY + [f"train.flat_params={f}"]) for f in (True, False))
    assert a.run_id() == b.run_id()


@pytest.mark.parametrize("first", [True, False])
def test_a_run_resumes_across_the_setting_to_the_bit(tmp_path, first):
    """Stopped with one setting, resumed with the other: the checkpoint holds the per-tensor AdamW state."""
    cfg = experiment_from_dict({}, TINY + ["train.amp=none"])
    full = _run(cfg, tmp_path / "full")
    stop = experiment_from_dict({}, TINY + ["train.amp=none", f"train.flat_params={first}"])
    go = experiment_from_dict({}, TINY + ["train.amp=none", f"train.flat_params={not first}"])
    train(stop, tmp_path / "resumed", stop_after_step=16)
    ck = torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=True)["optimizer"]
    assert len(ck["state"]) == sum(len(g["params"]) for g in ck["param_groups"]) > 2   # one entry per parameter
    resumed = _run(go, tmp_path / "resumed")
    assert resumed[0] == full[0]
    assert all(torch.equal(resumed[1][k], full[1][k]) for k in full[1])


def _steps(cfg, flat, n=4, model_fn=None, drop=None):
    """n steps of train_step on cfg's model (or model_fn's), flat or per tensor; ``drop(i, model)`` may zero a
    parameter's gradient path at step i (returns the parameter to detach)."""
    task = build_task(cfg.task)
    data = task.train_data(0)
    model = model_fn() if model_fn else init_model(cfg)[0]
    opt = make_optimizer(model, cfg.optim)
    if flat:
        opt = FlatAdamW.from_optimizer(model, opt)
    amp = step_context(resolve_precision("none", torch.device("cpu")), torch.device("cpu"), model)
    out = []
    for i in range(n):
        for g in opt.param_groups:
            g["lr"] = 1e-3 * (1 + i)
        frozen = drop(i, model) if drop else None
        if frozen is not None:
            frozen.requires_grad_(False)
        out.append(train_step(model, model, opt, task, data.batch(torch.arange(i * 64, (i + 1) * 64)), amp,
                              cfg.optim.clip_norm).item())
        if frozen is not None:
            frozen.requires_grad_(True)
    return out, {k: v.clone() for k, v in model.state_dict().items()}, opt


def test_a_parameter_without_gradient_hands_over_to_the_per_tensor_adamw():
    """torch's AdamW skips a parameter whose .grad is None (no decay, no momentum step); so does the flat one,
    by handing over for good from the first such step."""
    cfg = experiment_from_dict({}, TINY + ["train.amp=none"])
    drop = lambda i, m: m.readout.weight if i == 2 else None   # noqa: E731 -- step 2: the readout gets no gradient
    la, wa, opt = _steps(cfg, True, drop=drop)
    lb, wb, _ = _steps(cfg, False, drop=drop)
    assert opt.handed_over and la == lb
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_checkpoint_format_is_the_per_tensor_one():
    cfg = experiment_from_dict({}, TINY + ["train.amp=none"])
    _, _, flat = _steps(cfg, True)
    _, _, per = _steps(cfg, False)
    a, b = flat.state_dict(), per.state_dict()
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for k in b["state"]:
        for f in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(a["state"][k][f], b["state"][k][f]), (k, f)
    # and it loads back into a fresh flat optimizer unchanged
    model = init_model(cfg)[0]
    again = FlatAdamW.from_optimizer(model, make_optimizer(model, cfg.optim))
    again.load_state_dict(b)
    c = again.state_dict()
    assert all(torch.equal(c["state"][k]["exp_avg_sq"], b["state"][k]["exp_avg_sq"]) for k in b["state"])


class _Tied(nn.Module):
    def __init__(self, vocab=201, d=16):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(vocab, d)
        self.mid = nn.Linear(d, d)
        self.out = nn.Linear(d, vocab, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens, last_only=False):
        return self.out(torch.relu(self.mid(self.embed(tokens[:, -1]))))


def test_tied_weights_stay_tied_and_train_as_one():
    cfg = experiment_from_dict({}, TINY + ["train.amp=none"])
    la, wa, opt = _steps(cfg, True, model_fn=_Tied)
    lb, wb, _ = _steps(cfg, False, model_fn=_Tied)
    assert la == lb and all(torch.equal(wa[k], wb[k]) for k in wa)
    model = _Tied()
    flat = FlatAdamW.from_optimizer(model, make_optimizer(model, cfg.optim))
    assert model.out.weight is model.embed.weight and sum(p.numel() for g in flat.param_groups for p in g["params"]) \
        == sum(p.numel() for p in model.parameters())


def test_the_parameters_view_the_buffer_and_their_version_moves_with_it():
    """The native path's weight cache keys on a weight's version counter: it must move when AdamW updates the
    buffer, or the bf16 copies would go stale."""
    cfg = experiment_from_dict({}, TINY + ["train.amp=none"])
    model = init_model(cfg)[0]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = FlatAdamW.from_optimizer(model, make_optimizer(model, cfg.optim))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    w = model.readout.weight
    v0 = w._version
    assert w.untyped_storage().data_ptr() == opt.param_groups[0]["params"][0].untyped_storage().data_ptr()
    task = build_task(cfg.task)
    train_step(model, model, opt, task, task.train_data(0).batch(torch.arange(64)), contextlib.nullcontext(), 0.0)
    assert w._version != v0 and not torch.equal(w.detach(), before["readout.weight"])
    assert w.grad is not None and w.grad.untyped_storage().data_ptr() == opt.grads[0].untyped_storage().data_ptr()


def test_clip_gradients_matches_clip_grad_norm():
    cfg = experiment_from_dict({}, TINY + ["train.amp=none"])
    task = build_task(cfg.task)
    batch = task.train_data(0).batch(torch.arange(64))
    grads = []
    for flat in (True, False):
        model = init_model(cfg)[0]
        opt = make_optimizer(model, cfg.optim)
        if flat:
            opt = FlatAdamW.from_optimizer(model, opt)
        task.loss(model, batch).backward()
        clip_gradients(model, opt, 0.01)
        if flat:
            opt._gather()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*grads))
    assert torch.linalg.vector_norm(torch.stack([g.norm() for g in grads[0]])) == pytest.approx(0.01, rel=1e-4)


def test_a_parameter_whose_data_is_replaced_is_refused_in_one_line():
    cfg = experiment_from_dict({}, TINY + ["train.amp=none"])
    task = build_task(cfg.task)
    model = init_model(cfg)[0]
    opt = FlatAdamW.from_optimizer(model, make_optimizer(model, cfg.optim))
    model.readout.weight.data = model.readout.weight.detach().clone()
    with pytest.raises(RuntimeError, match=r"\['readout.weight'\] no longer views the flat buffer.*flat_params=false"):
        train_step(model, model, opt, task, task.train_data(0).batch(torch.arange(64)), contextlib.nullcontext(), 1.0)

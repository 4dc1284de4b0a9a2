"""train.bf16_path=native in the training loops: recorded, resumable, stackable; float32 and autocast unchanged."""

import contextlib
import json
import math

import pytest
import torch
from safetensors.torch import load_file

from anchorlab.config import experiment_from_dict
from anchorlab.tasks.base import build_task
from anchorlab.train import load_run, train
from run_helpers import assert_stack_matches_singles, train_stop_resume
from anchorlab.train.optim import make_optimizer
from anchorlab.train.precision import resolve_precision, step_context
from anchorlab.train.run import init_model
from anchorlab.train.single import train_step

# 1024 / 64 = 16 steps per epoch, 2 epochs -> 32 steps, evaluated every 8.
TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=64", "train.epochs=2", "train.eval_every=8", "optim.lr=1e-3", "optim.warmup_epochs=0.5",
        "optim.warmup_multiplier=2", "optim.cosine_epochs=1.5", "optim.min_lr=1e-4", "train.threads=1"]
NATIVE = TINY + ["train.amp=bf16", "train.bf16_path=native"]
AUTOCAST = TINY + ["train.amp=bf16", "train.bf16_path=autocast"]


def losses(final: dict) -> list[float]:
    return [h["train_loss"] for h in final["history"][1:]]


@pytest.fixture(scope="module")
def native_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("native")
    cfg = experiment_from_dict({}, NATIVE)
    full, part, resumed = train_stop_resume(cfg, root)
    auto = train(experiment_from_dict({}, AUTOCAST), root / "autocast").final
    return root, cfg, full, part, resumed, auto


def test_native_run_records_its_path_and_keeps_float32_state(native_runs):
    root, cfg, full, _, _, auto = native_runs
    assert full["status"] == "finished" and full["steps"] == 32
    assert full["precision"]["path"] == "native" and full["precision"]["matmul_dtype"] == "bfloat16"
    assert auto["precision"]["path"] == "autocast"
    started = json.loads((root / "full" / "precision.json").read_text())
    assert started["path"] == "native" and started["from_step"] == 0
    assert all(w.dtype == torch.float32 for w in load_file(root / "full" / "model.safetensors").values())
    ck = torch.load(root / "full" / "checkpoint.pt", weights_only=True)
    for st in ck["optimizer"]["state"].values():
        assert st["exp_avg"].dtype == st["exp_avg_sq"].dtype == torch.float32
    assert losses(full)[-1] < losses(full)[0]
    # another path, another run id; the same run trained with autocast is close, not equal
    assert cfg.run_id() != experiment_from_dict({}, AUTOCAST).run_id()
    assert losses(full) != losses(auto)
    assert losses(full) == pytest.approx(losses(auto), rel=2e-2)


def test_native_run_resumes_exactly(native_runs):
    root, _, full, part, resumed, _ = native_runs
    assert part["status"] == "interrupted"
    assert resumed["final"] == full["final"] and losses(resumed) == losses(full)
    a = load_run(root / "full").model.state_dict()
    b = load_run(root / "resumed").model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_native_stack_agrees_with_the_same_models_trained_alone(tmp_path):
    """Three models as one stack (their bf16 weights passed into vmap) against each trained alone: the
    batched bf16 GEMMs round differently from single ones, so to a tolerance (as the autocast stack)."""
    over = [o for o in NATIVE if not o.startswith("train.epochs")] + ["train.epochs=1"]
    variants = (["init.gamma=0.5"], ["init.gamma=0.8", "train.init_seed=1"], ["init.gamma=0.3", "optim.lr=2e-3"])
    cfgs = [experiment_from_dict({}, over + v) for v in variants]
    assert_stack_matches_singles(cfgs, tmp_path, "native")


# ------------------------------------------------------------------ float32 and autocast unchanged
def reference_forward(m, tokens: torch.Tensor, last_only: bool = False) -> torch.Tensor:
    """The post-LN forward (NeurIPS eq. 4-7) written with the model's own modules, as it was before the
    native path existed: every linear and LayerNorm a plain module call."""
    T = tokens.shape[1]
    x = m.embed(tokens) + m.pos_embed(torch.arange(T))
    last = len(m.blocks) - 1
    for i, blk in enumerate(m.blocks):
        lo = last_only and i == last
        resid = x[:, -1:] if lo else x                  # sliced before the attention's own query slice,
        a = blk.attn                                    # as the block does (the order autograd sums in)
        xq = x[:, -1:] if lo else x
        B, Tq = x.shape[0], xq.shape[1]
        q = a._split(a.W_Q(xq))
        k, v = a._split(a.W_K(x)), a._split(a.W_V(x))
        scores = (q @ k.transpose(-1, -2) / math.sqrt(a.d_head)).masked_fill(a.causal_mask[T - Tq:T, :T],
                                                                             float("-inf"))
        z = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, Tq, -1)
        x_ao = blk.ln_attn(resid + a.W_O(z))
        x = blk.ln_mlp(blk.mlp.W_out(blk.mlp.act(blk.mlp.W_in(x_ao))) + x_ao)
    if last_only:
        x = x[:, -1]
    return m.readout(x)


@pytest.mark.parametrize("amp", ["none", "bf16"])
def test_float32_and_autocast_steps_are_bit_identical_to_the_plain_forward(amp):
    """Eight training steps through the model's forward and through the reference forward, from the same
    init and batches, give the same losses and weights bit for bit (fp32, and bf16 on autocast)."""
    cfg = experiment_from_dict({}, TINY + [f"train.amp={amp}"])
    task = build_task(cfg.task)
    data = task.train_data(0)
    runs = []
    for fwd_of in (lambda m: m, lambda m: (lambda tok, last_only=False: reference_forward(m, tok, last_only))):
        model, _ = init_model(cfg)
        opt = make_optimizer(model, cfg.optim)
        ctx = step_context(resolve_precision(amp, torch.device("cpu")), torch.device("cpu"), model)
        assert isinstance(ctx, torch.autocast if amp == "bf16" else contextlib.nullcontext)
        got = [train_step(model, fwd_of(model), opt, task, data.batch(torch.arange(i * 64, (i + 1) * 64)),
                                ctx, cfg.optim.clip_norm).item() for i in range(8)]
        runs.append((got, model.state_dict()))
    (la, wa), (lb, wb) = runs
    assert la == lb and len(set(la)) == 8
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    w0 = init_model(cfg)[0].state_dict()
    assert not any(torch.equal(wa[k], w0[k]) for k in ("embed.weight", "blocks.0.mlp.W_in.weight"))


def test_train_cli_names_the_native_path(tmp_path, capsys):
    from anchorlab.cli import main

    over = [x for o in NATIVE for x in ("--set", o)]
    assert main(["train", "demo/small", *over, "--set", "train.max_steps=4", "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 0
    assert "precision: bfloat16 matmuls, native path (train.amp=bf16" in capsys.readouterr().out


def test_the_single_loop_multiplies_the_layout_train_bf16_wt_names(native_runs, tmp_path, monkeypatch):
    """train.bf16_wt=copy reaches the loop's weight cache; its run trains like the default (view on a CPU
    without AMX, the copy with it): the same losses to bf16 rounding (on the AVX512-BF16 EPYC, to the bit)."""
    import anchorlab.train.single as single

    seen = []

    def spy(*a, **k):
        ctx = step_context(*a, **k)
        seen.append(ctx.weights.transposed_copy)
        return ctx

    monkeypatch.setattr(single, "step_context", spy)
    _, _, full, _, _, _ = native_runs
    copy = train(experiment_from_dict({}, NATIVE + ["train.bf16_wt=copy"]), tmp_path / "copy").final
    assert seen == [True]
    assert copy["run_id"] == full["run_id"] and losses(copy) == pytest.approx(losses(full), rel=1e-2)


def test_the_stack_multiplies_the_layout_train_bf16_wt_names(tmp_path, monkeypatch):
    """train.bf16_wt reaches the stack's weight copies (``native_losses``): ``copy`` asks for the contiguous W.T."""
    import anchorlab.train.stacked as stacked
    from anchorlab.train.stacked import train_stack

    seen = []

    def spy(base, task, shared_data, transposed_copy=False):
        seen.append(transposed_copy)
        return native_losses(base, task, shared_data, transposed_copy)

    native_losses = stacked.native_losses
    monkeypatch.setattr(stacked, "native_losses", spy)
    over = [o for o in NATIVE if not o.startswith("train.epochs")] + ["train.max_steps=2", "train.bf16_wt=copy"]
    cfgs = [experiment_from_dict({}, over + [f"init.gamma={g}"]) for g in (0.5, 0.8)]
    finals = train_stack(cfgs, [tmp_path / f"s{i}" for i in range(2)])
    assert seen == [True] and all(f["status"] == "finished" for f in finals)

"""The stacked engine computes what separate single-model runs compute."""

import json
import math

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.train.stacked import (StackedAdamW, StackedParams, check_stackable, clip_per_model,
                                      should_stack, train_stack)
from anchorlab.train import train

# 2048 / 64 = 32 steps per epoch, 6 epochs -> 192 steps, evaluated every 48.
TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=2048", "task.n_eval_per_group=32",
        "train.batch_size=64", "train.epochs=6", "train.eval_every=48", "optim.warmup_epochs=0.5",
        "optim.warmup_multiplier=2", "optim.cosine_epochs=5", "optim.min_lr=1e-4", "train.threads=1",
        "train.dtype=float64"]
# Three models that differ in everything a stack allows to differ.
VARIANTS = [
    ["init.gamma=0.5", "optim.lr=1e-3", "optim.weight_decay=0.1", "train.init_seed=1"],
    ["init.gamma=0.9", "optim.lr=3e-3", "optim.weight_decay=0.0", "train.init_seed=2", "train.data_seed=1",
     "optim.clip_norm=0.05"],
    ["init.gamma=0.3", "init.role_gammas={qk: 0.8}", "optim.lr=5e-4", "optim.weight_decay=1.0",
     "optim.betas=[0.8,0.99]", "optim.clip_norm=0", "optim.decay=all", "train.init_seed=3"],
]


def cfg_of(extra, base=TINY):
    return experiment_from_dict({}, base + extra)


@pytest.fixture(scope="module")
def singles_and_stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("ens")
    cfgs = [cfg_of(v) for v in VARIANTS]
    singles = [train(c, root / f"single{i}").final for i, c in enumerate(cfgs)]
    dirs = [root / f"stack{i}" for i in range(len(cfgs))]
    stacked = train_stack(cfgs, dirs)
    return root, cfgs, singles, stacked, dirs


def test_stack_equals_single_runs(singles_and_stack):
    root, cfgs, singles, stacked, dirs = singles_and_stack
    for i, (a, b) in enumerate(zip(singles, stacked)):
        assert b["run_id"] == cfgs[i].run_id() and b["status"] == a["status"] == "finished"
        assert b["steps"] == a["steps"] == 192
        assert [h["step"] for h in b["history"]] == [0, 48, 96, 144, 192]
        for ha, hb in zip(a["history"], b["history"]):
            assert set(ha) == set(hb)
            for k in ha:
                if k.endswith("seconds"):
                    continue
                if k == "train_loss" and math.isnan(ha[k]):
                    assert math.isnan(hb[k])
                elif k == "train_loss":  # the loss is taken in float32, as in the single loop
                    assert hb[k] == pytest.approx(ha[k], rel=1e-6), (i, ha["step"])
                else:                    # accuracies, lr, epoch
                    assert hb[k] == pytest.approx(ha[k], rel=1e-12, abs=1e-12), (i, ha["step"], k)
        wa, wb = load_file(root / f"single{i}" / "model.safetensors"), load_file(dirs[i] / "model.safetensors")
        assert set(wa) == set(wb)
        for k in wa:
            assert wa[k].dtype == wb[k].dtype == torch.float64
            torch.testing.assert_close(wb[k], wa[k], rtol=0, atol=1e-8, msg=f"model {i} {k}")
        # The models really trained apart: weights moved from init, and differ between models.
        assert not torch.allclose(wa["embed.weight"], load_file(dirs[(i + 1) % 3] / "model.safetensors")["embed.weight"])
        ta, tb = pd.read_csv(root / f"single{i}" / "param_table.csv"), pd.read_csv(dirs[i] / "param_table.csv")
        pd.testing.assert_frame_equal(ta, tb)
        assert (root / f"single{i}" / "config.yaml").read_text() == (dirs[i] / "config.yaml").read_text()
        rows = [json.loads(line) for line in (dirs[i] / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [0, 48, 96, 144, 192]
    # optim.decay=all on model 2 only: its LayerNorm decays, model 0's does not
    t0, t2 = pd.read_csv(dirs[0] / "param_table.csv"), pd.read_csv(dirs[2] / "param_table.csv")
    assert t0.set_index("name").weight_decay["blocks.0.ln_attn.weight"] == 0.0
    assert t2.set_index("name").weight_decay["blocks.0.ln_attn.weight"] == 1.0


def test_rerun_skips_finished_models(singles_and_stack):
    _, cfgs, _, stacked, dirs = singles_and_stack
    mtimes = [(d / "model.safetensors").stat().st_mtime_ns for d in dirs]
    again = train_stack(cfgs, dirs)
    assert [(d / "model.safetensors").stat().st_mtime_ns for d in dirs] == mtimes
    assert [a["final"] for a in again] == [s["final"] for s in stacked]


def test_interrupted_stack_resumes_and_single_loop_reads_its_checkpoint(tmp_path):
    base = TINY + ["train.epochs=0.75"]  # 24 steps, eval every 8
    cfgs = [cfg_of(v + ["train.eval_every=8"], base) for v in VARIANTS[:2]]
    full = train_stack(cfgs, [tmp_path / "full0", tmp_path / "full1"])
    dirs = [tmp_path / "part0", tmp_path / "part1"]
    part = train_stack(cfgs, dirs, stop_after_step=8)
    assert [p["status"] for p in part] == ["interrupted", "interrupted"]
    assert not (dirs[0] / "final.json").exists()
    single = train(cfgs[0], dirs[0]).final       # the single loop resumes a stacked checkpoint
    rest = train_stack(cfgs, dirs)               # model 0 is skipped, model 1 resumes
    for a, b in zip(full, [single, rest[1]]):
        assert [h["step"] for h in b["history"]] == [0, 8, 16, 24]
        assert b["final"]["train_acc"] == a["final"]["train_acc"]
        assert b["final"]["train_loss"] == pytest.approx(a["final"]["train_loss"], rel=1e-6)
    for i in range(2):
        wa = load_file(tmp_path / f"full{i}" / "model.safetensors")
        wb = load_file(dirs[i] / "model.safetensors")
        for k in wa:
            torch.testing.assert_close(wb[k], wa[k], rtol=0, atol=1e-8)


def test_clipping_is_per_model(tmp_path):
    base = TINY + ["train.epochs=0.75"]
    calm = cfg_of(VARIANTS[0], base)
    friend = cfg_of(VARIANTS[1], base)
    wild = cfg_of(VARIANTS[1] + ["optim.lr=10.0", "optim.clip_norm=1.0"], base)
    a = train_stack([calm, friend], [tmp_path / "a0", tmp_path / "a1"])
    b = train_stack([calm, wild], [tmp_path / "b0", tmp_path / "b1"])
    assert b[0]["final"] == a[0]["final"]
    wa, wb = load_file(tmp_path / "a0" / "model.safetensors"), load_file(tmp_path / "b0" / "model.safetensors")
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], rtol=0, atol=1e-12)
    # the wild model itself did change a lot
    w1, w2 = load_file(tmp_path / "a1" / "model.safetensors"), load_file(tmp_path / "b1" / "model.safetensors")
    diff = (w1["embed.weight"] - w2["embed.weight"]).abs().nan_to_num(nan=math.inf)
    assert float(diff.max()) > 1.0


def test_clip_per_model_uses_each_models_own_norm():
    models = [torch.nn.Linear(3, 2), torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)]
    st = StackedParams(models, torch.device("cpu"))
    g = torch.randn(3, st.data.shape[1], generator=torch.Generator().manual_seed(0), dtype=torch.float64).float()
    g = g / g.norm(dim=1, keepdim=True) * torch.tensor([[10.0], [0.1], [10.0]])
    st.grad.copy_(g)
    norms = clip_per_model(st, [1.0, 1.0, 0.0])
    torch.testing.assert_close(norms, torch.tensor([10.0, 0.1, 10.0]))
    after = st.grad.norm(dim=1)
    torch.testing.assert_close(after, torch.tensor([1.0, 0.1, 10.0]), rtol=1e-5, atol=1e-6)
    # reference: torch's own clipping of model 0 alone
    p = torch.nn.Parameter(torch.zeros(st.data.shape[1]))
    p.grad = g[0].clone()
    torch.nn.utils.clip_grad_norm_([p], 1.0)
    torch.testing.assert_close(st.grad[0], p.grad)


def test_stacked_adamw_matches_torch_adamw():
    gen = torch.Generator().manual_seed(0)
    G, P = 3, 50
    lrs, wds = [1e-2, 3e-3, 1e-1], [0.1, 0.0, 0.5]
    betas, eps = [(0.9, 0.999), (0.8, 0.99), (0.5, 0.9)], [1e-8, 1e-6, 1e-8]
    mask = torch.ones(G, P, dtype=torch.bool)
    mask[:, :10] = False                             # e.g. norms / biases: no decay
    start = torch.randn(G, P, generator=gen, dtype=torch.float64)
    param = start.clone()
    opt = StackedAdamW(wds, betas, eps, mask, torch.zeros_like(param), torch.zeros_like(param))
    refs = []
    for g in range(G):
        a, b = torch.nn.Parameter(start[g, :10].clone()), torch.nn.Parameter(start[g, 10:].clone())
        refs.append((a, b, torch.optim.AdamW([{"params": [a], "weight_decay": 0.0},
                                              {"params": [b], "weight_decay": wds[g]}],
                                             lr=lrs[g], betas=betas[g], eps=eps[g])))
    for step in range(5):
        grad = torch.randn(G, P, generator=gen, dtype=torch.float64)
        sched = [lr * (1 + step) for lr in lrs]
        opt.update(param, grad, sched)
        for g, (a, b, o) in enumerate(refs):
            for group in o.param_groups:
                group["lr"] = sched[g]
            a.grad, b.grad = grad[g, :10].clone(), grad[g, 10:].clone()
            o.step()
    for g, (a, b, _) in enumerate(refs):
        torch.testing.assert_close(param[g], torch.cat([a.detach(), b.detach()]), rtol=1e-14, atol=1e-15)
    assert not torch.allclose(param, start)


def test_mismatched_configs_raise_naming_the_field(tmp_path):
    a = cfg_of([])
    with pytest.raises(ConfigError, match=r"model\.d_model"):
        train_stack([a, cfg_of(["model.d_model=32", "model.d_head=16"])], [tmp_path / "x", tmp_path / "y"])
    with pytest.raises(ConfigError, match=r"task\.n_train"):
        check_stackable([a, cfg_of(["task.n_train=4096"])])
    with pytest.raises(ConfigError, match=r"train\.batch_size"):
        check_stackable([a, cfg_of(["train.batch_size=32"])])
    with pytest.raises(ConfigError, match="out_dirs"):
        train_stack([a, a], [tmp_path / "x"])
    check_stackable([a, cfg_of(["train.data_seed=5", "init.gamma=1.0", "optim.lr=0.1"])])  # allowed
    assert not (tmp_path / "x").exists()


def test_should_stack_rule():
    tiny = [cfg_of([]), cfg_of(["init.gamma=0.9"])]
    assert should_stack(tiny, "cpu")                                  # small work per step: stack
    assert not should_stack(tiny[:1], "cpu")                          # one model: nothing to stack
    assert not should_stack([tiny[0], cfg_of(["model.d_ff=64"])], "cuda")
    big = [experiment_from_dict({}, ["init.gamma=0.5"]), experiment_from_dict({}, ["init.gamma=0.8"])]
    assert not should_stack(big, "cpu")                               # paper-size on CPU: loop
    assert should_stack(big, "cuda")

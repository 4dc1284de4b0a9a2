"""Early predictors (analysis/predictors) on hand-built models with known values; AUC (analysis/auc) on
hand-made tables; the training callback on a tiny run."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from anchorlab.papers.analysis import predictors as P
from anchorlab.papers.analysis.auc import AUC_COLUMNS, auc_table, bootstrap_auc, features_at_fractions, mann_whitney_auc
from anchorlab.config import load_config
from anchorlab.tasks.anchor import AnchorData
from anchorlab.tasks.base import build_task
from anchorlab.train import build_model

pytest.importorskip("scipy")
TINY = ["model.d_model=32", "model.d_head=16", "model.d_ff=64", "task.n_train=4096", "task.n_eval_per_group=64"]


@pytest.fixture(scope="module")
def setup():
    cfg = load_config("demo/small", TINY)
    task = build_task(cfg.task)
    return cfg, task, task.eval_data(0)


def fresh(cfg, seed=0):
    torch.manual_seed(seed)
    return build_model(cfg).eval()


# ------------------------------------------------------------------ embedding geometry
def test_anchor_embedding_cosines_hand_set(setup):
    cfg, task, _ = setup
    m = fresh(cfg)
    with torch.no_grad():
        E = m.embed.weight
        E.zero_()
        E[3, 0] = 2.0                                   # anchor 3 along e0
        E[4, 0], E[4, 1] = 0.6, 0.8                     # anchor 4 at cosine 0.6 from anchor 3
        E[1, 0] = -1.0                                  # anchor 1 opposite every key
        E[2, 1] = 3.0                                   # anchor 2 orthogonal to every key
        for x in range(task.cfg.value_min, task.cfg.value_max + 1):
            E[x, 0] = float(x)                          # keys along e0, ordered by value
    f = P.anchor_embedding_features(m.embed.weight, task)
    assert f["embed/cos_pair"] == pytest.approx(0.6, abs=1e-7)
    assert f["embed/cos_a1_keys"] == pytest.approx(-1.0, abs=1e-7)
    assert f["embed/cos_a2_keys"] == pytest.approx(0.0, abs=1e-7)
    assert f["embed/cos_a3_keys"] == pytest.approx(1.0, abs=1e-7)
    assert f["embed/cos_a4_keys"] == pytest.approx(0.6, abs=1e-7)
    w = P.weight_features(m)
    assert w["order/spearman"] == pytest.approx(1.0) and w["order/r2"] == pytest.approx(1.0)


# ------------------------------------------------------------------ attention
def test_anchor_attention_uniform_when_keys_are_zero(setup):
    cfg, task, ev = setup
    m = fresh(cfg)
    with torch.no_grad():
        m.blocks[0].attn.W_K.weight.zero_()
        m.blocks[0].attn.W_K.bias.zero_()              # all scores 0: the last position spreads 1/T everywhere
    f = P.run_features(m, task, ev)
    T = task.cfg.seq_len
    assert f["attn/l0_last_to_anchors_pair"] == pytest.approx(2 / T, abs=1e-6)
    assert f["attn/l0_last_to_anchors_trained"] == pytest.approx(2 / T, abs=1e-6)
    assert P.last_to_anchor_attention(fresh(cfg), P.pair_inputs(task, ev)) != pytest.approx(2 / T, abs=1e-6)


def test_anchor_attention_reads_the_anchor_positions_of_each_input(setup, monkeypatch):
    cfg, task, _ = setup
    T = task.cfg.seq_len
    key_pos = torch.tensor([0, 3, T - 4, T - 3])       # the last one is left out (its anchor 2 is the last token)
    tokens = torch.zeros(4, T, dtype=torch.long)
    A = torch.zeros(2, 4, 2, T, T)                     # (L, B, H, T, T)
    for b, p in enumerate(key_pos.tolist()):
        A[0, b, 0, T - 1, p + 1], A[0, b, 0, T - 1, p + 2] = 0.3, 0.2   # head 0: 0.5 on the anchors
        A[0, b, 1, T - 1, p + 1] = 0.1                                  # head 1: 0.1
        A[0, b, :, T - 1, p] = 0.4                                      # the key does not count
    A[0, 3, :, T - 1, :] = 1.0                                          # excluded input
    A[1] = 1.0                                                          # layer 1 is not read
    monkeypatch.setattr(P, "attention_patterns", lambda model, tok: A)
    data = AnchorData(tokens, torch.zeros(4, dtype=torch.long), torch.zeros(4, 2, dtype=torch.long),
                      torch.zeros(4, dtype=torch.long), key_pos)
    assert P.last_to_anchor_attention(None, data) == pytest.approx(0.3, abs=1e-7)


# ------------------------------------------------------------------ logit margin
def test_logit_margin_from_a_linear_readout_bias(setup):
    cfg, task, ev = setup
    m = fresh(cfg)
    with torch.no_grad():
        m.readout.weight.zero_()
        m.readout.bias.copy_(-torch.arange(m.readout.bias.numel(), dtype=torch.float32))  # logit[t] = -t
    # (4,3): logit[x-10] - logit[x-6] = -(x-10) + (x-6) = 4 for every key
    assert P.run_features(m, task, ev)["margin/pair"] == pytest.approx(4.0, abs=1e-6)
    with torch.no_grad():
        m.readout.bias.mul_(-0.5)
    assert P.logit_margin(m, task, P.pair_inputs(task, ev)) == pytest.approx(-2.0, abs=1e-6)


# ------------------------------------------------------------------ gradient alignment
def test_gradient_alignment_of_the_readout_bias(setup):
    """Only the readout bias trains and the logits are 0, so a set whose targets are all t has gradient
    1/V - e_t; two sets with targets t1 != t2 then have cosine -1/(V-1)."""
    cfg, task, _ = setup
    m = fresh(cfg)
    for p in m.parameters():
        p.requires_grad_(False)
    m.readout.bias.requires_grad_(True)
    with torch.no_grad():
        m.readout.weight.zero_()
        m.readout.bias.zero_()
    V = m.readout.bias.numel()
    n = 4
    pairs = [(3, 4)] * n + [(3, 4)] * 3 + [(1, 2)] * 5 + [(4, 3)] * 3   # (4,3) is held out: never in the rest
    targets = [50] * n + [70] * 3 + [60] * 5 + [80] * 3
    N = len(pairs)
    data = AnchorData(torch.randint(20, 100, (N, task.cfg.seq_len)), torch.tensor(targets),
                      torch.tensor(pairs), torch.zeros(N, dtype=torch.long), torch.zeros(N, dtype=torch.long))
    assert P.gradient_alignment(m, task, data, n=n) == pytest.approx(-1 / (V - 1), abs=1e-9)
    same = AnchorData(data.tokens, torch.tensor([60] * N), data.pair, data.key, data.key_pos)
    assert P.gradient_alignment(m, task, same, n=n) == pytest.approx(1.0, abs=1e-9)
    none = AnchorData(data.tokens[:n], data.targets[:n], data.pair[:n], data.key[:n], data.key_pos[:n])
    assert math.isnan(P.gradient_alignment(m, task, none))


def test_gradient_alignment_leaves_the_model_unchanged(setup):
    cfg, task, _ = setup
    m = fresh(cfg).train()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    g = P.gradient_alignment(m, task, task.train_data(0), n=64)
    assert -1.0 <= g <= 1.0 and m.training
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert all(p.grad is None for p in m.parameters())


# ------------------------------------------------------------------ weights
def test_condensation_and_stable_rank_of_hand_set_weights(setup):
    cfg, task, ev = setup
    m = fresh(cfg)
    attn, mlp = m.blocks[0].attn, m.blocks[0].mlp
    with torch.no_grad():
        u = torch.randn(attn.W_Q.weight.shape[1])
        signs = torch.tensor([1.0, -1.0]).repeat(attn.W_Q.weight.shape[0] // 2)
        attn.W_Q.weight.copy_(signs[:, None] * u[None, :])           # rank 1, rows +-u: one unsigned direction
        attn.W_K.weight.copy_(torch.eye(*attn.W_K.weight.shape))     # orthonormal rows: stable rank = #rows
        mlp.W_in.weight.copy_(torch.arange(1.0, mlp.W_in.weight.shape[0] + 1)[:, None] * u[None, :])
    f = P.run_features(m, task, ev)
    assert f["cond/wq0_largest_group_frac"] == pytest.approx(1.0)
    assert f["cond/wq0_mean_abs_cos"] == pytest.approx(1.0)
    assert f["cond/win0_largest_group_frac"] == pytest.approx(1.0)
    assert f["srank/blocks.0.attn.W_Q.weight"] == pytest.approx(1.0)
    assert f["srank/blocks.0.mlp.W_in.weight"] == pytest.approx(1.0)
    assert f["srank/blocks.0.attn.W_K.weight"] == pytest.approx(float(min(attn.W_K.weight.shape)))
    assert f["srank/mean"] == pytest.approx(np.mean([f[f"srank/{n}"] for n in P.SRANK_PARAMS]))
    assert "grad/cos_mirror_rest" not in f
    assert all(isinstance(v, float) for v in f.values())


# ------------------------------------------------------------------ AUC
def test_auc_hand_made():
    assert mann_whitney_auc([3, 4, 5, 0, 1, 2], [1, 1, 1, 0, 0, 0]) == 1.0
    assert mann_whitney_auc([0, 1, 2, 3, 4, 5], [1, 1, 1, 0, 0, 0]) == 0.0
    assert mann_whitney_auc([2, 2, 2, 2], [1, 0, 1, 0]) == 0.5
    # pos {1, 3, 3} vs neg {0, 3}: wins 1+0 + 1+0.5 + 1+0.5 = 4 of 6
    assert mann_whitney_auc([1, 3, 3, 0, 3], [1, 1, 1, 0, 0]) == pytest.approx(4 / 6)
    assert math.isnan(mann_whitney_auc([1, 2], [1, 1]))
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    s, y = rng.integers(0, 5, 40).astype(float), rng.random(40) < 0.5
    assert mann_whitney_auc(s, y) == pytest.approx(sk.roc_auc_score(y, s))


def test_bootstrap_contains_the_estimate_and_is_seeded():
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(12, bool), np.zeros(15, bool)]
    s = rng.normal(size=27) + 0.8 * y
    auc, lo, hi = bootstrap_auc(s, y, n_boot=500, seed=1)
    assert lo <= auc <= hi and lo < hi
    assert bootstrap_auc(s, y, n_boot=500, seed=1) == (auc, lo, hi)
    assert bootstrap_auc(s, y, n_boot=500, seed=2) != (auc, lo, hi)
    assert bootstrap_auc(np.r_[s[y] + 10, s[~y]], np.r_[y[y], y[~y]], n_boot=200) == (1.0, 1.0, 1.0)


def test_auc_table_per_feature_and_time():
    df = pd.DataFrame({
        "composes": [True, True, False, False] * 2 + [True, True],
        "at": [0.0] * 4 + [0.1] * 4 + [0.05] * 2,
        "good": [3, 4, 1, 2, 9, 8, 1, 0, 1, 2],
        "bad": [1, 2, 3, 4, 0, 0, 0, 0, 5, np.nan],
    })
    t = auc_table(df, "composes", ["good", "bad"], "at", n_boot=200, seed=0)
    assert list(t.columns) == AUC_COLUMNS
    assert list(zip(t.feature, t.at_fraction)) == [("good", 0.0), ("good", 0.05), ("good", 0.1),
                                                   ("bad", 0.0), ("bad", 0.05), ("bad", 0.1)]
    r = t.set_index(["feature", "at_fraction"])
    assert r.loc[("good", 0.0), "auc"] == 1.0 and r.loc[("bad", 0.0), "auc"] == 0.0
    assert r.loc[("bad", 0.1), "auc"] == 0.5 and r.loc[("good", 0.1), "n_runs"] == 4
    assert math.isnan(r.loc[("good", 0.05), "auc"]) and math.isnan(r.loc[("good", 0.05), "auc_lo"])
    assert r.loc[("bad", 0.05), "n_runs"] == 1
    assert t.equals(auc_table(df, "composes", ["good", "bad"], "at", n_boot=200, seed=0))


# ------------------------------------------------------------------ the callback in training
def test_callback_logs_predictors_during_training(tmp_path, tiny_overrides):
    from anchorlab.train import train

    cfg = load_config("demo/small", tiny_overrides + ["train.epochs=0.5", "train.eval_every=4",
                                                     "train.log_predictors=true"])
    assert cfg.run_id() == load_config("demo/small", tiny_overrides + ["train.epochs=0.5",
                                                                       "train.eval_every=4"]).run_id()
    train(cfg, tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 4, 8]
    for r in rows:
        feats = {k for k in r if k.startswith("pred/")}
        assert {"pred/embed/cos_pair", "pred/attn/l0_last_to_anchors_pair", "pred/margin/pair",
                "pred/grad/cos_mirror_rest", "pred/srank/mean", "pred/order/spearman"} <= feats
        assert all(math.isfinite(r[k]) for k in feats)
    assert rows[0]["pred/margin/pair"] != rows[-1]["pred/margin/pair"]
    got = features_at_fractions(tmp_path / "run", (0.0, 0.5, 1.0))
    assert list(got.step) == [0, 4, 8] and got.at_fraction.tolist() == [0.0, 0.5, 1.0]
    assert got.loc[0, "embed/cos_pair"] == rows[0]["pred/embed/cos_pair"]
    at_init = P.features_at_init(cfg)           # the step-0 model is a function of the config
    assert set(at_init) == {k[len("pred/"):] for k in rows[0] if k.startswith("pred/")}
    for k, v in at_init.items():
        assert v == pytest.approx(rows[0][f"pred/{k}"], rel=1e-6, abs=1e-9), k


def test_stacked_training_logs_the_same_predictors_as_single_runs(tmp_path, tiny_overrides):
    from anchorlab.train import train
    from anchorlab.train.stacked import train_stack

    sets = tiny_overrides + ["train.epochs=0.25", "train.log_predictors=true"]
    cfgs = [load_config("demo/small", sets + [f"train.init_seed={s}"]) for s in (0, 1)]
    stacked = train_stack(cfgs, [tmp_path / f"s{i}" for i in range(2)])
    single = train(cfgs[1], tmp_path / "single").final
    h_stack, h_single = stacked[1]["history"][0], single["history"][0]
    keys = [k for k in h_single if k.startswith("pred/")]
    assert len(keys) > 15 and set(keys) <= set(h_stack)
    assert stacked[0]["history"][0]["pred/embed/cos_pair"] != h_stack["pred/embed/cos_pair"]
    for k in keys:
        assert h_stack[k] == pytest.approx(h_single[k], rel=1e-4, abs=1e-6), k


def test_errors_name_what_is_missing(tmp_path):
    from anchorlab.config import ConfigError

    with pytest.raises(ConfigError, match="missing columns"):
        auc_table(pd.DataFrame({"y": [True]}), "y", ["f"], "at")
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "id_acc": 0.1}) + "\n")
    with pytest.raises(ConfigError, match="log_predictors"):
        features_at_fractions(tmp_path)
    assert P.PredictorCallback(object())(0, None) == {}     # not the anchor task: nothing logged

import json
import math

import pytest
import torch

from anchorlab.config import ExperimentConfig, OptimConfig, experiment_from_dict
from anchorlab.train import load_run, train
from anchorlab.train.optim import lr_at, param_groups
from anchorlab.model.transformer import build_model


def test_schedule_values_at_known_steps():
    c = OptimConfig(lr=1e-5, warmup_epochs=10, warmup_multiplier=25, cosine_epochs=200, min_lr=1e-5)
    spe = 100
    assert math.isclose(lr_at(0, spe, c), 1e-5)
    assert math.isclose(lr_at(500, spe, c), 1e-5 + (25e-5 - 1e-5) * 0.5)      # half-way through warmup
    assert math.isclose(lr_at(1000, spe, c), 25e-5)                            # peak
    assert math.isclose(lr_at(1000 + 100 * 100, spe, c), 1e-5 + (25e-5 - 1e-5) * 0.5)  # cosine midpoint
    assert math.isclose(lr_at(1000 + 200 * 100, spe, c), 1e-5)
    assert math.isclose(lr_at(10**7, spe, c), 1e-5)


def test_every_parameter_in_exactly_one_decay_group():
    m = build_model(ExperimentConfig().model)
    groups = param_groups(m, OptimConfig(weight_decay=0.1))
    names = [n for g in groups for n in g["names"]]
    assert sorted(names) == sorted(n for n, _ in m.named_parameters())
    wd = {n: g["weight_decay"] for g in groups for n in g["names"]}
    assert wd["embed.weight"] == 0.1 and wd["blocks.0.ln_attn.weight"] == 0.0 and wd["readout.bias"] == 0.0


def test_tiny_model_learns_a_single_anchor_task(tmp_path):
    # One anchor (+5), so the only pair (1,1) maps x -> x+10; key at position 0 or 1.
    cfg = experiment_from_dict({"task": {"preset": "custom", "anchors": {1: 5}, "seq_len": 4, "n_train": 8192,
                                         "n_eval_per_group": 200},
                                "model": {"d_model": 48, "d_head": 24, "d_ff": 96, "max_len": 4},
                                "optim": {"lr": 3e-3, "warmup_epochs": 0.2, "warmup_multiplier": 1,
                                          "cosine_epochs": 6, "min_lr": 3e-4, "weight_decay": 0.0},
                                "train": {"epochs": 6, "batch_size": 128, "threads": 1}})
    f = train(cfg, tmp_path / "run").final
    first = f["history"][0]
    assert first["step"] == 0 and first["train_acc"] < 0.1
    assert math.isnan(first["train_loss"])          # no training step yet: no running loss at step 0
    assert f["final"]["train_acc"] > 0.9 and f["final"]["id_acc"] > 0.9
    # the loss of the initial model (same init seed), measured directly on the training set
    from anchorlab.tasks.base import build_task
    from anchorlab.train import init_model

    task = build_task(cfg.task)
    model, _ = init_model(cfg)
    data = task.train_data(cfg.train.data_seed)
    with torch.no_grad():
        loss0 = float(task.loss(model, data.batch(torch.arange(len(data)))))
    assert loss0 > 1.0                                  # ~log(vocab) at init: nothing is learned yet
    assert f["final"]["train_loss"] < 0.2 * loss0
    assert f["final"]["train_loss"] < f["history"][1]["train_loss"]


def test_run_directory_contents(tmp_path, tiny_overrides):
    cfg = experiment_from_dict({}, tiny_overrides)
    train(cfg, tmp_path / "r")
    for name in ("config.yaml", "metrics.jsonl", "param_table.csv", "final.json", "model.safetensors"):
        assert (tmp_path / "r" / name).exists(), name
    final = json.loads((tmp_path / "r" / "final.json").read_text())
    assert final["run_id"] == cfg.run_id() and final["status"] == "finished"
    assert {"torch", "python", "anchorlab"} <= set(final["versions"])
    import pandas as pd
    t = pd.read_csv(tmp_path / "r" / "param_table.csv")
    assert {"name", "role", "shape", "fan_in", "gamma", "target_std", "measured_std", "lr", "weight_decay"} <= set(t)
    res = load_run(tmp_path / "r")
    x = torch.randint(20, 100, (3, 9))
    assert res.model(x).shape == (3, 9, 201)


def test_resume_gives_the_same_result(tmp_path, tiny_overrides):
    cfg = experiment_from_dict({}, tiny_overrides + ["train.eval_every=4"])
    full = train(cfg, tmp_path / "full").final
    part = train(cfg, tmp_path / "resumed", stop_after_step=8).final
    assert part["status"] == "interrupted"
    resumed = train(cfg, tmp_path / "resumed").final
    assert resumed["steps"] == full["steps"]
    assert resumed["final"] == full["final"]
    assert [h["step"] for h in resumed["history"]] == [h["step"] for h in full["history"]]
    a = load_run(tmp_path / "full").model.state_dict()
    b = load_run(tmp_path / "resumed").model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_same_seeds_same_numbers_and_init_seed_is_separate(tmp_path, tiny_overrides):
    cfg = experiment_from_dict({}, tiny_overrides + ["train.epochs=0.5"])
    a = train(cfg, tmp_path / "a").final["final"]
    b = train(cfg, tmp_path / "b").final["final"]
    assert a == b
    cfg2 = experiment_from_dict({}, tiny_overrides + ["train.epochs=0.5", "train.init_seed=1"])
    c = train(cfg2, tmp_path / "c")
    d0 = load_run(tmp_path / "a").model.state_dict()
    assert not torch.equal(c.model.state_dict()["embed.weight"].cpu(), d0["embed.weight"])


def test_other_config_in_same_dir_is_refused(tmp_path, tiny_overrides):
    from anchorlab.config import ConfigError
    train(experiment_from_dict({}, tiny_overrides + ["train.epochs=0.25"]), tmp_path / "x")
    with pytest.raises(ConfigError, match="different run"):
        train(experiment_from_dict({}, tiny_overrides + ["train.epochs=0.25", "init.gamma=0.9"]), tmp_path / "x")


def test_complexity_trajectory_is_logged_next_to_accuracy(tmp_path, tiny_overrides):
    cfg = experiment_from_dict({}, tiny_overrides + ["train.epochs=0.5", "train.log_complexity=true",
                                                      "train.eval_every=4"])
    hist = train(cfg, tmp_path / "c").final["history"]
    assert len(hist) >= 3
    for h in hist:
        assert "stable_rank/blocks.0.attn.W_Q.weight" in h and "condensation/largest_group_frac" in h
        assert "embedding/ordinal_spearman" in h and "id_acc" in h
    # weights move, so the logged stable rank changes over training
    assert hist[0]["stable_rank/blocks.0.attn.W_Q.weight"] != hist[-1]["stable_rank/blocks.0.attn.W_Q.weight"]


def test_best_values_are_minima_for_losses_and_perplexities():
    from anchorlab.metric_order import lower_is_better

    assert all(lower_is_better(m) for m in ("train_loss", "val_loss", "val_ppl", "denoise_loss_010", "ood_other_frac"))
    assert not any(lower_is_better(m) for m in ("id_acc", "acc/43/test", "shape_acc_010_011", "val_pplx_rank"))

"""Tests that need a GPU or minutes of CPU; they skip cleanly elsewhere.

Run the slow ones with ``ANCHORLAB_SLOW=1 python -m pytest tests/test_gpu_and_slow.py``.
"""

import pytest

from anchorlab.config import experiment_from_dict
from anchorlab.train import train

TINY = ["model.d_model=32", "model.d_head=16", "model.d_ff=64", "task.n_train=4096", "task.n_eval_per_group=64",
        "train.batch_size=256", "train.epochs=1", "optim.lr=1e-3", "train.eval_every=8"]


@pytest.mark.gpu
def test_cuda_run_matches_cpu_run(tmp_path):
    cpu = train(experiment_from_dict({}, TINY + ["train.device=cpu"]), tmp_path / "cpu").final
    gpu = train(experiment_from_dict({}, TINY + ["train.device=cuda"]), tmp_path / "gpu").final
    for k in ("train_loss", "train_acc", "id_acc"):
        assert abs(cpu["final"][k] - gpu["final"][k]) < 0.05, k


@pytest.mark.gpu
def test_cuda_stack_matches_single_runs(tmp_path):
    from anchorlab.train.stacked import train_stack

    cfgs = [experiment_from_dict({}, TINY + ["train.device=cuda", "train.dtype=float64", f"init.gamma={g}"])
            for g in (0.4, 0.7)]
    stacked = train_stack(cfgs, [tmp_path / f"s{i}" for i in range(2)])
    singles = [train(c, tmp_path / f"r{i}").final for i, c in enumerate(cfgs)]
    for a, b in zip(stacked, singles):
        assert abs(a["final"]["train_loss"] - b["final"]["train_loss"]) < 1e-6


@pytest.mark.slow
def test_demo_contrast_reproduces(tmp_path):
    """The demo's claim (docs/demo.md): large init memorizes, small init composes (~5 min on 2 cores)."""
    from anchorlab.papers.demo import run_demo

    table = run_demo(tmp_path, workers=2).set_index("model")
    assert table.loc["large_init", "final.ood_symmetric_acc"] > 0.8
    assert table.loc["large_init", "final.ood_inferential_acc"] < 0.1
    assert table.loc["small_init", "final.ood_inferential_acc"] > 0.8
    assert table.loc["small_init", "final.ood_symmetric_acc"] < 0.1

import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)
# Estimates time no probe in the suite (anchorlab.sweep.probe): a dry run of a paper-scale figure would time
# paper-scale steps. The probe's own tests turn it on with a cache of their own.
os.environ.setdefault("ANCHORLAB_PROBE", "off")


def pytest_collection_modifyitems(config, items):
    slow_ok = os.environ.get("ANCHORLAB_SLOW") == "1"
    gpu_ok = torch.cuda.is_available()
    for item in items:
        if "slow" in item.keywords and not slow_ok:
            item.add_marker(pytest.mark.skip(reason="slow test: set ANCHORLAB_SLOW=1 to run"))
        if "gpu" in item.keywords and not gpu_ok:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture
def tiny_overrides():
    """A config small enough to train in seconds on one CPU thread."""
    return ["model.d_model=32", "model.d_head=16", "model.d_ff=64", "task.n_train=4096",
            "task.n_eval_per_group=64", "train.batch_size=256", "train.epochs=2",
            "optim.lr=1e-3", "optim.warmup_epochs=0.5", "optim.warmup_multiplier=2",
            "optim.cosine_epochs=1.5", "optim.min_lr=1e-4", "train.threads=1",
            "train.amp=none"]   # float32 whatever the CPU: demo/small defaults to auto (bf16 where the CPU has units)


@pytest.fixture
def shared_datasets() -> Path:
    d = Path(os.environ.get("ANCHORLAB_DATA_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "datasets"))
    if not d.exists():
        pytest.skip(f"reference datasets not found at {d}")
    return d


@pytest.fixture
def probe_on(tmp_path, monkeypatch):
    """The timed probe on, with an empty cache of its own."""
    monkeypatch.setenv("ANCHORLAB_PROBE", "on")
    monkeypatch.setenv("ANCHORLAB_CACHE", str(tmp_path / "probe-cache"))
    return tmp_path / "probe-cache"

"""A run's environment: the device it trains on and the process-wide numeric switches it sets for its duration
(threads, flush-denormal, TF32, glibc's malloc thresholds)."""

from __future__ import annotations

import contextlib

import torch

from anchorlab.config import ConfigError, ExperimentConfig
from anchorlab.train.allocator import retain_freed_memory


def pick_device(spec: str) -> torch.device:
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"train.device: {spec!r} requested but CUDA is not available; use 'cpu' or 'auto'")
    dev = torch.device(spec)
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(f"train.device: {spec!r} but this machine has {torch.cuda.device_count()} CUDA device(s)")
    return dev


def flush_denormal() -> bool:
    """Whether this thread flushes denormals to zero now (torch has a setter only, so it is measured).

    Multiplies the float64 denormal 1e-310 by 1: the result is 0 exactly when
    flush-to-zero / denormals-are-zero is on (whoever switched it on).
    """
    return bool((torch.tensor([1e-310], dtype=torch.float64) * 1.0).item() == 0.0)


@contextlib.contextmanager
def numerics(cfg: ExperimentConfig, device: torch.device):
    """Process-wide numeric switches for the duration of a run, each restored to its previous value after.

    Threads (``train.threads``), flush-denormal on CPU (``train.flush_denormal``)
    and TF32 for CUDA matmuls and cuDNN (``train.tf32``). ``train.malloc_retain``
    (CPU) raises glibc's malloc thresholds for the rest of the process: it has no
    getter, so it is the one switch not restored.
    """
    t = cfg.train
    old_threads = torch.get_num_threads()
    old_flush = flush_denormal()
    old_tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if t.threads:
        torch.set_num_threads(t.threads)
    if device.type == "cpu":
        torch.set_flush_denormal(t.flush_denormal)
        if t.malloc_retain:
            retain_freed_memory()   # process-wide, not restored (see train/allocator.py)
    torch.backends.cuda.matmul.allow_tf32 = t.tf32   # flags only: harmless without CUDA
    torch.backends.cudnn.allow_tf32 = t.tf32
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        if device.type == "cpu":
            torch.set_flush_denormal(old_flush)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old_tf32

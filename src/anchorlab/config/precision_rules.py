"""The precision rules a config resolves without torch: what ``train.amp`` means on a device
(:func:`matmul_amp`) and what ``train.bf16_path: auto`` means for a model (:func:`auto_bf16_path`).

train/precision.py applies them to a run (with the device's name and the CPU's units),
papers/reproduce/estimate.py to a cost estimate, and :class:`~anchorlab.config.experiment.ExperimentConfig`
resolves ``bf16_path: auto`` when it is built, so a saved config names the path that ran.
"""

from __future__ import annotations

from typing import Any

BF16_PATHS = ("auto", "autocast", "native")


def matmul_amp(amp: str, device_type: str, cpu_bf16_units: bool) -> str:
    """What ``train.amp`` resolves to on a device: "bf16" or "none". ``auto`` is bf16 only on a CPU with
    bf16 matrix units (``cpu_bf16_units``); ``bf16`` is bf16 everywhere (emulated, and slow, on a CPU
    without them). The one rule: train/precision.py applies it to a run, papers/reproduce/estimate.py to a cost."""
    if amp == "bf16" or (amp == "auto" and device_type == "cpu" and cpu_bf16_units):
        return "bf16"
    return "none"


def auto_bf16_path(model: Any, train: Any) -> str:
    """What ``train.bf16_path: auto`` means for a model config and a train config: ``native`` where

    * the model family has the native bfloat16 path (its config class says ``native_bf16 = True``: the
      anchorlab Transformer, every arch; not Hugging Face GPT-2 nor the U-Net),
    * ``train.compile`` is off (the compiler does not trace the path's context), and
    * ``train.dtype`` is float32 (autocast leaves a float64 model in float64; native would not),

    else ``autocast``."""
    ok = getattr(model, "native_bf16", False) and not train.compile and train.dtype == "float32"
    return "native" if ok else "autocast"


def as_recorded(data: dict[str, Any]) -> dict[str, Any]:
    """A recorded config mapping (a run's config.yaml, a run-table row's sections) as it trained: one written
    before ``train.bf16_path`` existed has no such key (or a blank one) and trained on ``autocast``, the only
    path then, not on what ``auto`` means now. A shallow copy; ``data`` is not changed."""
    train = data.get("train")
    if isinstance(train, dict) and train.get("bf16_path") is None:
        return {**data, "train": {**train, "bf16_path": "autocast"}}
    return data


__all__ = ["BF16_PATHS", "as_recorded", "auto_bf16_path", "matmul_amp"]

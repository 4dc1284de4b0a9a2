"""What ``anchorlab bench`` measures: the shapes, the precisions, the clocks and the FLOP count of a step."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from anchorlab.config import ExperimentConfig, ModelConfig, load_config

SHAPES = {  # name -> (preset, overrides); data kept small: the step's cost does not depend on n_train
    "demo": ("demo/small", ("task.n_train=20000",)),
    "paper": ("neurips/paper", ("task.n_train=20000", "train.batch_size=2048")),
}
# precision -> (train.amp, train.bf16_path); the path that actually ran is read back from the resolved Precision
PRECISIONS = {"fp32": ("none", "autocast"), "bf16": ("bf16", "autocast"), "bf16-native": ("bf16", "native")}
PRECISION_KEYS = ("train.amp", "train.bf16_path")   # what a precision sets, so an override may not
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}   # matmul dtype name -> torch dtype


def dtype_of(precision: str) -> str:
    """The matmul dtype (a key of :data:`DTYPES`) a precision multiplies in."""
    return "fp32" if PRECISIONS[precision][0] == "none" else "bf16"


def check_names(shapes: Sequence[str], precisions: Sequence[str]) -> None:
    """One-line errors naming the flag and the allowed values."""
    for name in shapes:
        if name not in SHAPES:
            raise ValueError(f"--shapes: unknown shape {name!r}; choose from {', '.join(SHAPES)}")
    for p in precisions:
        if p not in PRECISIONS:
            raise ValueError(f"--precisions: unknown precision {p!r}; choose from {', '.join(PRECISIONS)}")


def shape_config(name: str, precision: str = "fp32", extra: Sequence[str] = ()) -> ExperimentConfig:
    """The config a shape trains in a precision (``train.amp`` and ``train.bf16_path`` set from it; ``extra``
    overrides anything else, ``--set``'s one-line error where it names one of those two)."""
    check_names([name], [precision])
    for o in extra:
        key = o.partition("=")[0].strip()
        if key in PRECISION_KEYS:
            raise ValueError(f"--set: {key} is set by --precisions ({', '.join(PRECISIONS)}); got {o!r}")
    preset, over = SHAPES[name]
    amp, path = PRECISIONS[precision]
    return load_config(preset, [*over, f"train.amp={amp}", f"train.bf16_path={path}", *extra])


def train_flops_per_sample(m: ModelConfig, seq_len: int) -> float:
    """Analytic fwd+bwd FLOPs of one training sequence of the anchor task (bwd = 2 x fwd).

    The loss reads the last position only, so the last layer needs keys and values at every
    position but its query, W_O, FFN and the readout at the last position only::

      6 * T * (L-1) * (4 * d_model * H * d_head + 2 * d_model * d_ff)   layers 1..L-1
      + 12 * (L-1) * H * T^2 * d_head                                   their Q K^T and pattern V
      + 6 * (2 * T * d_model * H * d_head                               last layer: K, V everywhere,
             + 2 * d_model * H * d_head + 2 * d_model * d_ff)           Q, W_O, FFN at the last position
      + 12 * H * T * d_head                                             its one attention row
      + 6 * d_model * V                                                 readout, last position only
    """
    T, L, H = seq_len, m.n_layers, m.n_heads
    qkvo, ffn = 4 * m.d_model * H * m.d_head, 2 * m.d_model * m.d_ff      # MACs per position
    matmul = T * (L - 1) * (qkvo + ffn) + T * qkvo // 2 + qkvo // 2 + ffn  # last layer trimmed
    attn = 4 * H * m.d_head * ((L - 1) * T * T + T)  # fwd: Q K^T and pattern V, 2 FLOPs per MAC
    return 6.0 * matmul + 3.0 * attn + 6.0 * m.d_model * m.vocab_size


Clock = Callable[[], float]


def clock_fn(name: str | Clock) -> Clock:
    """``wall`` (perf_counter) or ``process`` (this process's CPU seconds: fair on a shared machine);
    a callable is used as it is (a test's fake clock)."""
    if callable(name):
        return name
    if name not in ("wall", "process"):
        raise ValueError(f"--clock: must be 'wall' or 'process', got {name!r}")
    return time.perf_counter if name == "wall" else time.process_time


__all__ = ["DTYPES", "PRECISIONS", "SHAPES", "check_names", "clock_fn", "dtype_of", "shape_config",
           "train_flops_per_sample"]

"""Mixed precision: which matmul dtype a run uses (``train.amp``) and why.

``train.amp``:

* ``none`` -- float32 everywhere (the papers' setting).
* ``bf16`` -- bfloat16 autocast for the matmuls on any device; master weights,
  optimizer state and the loss stay float32.
* ``auto`` -- ``bf16`` on a CPU whose cores multiply bfloat16 in hardware
  (Intel AMX tiles or AVX512-BF16), ``none`` everywhere else, CUDA included
  (paper-scale GPU runs keep the papers' float32).

On a CPU without those units PyTorch's bfloat16 matmuls are emulated and run
several times *slower* than float32 (measured once: notes/2026-12-code-measurements.md),
which is why ``auto`` falls back and
an explicit ``bf16`` warns. The resolved choice and its reason go into
final.json (``precision``).

``train.bf16_path`` says how a bf16 run computes (:attr:`Precision.path`):

* ``native`` -- activations stay bfloat16 between ops, float32 only where
  chosen (loss, softmax and LayerNorm statistics), matmuls on a bfloat16 copy
  of the weights refreshed once per optimizer step (:mod:`anchorlab.model.bf16`);
* ``autocast`` -- ``torch.autocast``: float32 activations, each matmul casts its
  inputs to bfloat16 (every committed bf16 study trained this way, and pins it);
* ``auto`` (the default) -- ``native`` for the anchorlab Transformer with
  ``train.compile`` off and ``train.dtype`` float32, ``autocast`` otherwise;
  resolved when the config is built
  (:func:`anchorlab.config.precision_rules.auto_bf16_path`), so what reaches this
  module is ``native`` or ``autocast``.

A float32 run's path is ``fp32`` whatever ``bf16_path`` says.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from anchorlab.config import ConfigError
from anchorlab.config.precision_rules import matmul_amp
from anchorlab.model.bf16 import WeightCache, native_bf16

log = logging.getLogger(__name__)

PATHS = ("fp32", "autocast", "native")   # Precision.path: how a run computes


@dataclass(frozen=True)
class CpuMatrixUnits:
    """What this CPU offers for bfloat16 matmuls, as PyTorch sees it."""

    capability: str      # torch's vectorized kernel level: "AVX2", "AVX512", ...
    amx: bool            # Intel AMX tiles (bf16 tile matmul)
    avx512_bf16: bool    # AVX512-BF16 dot products

    @property
    def bf16(self) -> bool:
        return self.amx or self.avx512_bf16

    def describe(self) -> str:
        units = [n for n, ok in (("AMX", self.amx), ("AVX512-BF16", self.avx512_bf16)) if ok]
        return f"{self.capability} with {' and '.join(units)}" if units else f"{self.capability}, no bfloat16 matrix units"


def _probe(name: str) -> bool:
    fn = getattr(torch.cpu, name, None)     # private helpers: absent in some torch builds
    try:
        return bool(fn()) if fn is not None else False
    except Exception:  # noqa: BLE001 -- a probe that fails means "not detected"
        return False


@functools.lru_cache(maxsize=1)
def cpu_matrix_units() -> CpuMatrixUnits:
    """Detect this CPU's bfloat16 matrix units (cached; cheap)."""
    try:
        cap = str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001
        cap = "unknown"
    return CpuMatrixUnits(cap, _probe("_is_amx_tile_supported"), _probe("_is_avx512_bf16_supported"))


@dataclass(frozen=True)
class Precision:
    """A run's resolved precision: the requested ``train.amp``, what it became, and why."""

    requested: str
    amp: str             # "none" | "bf16"
    reason: str
    device: str = ""     # what trained: "cuda: NVIDIA H200", "cpu: AMD EPYC ... (AVX512 with AVX512-BF16)"
    path: str = ""       # "fp32" | "autocast" | "native"; "" -> "fp32" for amp none, else "autocast"
    dtype: str = "float32"   # train.dtype: the master weights' dtype, and the matmuls' when amp is none

    def __post_init__(self) -> None:
        if self.amp == "none":
            object.__setattr__(self, "path", "fp32")
        elif not self.path:
            object.__setattr__(self, "path", "autocast")
        if self.path not in PATHS:
            raise ValueError(f"Precision.path: {self.path!r} is not one of {PATHS}")

    @property
    def matmul_dtype(self) -> str:
        return "bfloat16" if self.amp == "bf16" else self.dtype

    def to_dict(self) -> dict[str, str]:
        d = asdict(self)
        master = d.pop("dtype")
        return {**d, "matmul_dtype": self.matmul_dtype, "master_dtype": master}


_WARNED: set[str] = set()


@functools.lru_cache(maxsize=1)
def cpu_model_name() -> str:
    """The CPU's model name from /proc/cpuinfo ("" where there is none, e.g. macOS)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def device_label(device: torch.device, units: CpuMatrixUnits | None = None) -> str:
    """A run's device in words, for final.json: the GPU's name, or the CPU's model and bf16 units."""
    if device.type == "cuda":
        try:
            return f"cuda: {torch.cuda.get_device_name(device)}"
        except Exception:  # noqa: BLE001 -- a name that cannot be read leaves the type
            return "cuda"
    if device.type == "cpu":
        units = units or cpu_matrix_units()
        return f"cpu: {cpu_model_name() or 'unknown model'} ({units.describe()})"
    return device.type


def resolve_precision(amp: str, device: torch.device, units: CpuMatrixUnits | None = None,
                      bf16_path: str = "autocast", dtype: str = "float32") -> Precision:
    """``train.amp`` on ``device`` -> :class:`Precision` with the device in words (logs one line when bf16
    is slow or declined); the rule itself is :func:`anchorlab.config.precision_rules.matmul_amp`.
    ``bf16_path`` (``train.bf16_path``) is the path of a run that resolves to bf16; float32 stays ``fp32``.
    ``dtype`` (``train.dtype``): a float64 model under autocast keeps float64 matmuls (autocast casts only
    float32 tensors), so it resolves to no bfloat16 and says why. The native path is CPU-only (its LayerNorm
    feeds a bfloat16 input to float32 affine parameters, a mix the CPU kernel takes): a bf16 run on another
    device with ``bf16_path`` native raises a one-line ConfigError."""
    if bf16_path not in PATHS[1:]:
        raise ValueError(f"bf16_path: 'autocast' or 'native' (config.precision_rules.auto_bf16_path resolves "
                         f"'auto'), got {bf16_path!r}")
    p = _resolve(amp, device, units)
    if p.amp == "bf16" and bf16_path == "native" and device.type != "cpu":
        raise ConfigError(f"train.bf16_path: 'native' runs on a CPU only (this run is on {device.type}; the "
                          "default 'auto' picks it for the anchorlab Transformer); use 'autocast'")
    if p.amp == "bf16" and dtype != "float32":
        p = Precision(amp, "none", f"train.dtype={dtype}: autocast casts only float32 tensors, so the matmuls "
                                   f"stay {dtype}")
    return dataclasses.replace(p, device=device_label(device, units), path=bf16_path if p.amp == "bf16" else "fp32",
                               dtype=dtype)


def _resolve(amp: str, device: torch.device, units: CpuMatrixUnits | None) -> Precision:
    if amp == "none":
        return Precision(amp, "none", "train.amp=none: float32")
    if device.type != "cpu":
        if matmul_amp(amp, device.type, False) == "bf16":
            return Precision(amp, "bf16", f"train.amp=bf16 on {device.type}")
        return Precision(amp, "none", f"train.amp=auto keeps float32 on {device.type} (the papers' precision)")
    units = units or cpu_matrix_units()
    if matmul_amp(amp, "cpu", units.bf16) == "none":
        reason = (f"train.amp=auto: float32, this CPU has no bfloat16 matrix units ({units.describe()}; "
                  "bfloat16 needs AMX or AVX512-BF16 to be faster)")
        log.info(reason)
        return Precision(amp, "none", reason)
    if units.bf16:
        return Precision(amp, "bf16", f"train.amp={amp}: this CPU multiplies bfloat16 in hardware ({units.describe()})")
    reason = (f"train.amp=bf16 on a CPU without bfloat16 matrix units ({units.describe()}): "
              "bfloat16 matmuls are emulated and run several times slower than float32")
    if reason not in _WARNED:          # once per process, not once per model of a stack
        _WARNED.add(reason)
        log.warning(reason)
    return Precision(amp, "bf16", reason)


def autocast(precision: Precision, device: torch.device):
    """The autocast context of a resolved precision (a null context for float32 and for the native
    bf16 path, which casts by itself)."""
    import contextlib

    if precision.path == "autocast":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def step_context(precision: Precision, device: torch.device, model: torch.nn.Module, compiled: bool = False,
                 wt: str = "auto"):
    """The context a training step's forward runs in: autocast, the native bfloat16 path (a
    :class:`~anchorlab.model.bf16.WeightCache` of ``model``'s linears, kept for the whole run and cast again
    after each optimizer step: the loop calls the context's ``after_step``), or none.
    ``wt`` (``train.bf16_wt``): the native forward's ``W.T``, ``copy`` (contiguous), ``view`` (of the
    bfloat16 ``W``) or ``auto`` (the copy on a CPU with AMX, else the view).
    Reusable across steps. Raises ConfigError when ``model`` has no native path."""
    if precision.path != "native":
        return autocast(precision, device)
    check_native(model, compiled)
    return native_bf16(WeightCache(model, transposed_copy=transposed_copy(wt, device), managed=True))


def transposed_copy(wt: str, device: torch.device) -> bool:
    """``train.bf16_wt`` on ``device``: whether the native forward multiplies a contiguous bfloat16 copy of
    ``W.T`` (``copy``, or ``auto`` on a CPU with AMX) rather than the transposed view of ``W``'s copy."""
    return wt == "copy" or (wt == "auto" and device.type == "cpu" and cpu_matrix_units().amx)


def check_native(model: torch.nn.Module, compiled: bool = False) -> None:
    """ConfigError unless ``model`` runs the native bfloat16 path (and is not compiled: the path is a
    context the compiler does not trace)."""
    if compiled:
        raise ConfigError("train.compile: not available with train.bf16_path='native'; use compile false "
                          "or bf16_path 'autocast'")
    if not getattr(model, "supports_native_bf16", False):
        raise ConfigError(f"train.bf16_path: 'native' needs a model whose forward has the native bfloat16 path "
                          f"(the anchorlab Transformer), not {type(model).__name__}; use 'autocast'")


__all__ = ["PATHS", "CpuMatrixUnits", "Precision", "autocast", "cpu_matrix_units", "cpu_model_name", "device_label",
           "resolve_precision", "step_context", "check_native", "transposed_copy"]

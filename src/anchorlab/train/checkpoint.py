"""Checkpoints (atomic, resumable) and run metadata."""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..io import atomic_write

CKPT = "checkpoint.pt"


def save_checkpoint(run_dir: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (tensors, numbers, dicts) atomically to run_dir/checkpoint.pt."""
    return atomic_write(Path(run_dir) / CKPT, lambda p: torch.save(state, p))


def load_checkpoint(run_dir: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any] | None:
    path = Path(run_dir) / CKPT
    if not path.exists():
        return None
    return torch.load(path, map_location=map_location, weights_only=True)


def save_weights(path: str | Path, model: torch.nn.Module, metadata: dict[str, str] | None = None) -> Path:
    """Model weights as safetensors (contiguous copies)."""
    from safetensors.torch import save_file

    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    return atomic_write(path, lambda p: save_file(tensors, str(p), metadata=metadata or {}))


def load_weights(path: str | Path, model: torch.nn.Module) -> torch.nn.Module:
    from safetensors.torch import load_file

    model.load_state_dict(load_file(str(path)))
    return model


def versions() -> dict[str, str]:
    from .. import __version__

    v = {"anchorlab": __version__, "python": sys.version.split()[0], "torch": torch.__version__,
         "numpy": np.__version__, "platform": platform.platform()}
    if torch.cuda.is_available():
        v["cuda"] = str(torch.version.cuda)
        v["gpu"] = torch.cuda.get_device_name(0)
    return v

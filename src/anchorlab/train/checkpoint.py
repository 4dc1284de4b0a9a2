"""Checkpoints (atomic, rotated, resumable) and run metadata.

A run directory keeps two checkpoints: ``checkpoint.pt`` (the latest) and
``checkpoint.prev.pt`` (the one before). Each is written atomically
(:func:`anchorlab.io.atomic_write`: temp file, fsync, rename, fsync of the
folder), and before a new one is written the current one becomes the previous
one through a hard link, so ``checkpoint.pt`` exists at every moment.

On resume, an unreadable ``checkpoint.pt`` (truncated, corrupt, or not a
checkpoint) is moved aside to ``checkpoint.corrupt.pt`` and the run resumes
from ``checkpoint.prev.pt`` with a warning; when no checkpoint is usable,
:class:`CheckpointError` says so in one line naming the file and how to start
over.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from anchorlab.config import ConfigError
from anchorlab.io import atomic_write, fsync_path

log = logging.getLogger(__name__)

CKPT = "checkpoint.pt"
PREV = "checkpoint.prev.pt"
CORRUPT = "checkpoint.corrupt.pt"
REQUIRED = ("model", "optimizer", "step")


class CheckpointError(ConfigError):
    """No usable checkpoint in a run directory that has checkpoint files (the message says how to start over)."""


def _rotate(run_dir: Path) -> None:
    """checkpoint.pt -> checkpoint.prev.pt, keeping checkpoint.pt in place (hard link; copy-free rename fallback)."""
    cur, prev = run_dir / CKPT, run_dir / PREV
    if not cur.exists():
        return
    tmp = run_dir / f".{PREV}.link"
    try:
        if tmp.exists():
            tmp.unlink()
        os.link(cur, tmp)
        os.replace(tmp, prev)
    except OSError:  # no hard links on this filesystem: a rename (checkpoint.pt is briefly absent)
        os.replace(cur, prev)
    fsync_path(run_dir)


def save_checkpoint(run_dir: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (tensors, numbers, dicts) atomically to run_dir/checkpoint.pt, keeping the previous one."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    _rotate(run_dir)
    return atomic_write(run_dir / CKPT, lambda p: torch.save(state, p))


def remove_stale_temps(run_dir: str | Path) -> None:
    """Delete temp files a killed writer left behind (``.<name>.*.tmp``); one writer per run directory."""
    for p in Path(run_dir).glob(".*.tmp"):
        try:
            p.unlink()
        except OSError:  # pragma: no cover - raced with another cleaner
            pass


def _read(path: Path, map_location: Any) -> dict[str, Any]:
    state = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(state, dict) or any(k not in state for k in REQUIRED):
        raise ValueError(f"not an anchorlab checkpoint (needs {', '.join(REQUIRED)})")
    return state


def _why(e: BaseException) -> str:
    line = (str(e).strip().splitlines() or [""])[0].split(". ")[0][:160]   # the first sentence
    return f"{type(e).__name__}: {line}" if line else type(e).__name__


def load_checkpoint(run_dir: str | Path, map_location: str | torch.device = "cpu",
                    apply: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any] | None:
    """The latest usable checkpoint of ``run_dir`` (None if it has none).

    ``apply(state)`` (e.g. loading it into a model and optimizer) is part of
    the check: if it raises, the next older checkpoint is tried. A bad
    ``checkpoint.pt`` is moved to ``checkpoint.corrupt.pt`` when an older one
    is used. Raises :class:`CheckpointError` when checkpoint files exist but
    none is usable.
    """
    run_dir = Path(run_dir)
    cur, prev = run_dir / CKPT, run_dir / PREV
    tried: list[tuple[Path, str]] = []
    for path in (cur, prev):
        if not path.exists():
            continue
        try:
            state = _read(path, map_location)
            if apply is not None:
                apply(state)
        except Exception as e:  # noqa: BLE001 - any failure makes this file unusable
            tried.append((path, _why(e)))
            continue
        if tried:
            bad, why = tried[0]
            log.warning("%s is unusable (%s); resuming from %s at step %d", bad, why, path.name, int(state["step"]))
            if bad == cur:
                os.replace(cur, run_dir / CORRUPT)
                fsync_path(run_dir)
        return state
    if not tried:
        return None
    bad, why = tried[0]
    older = f"; {prev.name} is unusable too ({tried[1][1]})" if len(tried) > 1 else f"; no {prev.name} to fall back to"
    raise CheckpointError(f"{bad}: unusable checkpoint ({why}){older}. To start the run over, delete "
                          f"{CKPT} and {PREV} in {run_dir} (or the whole run directory)")


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
    from anchorlab._version import __version__

    v = {"anchorlab": __version__, "python": sys.version.split()[0], "torch": torch.__version__,
         "numpy": np.__version__, "platform": platform.platform()}
    if torch.cuda.is_available():
        v["cuda"] = str(torch.version.cuda)
        v["gpu"] = torch.cuda.get_device_name(0)
    return v

"""Task families behind one protocol (:mod:`anchorlab.tasks.base`); ``task.name`` picks one.

The names below are imported on first use, so importing a task's config module
(``anchorlab.tasks.anchor.config``) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["EvalResult", "Task", "TensorData", "build_task"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module(".base", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # pragma: no cover
    from anchorlab.tasks.base import EvalResult, Task, TensorData, build_task

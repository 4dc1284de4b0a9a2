"""The anchor-function task: config, data, generation and evaluation.

The config is imported here; the data and task (torch) on first use, so reading
a config does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from anchorlab.tasks.anchor.config import AnchorTaskConfig

_LAZY = {"SPLITS": ".data", "AnchorData": ".data", "pair_label": ".data", "AnchorTask": ".task"}

__all__ = ["AnchorTaskConfig", "AnchorData", "AnchorTask", "SPLITS", "pair_label"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # pragma: no cover
    from anchorlab.tasks.anchor.data import SPLITS, AnchorData, pair_label
    from anchorlab.tasks.anchor.task import AnchorTask

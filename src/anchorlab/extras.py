"""Optional dependencies: import one, or fail with a one-line message naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from .config import ConfigError

EXTRAS = {"transformers": "hf", "tokenizers": "lm", "zstandard": "lm"}


def require(module: str, what: str) -> ModuleType:
    """``import module``, or raise ConfigError: ``<what> needs <module>: pip install 'anchorlab[<extra>]'``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = EXTRAS.get(module.split(".")[0], module)
        raise ConfigError(f"{what} needs the optional package {module.split('.')[0]!r}: "
                          f"pip install 'anchorlab[{extra}]'") from None

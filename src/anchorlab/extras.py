"""Optional dependencies: import them where needed, or fail in one line naming the extra to install.

A plain ``pip install anchorlab`` has torch, numpy, pandas, matplotlib, PyYAML,
tqdm and safetensors. Everything else belongs to an extra (pyproject.toml):

    analysis   scipy, scikit-learn   condensation clustering, t-SNE (train.log_complexity, complexity analyses)
    parquet    pyarrow               Parquet export of a sweep's results
    ray        ray                   the Ray executor
    tracking   mlflow-skinny, tensorboard   train.tracking: mlflow | tensorboard
    hf         transformers          model.arch: hf_gpt2 (Hugging Face GPT-2)
    lm         tokenizers, zstandard task.name: lm (byte-level BPE, SlimPajama .jsonl.zst shards)
"""

from __future__ import annotations

import importlib
from types import ModuleType

from anchorlab.config.base import ConfigError

# top-level module -> (pip package, extra)
EXTRAS = {
    "scipy": ("scipy", "analysis"),
    "sklearn": ("scikit-learn", "analysis"),
    "pyarrow": ("pyarrow", "parquet"),
    "ray": ("ray", "ray"),
    "mlflow": ("mlflow-skinny", "tracking"),
    "tensorboard": ("tensorboard", "tracking"),
    "transformers": ("transformers", "hf"),
    "tokenizers": ("tokenizers", "lm"),
    "zstandard": ("zstandard", "lm"),
}


class MissingExtra(ConfigError):
    """An optional dependency is not installed; the message names the extra that brings it."""


def install_hint(module: str) -> str:
    """``pip install 'anchorlab[<extra>]'`` for a module of :data:`EXTRAS`."""
    _, extra = EXTRAS[module.split(".")[0]]
    return f"pip install 'anchorlab[{extra}]'"


def require(module: str, what: str) -> ModuleType:
    """Import ``module`` (e.g. ``"scipy.cluster.hierarchy"``) for ``what``, or raise :class:`MissingExtra`."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        pkg, _ = EXTRAS[top]
        raise MissingExtra(f"{what} needs {pkg}, which is not installed: {install_hint(top)}") from None


def require_extra(extra: str, what: str) -> None:
    """Check that every package of ``extra`` imports, or raise :class:`MissingExtra` naming it."""
    for module, (_, e) in EXTRAS.items():
        if e == extra:
            require(module, what)

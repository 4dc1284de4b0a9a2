"""Argument values of the command line that are more than one flag's worth: ``sweep --stack``,
``robustness --vary`` and ``--setting``. Parsed here, beside :mod:`anchorlab.cli`, so the library
(:mod:`anchorlab.papers.robustness`, :mod:`anchorlab.sweep.runner`) takes plain values, mappings and
:class:`~anchorlab.papers.robustness.Setting` objects, never command-line text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anchorlab.config import ConfigError

if TYPE_CHECKING:
    from anchorlab.papers.robustness import Setting


def parse_vary(text: str) -> tuple[str, list[Any]]:
    """``"optim.peak_lr=5e-4,2e-3"`` -> ("optim.peak_lr", [0.0005, 0.002])."""
    k, eq, rest = text.partition("=")
    if not eq or not k.strip() or not rest.strip():
        raise ConfigError(f"--vary {text!r}: expected KEY=V1[,V2...], e.g. optim.peak_lr=5e-4,2e-3")
    return k.strip(), [_scalar(v) for v in rest.split(",")]


def _scalar(v: str) -> Any:
    from anchorlab.config import parse_scalar

    val = parse_scalar(v)
    if isinstance(val, str):  # YAML 1.1 reads 1e-3 as text
        try:
            return float(val)
        except ValueError:
            pass
    return val


def parse_setting(text: str) -> Setting:
    """``"small_init:init.gamma=0.6,optim.peak_lr=1e-3"`` -> Setting."""
    from anchorlab.papers.robustness import Setting

    name, sep, rest = text.partition(":")
    if not sep or not name.strip() or not rest.strip():
        raise ConfigError(f"--setting {text!r}: expected NAME:KEY=VALUE[,KEY=VALUE...], "
                          "e.g. small_init:init.gamma=0.6")
    ov = {}
    for item in rest.split(","):
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise ConfigError(f"--setting {text!r}: {item!r} is not KEY=VALUE")
        ov[k.strip()] = _scalar(v)
    return Setting(name.strip(), ov)


def parse_stack(text: str) -> str | int:
    """``--stack``: "auto", "never" or a maximum stack size."""
    stack = int(text) if text.isdigit() else text
    if stack not in ("auto", "never") and not isinstance(stack, int):
        raise ConfigError(f"--stack: must be 'auto', 'never' or a maximum stack size, got {text!r}")
    return stack

"""What a reproducible paper figure is: sweeps per scale, a maker, and the paper's claims.

A :class:`Figure` names, per scale (``cpu`` / ``paper``), the sweep that trains
its runs (a bundled sweep preset or an inline spec). Its ``make`` function
turns the finished sweep directory into tables and files (the figure itself,
drawn by :mod:`anchorlab.plots`, from analyses in :mod:`anchorlab.analysis`).
Each :class:`Claim` states what the paper says of the figure (its number where
it gives one) and reads our value from the tables, so ``anchorlab reproduce``
writes the paper's value beside ours.

Figures register themselves in :data:`FIGURES` from the modules
``figures_*.py`` of this package; a new task family adds its own module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

Tables = dict[str, "pd.DataFrame"]
Made = tuple[Tables, dict[str, Path]]


@dataclass(frozen=True)
class Claim:
    """``text``: the paper's statement; ``paper``: its value as the paper gives it ("100%", "> 99%",
    "qualitative"); ``ours(tables)`` -> our number (or a short text), NaN when the tables cannot say."""

    text: str
    paper: str
    ours: Callable[[Tables], float | str]


@dataclass(frozen=True)
class Figure:
    """A paper figure with data behind it."""

    id: str
    paper: str                                   # "NeurIPS 2024" | "journal"
    number: str                                  # "Fig. 2", "Fig. 7A"
    shows: str                                   # one line: what the figure shows
    sweeps: Mapping[str, str | dict[str, Any]]   # scale -> sweep preset name or inline spec
    make: Callable[[Path, Path, str], Made]      # (sweep dir, out dir, scale) -> (tables, files)
    claims: tuple[Claim, ...] = ()
    notes: str = ""                              # scale caveats, extras needed
    extra: str | None = None                     # pip extra the figure needs, e.g. "hf"


FIGURES: dict[str, Figure] = {}


def register(fig: Figure) -> Figure:
    if fig.id in FIGURES:
        raise ValueError(f"figure {fig.id!r} registered twice")
    FIGURES[fig.id] = fig
    return fig


# ------------------------------------------------------------------ helpers for makers
def value(table: pd.DataFrame, column: str, where: Mapping[str, Any] | Callable[[pd.DataFrame], Any] = (),
          how: str = "mean") -> float:
    """One number from a table: ``column`` over the rows matching ``where`` (mean/min/max); NaN if none."""
    import pandas as pd

    t = table
    if callable(where):
        t = t[where(t)]
    else:
        for k, v in dict(where).items():
            t = t[t[k] == v]
    if column not in t or t.empty:
        return math.nan
    s = pd.to_numeric(t[column], errors="coerce").dropna()
    if s.empty:
        return math.nan
    return float(getattr(s, how)())


def by_gamma(table: pd.DataFrame, which: str) -> pd.DataFrame:
    """Rows of the smallest (``which="large_init"``) or largest (``"small_init"``) init.gamma."""
    g = table["init.gamma"]
    return table[g == (g.min() if which == "large_init" else g.max())]


@dataclass
class Result:
    """What ``reproduce`` returns: paths written, and the claims table."""

    files: dict[str, Path] = field(default_factory=dict)
    claims: pd.DataFrame | None = None
